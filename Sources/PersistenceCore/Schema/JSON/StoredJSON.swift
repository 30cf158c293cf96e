import Foundation

// JSON for `.codable` columns: a checker and readers of the common shapes (objects, arrays,
// strings, integers, booleans, null) that types with a direct reader and writer
// (`StoredJSONRepresentable`) use without `JSONDecoder`'s and `JSONEncoder`'s per-call setup,
// which costs about 16,000 instructions per value. Every other type, and anything outside
// those shapes, goes to Foundation's coders, so results, bytes and error messages are exactly
// Foundation's. `StoredJSONTests` checks both directions against Foundation, value by value.

/// Thrown when the fast path does not handle a value; the caller then uses Foundation's coder.
struct StoredJSONFallback: Error {}

// MARK: Checking

/// JSON text the direct readers read in place, with no tree of nodes: ``check(_:)`` accepts
/// exactly what they handle, and they then find each value when asked for it.
@usableFromInline
enum StoredJSONText {
  /// The most members of an object the fast path reads (see ``check(_:)``).
  static let maximumMembers = 32

  /// The position of the document's value when `bytes` is one value the fast path decodes
  /// (RFC 8259, with integers only; objects of at most ``maximumMembers`` members, their keys
  /// ASCII, without escapes and each once per object; nesting up to 64 levels). Throws
  /// ``StoredJSONFallback`` for anything else, including every malformed document. O(n) in
  /// the length (each key is compared with at most 31 others).
  @usableFromInline
  static func check(_ bytes: UnsafeBufferPointer<UInt8>) throws -> Int {
    var checker = Checker(bytes: bytes)
    checker.skipWhitespace()
    let start = checker.position
    try checker.value(depth: 0)
    checker.skipWhitespace()
    guard checker.position == bytes.count else { throw StoredJSONFallback() }
    return start
  }

  private struct Checker {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    /// The keys of the objects still open, as ranges of `bytes`.
    var keys: [Range<Int>] = []

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func skipWhitespace() {
      position = StoredJSONText.skipWhitespace(bytes, from: position)
    }

    mutating func expect(_ literal: StaticString) throws {
      let count = literal.utf8CodeUnitCount
      guard position + count <= bytes.count,
        memcmp(bytes.baseAddress! + position, literal.utf8Start, count) == 0
      else { throw StoredJSONFallback() }
      position += count
    }

    mutating func value(depth: Int) throws {
      guard depth < 64, position < bytes.count else { throw StoredJSONFallback() }
      switch bytes[position] {
      case UInt8(ascii: "{"): try object(depth: depth)
      case UInt8(ascii: "["):
        guard opens(closing: UInt8(ascii: "]")) else { return }
        repeat {
          skipWhitespace()
          try value(depth: depth + 1)
        } while try continues(closing: UInt8(ascii: "]"))
      case UInt8(ascii: "\""): _ = try string()
      case UInt8(ascii: "t"): try expect("true")
      case UInt8(ascii: "f"): try expect("false")
      case UInt8(ascii: "n"): try expect("null")
      default: try number()
      }
    }

    /// Past a container's opening bracket; false (and past `closing` too) when it is empty.
    mutating func opens(closing: UInt8) -> Bool {
      position += 1
      skipWhitespace()
      guard position < bytes.count, bytes[position] == closing else { return true }
      position += 1
      return false
    }

    /// Past what follows an element or member: a comma (true, another follows) or `closing`
    /// (false); anything else is malformed.
    mutating func continues(closing: UInt8) throws -> Bool {
      skipWhitespace()
      guard position < bytes.count else { throw StoredJSONFallback() }
      position += 1
      if bytes[position - 1] == closing { return false }
      guard bytes[position - 1] == UInt8(ascii: ",") else { throw StoredJSONFallback() }
      return true
    }

