/// A fetched row, read attribute by attribute into the arguments of a model's initializer: the
/// fast way for rows to become new models (see ``ModelSchema/loading(_:)``).
///
/// Each read takes the next attribute in the schema's order, checks that the value's type is
/// the attribute's (in every build: a read out of order is a programming error that traps, not
/// memory read as the wrong type; in debug builds the key path is checked too), and keeps a copy
/// in the model's snapshot for change tracking.
///
/// ```swift
/// static let schema = ModelSchema<Trip>(
///   "trips",
///   .attribute(\.id, "id", .unique),
///   .attribute(\.name, "name"),
///   .codable(\.placeIdentifier, "place_id", fault: \._placeFault)
/// )
/// .loading { row in
///   try Trip(id: row.next(\.id), name: row.next(\.name), place: row.fault(\.placeIdentifier))
/// }
/// ```
///
/// Cost: per attribute, the column's read and the snapshot's copy; no closure call, no
/// key-path write and no exclusivity check (an initializer's stores need none).
public struct ModelRow<Model: PersistentModel>: ~Copyable {
  /// The row and the fetch's cache, held strongly: a read of an immutable property passes them
  /// on without a retain, where an `unowned(unsafe)` one cost a retain and a release per call
  /// (ten a row; now one each per row).
  @usableFromInline let row: any StoreRow
  @usableFromInline let cache: LoadCache
  @usableFromInline let firstColumn: Int32
  /// The snapshot being filled, or nil when the model is not registered.
  @usableFromInline let snapshot: UnsafeMutableRawPointer?
  /// Each attribute's snapshot slot, and `.codable` coder (the entity owns them).
  @usableFromInline let slots: UnsafeBufferPointer<EntityLayout.Slot>
  @usableFromInline unowned(unsafe) let entity: EntityLayout
  /// The attributes read so far: the snapshot's initialized slots.
  @usableFromInline var count = 0

  @usableFromInline
  init(
    _ row: any StoreRow, cache: LoadCache, firstColumn: Int32,
    snapshot: UnsafeMutableRawPointer?, entity: EntityLayout
  ) {
    self.row = row
    self.cache = cache
    self.firstColumn = firstColumn
    self.snapshot = snapshot
    self.slots = entity.slots
    self.entity = entity
  }

  /// The value of the next attribute, `keyPath`, a type stores keep natively.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the stored value cannot be read as
  ///   `Value` (the fetch names the row and the column).
  @inlinable @inline(__always)
  public mutating func next<Value: PersistableValue>(
    _ keyPath: @autoclosure () -> KeyPath<Model, Value>
  )
    throws -> Value
  {
    // The key path only for the debug check (and a value type's first use, whose check
    // throws): in release builds a fetch's rows never make it.
    assert(entity.isProbe || entity.isAttribute(count, keyPath()))
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    let slot = try self.slot(Value.self)
    let column = firstColumn + Int32(count)
    let value = try Value.read(from: row, at: column)
    slot?.store(copy value)
    count += 1
    return value
  }

  /// The next attribute, `keyPath`, an optional `.codable` value decoded on first access
  /// (declared with `codable(_:_:_:fault:)`): its storage, holding the stored bytes.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the column holds neither `NULL` nor
  ///   bytes.
  @inlinable @inline(__always)
  public mutating func fault<Value: Codable & SendableMetatype>(
    _ keyPath: @autoclosure () -> KeyPath<Model, Value?>
  ) throws -> CodableFault<Value> {
    assert(entity.isProbe || entity.isAttribute(count, keyPath()))
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    let slot = try self.slot(CodableFault<Value>.self)
    let coder = slots[count].coder(as: CodableColumn<Value>.self)
    let column = firstColumn + Int32(count)
    let loaded = try coder.fault(row, column, cache)
    slot?.store(loaded)
    count += 1
    return loaded
  }

