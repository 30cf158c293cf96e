import Foundation
import Synchronization

/// Encodes and decodes one `.codable` column.
@usableFromInline
final class CodableColumn<Value: Codable & SendableMetatype>: Sendable {
  let name: String
  let model: String
  @usableFromInline let shares: Bool
  @usableFromInline let isEquatable: Bool
  /// Encodings of recent equal values that the fast writer left to Foundation (only with
  /// `sharesEqualValues` and a `Hashable` type).
  @usableFromInline let encodings: EncodingMemo<Value>?

  @usableFromInline
  init(
    name: String, model: String, options: Set<AttributeOption>,
    encodings: EncodingMemo<Value>? = nil
  ) {
    self.name = name
    self.model = model
    self.shares = options.contains(.sharesEqualValues)
    self.isEquatable = Value.self is any Equatable.Type
    self.encodings = shares ? encodings : nil
  }

  @usableFromInline
  func nullError() -> PersistenceError {
    PersistenceError(
      code: .invalidValue, message: "NULL in the non-optional .codable column \(name) of \(model).")
  }

  @inlinable
  func encode(_ value: Value?) throws -> SQLValue {
    guard let value else { return .null }
    // The fast writer costs less than finding the value in the memo (a hash of the value and
    // a lock): the memo keeps only what Foundation had to encode.
    if let data = fastEncodeStoredJSON(value) { return .blob(data) }
    return .blob(try foundationEncode(value))
  }

  /// The encoding of a value the fast writer leaves to Foundation, remembered when equal values
  /// share one.
  @usableFromInline
  func foundationEncode(_ value: Value) throws -> Data {
    if let encodings, let cached = encodings.get(value) { return cached }
    do {
      let data = try foundationEncodeStoredJSON(value)
      encodings?.put(value, data)
      return data
    } catch {
      throw PersistenceError(
        code: .invalidValue, message: "Cannot encode the JSON attribute \(name) of \(model).",
        cause: error)
    }
  }

  /// Binds the value's encoding: the fast writer's bytes straight from its buffer (no `Data`
  /// in between), else Foundation's.
  @inlinable
  func bind(_ value: Value?, _ statement: any StoreStatement, _ index: Int32) throws {
    guard let value else { return statement.bindNull(index) }
    if withFastStoredJSON(value, { statement.bindBytes($0, at: index) }) { return }
    statement.bindData(try foundationEncode(value), at: index)
  }

  @usableFromInline
  func decode(_ data: Data) throws -> Value {
    try data.withUnsafeBytes { try decode(bytes: $0) }
  }

  /// Decodes the value from stored bytes in place: no `Data` is made unless Foundation has to
  /// decode it. Inlined where the model's module specializes it, so that a
  /// ``StoredJSONRepresentable`` value's direct reader is called without a conformance lookup
  /// or any generic metadata (about 400 instructions a value otherwise).
  @inlinable
  func decode(bytes: UnsafeRawBufferPointer) throws -> Value {
    if let direct = Value.self as? any StoredJSONRepresentable.Type,
      let value = Self.directDecode(bytes, as: direct)
    {
      return value
    }
    return try generalDecode(bytes: bytes)
  }

  /// The value read by its own direct reader (``StoredJSONRepresentable``), or nil when the
  /// text is not what the reader reads (the general path then decides).
  @inlinable
  static func directDecode<Direct: StoredJSONRepresentable>(
    _ bytes: UnsafeRawBufferPointer, as _: Direct.Type
  ) -> Value? {
    let text = [UInt8](bytes)
    guard let start = try? text.withUnsafeBufferPointer({ try StoredJSONText.check($0) }),
      text[start] == UInt8(ascii: "{"),
      let value = try? Direct(storedJSON: StoredJSONObjectReader(text: text, start: start))
    else { return nil }
    // SAFETY: Direct is Value: the caller's metatype cast of Value succeeded as Direct.
    assert(Direct.self == Value.self)
    return unsafeBitCast(value, to: Value.self)
  }

