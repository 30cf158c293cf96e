import Foundation

// A small JSON codec for `.codable` columns: the common shapes (objects, arrays, strings,
// integers, booleans, null) without `JSONDecoder`'s and `JSONEncoder`'s per-call setup, which
// costs about 16,000 instructions per value here. Anything outside those shapes (floating-point
// numbers, `Date`, `Data`, `URL`, `Decimal`, super coders, an error of any kind) falls back to
// Foundation's coders, so results, bytes and error messages are exactly Foundation's.
// `StoredJSONTests` checks both directions against Foundation, value by value.

/// Thrown when the fast path does not handle a value; the caller then uses Foundation's coder.
struct StoredJSONFallback: Error {}

// MARK: Checking

/// JSON text the fast decoder reads in place, with no tree of nodes: ``check(_:)`` accepts
/// exactly what the decoder handles, and the decoder then finds each value when asked for it.
enum StoredJSONText {
  /// The most members of an object the fast path reads (see ``check(_:)``).
  static let maximumMembers = 32

  /// The position of the document's value when `bytes` is one value the fast path decodes
  /// (RFC 8259, with integers only; objects of at most ``maximumMembers`` members, their keys
  /// ASCII, without escapes and each once per object; nesting up to 64 levels). Throws
  /// ``StoredJSONFallback`` for anything else, including every malformed document. O(n) in
  /// the length (each key is compared with at most 31 others).
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
        // Keys are compared byte for byte below and by the decoder: only plain ASCII keys
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
/// The text is checked once (O(n)), then each value is found when the type's `init(from:)`
/// asks for it: a keyed lookup costs O(size of its object), with no tree of nodes built. The
/// decoder keeps a copy of the bytes, since an `init(from:)` may keep its decoder.
func fastDecodeStoredJSON<Value: Decodable>(_: Value.Type, bytes: UnsafeRawBufferPointer)
  -> Value?
{
  let text = [UInt8](bytes)
  guard let start = try? text.withUnsafeBufferPointer({ try StoredJSONText.check($0) }) else {
    return nil
  }
  if let value = StoredJSONDirect.read(Value.self, text, at: start) { return value }
  return try? Value(from: StoredJSONDecoder(text: text, position: start, codingPath: []))
}

/// Whether Foundation's coders treat the type specially (their strategies apply to it).
private func isSpecial(_ type: Any.Type) -> Bool {
  type == Date.self || type == Data.self || type == URL.self || type == Decimal.self
    || type is any FloatingPoint.Type
}

/// A decoder of one value of checked text (``StoredJSONText/check(_:)``), at `position`.
private struct StoredJSONDecoder: Decoder {
  let text: [UInt8]
  let position: Int
  let codingPath: [any CodingKey]
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
    guard text[position] == UInt8(ascii: "{") else { throw StoredJSONFallback() }
    return KeyedDecodingContainer(Keyed(text: text, start: position, codingPath: codingPath))
  }

