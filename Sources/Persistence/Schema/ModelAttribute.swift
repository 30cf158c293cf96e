import Foundation
import Synchronization

/// One stored attribute of a ``PersistentModel``: a key path, a column name and options.
///
/// Make attributes with `attribute(_:_:…)` for the value types SQLite stores natively and
/// `codable(_:_:…)` for any other `Codable` value, which is stored opaquely.
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
  /// The bytes and alignment of the attribute's slot in a snapshot (see ``SnapshotSlot``).
  @usableFromInline let slotSize: Int
  @usableFromInline let slotAlignment: Int
  /// Deinitializes a slot holding a value; nil when the slot's type is plain data, which
  /// needs none. A closure of its own, specialized for the slot's type, so that releasing a
  /// snapshot calls nothing else.
  @usableFromInline let destroySlot: (@Sendable (UnsafeMutableRawPointer) -> Void)?

  /// Every access to the model's property, in one closure: one closure capturing the literal
  /// key path, and nothing else keeping it, is what lets the optimizer turn it into direct
  /// accessor calls (stored elsewhere too, or shared by several closures, it stays a key path).
  /// The model is nil only for ``AttributeOperation/keyPath``.
  ///
  /// The model comes as `AnyObject` (always a `Model`), so that the entity can keep the
  /// closures of all attributes in one non-generic array and call them without generic
  /// metadata lookups per row.
  @usableFromInline let access: AttributeAccess

  /// The key path of the property.
  var keyPath: AnyKeyPath {
    // The closure answers .keyPath with its key path; `\Model.self` never matches an attribute.
    ((try? access(nil, .keyPath)) as? AnyKeyPath) ?? \Model.self
  }

  /// An attribute whose snapshot slot holds a `Slot`.
  @inlinable
  init<Slot>(
    name: String, options: Set<Option>, storageType: StorageType, isOptional: Bool,
    isCodable: Bool, valueTypeName: String, slot: Slot.Type, access: @escaping AttributeAccess
  ) {
    self.name = name
    self.options = options
    self.storageType = storageType
    self.isOptional = isOptional
    self.isCodable = isCodable
    self.valueTypeName = valueTypeName
    self.slotSize = MemoryLayout<Slot>.size
    self.slotAlignment = MemoryLayout<Slot>.alignment
    if _isPOD(Slot.self) {
      self.destroySlot = nil
    } else {
      self.destroySlot = { slot in
        _ = slot.assumingMemoryBound(to: Slot.self).deinitialize(count: 1)
      }
    }
    self.access = access
  }

  /// The model's value as stored.
  func value(_ model: Model) throws -> SQLValue {
    guard let value = try access(model, .value) as? SQLValue else {
      throw PersistenceError(
        code: .invalidValue, message: "The attribute \(name) gave no stored value.")
    }
    return value
  }

  var isUnique: Bool { options.contains(.unique) }
  var isIndexed: Bool { options.contains(.indexed) || !indexCompanions.isEmpty }
  /// The further columns of a several-column index (``AttributeOption/indexed(with:)``).
  var indexCompanions: [String] { options.first { !$0.companions.isEmpty }?.companions ?? [] }
  var preservesValueOnDeletion: Bool { options.contains(.preserveValueOnDeletion) }

  /// An attribute of a type SQLite stores natively: `String`, `Int`, `Double`, `Bool`, `Date`,
  /// `UUID`, `Data`, or an optional of one of them.
  ///
  /// - Parameters:
  ///   - keyPath: The model's stored property.
  ///   - name: The column name: letters, digits and underscores, not starting with `_`.
  ///   - options: ``AttributeOption/unique``, ``AttributeOption/indexed``,
  ///     ``AttributeOption/preserveValueOnDeletion``.
  ///   - storage: Optionally, the `@Observable` macro's backing storage of the property
  ///     (`\._name` for `name`, reachable from inside the model's declaration). Rows then load
  ///     into new instances through it, skipping the observation registrar, which nobody can
  ///     have subscribed to yet (about 600 instructions per attribute and row). Saves and
  ///     change checks read through it too (no observation access is recorded, so a save
  ///     inside an observation-tracking block does not depend on every attribute). Every
  ///     write to a model others may observe, a refresh included, goes through `keyPath`.
  @inlinable @inline(__always)
  public static func attribute<Value: PersistableValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value>? = nil
  ) -> ModelAttribute {
    // Literal key paths, captured as they are so the optimizer can turn them into accessor
    // calls (an `& Sendable` existential hides them); key paths are immutable. Each branch
    // makes its own closure, so that no closure tests an optional key path at run time; they
    // are written out twice because a closure made by a shared helper function kept some key
    // paths from being folded (seen with perf).
    nonisolated(unsafe) let keyPath = keyPath
    let options = Set(options)
    if let storage {
      nonisolated(unsafe) let storage = storage
      return ModelAttribute(
        name: name, options: options, storageType: Value.storageType,
        isOptional: Value.isOptional, isCodable: false, valueTypeName: "\(Value.self)",
        slot: Value.self
      ) { object, operation in
        guard let object else { return keyPath as AnyKeyPath }
        let model = unsafeDowncast(object, to: Model.self)
        if case .load(let statement, let index, _, let slot, true) = operation {
          let value = try Value.read(from: statement, at: index)
          slot?.store(copy value)
          model[keyPath: storage] = consume value
          return ()
        }
        return try access(model, keyPath, reading: storage, operation)
      }
    }
    return ModelAttribute(
      name: name, options: options, storageType: Value.storageType,
      isOptional: Value.isOptional, isCodable: false, valueTypeName: "\(Value.self)",
      slot: Value.self
    ) { object, operation in
      guard let object else { return keyPath as AnyKeyPath }
      return try access(
        unsafeDowncast(object, to: Model.self), keyPath, reading: keyPath, operation)
    }
  }

  /// Every operation on a native attribute: writes through `keyPath` (observers are told),
  /// reads for saving and comparing through `read` (the backing storage when there is one: no
  /// observation bookkeeping, and a save inside an observation-tracking block does not make it
  /// depend on every attribute).
  @inlinable @inline(__always)
  static func access<Value: PersistableValue>(
    _ model: Model, _ keyPath: ReferenceWritableKeyPath<Model, Value>,
    reading read: ReferenceWritableKeyPath<Model, Value>, _ operation: AttributeOperation
  ) throws -> Any {
    switch operation {
    case .load(let statement, let index, _, let slot, _):
      let value = try Value.read(from: statement, at: index)
      model[keyPath: keyPath] = value
      slot?.store(value)
    case .bind(let statement, let index):
      try model[keyPath: read].bind(to: statement, at: index)
    case .value: return model[keyPath: read].sqlValue
    case .assign(let value): model[keyPath: keyPath] = try Value(sqlValue: value)
    case .record(let slot): slot.store(model[keyPath: read])
    case .matches(let slot):
      return slot.assumingMemoryBound(to: Value.self).pointee == model[keyPath: read]
    case .restore(let slot):
      model[keyPath: keyPath] = slot.assumingMemoryBound(to: Value.self).pointee
    case .keyPath: return keyPath as AnyKeyPath
    }
    return ()
  }

  /// An attribute of any `Codable` type, stored opaquely as JSON in a `BLOB`, like SwiftData's
  /// `.codable`: use it for types you do not own (a class included).
  ///
  /// The value cannot be used in predicates or sort descriptors (they throw), and a change of
  /// the type's shape triggers no migration: its `Codable` implementation must read older and
  /// newer encodings. Values are encoded with sorted keys, so equal values store equal bytes.
  /// Decoding happens when a row is loaded; with ``AttributeOption/sharesEqualValues`` rows
  /// with equal bytes share one decoded value (decoded once per fetch). `storage` is as for
  /// ``attribute(_:_:_:storage:)``.
  @inlinable @inline(__always)
  public static func codable<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value>? = nil
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(name: name, model: "\(Model.self)", options: Set(options))
    return required(keyPath, name, Set(options), storage: storage, coder: coder)
  }

  /// An optional `Codable` attribute; `nil` is stored as SQL `NULL`.
  @inlinable @inline(__always)
  public static func codable<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value?>? = nil
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(name: name, model: "\(Model.self)", options: Set(options))
    return codable(
      keyPath, name, Set(options), storage: storage, coder: coder, isOptional: true,
      wrap: { $0 }, unwrap: { $0 })
  }

  /// A `Codable` attribute of a `Hashable` type: as the other overload, and with
  /// ``AttributeOption/sharesEqualValues`` equal values also reuse one encoding when saved.
  @inlinable @inline(__always)
  public static func codable<Value: Codable & Hashable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value>? = nil
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(
      name: name, model: "\(Model.self)", options: Set(options),
      encodings: EncodingCache<Value>().memo)
    return required(keyPath, name, Set(options), storage: storage, coder: coder)
  }

  /// An optional `Codable` attribute of a `Hashable` type (see the non-optional overload).
  @inlinable @inline(__always)
  public static func codable<Value: Codable & Hashable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value?>? = nil
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(
      name: name, model: "\(Model.self)", options: Set(options),
      encodings: EncodingCache<Value>().memo)
    return codable(
      keyPath, name, Set(options), storage: storage, coder: coder, isOptional: true,
      wrap: { $0 }, unwrap: { $0 })
  }

  /// A non-optional `.codable` attribute: `NULL` in its column is an error.
  @inlinable @inline(__always)
  static func required<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String, _ options: Set<Option>,
    storage: ReferenceWritableKeyPath<Model, Value>?, coder: CodableColumn<Value>
  ) -> ModelAttribute {
    codable(
      keyPath, name, options, storage: storage, coder: coder, isOptional: false,
      wrap: { value in
        guard let value else { throw coder.nullError() }
        return value
      }, unwrap: { $0 })
  }

  /// A `.codable` attribute whose property holds `Stored` (the value, or its optional):
  /// `wrap` turns a decoded value (nil for `NULL`) into the property's value or throws,
  /// `unwrap` is the reverse. As for ``attribute(_:_:_:storage:)``, each branch makes its own
  /// closure around literal key paths.
  @inlinable @inline(__always)
  static func codable<Value: Codable & SendableMetatype, Stored>(
    _ keyPath: ReferenceWritableKeyPath<Model, Stored>, _ name: String, _ options: Set<Option>,
    storage: ReferenceWritableKeyPath<Model, Stored>?, coder: CodableColumn<Value>,
    isOptional: Bool, wrap: @escaping @Sendable (Value?) throws -> Stored,
    unwrap: @escaping @Sendable (Stored) -> Value?
  ) -> ModelAttribute {
    typealias Slot = CodableSnapshot<Value>
    nonisolated(unsafe) let keyPath = keyPath
    // Written out twice rather than through a shared helper: a closure made by a helper
    // function kept some key paths from being folded into accessor calls (seen with perf).
    if let storage {
      nonisolated(unsafe) let storage = storage
      return ModelAttribute(
        name: name, options: options, storageType: .blob, isOptional: isOptional,
        isCodable: true, valueTypeName: "\(Value.self)", slot: Slot.self
      ) { object, operation in
        guard let object else { return keyPath as AnyKeyPath }
        let model = unsafeDowncast(object, to: Model.self)
        if case .load(let statement, let index, let cache, let slot, true) = operation {
          let value = try wrap(coder.read(statement, index, cache))
          if let slot { slot.store(try coder.snapshot(unwrap(value))) }
          model[keyPath: storage] = consume value
          return ()
        }
        return try codableAccess(model, keyPath, reading: storage, coder, wrap, unwrap, operation)
      }
    }
    return ModelAttribute(
      name: name, options: options, storageType: .blob, isOptional: isOptional,
      isCodable: true, valueTypeName: "\(Value.self)", slot: Slot.self
    ) { object, operation in
      guard let object else { return keyPath as AnyKeyPath }
      return try codableAccess(
        unsafeDowncast(object, to: Model.self), keyPath, reading: keyPath, coder, wrap, unwrap,
        operation)
    }
  }

  /// Every operation on a `.codable` attribute: writes through `keyPath`, reads for saving and
  /// comparing through `read` (as for native attributes).
  @inlinable @inline(__always)
  static func codableAccess<Value: Codable & SendableMetatype, Stored>(
    _ model: Model, _ keyPath: ReferenceWritableKeyPath<Model, Stored>,
    reading read: ReferenceWritableKeyPath<Model, Stored>, _ coder: CodableColumn<Value>,
    _ wrap: (Value?) throws -> Stored,
    _ unwrap: (Stored) -> Value?, _ operation: AttributeOperation
  ) throws -> Any {
    typealias Slot = CodableSnapshot<Value>
    switch operation {
    case .load(let statement, let index, let cache, let slot, _):
      let value = try wrap(coder.read(statement, index, cache))
      model[keyPath: keyPath] = value
      if let slot { slot.store(try coder.snapshot(unwrap(value))) }
    case .bind(let statement, let index):
      try coder.bind(unwrap(model[keyPath: read]), statement, index)
    case .value: return try coder.encode(unwrap(model[keyPath: read]))
    case .assign(let value): model[keyPath: keyPath] = try wrap(coder.decode(value))
    case .record(let slot): slot.store(try coder.snapshot(unwrap(model[keyPath: read])))
    case .matches(let slot):
      return coder.matches(
        unwrap(model[keyPath: read]), slot.assumingMemoryBound(to: Slot.self).pointee)
    case .restore(let slot):
      // A non-optional property keeps its value when the snapshot cannot be restored.
      model[keyPath: keyPath] = try wrap(
        coder.restore(slot.assumingMemoryBound(to: Slot.self).pointee))
    case .keyPath: return keyPath as AnyKeyPath
    }
    return ()
  }
}

