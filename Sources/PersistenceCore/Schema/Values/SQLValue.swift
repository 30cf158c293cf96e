import Foundation

/// A value as a store keeps it: one of five storage classes (SQLite's; other engines map
/// their types to these).
public enum SQLValue: Hashable, Sendable {
  /// SQL `NULL`; Swift's `nil`.
  case null
  /// A 64-bit signed integer.
  case integer(Int64)
  /// A 64-bit IEEE float. NaN cannot be stored.
  case real(Double)
  /// UTF-8 text.
  case text(String)
  /// Bytes.
  case blob(Data)
}

extension SQLValue: CustomStringConvertible {
  /// A short, SQL-like rendering for messages and debugging.
  public var description: String {
    switch self {
    case .null: "NULL"
    case .integer(let value): String(value)
    case .real(let value): String(value)
    case .text(let value): "'\(value.replacingOccurrences(of: "'", with: "''"))'"
    case .blob(let value): "x'\(value.map { String(format: "%02x", $0) }.joined())'"
    }
  }
}

extension SQLValue {
  /// The value in `storage`'s class when it came back as text from a column that keeps every
  /// class as text (PostgreSQL's tombstone values): digits as an integer, a float as written
  /// by PostgreSQL (`Infinity` included), `\x` and hex digits as bytes. Any other value, or
  /// text that does not read as `storage`, is returned as it is.
  public func coerced(to storage: StorageType) -> SQLValue {
    guard case .text(let text) = self else { return self }
    switch storage {
    case .text: return self
    case .integer: return Int64(text).map(SQLValue.integer) ?? self
    case .real: return Double(text).map(SQLValue.real) ?? self
    case .blob:
      let digits = Array(text.utf8)
      guard digits.count >= 2, digits[0] == UInt8(ascii: "\\"), digits[1] == UInt8(ascii: "x"),
        digits.count.isMultiple(of: 2)
      else { return self }
      var bytes = Data(capacity: digits.count / 2 - 1)
      var index = 2
      while index < digits.count {
        guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else {
          return self
        }
        bytes.append(high << 4 | low)
        index += 2
      }
      return .blob(bytes)
    }
  }
}

private func hexValue(_ digit: UInt8) -> UInt8? {
  switch digit {
  case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
  case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
  case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
  default: nil
  }
}