    mutating func object(depth: Int) throws {
      guard opens(closing: UInt8(ascii: "}")) else { return }
      // An object's keys are kept from its second member on: one member needs no compare,
      // and no array is made for it.
      let firstKey = keys.count
      var onlyKey: Range<Int>?
      defer { keys.removeSubrange(firstKey...) }
      repeat {
        skipWhitespace()
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
          throw StoredJSONFallback()
        }
        // Keys are compared byte for byte below and by the readers: only plain ASCII keys
        // compare as Swift compares strings (canonical equivalence), so others fall back,
        // and so do duplicates (Foundation decides which one wins).
        let (key, plainASCII) = try string()
        guard plainASCII else { throw StoredJSONFallback() }
        if let first = onlyKey {
          keys.append(first)
          onlyKey = nil
        }
        if keys.count == firstKey {
          onlyKey = key
        } else {
          // The decoder finds a member by scanning its object, and this check compares each
          // key with the ones before it: both grow with the square of the members, so a
          // larger object goes to Foundation, whose lookups are hashed.
          guard keys.count - firstKey < StoredJSONText.maximumMembers else {
            throw StoredJSONFallback()
          }
          for earlier in keys[firstKey...]
          where earlier.count == key.count
            && memcmp(
              bytes.baseAddress! + earlier.lowerBound, bytes.baseAddress! + key.lowerBound,
              key.count) == 0
          {
            throw StoredJSONFallback()
          }
          keys.append(key)
        }
        skipWhitespace()
        try expect(":")
        skipWhitespace()
        try value(depth: depth + 1)
      } while try continues(closing: UInt8(ascii: "}"))
    }

    /// An integer (`-?(0|[1-9][0-9]*)`); fractions and exponents fall back.
    mutating func number() throws {
      if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
      let digits = position
      while position < bytes.count, (0x30...0x39).contains(bytes[position]) { position += 1 }
      guard position > digits, bytes[digits] != 0x30 || position == digits + 1 else {
        throw StoredJSONFallback()
      }
      if position < bytes.count,
        bytes[position] == UInt8(ascii: ".") || bytes[position] | 0x20 == UInt8(ascii: "e")
      {
        throw StoredJSONFallback()
      }
    }