/// An attribute's access closure: the model (nil to ask for the key path), and what to do.
@usableFromInline
typealias AttributeAccess = @Sendable (AnyObject?, AttributeOperation) throws -> Any

/// What ``ModelAttribute``'s access closure is asked to do with a model's property.
@usableFromInline
enum AttributeOperation {
  /// Read column `index` of the current row into the property, and into the slot if given;
  /// the flag tells that the model is new (no one can observe it yet).
  case load(Statement, Int32, LoadCache, SnapshotSlot?, Bool)
  /// Bind the property to parameter `index`.
  case bind(Statement, Int32)
  /// Answer the property's stored form, an ``SQLValue``.
  case value
  /// Set the property from a stored value.
  case assign(SQLValue)
  /// Copy the property into a snapshot slot.
  case record(SnapshotSlot)
  /// Answer whether the property equals the value in an initialized slot (a `Bool`).
  case matches(UnsafeMutableRawPointer)
  /// Set the property back to the value in an initialized slot.
  case restore(UnsafeMutableRawPointer)
  /// Answer the key path (asked with no model).
  case keyPath
}

/// One attribute's place in a model's snapshot: raw memory laid out by the entity, holding a
/// value of the attribute's own type (no `Any` box), initialized or not yet.
@usableFromInline
struct SnapshotSlot {
  @usableFromInline let pointer: UnsafeMutableRawPointer
  @usableFromInline let isInitialized: Bool

