import Foundation
import Synchronization

// What `@Model` writes for a stored property of a type it cannot see (`var reason: Reason`,
// `var address: Address`), declared without `@Attribute(.codable)`: the compiler picks the
// storage by the type's conformances, as SwiftData stores them.
//
// - A ``PersistableValue``: its column, natively.
// - A `RawRepresentable` whose `RawValue` is one (an enum `: String` or `: Int`): a column of
//   the raw value, usable in predicates (`$0.reason == family`, `[a, b].contains($0.reason)`)
//   and sorts (by the raw value, as SQL orders it). A stored raw value that names no case is
//   an error naming the row, never a default.
// - Any other `Codable` type (a struct, an array): JSON, as `.codable`, opaque to predicates
//   and sorts.
//
// A type that is both a `PersistableValue` and a `RawRepresentable` of one is ambiguous (a
// compile-time error at the property): mark it `@Attribute(.codable)`, or drop one of the two.

extension ModelAttribute {
  /// An attribute of a `RawRepresentable` type whose raw value a store keeps natively (an
  /// enum `: String` or `: Int`): a column of the raw value.
  ///
  /// Cost: as a native attribute of the raw type, plus `init(rawValue:)` per value loaded.
  @inlinable @inline(__always)
  public static func attribute<Value: RawRepresentable & Equatable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value>? = nil
  ) -> ModelAttribute where Value.RawValue: PersistableValue {
    rawValued(
      keyPath, name, Set(options), storage: storage, valueType: Value.self,
      wrap: { (raw: Value.RawValue) in
        guard let value = Value(rawValue: raw) else { throw noCase(raw, Value.self) }
        return value
      }, unwrap: { $0.rawValue })
  }

  /// An optional attribute of a `RawRepresentable` type (see the non-optional overload);
  /// `nil` is `NULL`.
  @inlinable @inline(__always)
  public static func attribute<Value: RawRepresentable & Equatable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value?>? = nil
  ) -> ModelAttribute where Value.RawValue: PersistableValue {
    rawValued(
      keyPath, name, Set(options), storage: storage, valueType: Value?.self,
      wrap: { (raw: Value.RawValue?) in
        guard let raw else { return nil }
        guard let value = Value(rawValue: raw) else { throw noCase(raw, Value.self) }
        return value
      }, unwrap: { $0?.rawValue })
  }

  /// An attribute of any other `Codable` type, written without `.codable`: stored as
  /// `codable(_:_:_:storage:)` stores it (JSON, opaque to predicates and
  /// sorts).
  @_disfavoredOverload @inlinable @inline(__always)
  public static func attribute<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value>? = nil
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(name: name, model: "\(Model.self)", options: Set(options))
    return required(keyPath, name, Set(options), storage: storage, coder: coder)
  }

  /// An optional attribute of another `Codable` type, written without `.codable`: JSON, `NULL`
  /// for nil.
  @_disfavoredOverload @inlinable @inline(__always)
  public static func attribute<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    _ options: Option..., storage: ReferenceWritableKeyPath<Model, Value?>? = nil
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(name: name, model: "\(Model.self)", options: Set(options))
    return codable(
      keyPath, name, Set(options), storage: storage, coder: coder, isOptional: true,
      wrap: { $0 }, unwrap: { $0 })
  }

  /// An attribute whose property holds `Stored` and whose column holds `Raw`, a type stores
  /// keep natively: `wrap` makes the property's value from the column's (throwing for a value
  /// that names no case), `unwrap` is the reverse. As for `attribute(_:_:_:storage:)`, each
  /// branch makes its own closure around literal key paths.
  @inlinable @inline(__always)
  static func rawValued<Stored: Equatable & SendableMetatype, Raw: PersistableValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Stored>, _ name: String, _ options: Set<Option>,
    storage: ReferenceWritableKeyPath<Model, Stored>?, valueType: Any.Type,
    wrap: @escaping @Sendable (Raw) throws -> Stored,
    unwrap: @escaping @Sendable (Stored) -> Raw
  ) -> ModelAttribute {
    nonisolated(unsafe) let keyPath = keyPath
    let read = storage ?? keyPath
    nonisolated(unsafe) let reading = read
    return ModelAttribute(
      name: name, options: options, storageType: Raw.storageType, isOptional: Raw.isOptional,
      isCodable: false, valueType: valueType, slot: Stored.self, keyPath: keyPath
    ) { object, operation in
      let model = unsafeDowncast(object, to: Model.self)
      switch operation {
      case .load(let row, let index, _, let slot, let isNew):
        let value = try wrap(Raw.read(from: row.object, at: index))
        slot?.store(value)
        // A new model has no observers yet: its backing storage is written directly.
        if isNew { model[keyPath: reading] = value } else { model[keyPath: keyPath] = value }
      case .bind(let statement, let index):
        try unwrap(model[keyPath: reading]).bind(to: statement.object, at: index)
      case .value: return .value(unwrap(model[keyPath: reading]).sqlValue)
      case .assign(let value): model[keyPath: keyPath] = try wrap(Raw(sqlValue: value))
      case .record(let slot): slot.store(model[keyPath: reading])
      case .matches(let slot):
        return .matches(slot.load(as: Stored.self) == model[keyPath: reading])
      case .restore(let slot): model[keyPath: keyPath] = slot.load(as: Stored.self)
      case .resolve: break
      }
      return .done
    }
  }
}