  func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
    guard text[position] == UInt8(ascii: "[") else { throw StoredJSONFallback() }
    return Unkeyed(text: text, start: position, codingPath: codingPath)
  }

  func singleValueContainer() throws -> any SingleValueDecodingContainer {
    Single(text: text, position: position, codingPath: codingPath)
  }

  static func isNull(_ text: [UInt8], at position: Int) -> Bool {
    text[position] == UInt8(ascii: "n")
  }

  static func string(_ text: [UInt8], at position: Int) throws -> String {
    guard let string = text.withUnsafeBufferPointer({ StoredJSONText.string(at: position, in: $0) })
    else { throw StoredJSONFallback() }
    return string
  }

  static func bool(_ text: [UInt8], at position: Int) throws -> Bool {
    switch text[position] {
    case UInt8(ascii: "t"): return true
    case UInt8(ascii: "f"): return false
    default: throw StoredJSONFallback()
    }
  }

  /// Decodes a `T` at `position`: strings, booleans and integers directly (a mismatch falls
  /// back, so that Foundation reports it), other types through their `init(from:)`.
  static func decode<T: Decodable>(
    _ text: [UInt8], at position: Int, _ codingPath: [any CodingKey]
  ) throws -> T {
    if isSpecial(T.self) { throw StoredJSONFallback() }
    if T.self == String.self { return try string(text, at: position) as! T }  // T is String
    if T.self == Bool.self { return try bool(text, at: position) as! T }  // T is Bool
    if let integerType = T.self as? any FixedWidthInteger.Type {
      let integer = text.withUnsafeBufferPointer { bytes -> (any FixedWidthInteger)? in
        guard bytes[position] == UInt8(ascii: "-") || (0x30...0x39).contains(bytes[position])
        else { return nil }
        let end = StoredJSONText.end(ofValueAt: position, in: bytes)
        return integerType.init(
          Substring(decoding: UnsafeBufferPointer(rebasing: bytes[position..<end]), as: UTF8.self),
          radix: 10)
      }
      guard let integer else { throw StoredJSONFallback() }
      return integer as! T  // T is integerType
    }
    return try T(from: StoredJSONDecoder(text: text, position: position, codingPath: codingPath))
  }

  struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let text: [UInt8]
    /// The position of the object's `{`.
    let start: Int
    let codingPath: [any CodingKey]

    /// Calls `body` with each member's key (as a range of the text) and value position, in
    /// document order, until it returns false. O(size of the object).
    func forEachMember(_ body: (UnsafeBufferPointer<UInt8>, Range<Int>, Int) -> Bool) {
      text.withUnsafeBufferPointer { bytes in
        var position = StoredJSONText.skipWhitespace(bytes, from: start + 1)
        guard bytes[position] != UInt8(ascii: "}") else { return }
        while true {
          let keyEnd = StoredJSONText.end(ofStringAt: position, in: bytes)
          let colon = StoredJSONText.skipWhitespace(bytes, from: keyEnd)
          let value = StoredJSONText.skipWhitespace(bytes, from: colon + 1)
          guard body(bytes, position + 1..<keyEnd - 1, value) else { return }
          position = StoredJSONText.following(value, in: bytes)
          guard bytes[position] != UInt8(ascii: "}") else { return }
        }
      }
    }

    var allKeys: [Key] {
      var keys: [Key] = []
      forEachMember { bytes, key, _ in
        let name = String(decoding: UnsafeBufferPointer(rebasing: bytes[key]), as: UTF8.self)
        if let key = Key(stringValue: name) { keys.append(key) }
        return true
      }
      return keys
    }

    /// The position of `key`'s value. Keys in the text are plain ASCII (checked), so for an
    /// ASCII key a byte compare is Swift's string equality; any other key is compared as Swift
    /// compares strings (canonical equivalence), as Foundation's decoder does.
    func member(_ key: Key) -> Int? {
      var name = key.stringValue
      return name.withUTF8 { wanted in
        let ascii = wanted.allSatisfy { $0 < 0x80 }
        var found: Int?
        forEachMember { bytes, key, value in
          let equal =
            ascii
            ? key.count == wanted.count
              && (key.isEmpty
                || memcmp(bytes.baseAddress! + key.lowerBound, wanted.baseAddress!, key.count) == 0)
            : String(decoding: UnsafeBufferPointer(rebasing: bytes[key]), as: UTF8.self)
              == String(decoding: wanted, as: UTF8.self)
          if equal { found = value }
          return !equal
        }
        return found
      }
    }

    func required(_ key: Key) throws -> Int {
      guard let position = member(key) else { throw StoredJSONFallback() }
      return position
    }

    func contains(_ key: Key) -> Bool { member(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool {
      StoredJSONDecoder.isNull(text, at: try required(key))
    }

    func decode<T: Decodable>(_: T.Type, forKey key: Key) throws -> T {
      try StoredJSONDecoder.decode(text, at: try required(key), codingPath + [key])
    }

    // Strings and Booleans directly: the generic path costs a coding path, type checks and a
    // dynamic cast per value.
    func decode(_: String.Type, forKey key: Key) throws -> String {
      try StoredJSONDecoder.string(text, at: try required(key))
    }

    func decode(_: Bool.Type, forKey key: Key) throws -> Bool {
      try StoredJSONDecoder.bool(text, at: try required(key))
    }

    func decodeIfPresent<T: Decodable>(_: T.Type, forKey key: Key) throws -> T? {
      guard let position = member(key), !StoredJSONDecoder.isNull(text, at: position) else {
        return nil
      }
      return try StoredJSONDecoder.decode(text, at: position, codingPath + [key]) as T
    }

    func nestedContainer<NestedKey: CodingKey>(
      keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
      try StoredJSONDecoder(text: text, position: try required(key), codingPath: codingPath + [key])
        .container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
      try StoredJSONDecoder(text: text, position: try required(key), codingPath: codingPath + [key])
        .unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { throw StoredJSONFallback() }
    func superDecoder(forKey _: Key) throws -> any Decoder { throw StoredJSONFallback() }
  }

  struct Unkeyed: UnkeyedDecodingContainer {
    let text: [UInt8]
    let codingPath: [any CodingKey]
    let count: Int?
    var currentIndex = 0
    /// The position of the next element, or of the closing `]`.
    private var position: Int

    /// The array whose `[` is at `start`; its elements are counted once, O(its length).
    init(text: [UInt8], start: Int, codingPath: [any CodingKey]) {
      self.text = text
      self.codingPath = codingPath
      position = text.withUnsafeBufferPointer {
        StoredJSONText.skipWhitespace($0, from: start + 1)
      }
      let first = position
      count = text.withUnsafeBufferPointer { bytes in
        var count = 0
        var element = first
        while bytes[element] != UInt8(ascii: "]") {
          count += 1
          element = StoredJSONText.following(element, in: bytes)
        }
        return count
      }
    }

    var isAtEnd: Bool { currentIndex >= count! }

    mutating func next() throws -> Int {
      guard !isAtEnd else { throw StoredJSONFallback() }
      let element = position
      position = text.withUnsafeBufferPointer { StoredJSONText.following(element, in: $0) }
      currentIndex += 1
      return element
    }

    mutating func decodeNil() throws -> Bool {
      guard !isAtEnd else { throw StoredJSONFallback() }
      guard StoredJSONDecoder.isNull(text, at: position) else { return false }
      _ = try next()
      return true
    }

    mutating func decode<T: Decodable>(_: T.Type) throws -> T {
      try StoredJSONDecoder.decode(text, at: try next(), codingPath)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
      keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
      try StoredJSONDecoder(text: text, position: try next(), codingPath: codingPath)
        .container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
      try StoredJSONDecoder(text: text, position: try next(), codingPath: codingPath)
        .unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { throw StoredJSONFallback() }
  }

  struct Single: SingleValueDecodingContainer {
    let text: [UInt8]
    let position: Int
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { StoredJSONDecoder.isNull(text, at: position) }

    func decode<T: Decodable>(_: T.Type) throws -> T {
      try StoredJSONDecoder.decode(text, at: position, codingPath)
    }
  }
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
  if StoredJSONDirect.withBytes(value, body) { return true }
  let writer = StoredJSONWriter.take()
  defer { writer.giveBack() }
  guard (try? writer.write(value, depth: 0, slot: writer.rootSlot)) != nil, !writer.failed else {
    return false
  }
  writer.output.withUnsafeBytes(body)
  return true
}

/// Foundation's encoding alone (`JSONEncoder` with `.sortedKeys`).
func foundationEncodeStoredJSON<Value: Encodable>(_ value: Value) throws -> Data {
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.sortedKeys]
  return try encoder.encode(value)
}

/// The fast path alone: nil when it leaves the value to Foundation.
///
/// The bytes are written as the value's `encode(to:)` runs, with no tree of nodes in between:
/// O(n) in the encoding's length, plus a sort of an object's keys when they come out of order.
@usableFromInline
func fastEncodeStoredJSON<Value: Encodable>(_ value: Value) -> Data? {
  var data: Data?
  _ = withFastStoredJSON(value) { data = Data($0) }
  return data
}

/// The thread's spare writer: the `pthread` key's value holds one retain of it, given up when
/// the thread ends.
private let spareWriterKey: pthread_key_t = {
  var key = pthread_key_t()
  let created = pthread_key_create(&key) { spare in
    if let spare { Unmanaged<StoredJSONWriter>.fromOpaque(spare).release() }
  }
  precondition(created == 0, "pthread_key_create failed: \(created)")
  return key
}()

/// The state of one fast encoding: the bytes so far and the containers still open.
///
/// JSON is written in place while containers are used in the order they nest: a container is
/// closed when its value's `encode(to:)` returns, or when a container further out is used
/// again. Anything else (a closed container used again, two kinds of container for one value,
/// a super encoder, a key that would need escaping or Foundation's ordering of non-ASCII
/// keys) marks the writer failed, and the value goes to Foundation. One encoding on one thread
/// owns a writer, so its properties skip the dynamic exclusivity checks (a third of the cost).
private final class StoredJSONWriter {
  /// The JSON written so far.
  @exclusivity(unchecked) var output: [UInt8] = []
  /// The containers open now, outermost first.
  @exclusivity(unchecked) var frames: [Frame] = []
  /// Where each member of the open objects starts, from its key's opening quote.
  @exclusivity(unchecked) var members: [Member] = []
  /// The source of frame and slot numbers.
  @exclusivity(unchecked) var serial = 1
  /// Set when the value must go to Foundation.
  @exclusivity(unchecked) var failed = false

  /// The number of the top-level value's position (new for each encoding, so that an encoder
  /// kept from an earlier one is refused).
  @exclusivity(unchecked) var rootSlot = 1

  struct Frame {
    let id: Int
    let isObject: Bool
    /// The index in `members` of this object's first member.
    let memberBase: Int
    var count = 0
    /// Whether the keys so far came in byte order (no sort at close).
    var inOrder = true
    /// The number of the value position being written now, and where its bytes begin.
    var slot = 0
    var slotStart = 0
    /// The key of that position, for coding paths (objects only).
    var slotKey: (any CodingKey)?
  }

  struct Member {
    let start: Int
    let keyLength: Int
  }

  /// Whether an encoding on this thread is using the thread's spare writer now.
  @exclusivity(unchecked) var isTaken = false

  init() { output.reserveCapacity(64) }

  /// A writer for one encoding: the thread's spare one (its buffers kept from the last
  /// encoding: four allocations fewer), or a new one when that is taken (an `encode(to:)` that
  /// encodes another `.codable` value inside).
  static func take() -> StoredJSONWriter {
    if let spare = pthread_getspecific(spareWriterKey) {
      let writer = Unmanaged<StoredJSONWriter>.fromOpaque(spare).takeUnretainedValue()
      if !writer.isTaken {
        writer.isTaken = true
        return writer
      }
      return StoredJSONWriter()
    }
    let writer = StoredJSONWriter()
    writer.isTaken = true
    pthread_setspecific(spareWriterKey, Unmanaged.passRetained(writer).toOpaque())
    return writer
  }

  /// Ends an encoding: the spare writer is emptied for the next one (a large buffer is not
  /// kept).
  func giveBack() {
    guard isTaken else { return }
    isTaken = false
    serial += 1
    rootSlot = serial
    // Empty after a whole encoding; left filled only by one that failed.
    if !frames.isEmpty { frames.removeAll(keepingCapacity: true) }
    if !members.isEmpty { members.removeAll(keepingCapacity: true) }
    failed = false
    if output.capacity > 4096 {
      output = []
      output.reserveCapacity(64)
    } else {
      output.removeAll(keepingCapacity: true)
    }
  }

  /// Whether `slot` is still the position being written at `depth`.
  func isCurrent(_ slot: Int, depth: Int) -> Bool {
    guard !failed, frames.count >= depth else { return false }
    return depth == 0 ? slot == rootSlot : frames[depth - 1].slot == slot
  }

  func slotStart(_ depth: Int) -> Int { depth == 0 ? 0 : frames[depth - 1].slotStart }

  func fail() -> StoredJSONFallback {
    failed = true
    return StoredJSONFallback()
  }

  /// The coding path of the value at `depth`, as Foundation reports it.
  func codingPath(_ depth: Int) -> [any CodingKey] {
    frames.prefix(min(depth, frames.count)).map { frame in
      frame.slotKey ?? IndexKey(frame.count - 1)
    }
  }

  /// Writes `value` at the position `slot` of `depth`, which must be current and empty.
  func write<T: Encodable>(_ value: T, depth: Int, slot: Int) throws {
    // Leaves by their metatype (a dynamic cast or a conformance check costs hundreds of
    // instructions). SAFETY: each bit cast is of a value whose type was just compared equal
    // to the target type, in the `if` that guards it.
    if T.self == String.self {
      writeString(unsafeBitCast(value, to: String.self))
    } else if T.self == Bool.self {
      output.append(contentsOf: unsafeBitCast(value, to: Bool.self) ? "true".utf8 : "false".utf8)
    } else if T.self == Int.self {
      writeInteger(unsafeBitCast(value, to: Int.self))
    } else if T.self == Int64.self {
      writeInteger(unsafeBitCast(value, to: Int64.self))
    } else if T.self == Int32.self {
      writeInteger(unsafeBitCast(value, to: Int32.self))
    } else if T.self == Int16.self {
      writeInteger(unsafeBitCast(value, to: Int16.self))
    } else if T.self == Int8.self {
      writeInteger(unsafeBitCast(value, to: Int8.self))
    } else if T.self == UInt.self {
      writeInteger(unsafeBitCast(value, to: UInt.self))
    } else if T.self == UInt64.self {
      writeInteger(unsafeBitCast(value, to: UInt64.self))
    } else if T.self == UInt32.self {
      writeInteger(unsafeBitCast(value, to: UInt32.self))
    } else if T.self == UInt16.self {
      writeInteger(unsafeBitCast(value, to: UInt16.self))
    } else if T.self == UInt8.self {
      writeInteger(unsafeBitCast(value, to: UInt8.self))
    } else if T.self == Double.self || T.self == Float.self || T.self == Date.self
      || T.self == Data.self || T.self == URL.self || T.self == Decimal.self
    {
      // Foundation's strategies and number formatting apply: its own coder writes them.
      throw fail()
    } else {
      // Any other type, floating-point and wider integers included, encodes itself through
      // these containers, down to the leaves above (or to a requirement that fails).
      let start = output.count
      try value.encode(to: StoredJSONStreamEncoder(writer: self, depth: depth, slot: slot))
      guard !failed, frames.count >= depth else { throw fail() }
      close(downTo: depth)
      // Nothing encoded: what Foundation makes of that is for Foundation to say.
      guard output.count > start else { throw fail() }
    }
  }

  func writeInteger<I: FixedWidthInteger>(_ value: I) {
    output.append(contentsOf: String(value).utf8)
  }

  func writeString(_ text: String) { StoredJSONText.appendString(text, to: &output) }

  /// Opens the container of the value at `slot` of `depth`, or finds the one it already
  /// opened (Foundation lets a value ask twice); the frame's id, 0 when failed.
  func open(isObject: Bool, depth: Int, slot: Int) -> Int {
    guard isCurrent(slot, depth: depth) else {
      failed = true
      return 0
    }
    close(downTo: depth + 1)
    if frames.count == depth + 1 {
      guard frames[depth].isObject == isObject else {
        failed = true
        return 0
      }
      return frames[depth].id
    }
    // A single value already written here cannot become a container.
    guard output.count == slotStart(depth) else {
      failed = true
      return 0
    }
    serial += 1
    frames.append(Frame(id: serial, isObject: isObject, memberBase: members.count))
    output.append(isObject ? UInt8(ascii: "{") : UInt8(ascii: "["))
    return serial
  }

  /// Makes the container `frame` at `depth` the innermost again, closing those inside it.
  func resume(_ frame: Int, depth: Int) throws {
    guard !failed, depth < frames.count, frames[depth].id == frame else { throw fail() }
    close(downTo: depth + 1)
  }

  /// Starts the next position of the array `frame`; its slot number.
  func element(_ frame: Int, depth: Int) throws -> Int {
    try resume(frame, depth: depth)
    if frames[depth].count > 0 { output.append(UInt8(ascii: ",")) }
    return advance(depth)
  }

  /// Writes `key` as the next member of the object `frame`; the slot number of its value.
  func member<Key: CodingKey>(_ key: Key, of frame: Int, depth: Int) throws -> Int {
    try resume(frame, depth: depth)
    var name = key.stringValue
    let start = output.count + (frames[depth].count > 0 ? 1 : 0)
    let written = name.withUTF8 { bytes -> Bool in
      // Keys outside printable ASCII need escapes or Foundation's ordering.
      guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && !StoredJSONText.needsEscape($0) }) else {
        return false
      }
      let frameState = frames[depth]
      if frameState.count > 0 {
        let previous = members[members.count - 1]
        let order = compare(previous.start + 1, previous.keyLength, bytes)
        guard order != 0 else { return false }  // a duplicate key: Foundation decides
        if order > 0 { frames[depth].inOrder = false }
        output.append(UInt8(ascii: ","))
      }
      output.append(UInt8(ascii: "\""))
      output.append(contentsOf: bytes)
      output.append(contentsOf: "\":".utf8)
      members.append(Member(start: start, keyLength: bytes.count))
      return true
    }
    guard written else { throw fail() }
    frames[depth].slotKey = key
    return advance(depth)
  }

  /// Moves `depth`'s frame to a new position starting here; its slot number.
  func advance(_ depth: Int) -> Int {
    serial += 1
    frames[depth].count += 1
    frames[depth].slot = serial
    frames[depth].slotStart = output.count
    return serial
  }

  /// Compares the key of `length` bytes at `offset` of the output with `bytes`, in byte order.
  func compare(_ offset: Int, _ length: Int, _ bytes: UnsafeBufferPointer<UInt8>) -> Int {
    for index in 0..<min(length, bytes.count) where output[offset + index] != bytes[index] {
      return output[offset + index] < bytes[index] ? -1 : 1
    }
    return length == bytes.count ? 0 : (length < bytes.count ? -1 : 1)
  }

  /// Closes the containers deeper than `depth`, putting an object's members in key order.
  func close(downTo depth: Int) {
    while frames.count > depth {
      let frame = frames.removeLast()
      if frame.isObject {
        if !frame.inOrder { sortMembers(from: frame.memberBase) }
        members.removeSubrange(frame.memberBase...)
        output.append(UInt8(ascii: "}"))
      } else {
        output.append(UInt8(ascii: "]"))
      }
    }
  }

  /// Rewrites the members from `base` on (the last ones written) in the byte order of their
  /// keys, as `JSONEncoder` with `.sortedKeys` orders ASCII keys.
  func sortMembers(from base: Int) {
    let marks = members[base...]
    let first = marks.first!.start
    let ends = marks.indices.map {
      $0 + 1 < members.count ? members[$0 + 1].start - 1 : output.count
    }
    let key = { (index: Int) in
      let start = self.members[index].start + 1
      return self.output[start..<(start + self.members[index].keyLength)]
    }
    let order = marks.indices.sorted { key($0).lexicographicallyPrecedes(key($1)) }
    for (left, right) in zip(order, order.dropFirst()) where key(left).elementsEqual(key(right)) {
      failed = true
      return
    }
    var sorted: [UInt8] = []
    sorted.reserveCapacity(output.count - first)
    for (position, index) in order.enumerated() {
      if position > 0 { sorted.append(UInt8(ascii: ",")) }
      sorted.append(contentsOf: output[members[index].start..<ends[index - base]])
    }
    output.replaceSubrange(first..., with: sorted)
  }
}

