import Foundation

/// A `.codable` value that writes and reads its stored JSON object itself, without the
/// `Encoder` and `Decoder` containers `Codable` goes through (about 2,500 instructions a value,
/// most of a small value's cost).
///
/// `Codable` stays the definition of the value's JSON. ``writeStoredJSON(to:)`` must write the
/// members `encode(to:)` encodes, and ``init(storedJSON:)`` must accept only what `init(from:)`
/// accepts and read the same value from it. When either cannot, it leaves the value to
/// `Codable`: a writer that is refused a member (see ``StoredJSONObjectWriter``) or an
/// initializer that throws sends the value through `encode(to:)` or `init(from:)` (and so to
/// `JSONEncoder`'s or `JSONDecoder`'s bytes and errors, as without this conformance). Check a
/// conformance against Foundation in tests, as `PlaceIdentifier`'s tests do.
///
/// ```swift
/// struct GazetteerEntry: Codable, StoredJSONRepresentable {
///   var source: String  // "geonames"
///   var code: String  // "1850147"
///
///   func writeStoredJSON(to object: inout StoredJSONObjectWriter) {
///     object.write(code, forKey: "code")  // keys in byte order, as .sortedKeys
///     object.write(source, forKey: "source")
///   }
///
///   init(storedJSON object: StoredJSONObjectReader) throws {
///     code = try object.string(forKey: "code")
///     source = try object.string(forKey: "source")
///   }
/// }
/// ```
public protocol StoredJSONRepresentable: Codable {
  /// Writes the value's members, in increasing byte order of their keys (the order
  /// `JSONEncoder` with `.sortedKeys` gives ASCII keys).
  func writeStoredJSON(to object: inout StoredJSONObjectWriter)

  /// Reads the value from its stored object; throws (any error) to leave it to `init(from:)`.
  init(storedJSON object: StoredJSONObjectReader) throws
}

/// Writes one JSON object as `JSONEncoder` with `.sortedKeys` writes it: members in the byte
/// order of their keys, strings escaped as Foundation escapes them.
///
/// A key that is not plain ASCII without characters JSON escapes, or that does not come after
/// the key before it, refuses the whole object: the value is then encoded through
/// `encode(to:)` instead.
public struct StoredJSONObjectWriter: ~Copyable {
  var bytes: [UInt8]
  private var lastKey: UnsafeRawBufferPointer?
  private(set) var refused = false

  init(into bytes: consuming [UInt8]) {
    self.bytes = bytes
    self.bytes.append(UInt8(ascii: "{"))
  }

  /// Writes `value` as a string member.
  public mutating func write(_ value: String, forKey key: StaticString) {
    guard member(key) else { return }
    StoredJSONText.appendString(value, to: &bytes)
  }

  /// Writes `value` as a string member, or nothing when it is nil (as `encodeIfPresent`).
  public mutating func writeIfPresent(_ value: String?, forKey key: StaticString) {
    if let value { write(value, forKey: key) }
  }

  /// Writes `value` as an integer member.
  public mutating func write(_ value: Int, forKey key: StaticString) {
    guard member(key) else { return }
    bytes.append(contentsOf: String(value).utf8)
  }

  /// Writes `value` as a Boolean member.
  public mutating func write(_ value: Bool, forKey key: StaticString) {
    guard member(key) else { return }
    bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
  }

  /// Opens a member: its comma and key. False (and the object refused) for a key out of
  /// order or one that would need escaping.
  private mutating func member(_ key: StaticString) -> Bool {
    guard !refused, key.hasPointerRepresentation else {
      refused = true
      return false
    }
    let name = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    guard name.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && !StoredJSONText.needsEscape($0) }),
      lastKey.map({ Self.precedes($0, name) }) ?? true
    else {
      refused = true
      return false
    }
    if lastKey != nil { bytes.append(UInt8(ascii: ",")) }
    lastKey = name
    bytes.append(UInt8(ascii: "\""))
    bytes.append(contentsOf: name)
    bytes.append(contentsOf: "\":".utf8)
    return true
  }

  private static func precedes(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer)
    -> Bool
  {
    let common = min(left.count, right.count)
    if common > 0 {
      let order = memcmp(left.baseAddress!, right.baseAddress!, common)
      if order != 0 { return order < 0 }
    }
    return left.count < right.count
  }

  /// The object's bytes, closed; nil when it was refused.
  consuming func finish() -> [UInt8]? {
    guard !refused else { return nil }
    bytes.append(UInt8(ascii: "}"))
    return bytes
  }
}

/// Reads the members of one stored JSON object, checked as the fast decoder checks text
/// (RFC 8259, integers only, each key once): what ``StoredJSONRepresentable/init(storedJSON:)``
/// is given. Each lookup is O(size of the object).
public struct StoredJSONObjectReader {
  let text: [UInt8]
  /// The position of the object's `{`.
  let start: Int

  /// A reader of the object whose `{` is at `start` in `text`, which ``StoredJSONText/check(_:)``
  /// accepted.
  @usableFromInline
  init(text: [UInt8], start: Int) {
    self.text = text
    self.start = start
  }

