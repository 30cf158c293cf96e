import Foundation
import Persistence
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

@Suite("Stored text is NFC")
struct PersistableValueTests {
  @Test("every scalar below U+0300 is NFC alone and after a letter, as Foundation says")
  func scalarsBelowCombiningMarks() {
    for value in 0..<0x300 {
      let scalar = Unicode.Scalar(UInt32(value))!
      #expect(scalar.properties.canonicalCombiningClass == .notReordered)
      for text in [String(Character(scalar)), "A\(scalar)", "e\(scalar)", "\(scalar)a"] {
        #expect(below(text))
        #expect(
          text.precomposedStringWithCanonicalMapping.unicodeScalars.elementsEqual(
            text.unicodeScalars), "U+\(String(value, radix: 16))")
        #expect(text.nfc.unicodeScalars.elementsEqual(text.unicodeScalars))
      }
    }
  }

  @Test("text with scalars from U+0300 up is normalized")
  func normalizedAboveCombiningMarks() {
    let cases = [
      ("e\u{301}", "\u{E9}"), ("Zu\u{308}rich", "Z\u{FC}rich"), ("\u{212B}", "\u{C5}"),
      ("Ω", "Ω"), ("\u{1100}\u{1161}", "\u{AC00}"), ("東京", "東京"),
    ]
    for (input, expected) in cases {
      #expect(!below(input))
      #expect(input.nfc.unicodeScalars.elementsEqual(expected.unicodeScalars), "\(input)")
    }
    #expect("".nfc == "" && "Köneürgenç".nfc.utf8.elementsEqual("Köneürgenç".utf8))
  }

  private func below(_ text: String) -> Bool {
    var copy = text
    return copy.withUTF8(String.isBelowCombiningMarks)
  }
}

@Suite("Decoded values shared by a fetch")
struct DecodedValuesTests {
  @Test("finds each value by its bytes, through growth, equal hashes and empty keys")
  func lookups() {
    let table = DecodedValues<String>()
    let keys = (0..<1000).map { "{\"rawValue\":\"geonames:\($0)\"}" } + [""]
    func find(_ key: String, hash: UInt64? = nil) -> String? {
      Array(key.utf8).withUnsafeBytes {
        table.value(for: $0, hash: hash ?? DecodedValues<String>.hash($0))
      }
    }
    for (index, key) in keys.enumerated() {
      #expect(find(key) == nil)
      Array(key.utf8).withUnsafeBytes {
        // Every third key shares one hash, so probing must compare bytes.
        table.insert(
          "v\(index)", for: $0, hash: index % 3 == 0 ? 7 : DecodedValues<String>.hash($0))
      }
    }
    for (index, key) in keys.enumerated() {
      #expect(find(key, hash: index % 3 == 0 ? 7 : nil) == "v\(index)")
    }
    #expect(find("{\"rawValue\":\"geonames:1000\"}") == nil)
    #expect(find("{\"rawValue\":\"geonames:1\"}", hash: 7) == nil)
    // Equal bytes hash alike; different lengths and tails differ.
    let hashes = Set(
      keys.map { key in Array(key.utf8).withUnsafeBytes(DecodedValues<String>.hash) })
    #expect(hashes.count == keys.count)
  }
}
