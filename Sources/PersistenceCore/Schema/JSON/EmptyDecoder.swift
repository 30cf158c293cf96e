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
    KeyedDecodingContainer(Keyed(codingPath: codingPath))
  }
  func unkeyedContainer() -> any UnkeyedDecodingContainer { Unkeyed(codingPath: codingPath) }
  func singleValueContainer() -> any SingleValueDecodingContainer { Single(codingPath: codingPath) }

  /// The value of a field: a type's own `init(from:)` on a decoder one key deeper.
  static func empty<T: Decodable>(_ type: T.Type, at path: [any CodingKey]) throws -> T {
    switch type {
    case is String.Type: return "" as! T
    case is Bool.Type: return false as! T
    case is Double.Type: return 0.0 as! T
    case is Float.Type: return Float(0) as! T
    case is Int.Type: return 0 as! T
    default: return try T(from: EmptyDecoder(codingPath: path))
    }
  }

  /// Every key is present and holds `nil`, or an empty value of the type asked for.
  struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    var codingPath: [any CodingKey]
    var allKeys: [Key] { [] }
    func contains(_: Key) -> Bool { true }
    func decodeNil(forKey _: Key) -> Bool { true }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
      try EmptyDecoder.empty(type, at: codingPath + [key])
    }
    func nestedContainer<Nested: CodingKey>(keyedBy _: Nested.Type, forKey key: Key)
      -> KeyedDecodingContainer<Nested>
    {
      KeyedDecodingContainer(Keyed<Nested>(codingPath: codingPath + [key]))
    }
    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedDecodingContainer {
      Unkeyed(codingPath: codingPath + [key])
    }
    func superDecoder() -> any Decoder { EmptyDecoder(codingPath: codingPath) }
    func superDecoder(forKey key: Key) -> any Decoder {
      EmptyDecoder(codingPath: codingPath + [key])
    }
  }

  /// A list with no elements.
  struct Unkeyed: UnkeyedDecodingContainer {
    var codingPath: [any CodingKey]
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
      KeyedDecodingContainer(Keyed<Nested>(codingPath: codingPath))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedDecodingContainer {
      Unkeyed(codingPath: codingPath)
    }
    mutating func superDecoder() -> any Decoder { EmptyDecoder(codingPath: codingPath) }
  }

  /// One empty value; `nil` when asked whether it is.
  struct Single: SingleValueDecodingContainer {
    var codingPath: [any CodingKey]
    func decodeNil() -> Bool { true }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
      try EmptyDecoder.empty(type, at: codingPath)
    }
  }
}