  init(_ pointer: UnsafeMutableRawPointer, isInitialized: Bool) {
    self.pointer = pointer
    self.isInitialized = isInitialized
  }

  /// Puts `value` in the slot, replacing the value there if any (taking it over: a caller's
  /// last use moves it in, with no copy).
  @inlinable @inline(__always)
  func store<Value>(_ value: consuming Value) {
    if isInitialized {
      pointer.assumingMemoryBound(to: Value.self).pointee = value
    } else {
      pointer.initializeMemory(as: Value.self, to: value)
    }
  }
}

/// The snapshot of a `.codable` value: the value itself when it is `Equatable`, else its
/// stored encoding (a mutable instance would change under a kept reference).
@usableFromInline
enum CodableSnapshot<Value> {
  case value(Value?)
  case encoded(SQLValue)
}

/// An option on a ``ModelAttribute``.
public struct AttributeOption: Hashable, Sendable {
  private let name: String
  /// For ``indexed(with:)``: the further columns of the index, in order.
  let companions: [String]
  private init(_ name: String, companions: [String] = []) {
    self.name = name
    self.companions = companions
  }

  /// At most one row has a given value. Inserting a model whose value exists updates that
  /// row instead (SwiftData's upsert). Implies an index.
  public static let unique = AttributeOption("unique")
  /// The column has an index, for fast predicates and sorts on it.
  public static let indexed = AttributeOption("indexed")
  /// The column has an index on it and the columns named `columns` (in that order): a range of
  /// this column filtered, or sorted, by the others is answered from the index alone, without
  /// reading rows (a bounding box: longitude, then latitude, then the columns of the usual
  /// sort). Each further column makes inserts and updates a little dearer.
  public static func indexed(with columns: String...) -> AttributeOption {
    AttributeOption("indexedWith:" + columns.joined(separator: ","), companions: columns)
  }
  /// The value is kept in history (the tombstone) when the model is deleted.
  public static let preserveValueOnDeletion = AttributeOption("preserveValueOnDeletion")
  /// For `.codable` attributes of an immutable type: rows with equal stored bytes may share one
  /// decoded instance (decoded once per fetch), and equal `Hashable` values reuse one
  /// encoding. Do not use it for a type whose instances can change.
  public static let sharesEqualValues = AttributeOption("sharesEqualValues")
}