/// The error for a stored raw value that names no case of `type`.
@usableFromInline
func noCase<Raw: PersistableValue>(_ raw: Raw, _ type: Any.Type) -> PersistenceError {
  PersistenceError(
    code: .invalidValue,
    message:
      "The stored value \(raw.sqlValue) is no \(type): no case has that raw value. The store may have been written by another version of the program, or edited by hand."
  )
}

extension ModelRow {
  /// The value of the next attribute, `keyPath`, of a `RawRepresentable` type whose raw value
  /// a store keeps natively (see `ModelAttribute.attribute(_:_:_:storage:)`).
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the stored value is not one of the
  ///   type's raw values.
  @inlinable @inline(__always)
  public mutating func next<Value: RawRepresentable & Equatable & SendableMetatype>(
    _ keyPath: @autoclosure () -> KeyPath<Model, Value>
  ) throws -> Value where Value.RawValue: PersistableValue {
    assert(entity.isProbe || entity.isAttribute(count, keyPath()))
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    let slot = try self.slot(Value.self)
    let raw = try Value.RawValue.read(from: row, at: firstColumn + Int32(count))
    guard let value = Value(rawValue: raw) else { throw noCase(raw, Value.self) }
    slot?.store(value)
    count += 1
    return value
  }

  /// The value of the next attribute, `keyPath`, an optional `RawRepresentable`; `NULL` is nil.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the stored value is not one of the
  ///   type's raw values.
  @inlinable @inline(__always)
  public mutating func next<Value: RawRepresentable & Equatable & SendableMetatype>(
    _ keyPath: @autoclosure () -> KeyPath<Model, Value?>
  ) throws -> Value? where Value.RawValue: PersistableValue {
    assert(entity.isProbe || entity.isAttribute(count, keyPath()))
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    let slot = try self.slot(Value?.self)
    var value: Value?
    if let raw = try Value.RawValue?.read(from: row, at: firstColumn + Int32(count)) {
      guard let found = Value(rawValue: raw) else { throw noCase(raw, Value.self) }
      value = found
    }
    slot?.store(value)
    count += 1
    return value
  }

  /// The value of the next attribute, `keyPath`, an optional of another `Codable` type
  /// written without `.codable`, decoded now; `NULL` is nil.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` for bytes that do not decode as `Value`.
  @_disfavoredOverload @inlinable @inline(__always)
  public mutating func next<Value: Codable & SendableMetatype>(
    _ keyPath: @autoclosure () -> KeyPath<Model, Value?>
  ) throws -> Value? {
    assert(entity.isProbe || entity.isAttribute(count, keyPath()))
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    let slot = try self.slot(CodableSnapshot<Value>.self)
    let coder = slots[count].coder(as: CodableColumn<Value>.self)
    let value = try coder.read(row, firstColumn + Int32(count), cache)
    if let slot { slot.store(try coder.snapshot(value)) }
    count += 1
    return value
  }

