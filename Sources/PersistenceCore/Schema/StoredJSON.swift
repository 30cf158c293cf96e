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
func fastDecodeStoredJSON<Value: Decodable>(_: Value.Type, bytes: UnsafeRawBufferPointer)
  -> Value?
{
  guard let parsed = try? StoredJSON.parse(bytes) else { return nil }
  return try? Value(from: StoredJSONDecoder(value: parsed, codingPath: []))
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

    // Strings and Booleans directly: the generic path costs a coding path, type checks and a
    // dynamic cast per value.
    func decode(_: String.Type, forKey key: Key) throws -> String {
      guard case .string(let text) = member(key) else { throw StoredJSONFallback() }
      return text
    }

    func decode(_: Bool.Type, forKey key: Key) throws -> Bool {
      guard case .bool(let flag) = member(key) else { throw StoredJSONFallback() }
      return flag
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
    // instructions); the bit casts are of a value whose type was just compared equal.
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

  /// Writes a string as `JSONEncoder` does: `"`, `\` and `/` escaped, the usual short escapes,
  /// other control characters as `\u00XX`, everything else as UTF-8.
  func writeString(_ text: String) {
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
      guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && !Self.needsEscape($0) }) else {
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