/// Per-fetch state shared by the rows of one fetch: decoded `.codable` values by stored bytes.
///
/// Used by one fetch on one thread and never reentered, so its properties skip the runtime's
/// exclusivity checks (`@exclusivity(unchecked)`, as in `DecodedValues` and `RowTable`): they
/// cost a thread-local lookup per access, per row.
public final class LoadCache {
  /// One ``DecodedValues`` per `.codable` column, by the column's identity.
  @usableFromInline @exclusivity(unchecked) var decoded: [ObjectIdentifier: AnyObject] = [:]
  /// The column asked last and its values: rows ask column after column, so with one
  /// `.codable` column per model every row after the first finds its values here.
  @usableFromInline @exclusivity(unchecked) var lastColumn: ObjectIdentifier?
  @usableFromInline @exclusivity(unchecked) var lastValues: AnyObject?
  init() {}

  /// The decoded values of the column `id`, made by `make` on first use.
  @inlinable
  func values(for id: ObjectIdentifier, _ make: () -> AnyObject) -> AnyObject {
    if id == lastColumn, let lastValues { return lastValues }
    let values: AnyObject
    if let known = decoded[id] {
      values = known
    } else {
      values = make()
      decoded[id] = values
    }
    lastColumn = id
    lastValues = values
    return values
  }
}