  /// The value of the next attribute, `keyPath`, of another `Codable` type written without
  /// `.codable`, decoded now (see `ModelAttribute.attribute(_:_:_:storage:)`).
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` for `NULL`, or bytes that do not decode
  ///   as `Value`.
  @_disfavoredOverload @inlinable @inline(__always)
  public mutating func next<Value: Codable & SendableMetatype>(
    _ keyPath: @autoclosure () -> KeyPath<Model, Value>
  ) throws -> Value {
    assert(entity.isProbe || entity.isAttribute(count, keyPath()))
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    let slot = try self.slot(CodableSnapshot<Value>.self)
    let coder = slots[count].coder(as: CodableColumn<Value>.self)
    guard let value = try coder.read(row, firstColumn + Int32(count), cache) else {
      throw coder.nullError()
    }
    if let slot { slot.store(try coder.snapshot(value)) }
    count += 1
    return value
  }
}

extension ModelRowBinder {
  /// Binds `value` as the next attribute, `keyPath`, of a `RawRepresentable` type: its raw
  /// value.
  @inlinable @inline(__always)
  public mutating func bind<Value: RawRepresentable & Equatable & SendableMetatype>(
    _ keyPath: KeyPath<Model, Value>, _ value: Value
  ) throws where Value.RawValue: PersistableValue {
    assert(entity.isProbe || entity.isAttribute(count, keyPath))
    try check(Value.self)
    if let statement {
      try value.rawValue.bind(to: statement, at: Int32(count + 1))
    } else {
      slot().store(value)
    }
    count += 1
  }

  /// Binds `value` as the next attribute, `keyPath`, an optional `RawRepresentable`: its raw
  /// value, or `NULL`.
  @inlinable @inline(__always)
  public mutating func bind<Value: RawRepresentable & Equatable & SendableMetatype>(
    _ keyPath: KeyPath<Model, Value?>, _ value: Value?
  ) throws where Value.RawValue: PersistableValue {
    assert(entity.isProbe || entity.isAttribute(count, keyPath))
    try check(Value?.self)
    if let statement {
      try value.map(\.rawValue).bind(to: statement, at: Int32(count + 1))
    } else {
      slot().store(value)
    }
    count += 1
  }

  /// Binds `value` as the next attribute, `keyPath`, an optional of another `Codable` type
  /// written without `.codable`: JSON, or `NULL`.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the value cannot be encoded.
  @_disfavoredOverload @inlinable @inline(__always)
  public mutating func bind<Value: Codable & SendableMetatype>(
    _ keyPath: KeyPath<Model, Value?>, _ value: Value?
  ) throws {
    assert(entity.isProbe || entity.isAttribute(count, keyPath))
    try check(CodableSnapshot<Value>.self)
    let coder = slots[count].coder(as: CodableColumn<Value>.self)
    if let statement {
      try coder.bind(value, statement, Int32(count + 1))
    } else {
      slot().store(try coder.snapshot(value))
    }
    count += 1
  }

  /// Binds `value` as the next attribute, `keyPath`, of another `Codable` type written
  /// without `.codable`: encoded as JSON.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the value cannot be encoded.
  @_disfavoredOverload @inlinable @inline(__always)
  public mutating func bind<Value: Codable & SendableMetatype>(
    _ keyPath: KeyPath<Model, Value>, _ value: Value
  ) throws {
    assert(entity.isProbe || entity.isAttribute(count, keyPath))
    try check(CodableSnapshot<Value>.self)
    let coder = slots[count].coder(as: CodableColumn<Value>.self)
    if let statement {
      try coder.bind(value, statement, Int32(count + 1))
    } else {
      slot().store(try coder.snapshot(value))
    }
    count += 1
  }
}

/// Accepts a `RawRepresentable` of a type the store keeps: what `@Model` checks such an
/// attribute's type with. Not called by hand.
@inlinable
public func _persistableAttribute<Value: RawRepresentable & Equatable & SendableMetatype>(_: Value)
where Value.RawValue: PersistableValue {}

/// Accepts an optional `RawRepresentable` of a type the store keeps. Not called by hand.
@inlinable
public func _persistableAttribute<Value: RawRepresentable & Equatable & SendableMetatype>(
  _: Value?
) where Value.RawValue: PersistableValue {}

/// Accepts any other `Codable` type, stored as JSON. Not called by hand.
@_disfavoredOverload @inlinable
public func _persistableAttribute<Value: Codable & SendableMetatype>(_: Value) {}

extension ModelDefaults {
  /// The empty value of a `RawRepresentable` attribute declared without an initial value:
  /// the case whose raw value is the raw type's empty value (`""`, `0`), else the first of
  /// `allCases` for a `CaseIterable` type, else, for an enum without payloads, its first
  /// declared case. What a model made for loading holds until its row's values are set, and
  /// what a column added to an existing table is filled with.
  ///
  /// A type with none of those traps here, naming the type, when a container for the model
  /// opens: give the property an initial value.
  ///
  /// Cost: a lock and a hash after the first call for the type.
  public static func value<Value: RawRepresentable & Equatable & SendableMetatype>() -> Value
  where Value.RawValue: PersistableValue {
    EmptyValues.value(Value.self) {
      if let value = Value(rawValue: ModelDefaults.value()) { return value }
      if let all = Value.self as? any CaseIterable.Type, let first = firstCase(all) as? Value {
        return first
      }
      if let first = firstDeclaredCase(Value.self) { return first }
      fatalError(
        "\(Value.self) has no empty value to give a @Model property declared without an initial value: give the property one"
      )
    }
  }

  /// `nil`, the empty value of an optional `RawRepresentable` attribute.
  public static func value<Value: RawRepresentable & Equatable & SendableMetatype>() -> Value?
  where Value.RawValue: PersistableValue { nil }

  /// The empty value of any other `Codable` attribute declared without an initial value: the
  /// value decoded from a decoder that answers every question with an empty value (`""`, `0`,
  /// `false`, `nil` for an optional, an empty list or dictionary); `Address(street: "",
  /// zip: 0)` for a struct of such fields.
  ///
  /// A type whose decoding refuses those (a `UUID` or a `URL` field, an enum) traps here,
  /// naming the type, when a container for the model opens: give the property an initial
  /// value.
  ///
  /// Cost: one decode for the type, then a lock and a hash per call.
  @_disfavoredOverload
  public static func value<Value: Codable & SendableMetatype>() -> Value {
    EmptyValues.value(Value.self) {
      do {
        return try EmptyDecoder.empty(Value.self, at: [], depth: 0)
      } catch {
        fatalError(
          "\(Value.self) has no empty value to give a @Model property declared without an initial value (\(error)): give the property one"
        )
      }
    }
  }

  /// The first of `type.allCases`.
  private static func firstCase<All: CaseIterable>(_ type: All.Type) -> Any? {
    type.allCases.first
  }

  /// The first declared case of an enum without payloads: its tag 0, all-zero memory of the
  /// type's size, which is 0 bytes for one case and 1 or 2 for 2 to 65,536 cases. Taken only when
  /// its raw value reads back as the same case, which a garbage value would not.
  private static func firstDeclaredCase<Value: RawRepresentable & Equatable & SendableMetatype>(
    _ type: Value.Type
  ) -> Value? where Value.RawValue: PersistableValue {
    // A one-case enum has no bytes at all.
    guard _isPOD(Value.self), (0...2).contains(MemoryLayout<Value>.size) else { return nil }
    let zero = withUnsafeTemporaryAllocation(
      byteCount: max(MemoryLayout<Value>.size, 1), alignment: MemoryLayout<Value>.alignment
    ) { bytes in
      bytes.initializeMemory(as: UInt8.self, repeating: 0)
      return bytes.load(as: Value.self)
    }
    guard Mirror(reflecting: zero).displayStyle == .enum else { return nil }
    return Value(rawValue: zero.rawValue) == zero ? zero : nil
  }
}

/// The empty values found so far, one per value type (bounded by the program's attribute
/// types). A class's is made on each call: one instance shared by every model would be one
/// object changed through all of them.
enum EmptyValues {
  // SAFETY (UncheckedSendable): the table holds values of value types only, each copied out
  // on a read and never changed in place: immutable values, safe to share.
  private static let table = Mutex<[ObjectIdentifier: UncheckedSendable<Any>]>([:])

