import Foundation
import Synchronization

/// One stored attribute of a ``PersistentModel``: a key path, a column name and options.
///
/// Make attributes with ``attribute(_:_:_:)`` for the value types SQLite stores natively and
/// ``codable(_:_:_:)`` for any other `Codable` value, which is stored opaquely.
///
/// Both are `@inlinable`: compiled in the module that declares the schema, where the key path is
/// a literal, so that loading a row calls the property's accessors directly instead of going
/// through the key path machinery (about 4 times faster per attribute on an `@Observable`
/// model). Key paths are immutable values, shared between threads as they are.
public struct ModelAttribute<Model: PersistentModel>: Sendable {
  /// An option on an attribute.
  public typealias Option = AttributeOption

  /// The column name.
  public let name: String
  /// The options.
  public let options: Set<Option>
  /// The SQLite storage class.
  public let storageType: StorageType
  /// Whether the column allows `NULL`.
  public let isOptional: Bool
  /// Whether the value is an opaque `.codable` value (not usable in predicates or sorts).
  public let isCodable: Bool
  /// The Swift type of the value, for messages.
  public let valueTypeName: String

  /// Every access to the model's property, in one closure: one closure capturing the literal
  /// key path, and nothing else keeping it, is what lets the optimizer turn it into direct
  /// accessor calls (stored elsewhere too, or shared by several closures, it stays a key path).
  /// The model is nil only for ``AttributeOperation/keyPath``.
  @usableFromInline let access: @Sendable (Model?, AttributeOperation) throws -> Any

  /// The key path of the property.
  var keyPath: AnyKeyPath {
    // The closure answers .keyPath with its key path; `\Model.self` never matches an attribute.
    ((try? access(nil, .keyPath)) as? AnyKeyPath) ?? \Model.self
  }

  @inlinable
  init(
    name: String, options: Set<Option>, storageType: StorageType, isOptional: Bool,
    isCodable: Bool, valueTypeName: String,
    access: @escaping @Sendable (Model?, AttributeOperation) throws -> Any
  ) {
    self.name = name
    self.options = options
    self.storageType = storageType
    self.isOptional = isOptional
    self.isCodable = isCodable
    self.valueTypeName = valueTypeName
    self.access = access
  }

  /// Reads column `index` of the current row into the model; returns the value as a snapshot.
  func load(_ model: Model, _ statement: Statement, _ index: Int32, _ cache: LoadCache) throws
    -> Any
  {
    try access(model, .load(statement, index, cache))
  }
  /// Binds the model's value to parameter `index`.
  func bind(_ model: Model, _ statement: Statement, _ index: Int32) throws {
    _ = try access(model, .bind(statement, index))
  }
  /// The model's value as stored.
  func value(_ model: Model) throws -> SQLValue {
    guard let value = try access(model, .value) as? SQLValue else {
      throw PersistenceError(
        code: .invalidValue, message: "The attribute \(name) gave no stored value.")
    }
    return value
  }
  /// Sets the model's value from a stored value.
  func assign(_ model: Model, _ value: SQLValue) throws { _ = try access(model, .assign(value)) }
  /// A copy of the model's value for change tracking.
  func snapshot(_ model: Model) throws -> Any { try access(model, .snapshot) }
  /// Whether the model's value still equals a snapshot.
  func matches(_ model: Model, _ old: Any) -> Bool {
    ((try? access(model, .matches(old))) as? Bool) ?? false
  }
  /// Puts a snapshot back into the model (rollback).
  func restore(_ model: Model, _ old: Any) { _ = try? access(model, .restore(old)) }

  var isUnique: Bool { options.contains(.unique) }
  var isIndexed: Bool { options.contains(.indexed) }
  var preservesValueOnDeletion: Bool { options.contains(.preserveValueOnDeletion) }

