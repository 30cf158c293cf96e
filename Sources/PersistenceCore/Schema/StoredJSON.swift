import Foundation

// A small JSON codec for `.codable` columns: the common shapes (objects, arrays, strings,
// integers, booleans, null) without `JSONDecoder`'s and `JSONEncoder`'s per-call setup, which
// costs about 16,000 instructions per value here. Anything outside those shapes (floating-point
// numbers, `Date`, `Data`, `URL`, `Decimal`, super coders, an error of any kind) falls back to
// Foundation's coders, so results, bytes and error messages are exactly Foundation's.
// `StoredJSONTests` checks both directions against Foundation, value by value.

/// A parsed JSON value.
enum StoredJSON {
  case null
  case bool(Bool)
  /// A number, as its text (only integers are decoded here).
  case number(Substring)
  case string(String)
  case array([StoredJSON])
  /// Members in document order.
  case object([(key: String, value: StoredJSON)])
}

/// Thrown when the fast path does not handle a value; the caller then uses Foundation's coder.
struct StoredJSONFallback: Error {}

// MARK: Parsing

extension StoredJSON {
  /// Parses `bytes` strictly (RFC 8259, no duplicate keys, nesting up to 64 levels).
  static func parse(_ bytes: UnsafeRawBufferPointer) throws -> StoredJSON {
    var parser = Parser(bytes: bytes)
    let value = try parser.value(depth: 0)
    parser.skipWhitespace()
    guard parser.position == bytes.count else { throw StoredJSONFallback() }
    return value
  }

  private struct Parser {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func skipWhitespace() {
      while position < bytes.count {
        switch bytes[position] {
        case 0x20, 0x09, 0x0A, 0x0D: position += 1
        default: return
        }
      }
    }

    mutating func expect(_ literal: StaticString) throws {
      let count = literal.utf8CodeUnitCount
      guard position + count <= bytes.count else { throw StoredJSONFallback() }
      for offset in 0..<count where bytes[position + offset] != literal.utf8Start[offset] {
        throw StoredJSONFallback()
      }
      position += count
    }