  /// The next attribute, `keyPath`, an optional `.codable` value, decoded now: how a
  /// ``ModelValue`` reads one (a model's loader keeps the bytes instead, with ``fault(_:)``).
  /// Equal stored bytes decode once per fetch when the attribute
  /// ``AttributeOption/sharesEqualValues``.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the stored bytes do not decode as
  ///   `Value` (the fetch names the row and the column).
  @inlinable @inline(__always)
  public mutating func decoded<Value: Codable & SendableMetatype>(
    _ keyPath: @autoclosure () -> KeyPath<Model, Value?>
  ) throws -> Value? {
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    let coder = try codableColumn(Value.self)
    let value = try coder.read(row, firstColumn + Int32(count), cache)
    count += 1
    return value
  }

  /// The next attribute, `keyPath`, a non-optional `.codable` value, decoded now (see the
  /// optional overload).
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` for `NULL`, or bytes that do not decode
  ///   as `Value`.
  @inlinable @inline(__always)
  public mutating func decoded<Value: Codable & SendableMetatype>(
    _ keyPath: @autoclosure () -> KeyPath<Model, Value>
  ) throws -> Value {
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    let coder = try codableColumn(Value.self)
    guard let value = try coder.read(row, firstColumn + Int32(count), cache) else {
      throw coder.nullError()
    }
    count += 1
    return value
  }

  /// The next attribute's value as the store keeps it, passed to `read`: how a ``ModelValue``
  /// that reads every attribute by its type's non-generic conversion (`init(sqlValue:)`) reads
  /// a row, with no generic type made per column. Only for a value (a model's loader fills its
  /// snapshot with `next(_:)`); the attribute is not checked against a key path.
  ///
  /// - Throws: what `read` throws (the fetch names the row and the column).
  @inlinable
  public mutating func nextStored<Value>(_ read: (SQLValue) throws -> Value) throws -> Value {
    precondition(snapshot == nil, "ModelRow.nextStored(_:) in a model's row loader: use next(_:)")
    guard count < slots.count else { try entity.misread(Value.self, at: count) }
    let value = try read(row.value(at: firstColumn + Int32(count)))
    count += 1
    return value
  }

  /// Passes over the next attribute, `keyPath`, without reading it: for a ``ModelValue`` that
  /// does not hold every attribute. Its column is still selected.
  @inlinable @inline(__always)
  public mutating func skip<Value>(_ keyPath: @autoclosure () -> KeyPath<Model, Value>) throws {
    if entity.checksKeyPaths { try entity.checkKeyPath(count, { keyPath() }) }
    guard count < slots.count else { try entity.misread(Value.self, at: count) }
    count += 1
  }

  /// The next attribute's coder, after checking in every build that the next attribute is a
  /// `.codable` `Value` and that no snapshot is being filled (a model's loader reads
  /// `.codable` attributes with ``fault(_:)``, which its snapshot keeps).
  @inlinable @inline(__always)
  func codableColumn<Value: Codable & SendableMetatype>(_: Value.Type) throws
    -> CodableColumn<Value>
  {
    precondition(snapshot == nil, "ModelRow.decoded(_:) in a model's row loader: use fault(_:)")
    guard count < slots.count,
      slots[count].type == ObjectIdentifier(CodableFault<Value>.self)
        || slots[count].type == ObjectIdentifier(CodableSnapshot<Value>.self)
    else {
      try entity.misread(Value.self, at: count)
    }
    return slots[count].coder(as: CodableColumn<Value>.self)
  }

  /// The next attribute's slot (nil without a snapshot), after checking that there is a next
  /// attribute and that it holds `Value`, in every build (a trap, or the container's check's
  /// error, see ``EntityLayout/misread(_:at:)``).
  @inlinable @inline(__always)
  func slot<Value>(_: Value.Type) throws -> SnapshotSlot? {
    guard count < slots.count, slots[count].type == ObjectIdentifier(Value.self) else {
      try entity.misread(Value.self, at: count)
    }
    guard let snapshot else { return nil }
    return SnapshotSlot(
      snapshot + slots[count].offset, isInitialized: false, type: slots[count].type)
  }
}

/// A new model's attributes, bound one by one to an insert's parameters: the fast way for a
/// model to become a row (see ``ModelSchema/saving(_:)``). The same binds, with no statement,
/// record the saved values in the model's snapshot after the save commits.
///
/// Each bind takes the next attribute in the schema's order and checks that the value's type
/// is the attribute's (in every build: a bind out of order is a programming error that traps,
/// not a value written to another column; in debug builds the key path is checked too).
///
/// Cost: per attribute, the value's bind (or its copy into the snapshot); no closure call and
/// no key-path read.
public struct ModelRowBinder<Model: PersistentModel>: ~Copyable {
  /// Where the values go: an insert's parameters 1 to n, or else `snapshot`.
  @usableFromInline let statement: (any StoreStatement)?
  @usableFromInline let snapshot: UnsafeMutableRawPointer?
  /// Whether the snapshot's slots hold values (replaced) or not yet (initialized).
  @usableFromInline let isInitialized: Bool
  @usableFromInline let slots: UnsafeBufferPointer<EntityLayout.Slot>
  @usableFromInline unowned(unsafe) let entity: EntityLayout
  /// The attributes bound so far.
  @usableFromInline var count = 0

  @usableFromInline
  init(
    _ statement: (any StoreStatement)?, snapshot: UnsafeMutableRawPointer?, isInitialized: Bool,
    entity: EntityLayout
  ) {
    precondition((statement == nil) != (snapshot == nil))
    self.statement = statement
    self.snapshot = snapshot
    self.isInitialized = isInitialized
    self.slots = entity.slots
    self.entity = entity
  }

  /// Binds `value` as the next attribute, `keyPath`, a type stores keep natively.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the value cannot be stored (NaN).
  @inlinable @inline(__always)
  public mutating func bind<Value: PersistableValue>(
    _ keyPath: KeyPath<Model, Value>, _ value: Value
  ) throws {
    // The key path only for the debug check: in release builds it is never made.
    assert(entity.isProbe || entity.isAttribute(count, keyPath))
    try check(Value.self)
    if let statement {
      try value.bind(to: statement, at: Int32(count + 1))
    } else {
      slot().store(value)
    }
    count += 1
  }

  /// Binds a `.codable` attribute, `keyPath`, from the fault that holds its value: its stored
  /// bytes as they are when it was loaded and not changed, else the value encoded.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the value cannot be encoded.
  @inlinable @inline(__always)
  public mutating func bind<Value: Codable & SendableMetatype>(
    _ keyPath: KeyPath<Model, Value?>, fault: CodableFault<Value>
  ) throws {
    assert(entity.isProbe || entity.isAttribute(count, keyPath))
    try check(CodableFault<Value>.self)
    if let statement {
      let coder = slots[count].coder(as: CodableColumn<Value>.self)
      try coder.bind(fault, statement, Int32(count + 1))
    } else {
      slot().store(fault)
    }
    count += 1
  }

  /// The next attribute's snapshot slot (after ``check(_:)``).
  @inlinable @inline(__always)
  func slot() -> SnapshotSlot {
    SnapshotSlot(
      snapshot.unsafelyUnwrapped + slots[count].offset, isInitialized: isInitialized,
      type: slots[count].type)
  }

  /// Checks, in every build, that there is a next attribute and that it holds `Value` (a trap,
  /// or the container's check's error, see ``EntityLayout/misbound(_:at:)``).
  @inlinable @inline(__always)
  func check<Value>(_: Value.Type) throws {
    guard count < slots.count, slots[count].type == ObjectIdentifier(Value.self) else {
      try entity.misbound(Value.self, at: count)
    }
  }
}

/// What a ``ModelRow`` needs of its entity: each attribute's snapshot slot and `.codable`
/// coder, in memory of its own (read by pointer, with no array checks or retains per row), and
/// the key paths for debug checks. Made once per entity.
@usableFromInline
final class EntityLayout: Sendable {
  /// One attribute's slot: where it is in a snapshot, its type, and its coder if `.codable`.
  @usableFromInline
  struct Slot {
    @usableFromInline let offset: Int
    @usableFromInline let type: ObjectIdentifier
    @usableFromInline let coder: Unmanaged<AnyObject>?

    /// The coder, whose type the slot's type check has settled (asserted in debug builds).
    @inlinable @inline(__always)
    func coder<Coder: AnyObject>(as _: Coder.Type) -> Coder {
      guard let coder else { preconditionFailure("A native attribute was read as .codable.") }
      assert(coder.takeUnretainedValue() is Coder)
      return unsafeDowncast(coder.takeUnretainedValue(), to: Coder.self)
    }
  }
  nonisolated(unsafe) let slots: UnsafeBufferPointer<Slot>
  nonisolated(unsafe) let keyPaths: [AnyKeyPath]
  /// Keeps the coders alive (the slots hold them unretained).
  let coders: [(AnyObject & Sendable)?]
  /// The model type's name, for messages.
  let modelName: String
  /// Whether this layout serves the container's check of the row code
  /// (``Entity/checkRowCode()``): a misread or misbind then throws instead of trapping.
  @usableFromInline let isProbe: Bool
  /// Whether each read checks its key path against the schema's, throwing when it differs: a
  /// probe of a ``ModelValue``'s initializer (``Entity/checkValueCode(_:)``), which, unlike a
  /// model's loader, fills nothing the check could read back.
  @usableFromInline let checksKeyPaths: Bool

  init(
    layout: SnapshotLayout, keyPaths: [AnyKeyPath], coders: [(AnyObject & Sendable)?],
    modelName: String, isProbe: Bool = false, checksKeyPaths: Bool = false
  ) {
    self.modelName = modelName
    self.isProbe = isProbe || checksKeyPaths
    self.checksKeyPaths = checksKeyPaths
    let slots = UnsafeMutableBufferPointer<Slot>.allocate(capacity: keyPaths.count)
    for index in keyPaths.indices {
      slots.initializeElement(
        at: index,
        to: Slot(
          offset: layout.offsets[index], type: layout.types[index],
          coder: coders[index].map { Unmanaged.passUnretained($0) }))
    }
    self.slots = UnsafeBufferPointer(slots)
    self.keyPaths = keyPaths
    self.coders = coders
  }

  deinit { UnsafeMutableBufferPointer(mutating: slots).deallocate() }

  /// Whether attribute `index` is declared with `keyPath` (asserted in debug builds, except on
  /// a probe layout, whose check compares the values read).
  @usableFromInline
  func isAttribute(_ index: Int, _ keyPath: AnyKeyPath) -> Bool {
    index < keyPaths.count && keyPaths[index] == keyPath
  }

  /// Refuses a read of `keyPath` as attribute `index` when the schema declares another there
  /// (only on a layout that ``checksKeyPaths``).
  /// Not inlined, and given the key path as a closure: the optimizer would otherwise make the
  /// key path before the branch that calls this, in every read of every row.
  @usableFromInline @inline(never)
  func checkKeyPath(_ index: Int, _ makeKeyPath: () -> AnyKeyPath) throws {
    let keyPath = makeKeyPath()
    guard !isAttribute(index, keyPath) else { return }
    let declared = keyPaths.firstIndex(of: keyPath).map { "attribute \($0 + 1)" } ?? "no attribute"
    try refuse(
      "its value reads \(keyPath) as attribute \(index + 1) of \(slots.count), which the schema declares as \(declared); read the attributes in the schema's order, once each (skip(_:) passes over one)"
    )
  }

  /// A row binder bound attribute `index` as `Value`, which the schema does not declare: traps,
  /// or throws on a probe layout (the container's check, which runs before any row is read).
  @usableFromInline
  func misbound<Value>(_: Value.Type, at index: Int) throws -> Never {
    try refuse(
      "its row binder binds \(Value.self) as attribute \(index + 1) of \(slots.count), which the schema does not declare so; bind the attributes in the schema's order, once each"
    )
  }

  /// A row loader read attribute `index` as `Value`, which the schema does not declare: traps,
  /// or throws on a probe layout.
  @usableFromInline
  func misread<Value>(_: Value.Type, at index: Int) throws -> Never {
    try refuse(
      "its row loader reads \(Value.self) as attribute \(index + 1) of \(slots.count), which the schema does not declare so; read the attributes in the schema's order, once each"
    )
  }

  /// Throws the schema error `why` on a probe layout; traps on any other (a fetch or save past
  /// the container's check met code the check did not run: a programming error).
  func refuse(_ why: String) throws -> Never {
    let message = "The schema of \(modelName) is invalid: \(why)."
    guard isProbe else { preconditionFailure(message) }
    throw RowCodeRefusal(error: PersistenceError(code: .invalidValue, message: message))
  }
}
