import Foundation

extension UUID {
  /// The UUID in lower-case hexadecimal, `8-4-4-4-12`, as every output of the planner writes
  /// ids (RFC 9562's preferred form). The same text as `lowercasedString`, written
  /// directly: O(1), one allocation.
  package var lowercasedString: String {
    String(unsafeUninitializedCapacity: 36) { writeLowercased(into: $0) }
  }

  /// Appends ``lowercasedString``'s 36 bytes to `output`, without a `String` in between.
  package func writeLowercased(into output: inout [UInt8]) {
    let start = output.count
    output.append(contentsOf: repeatElement(0, count: 36))
    output.withUnsafeMutableBufferPointer {
      _ = writeLowercased(into: UnsafeMutableBufferPointer(rebasing: $0[start...]))
    }
  }

  /// Writes the 36 bytes into `output` (at least 36 long); returns 36.
  private func writeLowercased(into output: UnsafeMutableBufferPointer<UInt8>) -> Int {
    let digits: StaticString = "0123456789abcdef"
    return withUnsafeBytes(of: uuid) { raw in
      var index = 0
      for (position, byte) in raw.enumerated() {
        if position == 4 || position == 6 || position == 8 || position == 10 {
          output[index] = UInt8(ascii: "-")
          index += 1
        }
        output[index] = digits.utf8Start[Int(byte >> 4)]
        output[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
        index += 2
      }
      return index
    }
  }
}
