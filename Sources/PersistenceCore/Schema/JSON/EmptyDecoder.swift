/// A decoder that answers every question with an empty value: `""`, `0`, `false`, `nil` for an
/// optional, no elements in a list and no keys in a dictionary. Decoding a `Codable` struct of
/// such fields from it gives the struct's empty value (`ModelDefaults.value()`); a type that
/// refuses those (a `UUID` or a `URL` field, an enum) throws its own error.
///
/// Cost: as the type's `init(from:)`, with no bytes read.
struct EmptyDecoder: Decoder {
  var codingPath: [any CodingKey] = []
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy _: Key.Type) -> KeyedDecodingContainer<Key> {
    KeyedDecodingContainer(Keyed(codingPath: codingPath, depth: depth))
  }
  func unkeyedContainer() -> any UnkeyedDecodingContainer {
    Unkeyed(codingPath: codingPath, depth: depth)
  }
  func singleValueContainer() -> any SingleValueDecodingContainer {
    Single(codingPath: codingPath, decoding: decoding, depth: depth)
  }

  /// The value of a field: the empty value of a type a decoder reads itself (a string, a
  /// number, a Boolean), else the type's own `init(from:)` on a decoder one key deeper.
  ///
  /// - Throws: `DecodingError.valueNotFound` for a type whose `init(from:)` asks a single value
  ///   of its own type (it would ask again forever), and past 32 levels of nesting (a type that
  ///   holds itself).
  static func empty<T: Decodable>(_ type: T.Type, at path: [any CodingKey], depth: Int) throws
    -> T
  {
    if let value = primitive(type) { return value }
    guard depth < 32 else {
      throw DecodingError.valueNotFound(
        type, .init(codingPath: path, debugDescription: "Nested too deep to have an empty value"))
    }
    return try T(
      from: EmptyDecoder(codingPath: path, decoding: ObjectIdentifier(type), depth: depth + 1))
  }

  /// The empty value of a type decoders read themselves: `""`, `false`, `0` of every integer
  /// and floating-point type; nil for any other.
  static func primitive<T>(_ type: T.Type) -> T? {
    switch type {
    case is String.Type: "" as? T
    case is Bool.Type: false as? T
    case is Double.Type: 0.0 as? T
    case is Float.Type: Float(0) as? T
    case is Int.Type: 0 as? T
    case is Int8.Type: Int8(0) as? T
    case is Int16.Type: Int16(0) as? T
    case is Int32.Type: Int32(0) as? T
    case is Int64.Type: Int64(0) as? T
    case is UInt.Type: UInt(0) as? T
    case is UInt8.Type: UInt8(0) as? T
    case is UInt16.Type: UInt16(0) as? T
    case is UInt32.Type: UInt32(0) as? T
    case is UInt64.Type: UInt64(0) as? T
    default: nil
    }
  }

  /// The type whose `init(from:)` this decoder serves, if any: a single value it asks of that
  /// very type has no empty value here.
  var decoding: ObjectIdentifier?
  /// How many `init(from:)` calls this one is inside.
  var depth = 0

  /// Every key is present and holds `nil`, or an empty value of the type asked for.
  struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    var codingPath: [any CodingKey]
    var depth: Int
    var allKeys: [Key] { [] }
    func contains(_: Key) -> Bool { true }
    func decodeNil(forKey _: Key) -> Bool { true }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
      try EmptyDecoder.empty(type, at: codingPath + [key], depth: depth)
    }
    func nestedContainer<Nested: CodingKey>(keyedBy _: Nested.Type, forKey key: Key)
      -> KeyedDecodingContainer<Nested>
    {
      KeyedDecodingContainer(Keyed<Nested>(codingPath: codingPath + [key], depth: depth))
    }
    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedDecodingContainer {
      Unkeyed(codingPath: codingPath + [key], depth: depth)
    }
    func superDecoder() -> any Decoder { EmptyDecoder(codingPath: codingPath, depth: depth) }
    func superDecoder(forKey key: Key) -> any Decoder {
      EmptyDecoder(codingPath: codingPath + [key], depth: depth)
    }
  }

  /// A list with no elements.
  struct Unkeyed: UnkeyedDecodingContainer {
    var codingPath: [any CodingKey]
    var depth: Int
    var count: Int? { 0 }
    var isAtEnd: Bool { true }
    var currentIndex: Int { 0 }
    mutating func decodeNil() -> Bool { true }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
      throw DecodingError.valueNotFound(
        type, .init(codingPath: codingPath, debugDescription: "An empty list has no element"))
    }
    mutating func nestedContainer<Nested: CodingKey>(keyedBy _: Nested.Type)
      -> KeyedDecodingContainer<Nested>
    {
      KeyedDecodingContainer(Keyed<Nested>(codingPath: codingPath, depth: depth))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedDecodingContainer {
      Unkeyed(codingPath: codingPath, depth: depth)
    }
    mutating func superDecoder() -> any Decoder {
      EmptyDecoder(codingPath: codingPath, depth: depth)
    }
  }

  /// One empty value; `nil` when asked whether it is.
  struct Single: SingleValueDecodingContainer {
    var codingPath: [any CodingKey]
    var decoding: ObjectIdentifier?
    var depth: Int
    func decodeNil() -> Bool { true }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
      if let value = EmptyDecoder.primitive(type) { return value }
      guard ObjectIdentifier(type) != decoding else {
        throw DecodingError.valueNotFound(
          type,
          .init(codingPath: codingPath, debugDescription: "\(type) has no empty value"))
      }
      return try EmptyDecoder.empty(type, at: codingPath, depth: depth)
    }
  }
}