  /// The position of `key`'s value, or nil.
  private func member(_ key: StaticString) -> Int? {
    guard key.hasPointerRepresentation else { return nil }
    let wanted = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    return text.withUnsafeBufferPointer { bytes in
      var position = StoredJSONText.skipWhitespace(bytes, from: start + 1)
      guard bytes[position] != UInt8(ascii: "}") else { return nil }
      while true {
        let keyEnd = StoredJSONText.end(ofStringAt: position, in: bytes)
        let colon = StoredJSONText.skipWhitespace(bytes, from: keyEnd)
        let value = StoredJSONText.skipWhitespace(bytes, from: colon + 1)
        let length = keyEnd - 1 - (position + 1)
        if length == wanted.count,
          length == 0 || memcmp(bytes.baseAddress! + position + 1, wanted.baseAddress!, length) == 0
        {
          return value
        }
        position = StoredJSONText.following(value, in: bytes)
        guard bytes[position] != UInt8(ascii: "}") else { return nil }
      }
    }
  }

  /// The string member `key`; throws when it is missing or not a string.
  public func string(forKey key: StaticString) throws -> String {
    guard let position = member(key),
      let string = text.withUnsafeBufferPointer({ StoredJSONText.string(at: position, in: $0) })
    else { throw StoredJSONFallback() }
    return string
  }

  /// The string member `key`, nil when it is missing or null (as `decodeIfPresent`); throws
  /// when it is another kind of value.
  public func stringIfPresent(forKey key: StaticString) throws -> String? {
    guard let position = member(key), text[position] != UInt8(ascii: "n") else { return nil }
    return try string(forKey: key)
  }

  /// The integer member `key`; throws when it is missing, not an integer or out of range.
  public func integer(forKey key: StaticString) throws -> Int {
    guard let position = member(key) else { throw StoredJSONFallback() }
    let value = text.withUnsafeBufferPointer { bytes -> Int? in
      guard bytes[position] == UInt8(ascii: "-") || (0x30...0x39).contains(bytes[position])
      else { return nil }
      let end = StoredJSONText.end(ofValueAt: position, in: bytes)
      return Int(
        Substring(decoding: UnsafeBufferPointer(rebasing: bytes[position..<end]), as: UTF8.self))
    }
    guard let value else { throw StoredJSONFallback() }
    return value
  }

  /// The Boolean member `key`; throws when it is missing or not a Boolean.
  public func bool(forKey key: StaticString) throws -> Bool {
    guard let position = member(key) else { throw StoredJSONFallback() }
    switch text[position] {
    case UInt8(ascii: "t"): return true
    case UInt8(ascii: "f"): return false
    default: throw StoredJSONFallback()
    }
  }
}

/// The direct reading and writing of ``StoredJSONRepresentable`` types, for the generic paths.
enum StoredJSONDirect {
  /// Calls `body` with the direct encoding of `value` when its type writes its own; false
  /// when it does not, or refused.
  @inline(__always)
  static func withBytes<Value: Encodable>(
    _ value: Value, _ body: (UnsafeRawBufferPointer) -> Void
  ) -> Bool {
    guard let direct = Value.self as? any StoredJSONRepresentable.Type else { return false }
    return withBytes(value, as: direct, body)
  }

  private static func withBytes<Value: Encodable, Direct: StoredJSONRepresentable>(
    _ value: Value, as _: Direct.Type, _ body: (UnsafeRawBufferPointer) -> Void
  ) -> Bool {
    var buffer: [UInt8] = []
    buffer.reserveCapacity(64)
    var writer = StoredJSONObjectWriter(into: buffer)
    // SAFETY: Value is Direct: the metatype cast above succeeded for this very type.
    assert(Value.self == Direct.self)
    unsafeBitCast(value, to: Direct.self).writeStoredJSON(to: &writer)
    guard let bytes = writer.finish() else { return false }
    bytes.withUnsafeBytes(body)
    return true
  }

  /// The value read directly from checked text whose value starts at `start`, when its type
  /// reads its own and the text holds an object; nil otherwise, or when it threw.
  @inline(__always)
  static func read<Value: Decodable>(_: Value.Type, _ text: [UInt8], at start: Int) -> Value? {
    guard text[start] == UInt8(ascii: "{"),
      let direct = Value.self as? any StoredJSONRepresentable.Type
    else { return nil }
    return read(Value.self, as: direct, text, at: start)
  }

  private static func read<Value: Decodable, Direct: StoredJSONRepresentable>(
    _: Value.Type, as _: Direct.Type, _ text: [UInt8], at start: Int
  ) -> Value? {
    guard let value = try? Direct(storedJSON: StoredJSONObjectReader(text: text, start: start))
    else { return nil }
    // SAFETY: Direct is Value (the metatype cast in `read(_:_:at:)` succeeded for it).
    assert(Value.self == Direct.self)
    return unsafeBitCast(value, to: Value.self)
  }
}