    mutating func value(depth: Int) throws -> StoredJSON {
      guard depth < 64 else { throw StoredJSONFallback() }
      skipWhitespace()
      guard position < bytes.count else { throw StoredJSONFallback() }
      switch bytes[position] {
      case UInt8(ascii: "{"):
        position += 1
        var members: [(key: String, value: StoredJSON)] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
          position += 1
          return .object(members)
        }
        while true {
          skipWhitespace()
          guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
            throw StoredJSONFallback()
          }
          let key = try string()
          // Duplicate keys: Foundation decides which wins, so leave them to it.
          if members.contains(where: { $0.key == key }) { throw StoredJSONFallback() }
          skipWhitespace()
          try expect(":")
          members.append((key, try value(depth: depth + 1)))
          skipWhitespace()
          guard position < bytes.count else { throw StoredJSONFallback() }
          if bytes[position] == UInt8(ascii: ",") {
            position += 1
          } else if bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(members)
          } else {
            throw StoredJSONFallback()
          }
        }
      case UInt8(ascii: "["):
        position += 1
        var elements: [StoredJSON] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
          position += 1
          return .array(elements)
        }
        while true {
          elements.append(try value(depth: depth + 1))
          skipWhitespace()
          guard position < bytes.count else { throw StoredJSONFallback() }
          if bytes[position] == UInt8(ascii: ",") {
            position += 1
          } else if bytes[position] == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
          } else {
            throw StoredJSONFallback()
          }
        }
      case UInt8(ascii: "\""): return .string(try string())
      case UInt8(ascii: "t"):
        try expect("true")
        return .bool(true)
      case UInt8(ascii: "f"):
        try expect("false")
        return .bool(false)
      case UInt8(ascii: "n"):
        try expect("null")
        return .null
      default: return .number(try number())
      }
    }

    /// An integer (`-?(0|[1-9][0-9]*)`); fractions and exponents fall back.
    mutating func number() throws -> Substring {
      let start = position
      if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
      let digits = position
      while position < bytes.count, (0x30...0x39).contains(bytes[position]) { position += 1 }
      guard position > digits, bytes[digits] != 0x30 || position == digits + 1 else {
        throw StoredJSONFallback()
      }
      if position < bytes.count, [0x2E, 0x65, 0x45].contains(bytes[position]) {
        throw StoredJSONFallback()
      }
      return Substring(
        decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
    }

    /// A string at a `"`: escapes decoded, UTF-8 validated, control characters refused.
    mutating func string() throws -> String {
      position += 1
      let start = position
      while position < bytes.count {
        let byte = bytes[position]
        if byte == UInt8(ascii: "\"") {
          let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<position])
          position += 1
          guard let text = String(validating: raw, as: UTF8.self) else {
            throw StoredJSONFallback()
          }
          return text
        }
        if byte == UInt8(ascii: "\\") { break }
        if byte < 0x20 { throw StoredJSONFallback() }
        position += 1
      }
      // With escapes: collect the bytes, then validate.
      var collected = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
      while position < bytes.count {
        let byte = bytes[position]
        position += 1
        switch byte {
        case UInt8(ascii: "\""):
          guard let text = String(validating: collected, as: UTF8.self) else {
            throw StoredJSONFallback()
          }
          return text
        case UInt8(ascii: "\\"):
          guard position < bytes.count else { throw StoredJSONFallback() }
          let escape = bytes[position]
          position += 1
          switch escape {
          case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): collected.append(escape)
          case UInt8(ascii: "b"): collected.append(0x08)
          case UInt8(ascii: "f"): collected.append(0x0C)
          case UInt8(ascii: "n"): collected.append(0x0A)
          case UInt8(ascii: "r"): collected.append(0x0D)
          case UInt8(ascii: "t"): collected.append(0x09)
          case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
              try expect("\\u")
              let low = try hex4()
              guard (0xDC00..<0xE000).contains(low) else { throw StoredJSONFallback() }
              scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw StoredJSONFallback() }
            collected.append(contentsOf: String(Character(unicode)).utf8)
          default: throw StoredJSONFallback()
          }
        default:
          if byte < 0x20 { throw StoredJSONFallback() }
          collected.append(byte)
        }
      }
      throw StoredJSONFallback()
    }

    mutating func hex4() throws -> UInt32 {
      guard position + 4 <= bytes.count else { throw StoredJSONFallback() }
      var value: UInt32 = 0
      for _ in 0..<4 {
        let byte = bytes[position]
        position += 1
        let digit: UInt8
        switch byte {
        case 0x30...0x39: digit = byte - 0x30
        case 0x41...0x46: digit = byte - 0x41 + 10
        case 0x61...0x66: digit = byte - 0x61 + 10
        default: throw StoredJSONFallback()
        }
        value = value << 4 | UInt32(digit)
      }
      return value
    }
  }
}

// MARK: Decoding

/// Decodes `Value` from JSON bytes: the fast path when it applies, else `JSONDecoder`.
func decodeStoredJSON<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
  if let value = fastDecodeStoredJSON(type, from: data) { return value }
  return try JSONDecoder().decode(Value.self, from: data)
}

/// The fast path alone: nil when it leaves the value to Foundation.
func fastDecodeStoredJSON<Value: Decodable>(_: Value.Type, from data: Data) -> Value? {
  data.withUnsafeBytes { bytes -> Value? in
    guard let parsed = try? StoredJSON.parse(bytes) else { return nil }
    return try? Value(from: StoredJSONDecoder(value: parsed, codingPath: []))
  }
}

/// Whether Foundation's coders treat the type specially (their strategies apply to it).
private func isSpecial(_ type: Any.Type) -> Bool {
  type == Date.self || type == Data.self || type == URL.self || type == Decimal.self
    || type is any FloatingPoint.Type
}