/// An unkeyed container's element in a coding path, named as Foundation names it.
private struct IndexKey: CodingKey {
  let intValue: Int?
  var stringValue: String { "Index \(intValue ?? 0)" }
  init(_ index: Int) { intValue = index }
  init?(intValue: Int) { self.intValue = intValue }
  init?(stringValue _: String) { nil }
}

/// The encoder a value writes itself to: one position (`slot`) at one depth of the writer.
private struct StoredJSONStreamEncoder: Encoder {
  let writer: StoredJSONWriter
  let depth: Int
  let slot: Int
  var codingPath: [any CodingKey] { writer.codingPath(depth) }
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy _: Key.Type) -> KeyedEncodingContainer<Key> {
    let frame = writer.open(isObject: true, depth: depth, slot: slot)
    return KeyedEncodingContainer(Keyed(writer: writer, frame: frame, depth: depth))
  }

  func unkeyedContainer() -> any UnkeyedEncodingContainer {
    Unkeyed(
      writer: writer, frame: writer.open(isObject: false, depth: depth, slot: slot), depth: depth)
  }

  func singleValueContainer() -> any SingleValueEncodingContainer {
    Single(writer: writer, depth: depth, slot: slot)
  }

  struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: StoredJSONWriter
    let frame: Int
    let depth: Int
    var codingPath: [any CodingKey] { writer.codingPath(depth) }

    mutating func encodeNil(forKey key: Key) throws {
      _ = try writer.member(key, of: frame, depth: depth)
      writer.output.append(contentsOf: "null".utf8)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
      let slot = try writer.member(key, of: frame, depth: depth)
      try writer.write(value, depth: depth + 1, slot: slot)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
      keyedBy _: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
      let slot = (try? writer.member(key, of: frame, depth: depth)) ?? 0
      let nested = writer.open(isObject: true, depth: depth + 1, slot: slot)
      return KeyedEncodingContainer(
        Keyed<NestedKey>(writer: writer, frame: nested, depth: depth + 1))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
      let slot = (try? writer.member(key, of: frame, depth: depth)) ?? 0
      let nested = writer.open(isObject: false, depth: depth + 1, slot: slot)
      return Unkeyed(writer: writer, frame: nested, depth: depth + 1)
    }

    // A super encoder sends the whole value to Foundation.
    mutating func superEncoder() -> any Encoder {
      writer.failed = true
      return StoredJSONStreamEncoder(writer: writer, depth: depth + 1, slot: 0)
    }
    mutating func superEncoder(forKey _: Key) -> any Encoder { superEncoder() }
  }

  struct Unkeyed: UnkeyedEncodingContainer {
    let writer: StoredJSONWriter
    let frame: Int
    let depth: Int
    var codingPath: [any CodingKey] { writer.codingPath(depth) }

    var count: Int {
      guard !writer.failed, depth < writer.frames.count, writer.frames[depth].id == frame else {
        return 0
      }
      return writer.frames[depth].count
    }

    mutating func encodeNil() throws {
      _ = try writer.element(frame, depth: depth)
      writer.output.append(contentsOf: "null".utf8)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
      let slot = try writer.element(frame, depth: depth)
      try writer.write(value, depth: depth + 1, slot: slot)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
      keyedBy _: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
      let slot = (try? writer.element(frame, depth: depth)) ?? 0
      let nested = writer.open(isObject: true, depth: depth + 1, slot: slot)
      return KeyedEncodingContainer(
        Keyed<NestedKey>(writer: writer, frame: nested, depth: depth + 1))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
      let slot = (try? writer.element(frame, depth: depth)) ?? 0
      return Unkeyed(
        writer: writer, frame: writer.open(isObject: false, depth: depth + 1, slot: slot),
        depth: depth + 1)
    }

    mutating func superEncoder() -> any Encoder {
      writer.failed = true
      return StoredJSONStreamEncoder(writer: writer, depth: depth + 1, slot: 0)
    }
  }

  struct Single: SingleValueEncodingContainer {
    let writer: StoredJSONWriter
    let depth: Int
    let slot: Int
    var codingPath: [any CodingKey] { writer.codingPath(depth) }

    /// Checks that this position is current and still empty (one value per container).
    func claim() throws {
      guard writer.isCurrent(slot, depth: depth), writer.frames.count == depth,
        writer.output.count == writer.slotStart(depth)
      else { throw writer.fail() }
    }

    mutating func encodeNil() throws {
      try claim()
      writer.output.append(contentsOf: "null".utf8)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
      try claim()
      try writer.write(value, depth: depth, slot: slot)
    }
  }
}