    /// A string at a `"`: escapes checked (a surrogate only in a pair), UTF-8 validated,
    /// control characters refused. Returns the text between the quotes and whether it is
    /// ASCII without escapes.
    mutating func string() throws -> (Range<Int>, plainASCII: Bool) {
      position += 1
      let start = position
      var plain = true
      var ascii = true
      while position < bytes.count {
        // Plain printable ASCII, the bytes of nearly every stored string, in a tight loop.
        while position < bytes.count, (0x20..<0x80).contains(bytes[position]),
          bytes[position] != UInt8(ascii: "\""), bytes[position] != UInt8(ascii: "\\")
        {
          position += 1
        }
        guard position < bytes.count else { break }
        let byte = bytes[position]
        position += 1
        switch byte {
        case UInt8(ascii: "\""):
          let text = start..<position - 1
          guard ascii || StoredJSONText.isValidUTF8(UnsafeBufferPointer(rebasing: bytes[text]))
          else { throw StoredJSONFallback() }
          return (text, plain && ascii)
        case UInt8(ascii: "\\"):
          plain = false
          guard position < bytes.count else { throw StoredJSONFallback() }
          let escape = bytes[position]
          position += 1
          switch escape {
          case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
            UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            break
          case UInt8(ascii: "u"):
            let scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
              try expect("\\u")
              guard (0xDC00..<0xE000).contains(try hex4()) else { throw StoredJSONFallback() }
            } else if (0xDC00..<0xE000).contains(scalar) {
              throw StoredJSONFallback()
            }
          default: throw StoredJSONFallback()
          }
        default:
          if byte < 0x20 { throw StoredJSONFallback() }
          if byte >= 0x80 { ascii = false }
        }
      }
      throw StoredJSONFallback()
    }

    mutating func hex4() throws -> UInt32 {
      guard position + 4 <= bytes.count else { throw StoredJSONFallback() }
      var value: UInt32 = 0
      for _ in 0..<4 {
        guard let digit = StoredJSONText.hexDigit(bytes[position]) else {
          throw StoredJSONFallback()
        }
        position += 1
        value = value << 4 | digit
      }
      return value
    }
  }

  static func hexDigit(_ byte: UInt8) -> UInt32? {
    switch byte {
    case 0x30...0x39: UInt32(byte - 0x30)
    case 0x41...0x46: UInt32(byte - 0x41 + 10)
    case 0x61...0x66: UInt32(byte - 0x61 + 10)
    default: nil
    }
  }

  static func skipWhitespace(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
    var position = start
    while position < bytes.count {
      switch bytes[position] {
      case 0x20, 0x09, 0x0A, 0x0D: position += 1
      default: return position
      }
    }
    return position
  }

  /// Whether `bytes` is well-formed UTF-8 (RFC 3629: shortest forms, no surrogates, at most
  /// U+10FFFF), as `String(validating:as:)` decides, without its generic machinery.
  static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    var index = 0
    func continuation(_ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
      guard index < bytes.count, range.contains(bytes[index]) else { return false }
      index += 1
      return true
    }
    while index < bytes.count {
      let lead = bytes[index]
      index += 1
      switch lead {
      case 0x00...0x7F: continue
      case 0xC2...0xDF: guard continuation() else { return false }
      case 0xE0: guard continuation(0xA0...0xBF), continuation() else { return false }
      case 0xE1...0xEC, 0xEE...0xEF: guard continuation(), continuation() else { return false }
      case 0xED: guard continuation(0x80...0x9F), continuation() else { return false }
      case 0xF0:
        guard continuation(0x90...0xBF), continuation(), continuation() else { return false }
      case 0xF1...0xF3:
        guard continuation(), continuation(), continuation() else { return false }
      case 0xF4:
        guard continuation(0x80...0x8F), continuation(), continuation() else { return false }
      default: return false
      }
    }
    return true
  }

  // MARK: Writing

  /// Appends a string as `JSONEncoder` writes it: `"`, `\` and `/` escaped, the usual short
  /// escapes, other control characters as `\u00XX`, everything else as UTF-8.
  static func appendString(_ text: String, to output: inout [UInt8]) {
    output.append(UInt8(ascii: "\""))
    // Most text needs no escape: copied whole (about a tenth of the byte-by-byte cost).
    var text = text
    let plain = text.withUTF8 { bytes in
      guard !bytes.contains(where: needsEscape) else { return false }
      output.append(contentsOf: bytes)
      return true
    }
    if plain {
      output.append(UInt8(ascii: "\""))
      return
    }
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "\""): output.append(contentsOf: "\\\"".utf8)
      case UInt8(ascii: "\\"): output.append(contentsOf: "\\\\".utf8)
      case UInt8(ascii: "/"): output.append(contentsOf: "\\/".utf8)
      case 0x0A: output.append(contentsOf: "\\n".utf8)
      case 0x0D: output.append(contentsOf: "\\r".utf8)
      case 0x09: output.append(contentsOf: "\\t".utf8)
      case 0x08: output.append(contentsOf: "\\b".utf8)
      case 0x0C: output.append(contentsOf: "\\f".utf8)
      case 0..<0x20:
        let hex = Array("0123456789abcdef".utf8)
        output.append(contentsOf: "\\u00".utf8)
        output.append(hex[Int(byte >> 4)])
        output.append(hex[Int(byte & 0xF)])
      default: output.append(byte)
      }
    }
    output.append(UInt8(ascii: "\""))
  }

  /// Whether `JSONEncoder` writes the byte escaped: `"`, `\\`, `/` and control characters.
  @inline(__always)
  static func needsEscape(_ byte: UInt8) -> Bool {
    byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
      || byte == UInt8(ascii: "/")
  }

  // MARK: Reading checked text

  /// The position just past the value at `start` in checked text. O(the value's length).
  static func end(ofValueAt start: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
    var position = start
    var depth = 0
    repeat {
      let byte = bytes[position]
      position += 1
      switch byte {
      case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
      case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
      case UInt8(ascii: "\""): position = end(ofStringAt: position - 1, in: bytes)
      case UInt8(ascii: "t"), UInt8(ascii: "n"): position += 3
      case UInt8(ascii: "f"): position += 4
      case UInt8(ascii: "-"), 0x30...0x39:
        while position < bytes.count, (0x30...0x39).contains(bytes[position]) { position += 1 }
      default: break  // whitespace, commas and colons inside a container
      }
    } while depth > 0
    return position
  }

  /// What follows the value at `start` in checked text: the next element or member (past the
  /// comma), or the container's closing bracket.
  static func following(_ start: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
    let after = skipWhitespace(bytes, from: end(ofValueAt: start, in: bytes))
    guard bytes[after] == UInt8(ascii: ",") else { return after }
    return skipWhitespace(bytes, from: after + 1)
  }

  /// The position just past the closing quote of the string at `start` in checked text.
  static func end(ofStringAt start: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
    var position = start + 1
    while bytes[position] != UInt8(ascii: "\"") {
      position += bytes[position] == UInt8(ascii: "\\") ? 2 : 1
    }
    return position + 1
  }

  /// The string at `start` in checked text; nil when the value there is not a string.
  static func string(at start: Int, in bytes: UnsafeBufferPointer<UInt8>) -> String? {
    guard bytes[start] == UInt8(ascii: "\"") else { return nil }
    var position = start + 1
    while bytes[position] != UInt8(ascii: "\"") {
      if bytes[position] == UInt8(ascii: "\\") {
        return escapedString(from: start + 1, firstEscape: position, in: bytes)
      }
      position += 1
    }
    // Checked: valid UTF-8, so decoding repairs nothing.
    return String(
      decoding: UnsafeBufferPointer(rebasing: bytes[start + 1..<position]), as: UTF8.self)
  }

  private static func escapedString(
    from start: Int, firstEscape: Int, in bytes: UnsafeBufferPointer<UInt8>
  ) -> String {
    var collected = [UInt8](UnsafeBufferPointer(rebasing: bytes[start..<firstEscape]))
    var position = firstEscape
    func hex4() -> UInt32 {
      var value: UInt32 = 0
      for offset in 0..<4 { value = value << 4 | hexDigit(bytes[position + offset])! }
      position += 4
      return value
    }
    while true {
      let byte = bytes[position]
      position += 1
      switch byte {
      case UInt8(ascii: "\""): return String(decoding: collected, as: UTF8.self)
      case UInt8(ascii: "\\"):
        let escape = bytes[position]
        position += 1
        switch escape {
        case UInt8(ascii: "b"): collected.append(0x08)
        case UInt8(ascii: "f"): collected.append(0x0C)
        case UInt8(ascii: "n"): collected.append(0x0A)
        case UInt8(ascii: "r"): collected.append(0x0D)
        case UInt8(ascii: "t"): collected.append(0x09)
        case UInt8(ascii: "u"):
          var scalar = hex4()
          if (0xD800..<0xDC00).contains(scalar) {
            position += 2  // `\u`, checked
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (hex4() - 0xDC00)
          }
          collected.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
        default: collected.append(escape)  // `"`, `\` or `/`
        }
      default: collected.append(byte)
      }
    }
  }
}