private struct StoredJSONDecoder: Decoder {
  let value: StoredJSON
  let codingPath: [any CodingKey]
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
    guard case .object(let members) = value else { throw StoredJSONFallback() }
    return KeyedDecodingContainer(Keyed(members: members, codingPath: codingPath))
  }

  func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
    guard case .array(let elements) = value else { throw StoredJSONFallback() }
    return Unkeyed(elements: elements, codingPath: codingPath)
  }

  func singleValueContainer() throws -> any SingleValueDecodingContainer {
    Single(value: value, codingPath: codingPath)
  }

  /// Decodes a `T` from `value`: strings, booleans and integers directly (a mismatch falls
  /// back, so that Foundation reports it), other types through their `init(from:)`.
  static func decode<T: Decodable>(_ value: StoredJSON, _ codingPath: [any CodingKey]) throws -> T {
    if isSpecial(T.self) { throw StoredJSONFallback() }
    if T.self == String.self {
      guard case .string(let text) = value else { throw StoredJSONFallback() }
      return text as! T  // T is String
    }
    if T.self == Bool.self {
      guard case .bool(let flag) = value else { throw StoredJSONFallback() }
      return flag as! T  // T is Bool
    }
    if let integerType = T.self as? any FixedWidthInteger.Type {
      guard case .number(let digits) = value, let integer = integerType.init(digits, radix: 10)
      else { throw StoredJSONFallback() }
      return integer as! T  // T is integerType
    }
    return try T(from: StoredJSONDecoder(value: value, codingPath: codingPath))
  }

  struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [(key: String, value: StoredJSON)]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { members.compactMap { Key(stringValue: $0.key) } }

    func member(_ key: Key) -> StoredJSON? {
      members.first { $0.key == key.stringValue }?.value
    }
    func contains(_ key: Key) -> Bool { member(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool {
      guard let value = member(key) else { throw StoredJSONFallback() }
      if case .null = value { return true }
      return false
    }

    func decode<T: Decodable>(_: T.Type, forKey key: Key) throws -> T {
      guard let value = member(key) else { throw StoredJSONFallback() }
      return try StoredJSONDecoder.decode(value, codingPath + [key])
    }

    func decodeIfPresent<T: Decodable>(_: T.Type, forKey key: Key) throws -> T? {
      guard let value = member(key) else { return nil }
      if case .null = value { return nil }
      return try StoredJSONDecoder.decode(value, codingPath + [key]) as T
    }

    func nestedContainer<NestedKey: CodingKey>(
      keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
      guard let value = member(key) else { throw StoredJSONFallback() }
      return try StoredJSONDecoder(value: value, codingPath: codingPath + [key])
        .container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
      guard let value = member(key) else { throw StoredJSONFallback() }
      return try StoredJSONDecoder(value: value, codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { throw StoredJSONFallback() }
    func superDecoder(forKey _: Key) throws -> any Decoder { throw StoredJSONFallback() }
  }

  struct Unkeyed: UnkeyedDecodingContainer {
    let elements: [StoredJSON]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [StoredJSON], codingPath: [any CodingKey]) {
      self.elements = elements
      self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    mutating func next() throws -> StoredJSON {
      guard currentIndex < elements.count else { throw StoredJSONFallback() }
      defer { currentIndex += 1 }
      return elements[currentIndex]
    }

    mutating func decodeNil() throws -> Bool {
      guard currentIndex < elements.count else { throw StoredJSONFallback() }
      if case .null = elements[currentIndex] {
        currentIndex += 1
        return true
      }
      return false
    }

    mutating func decode<T: Decodable>(_: T.Type) throws -> T {
      try StoredJSONDecoder.decode(try next(), codingPath)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
      keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
      try StoredJSONDecoder(value: try next(), codingPath: codingPath).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
      try StoredJSONDecoder(value: try next(), codingPath: codingPath).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { throw StoredJSONFallback() }
  }

  struct Single: SingleValueDecodingContainer {
    let value: StoredJSON
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool {
      if case .null = value { return true }
      return false
    }

    func decode<T: Decodable>(_: T.Type) throws -> T {
      try StoredJSONDecoder.decode(value, codingPath)
    }
  }
}

// MARK: Encoding

/// Encodes `value` as `JSONEncoder` with `.sortedKeys` does: the fast path when it applies,
/// else `JSONEncoder` itself.
func encodeStoredJSON<Value: Encodable>(_ value: Value) throws -> Data {
  if let bytes = fastEncodeStoredJSON(value) { return bytes }
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.sortedKeys]
  return try encoder.encode(value)
}

/// The fast path alone: nil when it leaves the value to Foundation.
func fastEncodeStoredJSON<Value: Encodable>(_ value: Value) -> Data? {
  let root = EncodedNode()
  guard (try? StoredJSONEncoder.encode(value, into: root, .root)) != nil else { return nil }
  return root.serialized()
}

/// A value being encoded; containers fill it in place.
private final class EncodedNode {
  enum Content {
    case unset
    /// A super encoder was asked for: the value goes to Foundation.
    case poisoned
    case null
    case literal(String)
    case string(String)
    case array([EncodedNode])
    case object([(key: String, value: EncodedNode)])
  }
  var content = Content.unset

  /// The JSON bytes; nil when a value was never set or keys would need Foundation's ordering.
  func serialized() -> Data? {
    var output: [UInt8] = []
    // One allocation for the common small value, not one per doubling from empty.
    output.reserveCapacity(64)
    guard write(into: &output) else { return nil }
    return Data(output)
  }

  private func write(into output: inout [UInt8]) -> Bool {
    switch content {
    case .unset, .poisoned: return false
    case .null: output.append(contentsOf: "null".utf8)
    case .literal(let text): output.append(contentsOf: text.utf8)
    case .string(let text): EncodedNode.writeString(text, into: &output)
    case .array(let elements):
      output.append(UInt8(ascii: "["))
      for (offset, element) in elements.enumerated() {
        if offset > 0 { output.append(UInt8(ascii: ",")) }
        guard element.write(into: &output) else { return false }
      }
      output.append(UInt8(ascii: "]"))
    case .object(let members):
      // Foundation orders keys with its own comparison; for ASCII keys it is byte order
      // (checked against JSONEncoder by StoredJSONTests). Other keys fall back.
      guard members.allSatisfy({ $0.key.utf8.allSatisfy { $0 < 0x80 } }) else { return false }
      let sorted =
        members.count < 2
        ? members : members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
      for index in sorted.indices.dropFirst() where sorted[index].key == sorted[index - 1].key {
        return false
      }
      output.append(UInt8(ascii: "{"))
      for (offset, member) in sorted.enumerated() {
        if offset > 0 { output.append(UInt8(ascii: ",")) }
        EncodedNode.writeString(member.key, into: &output)
        output.append(UInt8(ascii: ":"))
        guard member.value.write(into: &output) else { return false }
      }
      output.append(UInt8(ascii: "}"))
    }
    return true
  }

  /// Writes a string as `JSONEncoder` does: `"`, `\` and `/` escaped, the usual short escapes,
  /// other control characters as `\u00XX`, everything else as UTF-8.
  static func writeString(_ text: String, into output: inout [UInt8]) {
    output.append(UInt8(ascii: "\""))
    // Most text needs no escape: copied whole (about a tenth of the byte-by-byte cost).
    var text = text
    let plain = text.withUTF8 { bytes in
      guard !bytes.contains(where: Self.needsEscape) else { return false }
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
}

/// The coding path of a value being encoded, made into an array only when asked: the last key
/// apart from the keys before it, so that encoding a member of a top-level container (the
/// common case) allocates no path.
/// An unkeyed container's element in a coding path, named as Foundation names it.
private struct IndexKey: CodingKey {
  let intValue: Int?
  var stringValue: String { "Index \(intValue ?? 0)" }
  init(_ index: Int) { intValue = index }
  init?(intValue: Int) { self.intValue = intValue }
  init?(stringValue _: String) { nil }
}

private struct EncodingPath {
  let parent: [any CodingKey]
  let last: (any CodingKey)?
  static var root: EncodingPath { EncodingPath(parent: [], last: nil) }
  var keys: [any CodingKey] { last.map { parent + [$0] } ?? parent }
  func appending(_ key: any CodingKey) -> EncodingPath { EncodingPath(parent: keys, last: key) }
}

private struct StoredJSONEncoder: Encoder {
  let node: EncodedNode
  let path: EncodingPath
  var codingPath: [any CodingKey] { path.keys }
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy _: Key.Type) -> KeyedEncodingContainer<Key> {
    switch node.content {
    case .object, .poisoned: break
    default: node.content = .object([])
    }
    return KeyedEncodingContainer(Keyed(node: node, path: path))
  }

  func unkeyedContainer() -> any UnkeyedEncodingContainer {
    switch node.content {
    case .array, .poisoned: break
    default: node.content = .array([])
    }
    return Unkeyed(node: node, path: path)
  }

  func singleValueContainer() -> any SingleValueEncodingContainer {
    Single(node: node, path: path)
  }

  /// Sets `node` to `value`, or throws ``StoredJSONFallback`` for what the fast path leaves
  /// to Foundation.
  static func encode<T: Encodable>(
    _ value: T, into node: EncodedNode, _ path: EncodingPath
  )
    throws
  {
    if case .poisoned = node.content { return }
    // The common leaf first, by its metatype (a dynamic cast and the conformance checks below
    // cost hundreds of instructions each).
    if T.self == String.self {
      node.content = .string(value as! String)
      return
    }
    if isSpecial(T.self) { throw StoredJSONFallback() }
    // Checked on the metatype: a cast of the value (`value as? Bool`) cost about 1,700
    // instructions each for every other type, a container value included.
    if T.self == Bool.self {
      node.content = .literal((value as! Bool) ? "true" : "false")
    } else if T.self is any FixedWidthInteger.Type, let integer = value as? any FixedWidthInteger {
      node.content = .literal("\(integer)")
    } else {
      try value.encode(to: StoredJSONEncoder(node: node, path: path))
    }
  }

  struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodedNode
    let path: EncodingPath
    var codingPath: [any CodingKey] { path.keys }

    func add(_ key: Key) -> EncodedNode {
      let child = EncodedNode()
      if case .object(var members) = node.content {
        node.content = .unset
        members.append((key.stringValue, child))
        node.content = .object(members)
      }
      return child
    }

    mutating func encodeNil(forKey key: Key) throws { add(key).content = .null }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
      try StoredJSONEncoder.encode(value, into: add(key), path.appending(key))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
      keyedBy type: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
      StoredJSONEncoder(node: add(key), path: path.appending(key)).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
      StoredJSONEncoder(node: add(key), path: path.appending(key)).unkeyedContainer()
    }

    // A super encoder sends the whole value to Foundation.
    mutating func superEncoder() -> any Encoder {
      node.content = .poisoned
      return StoredJSONEncoder(node: EncodedNode(), path: path)
    }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
      node.content = .poisoned
      return StoredJSONEncoder(node: EncodedNode(), path: path.appending(key))
    }
  }

  struct Unkeyed: UnkeyedEncodingContainer {
    let node: EncodedNode
    let path: EncodingPath
    var codingPath: [any CodingKey] { path.keys }

    var count: Int {
      if case .array(let elements) = node.content { return elements.count }
      return 0
    }

    func add() -> EncodedNode {
      let child = EncodedNode()
      if case .array(var elements) = node.content {
        node.content = .unset
        elements.append(child)
        node.content = .array(elements)
      }
      return child
    }

    mutating func encodeNil() throws { add().content = .null }

    /// The path of the next element: Foundation's `Index n` key after the container's.
    var nextPath: EncodingPath { path.appending(IndexKey(count)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
      let path = nextPath
      try StoredJSONEncoder.encode(value, into: add(), path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
      keyedBy type: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
      let path = nextPath
      return StoredJSONEncoder(node: add(), path: path).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
      let path = nextPath
      return StoredJSONEncoder(node: add(), path: path).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
      node.content = .poisoned
      return StoredJSONEncoder(node: EncodedNode(), path: path)
    }
  }

  struct Single: SingleValueEncodingContainer {
    let node: EncodedNode
    let path: EncodingPath
    var codingPath: [any CodingKey] { path.keys }

    mutating func encodeNil() throws { node.content = .null }

    mutating func encode<T: Encodable>(_ value: T) throws {
      try StoredJSONEncoder.encode(value, into: node, path)
    }
  }
}