  /// The value decoded by the fast path or by Foundation, or the error naming the column.
  @usableFromInline
  func generalDecode(bytes: UnsafeRawBufferPointer) throws -> Value {
    do {
      return try decodeStoredJSON(Value.self, bytes: bytes)
    } catch {
      var failure = PersistenceError(
        code: .invalidValue,
        message:
          "Cannot decode the JSON attribute \(name) of \(model) as \(Value.self): its Codable implementation must read every encoding it has written.",
        cause: error)
      failure.attribute = name
      throw failure
    }
  }

  @usableFromInline
  func decode(_ stored: SQLValue) throws -> Value? {
    switch stored {
    case .null: return nil
    case .blob(let data): return try decode(data)
    default: throw invalid(stored, Value.self)
    }
  }

  /// Reads the column; nil for `NULL`. Shared values come from the fetch's cache.
  @inlinable
  func read(_ statement: any StoreRow, _ index: Int32, _ cache: LoadCache) throws -> Value? {
    if statement.isNull(at: index) { return nil }
    guard shares else { return try decode(bytes: statement.bytes(at: index)) }
    let bytes = statement.bytes(at: index)
    // Only this column stores under its identity.
    let values = unsafeDowncast(
      cache.values(for: ObjectIdentifier(self)) { DecodedValues<Value>() },
      to: DecodedValues<Value>.self)
    let hash = DecodedValues<Value>.hash(bytes)
    if let hit = values.value(for: bytes, hash: hash) { return hit }
    let value = try decode(bytes: bytes)
    values.insert(value, for: bytes, hash: hash)
    return value
  }

  /// The snapshot of a value: the value itself when it is `Equatable`, else its encoding.
  @inlinable
  func snapshot(_ value: Value?) throws -> CodableSnapshot<Value> {
    if isEquatable { return .value(value) }
    return .encoded(try encode(value))
  }

  @usableFromInline
  func matches(_ current: Value?, _ old: CodableSnapshot<Value>) -> Bool {
    switch old {
    case .value(let previous):
      switch (current, previous) {
      case (nil, nil): return true
      case (let current?, let previous?):
        return (current as? any Equatable)?.isEqual(toAny: previous) ?? false
      default: return false
      }
    case .encoded(let encoding): return (try? encode(current)) == encoding
    }
  }

  @usableFromInline
  func restore(_ old: CodableSnapshot<Value>) -> Value? {
    switch old {
    case .value(let previous): return previous
    case .encoded(let encoding): return try? decode(encoding)
    }
  }
}

/// Finds and remembers the encodings of equal values of one `.codable` column: made where the
/// value type is known to be `Hashable`, so that its closures are specialized for it (no
/// `AnyHashable` boxing or dynamic equality per row).
@usableFromInline
struct EncodingMemo<Value>: Sendable {
  @usableFromInline let get: @Sendable (Value) -> Data?
  @usableFromInline let put: @Sendable (Value, Data) -> Void

  @inlinable
  init(get: @escaping @Sendable (Value) -> Data?, put: @escaping @Sendable (Value, Data) -> Void) {
    self.get = get
    self.put = put
  }
}

/// A bounded map from values to their encodings, behind a mutex (a schema, and so its columns,
/// is shared by every context).
@usableFromInline
final class EncodingCache<Value: Hashable & SendableMetatype>: Sendable {
  // SAFETY: the map is only reached inside `entries`' mutex, and its keys are values of a type
  // declared immutable.
  /// The keys are values of a type declared immutable (`sharesEqualValues`); they are only
  /// reached inside the mutex.
  @usableFromInline
  struct Entries: @unchecked Sendable {
    @usableFromInline var map: [Value: Data] = [:]
    @inlinable init() {}
  }
  @usableFromInline let entries = Mutex(Entries())
  /// Past this many values the map starts again (memory stays bounded).
  @usableFromInline static var limit: Int { 65_536 }

  @inlinable init() {}

  @inlinable
  func get(_ value: Value) -> Data? { entries.withLock { $0.map[value] } }

  @inlinable
  func put(_ value: Value, _ data: Data) {
    entries.withLock { entries in
      if entries.map.count >= Self.limit { entries.map.removeAll(keepingCapacity: true) }
      entries.map[value] = data
    }
  }

  /// The memo a column uses, its closures specialized where `Value` is known.
  @inlinable
  var memo: EncodingMemo<Value> {
    EncodingMemo(get: { self.get($0) }, put: { self.put($0, $1) })
  }
}