/// The values one `.codable` column decoded during a fetch, by stored bytes: an
/// open-addressing table of (hash, entry) pairs over flat arrays of bytes and values, so that
/// a hit costs a hash of the bytes, about one probe, one `memcmp` and no allocation, and
/// touches no object but the value it returns. Inlinable, so that it is specialized for the
/// value type where a schema is declared (no generic metadata lookups per row).
///
/// Cost: O(bytes) per lookup; O(values) memory for the fetch's lifetime.
@usableFromInline
final class DecodedValues<Value> {
  /// Hash and entry index per slot (`-1`: empty); the count is a power of two, at most half
  /// full.
  @usableFromInline @exclusivity(unchecked) var slots: [(hash: UInt64, entry: Int32)]
  /// Each entry's bytes are `bytes[ends[entry - 1] ..< ends[entry]]` (from 0 for the first).
  @usableFromInline @exclusivity(unchecked) var ends: [Int] = []
  @usableFromInline @exclusivity(unchecked) var bytes: [UInt8] = []
  @usableFromInline @exclusivity(unchecked) var values: [Value] = []

  @inlinable
  init() {
    slots = Array(repeating: (0, -1), count: 64)
  }

  /// A 64-bit hash of the bytes, eight at a time.
  @inlinable
  static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var hash = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
    var offset = 0
    while offset + 8 <= bytes.count {
      let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
      hash = (hash ^ word) &* 0xBF58_476D_1CE4_E5B9
      hash ^= hash >> 31
      offset += 8
    }
    var tail: UInt64 = 0
    while offset < bytes.count {
      tail = tail << 8 | UInt64(bytes[offset])
      offset += 1
    }
    hash = (hash ^ tail) &* 0x94D0_49BB_1331_11EB
    return hash ^ (hash >> 29)
  }

  @inlinable
  func value(for key: UnsafeRawBufferPointer, hash: UInt64) -> Value? {
    let mask = slots.count - 1
    var slot = Int(truncatingIfNeeded: hash) & mask
    while true {
      let (slotHash, entry) = slots[slot]
      if entry < 0 { return nil }
      if slotHash == hash && matches(Int(entry), key) { return values[Int(entry)] }
      slot = (slot + 1) & mask
    }
  }

  @inlinable
  func matches(_ entry: Int, _ key: UnsafeRawBufferPointer) -> Bool {
    let start = entry == 0 ? 0 : ends[entry - 1]
    guard ends[entry] - start == key.count else { return false }
    if key.isEmpty { return true }
    return bytes.withUnsafeBufferPointer { stored in
      memcmp(stored.baseAddress! + start, key.baseAddress!, key.count) == 0
    }
  }

  @inlinable
  func insert(_ value: Value, for key: UnsafeRawBufferPointer, hash: UInt64) {
    if (values.count + 1) * 2 > slots.count { grow() }
    let entry = Int32(values.count)
    bytes.append(contentsOf: key)
    ends.append(bytes.count)
    values.append(value)
    place(hash, entry)
  }

  @inlinable
  func place(_ hash: UInt64, _ entry: Int32) {
    let mask = slots.count - 1
    var slot = Int(truncatingIfNeeded: hash) & mask
    while slots[slot].entry >= 0 { slot = (slot + 1) & mask }
    slots[slot] = (hash, entry)
  }

  @inlinable
  func grow() {
    let old = slots
    slots = Array(repeating: (0, -1), count: old.count * 2)
    for (hash, entry) in old where entry >= 0 { place(hash, entry) }
  }
}