  /// An attribute of a type SQLite stores natively: `String`, `Int`, `Double`, `Bool`, `Date`,
  /// `UUID`, `Data`, or an optional of one of them.
  ///
  /// - Parameters:
  ///   - keyPath: The model's stored property.
  ///   - name: The column name: letters, digits and underscores, not starting with `_`.
  ///   - options: ``AttributeOption/unique``, ``AttributeOption/indexed``,
  ///     ``AttributeOption/preserveValueOnDeletion``.
  @inlinable @inline(__always)
  public static func attribute<Value: PersistableValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ options: Option...
  ) -> ModelAttribute {
    // A literal key path, captured as is so the optimizer can turn it into accessor calls
    // (an `& Sendable` existential hides it); key paths are immutable.
    nonisolated(unsafe) let keyPath = keyPath
    return ModelAttribute(
      name: name, options: Set(options), storageType: Value.storageType,
      isOptional: Value.isOptional, isCodable: false, valueTypeName: "\(Value.self)",
    ) { model, operation in
      guard let model else { return keyPath as AnyKeyPath }
      switch operation {
      case .load(let statement, let index, _):
        let value = try Value.read(from: statement, at: index)
        model[keyPath: keyPath] = value
        return value
      case .bind(let statement, let index):
        try model[keyPath: keyPath].bind(to: statement, at: index)
      case .value: return model[keyPath: keyPath].sqlValue
      case .assign(let value): model[keyPath: keyPath] = try Value(sqlValue: value)
      case .snapshot: return model[keyPath: keyPath]
      case .matches(let old): return (old as? Value) == model[keyPath: keyPath]
      case .restore(let old): if let old = old as? Value { model[keyPath: keyPath] = old }
      case .keyPath: return keyPath as AnyKeyPath
      }
      return ()
    }
  }

  /// An attribute of any `Codable` type, stored opaquely as JSON in a `BLOB`, like SwiftData's
  /// `.codable`: use it for types you do not own (a class included).
  ///
  /// The value cannot be used in predicates or sort descriptors (they throw), and a change of
  /// the type's shape triggers no migration: its `Codable` implementation must read older and
  /// newer encodings. Values are encoded with sorted keys, so equal values store equal bytes.
  /// Decoding happens when a row is loaded; with ``AttributeOption/sharesEqualValues`` rows
  /// with equal bytes share one decoded value (decoded once per fetch).
  @inlinable @inline(__always)
  public static func codable<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ options: Option...
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(name: name, model: "\(Model.self)", options: Set(options))
    nonisolated(unsafe) let keyPath = keyPath
    return ModelAttribute(
      name: name, options: Set(options), storageType: .blob, isOptional: false, isCodable: true,
      valueTypeName: "\(Value.self)"
    ) { model, operation in
      guard let model else { return keyPath as AnyKeyPath }
      switch operation {
      case .load(let statement, let index, let cache):
        guard let value = try coder.read(statement, index, cache) else { throw coder.nullError() }
        model[keyPath: keyPath] = value
        return try coder.snapshot(value)
      case .bind(let statement, let index):
        try coder.bind(model[keyPath: keyPath], statement, index)
      case .value: return try coder.encode(model[keyPath: keyPath])
      case .assign(let value):
        guard let decoded = try coder.decode(value) else { throw coder.nullError() }
        model[keyPath: keyPath] = decoded
      case .snapshot: return try coder.snapshot(model[keyPath: keyPath])
      case .matches(let old): return coder.matches(model[keyPath: keyPath], old)
      case .restore(let old): if let value = coder.restore(old) { model[keyPath: keyPath] = value }
      case .keyPath: return keyPath as AnyKeyPath
      }
      return ()
    }
  }

  /// An optional `Codable` attribute; `nil` is stored as SQL `NULL`.
  @inlinable @inline(__always)
  public static func codable<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    _ options: Option...
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(name: name, model: "\(Model.self)", options: Set(options))
    nonisolated(unsafe) let keyPath = keyPath
    return ModelAttribute(
      name: name, options: Set(options), storageType: .blob, isOptional: true, isCodable: true,
      valueTypeName: "\(Value.self)"
    ) { model, operation in
      guard let model else { return keyPath as AnyKeyPath }
      switch operation {
      case .load(let statement, let index, let cache):
        let value = try coder.read(statement, index, cache)
        model[keyPath: keyPath] = value
        return try coder.snapshot(value)
      case .bind(let statement, let index):
        try coder.bind(model[keyPath: keyPath], statement, index)
      case .value: return try coder.encode(model[keyPath: keyPath])
      case .assign(let value): model[keyPath: keyPath] = try coder.decode(value)
      case .snapshot: return try coder.snapshot(model[keyPath: keyPath])
      case .matches(let old): return coder.matches(model[keyPath: keyPath], old)
      case .restore(let old): model[keyPath: keyPath] = coder.restore(old)
      case .keyPath: return keyPath as AnyKeyPath
      }
      return ()
    }
  }
}

