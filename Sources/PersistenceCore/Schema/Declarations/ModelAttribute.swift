import Foundation
import Synchronization

/// One stored attribute of a ``PersistentModel``: a key path, a column name and options.
///
/// Make attributes with `attribute(_:_:…)` for the value types stores keep natively and
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
  /// The storage class of the column.
  public let storageType: StorageType
  /// Whether the column allows `NULL`.
  public let isOptional: Bool
  /// Whether the value is an opaque `.codable` value (not usable in predicates or sorts).
  public let isCodable: Bool
  /// The Swift type of the value, for messages.
  public let valueTypeName: String
  /// The Swift type of the value: the property's (`String?` for an optional native value),
  /// the encoded type's for a `.codable` one.
  public let valueType: Any.Type
  /// The bytes and alignment of the attribute's slot in a snapshot (see ``SnapshotSlot``).
  @usableFromInline let slotSize: Int
  @usableFromInline let slotAlignment: Int
  /// The slot's type, which ``SnapshotSlot`` checks in debug builds.
  @usableFromInline let slotType: ObjectIdentifier
  /// Deinitializes a slot holding a value; nil when the slot's type is plain data, which
  /// needs none. A metatype, specialized for the slot's type: calling it retains nothing (a
  /// closure cost a retain and a release of its context per slot and snapshot).
  @usableFromInline let destroySlot: (any SnapshotSlotKind.Type)?

  /// Every access to the model's property, in one closure: one closure capturing the literal
  /// key paths is what lets the optimizer turn them into direct accessor calls (shared by
  /// several closures, or used as objects inside one, they stay key paths: seen with perf and
  /// callgrind).
  ///
  /// The model comes as `AnyObject` (always a `Model`), so that the entity can keep the
  /// closures of all attributes in one non-generic array and call them without generic
  /// metadata lookups per row.
  @usableFromInline let access: AttributeAccess
  /// The key path of the property (immutable, shared between threads as it is).
  ///
  /// Kept here rather than answered by ``access``: a closure that also had to hand out its key
  /// path as an object made the optimizer materialize it (`swift_getKeyPath`, with a retain
  /// and a release) on every call, the row path's included (about 5% of a fetch, measured with
  /// callgrind). The price: writes through `keyPath` itself (restoring a changed value,
  /// assigning, refreshing a model others may observe) are no longer folded into setter calls
  /// (about 2k instructions each); the row path into new models writes through the backing
  /// storage's key path, which still folds, and a rollback writes back only changed values.
  @usableFromInline nonisolated(unsafe) let keyPath: AnyKeyPath
  /// The ``CodableColumn`` of a `.codable` attribute (for ``ModelRow``), nil for a native one.
  @usableFromInline let coder: (AnyObject & Sendable)?
  /// The relationship this entry declares (``toOne(_:_:link:inverse:)`` and the others), nil
  /// for an attribute.
  @usableFromInline var relationship: RelationshipInfo?

  /// An attribute whose snapshot slot holds a `Slot`.
  @inlinable
  init<Slot>(
    name: String, options: Set<Option>, storageType: StorageType, isOptional: Bool,
    isCodable: Bool, valueType: Any.Type, slot: Slot.Type, keyPath: AnyKeyPath,
    coder: (AnyObject & Sendable)? = nil, access: @escaping AttributeAccess
  ) {
    self.keyPath = keyPath
    self.coder = coder
    self.name = name
    self.options = options
    self.storageType = storageType
    self.isOptional = isOptional
    self.isCodable = isCodable
    self.valueType = valueType
    self.valueTypeName = "\(valueType)"
    self.slotSize = MemoryLayout<Slot>.size
    self.slotAlignment = MemoryLayout<Slot>.alignment
    self.slotType = ObjectIdentifier(Slot.self)
    if _isPOD(Slot.self) {
      self.destroySlot = nil
    } else {
      self.destroySlot = SlotKind<Slot>.self
    }
    self.access = access
    self.relationship = nil
  }

  /// This entry with `options` in place of its own.
  init(_ other: ModelAttribute, options: Set<Option>) {
    self.init(inheriting: other, keyPath: other.keyPath, options: options)
  }

  /// `other`, an entry of this model or of a superclass, as this model's: read through
  /// `keyPath`, with `options` (nil: its own).
  init<Other>(inheriting other: ModelAttribute<Other>, keyPath: AnyKeyPath, options: Set<Option>?) {
    name = other.name
    self.options = options ?? other.options
    storageType = other.storageType
    isOptional = other.isOptional
    isCodable = other.isCodable
    valueTypeName = other.valueTypeName
    valueType = other.valueType
    slotSize = other.slotSize
    slotAlignment = other.slotAlignment
    slotType = other.slotType
    destroySlot = other.destroySlot
    access = other.access
    self.keyPath = keyPath
    coder = other.coder
    relationship = other.relationship
  }

  /// The model's value as stored.
  func value(_ model: Model) throws -> SQLValue {
    try access(model, .value).storedValue(name)
  }

  var isUnique: Bool { options.contains(.unique) || !uniqueCompanions.isEmpty }
  /// The further columns of a several-column unique constraint (``AttributeOption/unique(with:)``).
  var uniqueCompanions: [String] {
    options.first { !$0.uniqueCompanions.isEmpty }?.uniqueCompanions ?? []
  }
  var isIndexed: Bool { options.contains(.indexed) || !indexCompanions.isEmpty }
  /// The further columns of a several-column index (``AttributeOption/indexed(with:)``).
  var indexCompanions: [String] { options.first { !$0.companions.isEmpty }?.companions ?? [] }
  var preservesValueOnDeletion: Bool { options.contains(.preserveValueOnDeletion) }

  /// An attribute of a type stores keep natively (``PersistableValue``): `String`, `Int`,
  /// `Int8`…`Int64`, `UInt8`…`UInt32`, `Double`, `Float`, `Bool`, `Date`, `UUID`, `Data`,
  /// `URL`, or an optional of one of them.
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
        isOptional: Value.isOptional, isCodable: false, valueType: Value.self,
        slot: Value.self, keyPath: keyPath
      ) { object, operation in
        // The row path first, before anything that needs a key path as an object: the
        // optimizer materializes the key paths (`swift_getKeyPath`) where a branch uses them.
        if case .load(let row, let index, _, let slot, true) = operation {
          let value = try Value.read(from: row.object, at: index)
          slot?.store(copy value)
          unsafeDowncast(object, to: Model.self)[keyPath: storage] = consume value
          return .done
        }
        return try access(
          unsafeDowncast(object, to: Model.self), keyPath, reading: storage, operation)
      }
    }
    return ModelAttribute(
      name: name, options: options, storageType: Value.storageType,
      isOptional: Value.isOptional, isCodable: false, valueType: Value.self,
      slot: Value.self, keyPath: keyPath
    ) { object, operation in
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
  ) throws -> AttributeAnswer {
    switch operation {
    case .load(let row, let index, _, let slot, _):
      let value = try Value.read(from: row.object, at: index)
      model[keyPath: keyPath] = value
      slot?.store(value)
    case .bind(let statement, let index):
      try model[keyPath: read].bind(to: statement.object, at: index)
    case .value: return .value(model[keyPath: read].sqlValue)
    case .assign(let value): model[keyPath: keyPath] = try Value(sqlValue: value)
    case .record(let slot): slot.store(model[keyPath: read])
    case .matches(let slot):
      return .matches(slot.load(as: Value.self) == model[keyPath: read])
    case .restore(let slot):
      model[keyPath: keyPath] = slot.load(as: Value.self)
    case .resolve: break
    }
    return .done
  }

  /// An attribute of any `Codable` type, stored opaquely as JSON in a `BLOB`, like SwiftData's
  /// `.codable`: use it for types you do not own (a class included).
  ///
  /// The value cannot be used in predicates or sort descriptors (they throw), and a change of
  /// the type's shape triggers no migration: its `Codable` implementation must read older and
  /// newer encodings. Values are encoded with sorted keys, so equal values store equal bytes.
  /// Decoding happens when a row is loaded; with ``AttributeOption/sharesEqualValues`` rows
  /// with equal bytes share one decoded value (decoded once per fetch). `storage` is as for
  /// `attribute(_:_:_:storage:)`.
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
  /// ``AttributeOption/sharesEqualValues`` equal values that Foundation's encoder encodes (the
  /// package's own JSON writer leaves floating point, dates and super coders to it) also reuse
  /// one encoding when saved.
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
  /// `unwrap` is the reverse. As for `attribute(_:_:_:storage:)`, each branch makes its own
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
        isCodable: true, valueType: Value.self, slot: Slot.self, keyPath: keyPath,
        coder: coder
      ) { object, operation in
        let model = unsafeDowncast(object, to: Model.self)
        if case .load(let row, let index, let cache, let slot, true) = operation {
          let value = try wrap(coder.read(row.object, index, cache.object))
          if let slot { slot.store(try coder.snapshot(unwrap(value))) }
          model[keyPath: storage] = consume value
          return .done
        }
        return try codableAccess(model, keyPath, reading: storage, coder, wrap, unwrap, operation)
      }
    }
    return ModelAttribute(
      name: name, options: options, storageType: .blob, isOptional: isOptional,
      isCodable: true, valueType: Value.self, slot: Slot.self, keyPath: keyPath,
      coder: coder
    ) { object, operation in
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
  ) throws -> AttributeAnswer {
    typealias Slot = CodableSnapshot<Value>
    switch operation {
    case .load(let row, let index, let cache, let slot, _):
      let value = try wrap(coder.read(row.object, index, cache.object))
      model[keyPath: keyPath] = value
      if let slot { slot.store(try coder.snapshot(unwrap(value))) }
    case .bind(let statement, let index):
      try coder.bind(unwrap(model[keyPath: read]), statement.object, index)
    case .value: return .value(try coder.encode(unwrap(model[keyPath: read])))
    case .assign(let value): model[keyPath: keyPath] = try wrap(coder.decode(value))
    case .record(let slot): slot.store(try coder.snapshot(unwrap(model[keyPath: read])))
    case .matches(let slot):
      return .matches(coder.matches(unwrap(model[keyPath: read]), slot.load(as: Slot.self)))
    case .restore(let slot):
      // A non-optional property keeps its value when the snapshot cannot be restored.
      model[keyPath: keyPath] = try wrap(coder.restore(slot.load(as: Slot.self)))
    case .resolve: break
    }
    return .done
  }

  /// An optional `.codable` attribute decoded on first access: rows load its stored bytes into
  /// `fault`, the ``CodableFault`` behind the computed property `keyPath` (see
  /// ``CodableFault`` for the declaration), and the property decodes them when first read. A
  /// fetch then pays nothing for values nobody reads; with
  /// ``AttributeOption/sharesEqualValues`` rows with equal bytes share one decoded value.
  ///
  /// Stored bytes that cannot be decoded read as `nil`; a column of another storage class is
  /// still an error when the row loads.
  @inlinable @inline(__always)
  public static func codable<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String, _ options: Option...,
    fault: ReferenceWritableKeyPath<Model, CodableFault<Value>>
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(name: name, model: "\(Model.self)", options: Set(options))
    return lazyCodable(keyPath, name, Set(options), fault: fault, coder: coder)
  }

  /// A `.codable` attribute of a `Hashable` type decoded on first access: as the other
  /// overload, and with ``AttributeOption/sharesEqualValues`` equal values set by the program
  /// that Foundation's encoder encodes also reuse one encoding when saved.
  @inlinable @inline(__always)
  public static func codable<Value: Codable & Hashable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String, _ options: Option...,
    fault: ReferenceWritableKeyPath<Model, CodableFault<Value>>
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(
      name: name, model: "\(Model.self)", options: Set(options),
      encodings: EncodingCache<Value>().memo)
    return lazyCodable(keyPath, name, Set(options), fault: fault, coder: coder)
  }

  /// A `.codable` attribute kept in a ``CodableFault``: loads write the fault (and, for models
  /// others may observe, the property first, which decodes); saves and comparisons read the
  /// fault, so an unread value is never decoded; writes others must see go through `keyPath`.
  /// One closure around literal key paths, as for `attribute(_:_:_:storage:)`.
  @inlinable @inline(__always)
  static func lazyCodable<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String, _ options: Set<Option>,
    fault: ReferenceWritableKeyPath<Model, CodableFault<Value>>, coder: CodableColumn<Value>
  ) -> ModelAttribute {
    typealias Slot = CodableFault<Value>
    nonisolated(unsafe) let keyPath = keyPath
    nonisolated(unsafe) let fault = fault
    return ModelAttribute(
      name: name, options: options, storageType: .blob, isOptional: true, isCodable: true,
      valueType: Value.self, slot: Slot.self, keyPath: keyPath, coder: coder
    ) { object, operation in
      let model = unsafeDowncast(object, to: Model.self)
      switch operation {
      case .load(let row, let index, let cache, let slot, let isNew):
        let loaded = try coder.fault(row.object, index, cache.object)
        slot?.store(loaded)
        if !isNew {
          // Observers are told through the property; the fault then keeps the bytes.
          model[keyPath: keyPath] = loaded.value
        }
        model[keyPath: fault] = loaded
      case .bind(let statement, let index):
        try coder.bind(model[keyPath: fault], statement.object, index)
      case .value: return .value(try coder.stored(model[keyPath: fault]))
      case .assign(let value): model[keyPath: keyPath] = try coder.decode(value)
      case .record(let slot): slot.store(model[keyPath: fault])
      case .matches(let slot):
        return .matches(coder.matches(model[keyPath: fault], slot.load(as: Slot.self)))
      case .restore(let slot):
        let old = slot.load(as: Slot.self)
        if !coder.matches(model[keyPath: fault], old) {
          model[keyPath: keyPath] = old.value
          model[keyPath: fault] = old
        }
      case .resolve:
        if case .stored(let table, let entry) = model[keyPath: fault].state {
          _ = try table.decoded(entry)
        }
      }
      return .done
    }
  }
}