  static func value<Value>(_ type: Value.Type, _ make: () -> Value) -> Value {
    if Value.self is AnyClass { return make() }
    let key = ObjectIdentifier(type)
    if let known = table.withLock({ $0[key] }) { return known.value as! Value }
    let value = make()
    table.withLock { $0[key] = UncheckedSendable(value) }
    return value
  }
}

extension _OptionalProperty {
  /// The backing storage of an optional `RawRepresentable` attribute: nil until set.
  public static func storage<Value: RawRepresentable & Equatable & SendableMetatype>(
    _: Value.Type
  ) -> Value? where Value.RawValue: PersistableValue { nil }

  /// The backing storage of an optional attribute of another `Codable` type: nil until set.
  @_disfavoredOverload
  public static func storage<Value: Codable & SendableMetatype>(_: Value.Type) -> Value? { nil }

  /// Reads an optional `RawRepresentable` attribute, recording the read for observers.
  public static func get<Owner: PersistentModel, Value: RawRepresentable & Equatable>(
    _ owner: Owner, _ storage: Value?, _ keyPath: KeyPath<Owner, Value?>,
    _ registrar: borrowing ModelObservationRegistrar
  ) -> Value? where Value.RawValue: PersistableValue {
    registrar.access(owner, keyPath: keyPath)
    return storage
  }