/// What ``ModelAttribute``'s access closure is asked to do with a model's property.
@usableFromInline
enum AttributeOperation {
  /// Read column `index` of the current row into the property; answer the snapshot.
  case load(Statement, Int32, LoadCache)
  /// Bind the property to parameter `index`.
  case bind(Statement, Int32)
  /// Answer the property's stored form, an ``SQLValue``.
  case value
  /// Set the property from a stored value.
  case assign(SQLValue)
  /// Answer a snapshot of the property.
  case snapshot
  /// Answer whether the property equals a snapshot (a `Bool`).
  case matches(Any)
  /// Set the property back to a snapshot.
  case restore(Any)
  /// Answer the key path (asked with no model).
  case keyPath
}

/// An option on a ``ModelAttribute``.
public struct AttributeOption: Hashable, Sendable {
  private let name: String
  private init(_ name: String) { self.name = name }

  /// At most one row has a given value. Inserting a model whose value exists updates that
  /// row instead (SwiftData's upsert). Implies an index.
  public static let unique = AttributeOption("unique")
  /// The column has an index, for fast predicates and sorts on it.
  public static let indexed = AttributeOption("indexed")
  /// The value is kept in history (the tombstone) when the model is deleted.
  public static let preserveValueOnDeletion = AttributeOption("preserveValueOnDeletion")
  /// For `.codable` attributes of an immutable type: rows with equal stored bytes may share one
  /// decoded instance (decoded once per fetch), and equal `Hashable` values reuse one
  /// encoding. Do not use it for a type whose instances can change.
  public static let sharesEqualValues = AttributeOption("sharesEqualValues")
}

/// Per-fetch state shared by the rows of one fetch: decoded `.codable` values by stored bytes.
public final class LoadCache {
  /// One ``DecodedValues`` per `.codable` column, by the column's identity.
  var decoded: [ObjectIdentifier: AnyObject] = [:]
  init() {}
}

/// The values one `.codable` column decoded during a fetch, by stored bytes: buckets by an
/// FNV-1a hash of the bytes, so that a hit needs no allocation and no `Data` hashing.
final class DecodedValues<Value> {
  private var buckets: [UInt64: [(Data, Value)]] = [:]

  static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return hash
  }

  func value(for bytes: UnsafeRawBufferPointer, hash: UInt64) -> Value? {
    guard let bucket = buckets[hash] else { return nil }
    for (data, value) in bucket where data.count == bytes.count {
      let equal = data.withUnsafeBytes { stored in
        stored.count == 0 || memcmp(stored.baseAddress!, bytes.baseAddress!, bytes.count) == 0
      }
      if equal { return value }
    }
    return nil
  }

  func insert(_ value: Value, for data: Data, hash: UInt64) {
    buckets[hash, default: []].append((data, value))
  }
}

/// Encodes and decodes one `.codable` column.
@usableFromInline
final class CodableColumn<Value: Codable & SendableMetatype>: Sendable {
  let name: String
  let model: String
  let shares: Bool
  let isEquatable: Bool
  /// Encodings of recent equal values (only with `sharesEqualValues` and a `Hashable` type).
  private let encodings = EncodingCache()

  @usableFromInline
  init(name: String, model: String, options: Set<AttributeOption>) {
    self.name = name
    self.model = model
    self.shares = options.contains(.sharesEqualValues)
    self.isEquatable = Value.self is any Equatable.Type
  }