/// Encodes and decodes one `.codable` column.
@usableFromInline
final class CodableColumn<Value: Codable & SendableMetatype>: Sendable {
  let name: String
  let model: String
  @usableFromInline let shares: Bool
  @usableFromInline let isEquatable: Bool
  /// Encodings of recent equal values (only with `sharesEqualValues` and a `Hashable` type).
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

  @usableFromInline
  func encode(_ value: Value?) throws -> SQLValue {
    guard let value else { return .null }
    if let encodings, let cached = encodings.get(value) { return .blob(cached) }
    do {
      let data = try encodeStoredJSON(value)
      encodings?.put(value, data)
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

  @usableFromInline
  func decode(_ data: Data) throws -> Value {
    do {
      return try decodeStoredJSON(Value.self, from: data)
    } catch {
      var failure = PersistenceError(
        code: .invalidValue,
        message:
          "Cannot decode the .codable attribute \(name) of \(model) as \(Value.self): its Codable implementation must read every encoding it has written.",
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
  func read(_ statement: Statement, _ index: Int32, _ cache: LoadCache) throws -> Value? {
    if statement.isNull(at: index) { return nil }
    guard shares else { return try decode(statement.data(at: index)) }
    let bytes = statement.bytes(at: index)
    // Only this column stores under its identity.
    let values = unsafeDowncast(
      cache.values(for: ObjectIdentifier(self)) { DecodedValues<Value>() },
      to: DecodedValues<Value>.self)
    let hash = DecodedValues<Value>.hash(bytes)
    if let hit = values.value(for: bytes, hash: hash) { return hit }
    let value = try decode(Data(bytes))
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

/// Wraps a value that is safe to share but not declared `Sendable` (an immutable key path).
@usableFromInline
struct UncheckedSendable<Value>: @unchecked Sendable {
  @usableFromInline let value: Value
  @usableFromInline init(_ value: Value) { self.value = value }
}