// MARK: Decoding

/// Decodes `Value` from JSON bytes: the fast path when it applies, else `JSONDecoder`.
func decodeStoredJSON<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
  if let value = fastDecodeStoredJSON(type, from: data) { return value }
  return try JSONDecoder().decode(Value.self, from: data)
}

/// Decodes `Value` from JSON bytes in place (no `Data` made unless Foundation has to decode).
func decodeStoredJSON<Value: Decodable>(_ type: Value.Type, bytes: UnsafeRawBufferPointer)
  throws -> Value
{
  if let value = fastDecodeStoredJSON(type, bytes: bytes) { return value }
  return try JSONDecoder().decode(Value.self, from: Data(bytes))
}

/// The fast path alone: nil when it leaves the value to Foundation.
func fastDecodeStoredJSON<Value: Decodable>(_ type: Value.Type, from data: Data) -> Value? {
  data.withUnsafeBytes { fastDecodeStoredJSON(type, bytes: $0) }
}

/// The fast path alone, from bytes: nil when it leaves the value to Foundation.
///
/// The text is checked once (O(n)); a type with a direct reader (``StoredJSONRepresentable``)
/// then reads it in place, finding each member when asked for it. Every other type is left to
/// Foundation.
func fastDecodeStoredJSON<Value: Decodable>(_: Value.Type, bytes: UnsafeRawBufferPointer)
  -> Value?
{
  let text = [UInt8](bytes)
  guard let start = try? text.withUnsafeBufferPointer({ try StoredJSONText.check($0) }) else {
    return nil
  }
  return StoredJSONDirect.read(Value.self, text, at: start)
}

// MARK: Encoding

/// Encodes `value` as `JSONEncoder` with `.sortedKeys` does: the fast path when it applies,
/// else `JSONEncoder` itself. `CodableColumn` composes the same two with its memo of equal
/// values between them; `StoredJSONTests` checks this composition against Foundation.
func encodeStoredJSON<Value: Encodable>(_ value: Value) throws -> Data {
  if let bytes = fastEncodeStoredJSON(value) { return bytes }
  return try foundationEncodeStoredJSON(value)
}

/// Calls `body` with the fast path's bytes, valid only during the call; false (and no call)
/// when the value is left to Foundation.
@usableFromInline
func withFastStoredJSON<Value: Encodable>(
  _ value: Value, _ body: (UnsafeRawBufferPointer) -> Void
) -> Bool {
  StoredJSONDirect.withBytes(value, body)
}

/// Foundation's encoding alone (`JSONEncoder` with `.sortedKeys`).
func foundationEncodeStoredJSON<Value: Encodable>(_ value: Value) throws -> Data {
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.sortedKeys]
  return try encoder.encode(value)
}

/// The fast path alone (a ``StoredJSONRepresentable`` type's direct writer): nil when it
/// leaves the value to Foundation. O(n) in the encoding's length.
@usableFromInline
func fastEncodeStoredJSON<Value: Encodable>(_ value: Value) -> Data? {
  var data: Data?
  _ = withFastStoredJSON(value) { data = Data($0) }
  return data
}