  @usableFromInline
  func nullError() -> PersistenceError {
    PersistenceError(
      code: .invalidValue, message: "NULL in the non-optional .codable column \(name) of \(model).")
  }

  @usableFromInline
  func encode(_ value: Value?) throws -> SQLValue {
    guard let value else { return .null }
    let key: AnyHashable? = shares ? (value as? any Hashable).map { AnyHashable($0) } : nil
    if let key, let cached = encodings.get(key) { return .blob(cached) }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    do {
      let data = try encoder.encode(value)
      if let key { encodings.put(key, data) }
      return .blob(data)
    } catch {
      throw PersistenceError(
        code: .invalidValue, message: "Cannot encode the .codable attribute \(name) of \(model).",
        cause: error)
    }
  }

  @usableFromInline
  func bind(_ value: Value?, _ statement: Statement, _ index: Int32) throws {
    statement.bindValue(try encode(value), at: index)
  }

  func decode(_ data: Data) throws -> Value {
    do {
      return try JSONDecoder().decode(Value.self, from: data)
    } catch {
      throw PersistenceError(
        code: .invalidValue,
        message:
          "Cannot decode the .codable attribute \(name) of \(model) as \(Value.self): its Codable implementation must read every encoding it has written.",
        cause: error)
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
  @usableFromInline
  func read(_ statement: Statement, _ index: Int32, _ cache: LoadCache) throws -> Value? {
    if statement.isNull(at: index) { return nil }
    guard shares else { return try decode(statement.data(at: index)) }
    let bytes = statement.bytes(at: index)
    let id = ObjectIdentifier(self)
    let values: DecodedValues<Value>
    if let known = cache.decoded[id] {
      values = unsafeDowncast(known, to: DecodedValues<Value>.self)  // only this column stores here
    } else {
      values = DecodedValues()
      cache.decoded[id] = values
    }
    let hash = DecodedValues<Value>.hash(bytes)
    if let hit = values.value(for: bytes, hash: hash) { return hit }
    let data = Data(bytes)
    let value = try decode(data)
    values.insert(value, for: data, hash: hash)
    return value
  }

  /// The snapshot of a value: the value itself when it is `Equatable`, else its encoding.
  @usableFromInline
  func snapshot(_ value: Value?) throws -> Any {
    if isEquatable { return value as Any }
    return try encode(value)
  }

  @usableFromInline
  func matches(_ current: Value?, _ old: Any) -> Bool {
    if isEquatable {
      let previous: Value? = (old as? Value?) ?? nil
      switch (current, previous) {
      case (nil, nil): return true
      case (let current?, let previous?):
        return (current as? any Equatable)?.isEqual(toAny: previous) ?? false
      default: return false
      }
    }
    return (try? encode(current)) == (old as? SQLValue)
  }

  @usableFromInline
  func restore(_ old: Any) -> Value? {
    if isEquatable { return (old as? Value?) ?? nil }
    if let old = old as? SQLValue, let value = try? decode(old) { return value }
    return nil
  }
}

/// A small bounded map from values to their encodings.
final class EncodingCache: Sendable {
  /// The keys are values of a type declared immutable (`sharesEqualValues`); they are only
  /// reached inside the mutex.
  private struct Entries: @unchecked Sendable {
    var map: [AnyHashable: Data] = [:]
  }
  private let entries = Mutex(Entries())
  static let limit = 65_536

  func get(_ key: AnyHashable) -> Data? { entries.withLock { $0.map[key] } }

  func put(_ key: AnyHashable, _ data: Data) {
    entries.withLock { entries in
      if entries.map.count >= Self.limit { entries.map.removeAll(keepingCapacity: true) }
      entries.map[key] = data
    }
  }
}

/// Wraps a value that is safe to share but not declared `Sendable` (an immutable key path).
@usableFromInline
struct UncheckedSendable<Value>: @unchecked Sendable {
  @usableFromInline let value: Value
  @usableFromInline init(_ value: Value) { self.value = value }
}