  /// Reads an optional attribute of another `Codable` type, recording the read for observers.
  @_disfavoredOverload
  public static func get<Owner: PersistentModel, Value: Codable>(
    _ owner: Owner, _ storage: Value?, _ keyPath: KeyPath<Owner, Value?>,
    _ registrar: borrowing ModelObservationRegistrar
  ) -> Value? {
    registrar.access(owner, keyPath: keyPath)
    return storage
  }

  /// Sets an optional `RawRepresentable` attribute, telling observers of a change, not of an
  /// equal value.
  public static func set<Owner: PersistentModel, Value: RawRepresentable & Equatable>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, Value?>, _ newValue: Value?,
    _ keyPath: KeyPath<Owner, Value?>, _ registrar: borrowing ModelObservationRegistrar
  ) where Value.RawValue: PersistableValue {
    guard owner[keyPath: storage] != newValue else {
      owner[keyPath: storage] = newValue
      return
    }
    registrar.withMutation(of: owner, keyPath: keyPath) { owner[keyPath: storage] = newValue }
  }

  /// Sets an optional attribute of another `Codable` type, telling observers (of every
  /// assignment: the type need not be `Equatable`).
  @_disfavoredOverload
  public static func set<Owner: PersistentModel, Value: Codable>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, Value?>, _ newValue: Value?,
    _ keyPath: KeyPath<Owner, Value?>, _ registrar: borrowing ModelObservationRegistrar
  ) {
    registrar.withMutation(of: owner, keyPath: keyPath) { owner[keyPath: storage] = newValue }
  }
}

extension ModelAttribute {
  /// The schema's entry for a `@Model` property of `_OptionalProperty` of a
  /// `RawRepresentable` type: an optional column of the raw value.
  public static func _optional<Value: RawRepresentable & Equatable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    _ options: AttributeOption..., storage: ReferenceWritableKeyPath<Model, Value?>
  ) -> ModelAttribute where Value.RawValue: PersistableValue {
    ModelAttribute(attribute(keyPath, name, storage: storage), options: Set(options))
  }

  /// The schema's entry for a `@Model` property of `_OptionalProperty` of another `Codable`
  /// type: JSON, `NULL` for nil.
  @_disfavoredOverload
  public static func _optional<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    _ options: AttributeOption..., storage: ReferenceWritableKeyPath<Model, Value?>
  ) -> ModelAttribute {
    let coder = CodableColumn<Value>(name: name, model: "\(Model.self)", options: Set(options))
    return codable(
      keyPath, name, Set(options), storage: storage, coder: coder, isOptional: true,
      wrap: { $0 }, unwrap: { $0 })
  }
}
