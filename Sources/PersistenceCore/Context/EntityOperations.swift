import Synchronization

/// The type-erased operations a ``ModelContext`` needs on one model type, so that registrations
/// of different models can live in one identity map.
protocol EntityOperations: AnyObject, Sendable {
  var name: String { get }
  var columnNames: [String] { get }
  /// SQL the context runs for this entity, made once.
  var statements: EntityStatements { get }
  /// The attributes of every unique constraint (each attribute once), for messages.
  var uniqueIndexes: [Int] { get }
  /// The unique constraints, each its attributes' indexes, the declaring attribute first
  /// (``AttributeOption/unique`` alone, ``AttributeOption/unique(with:)`` with the others).
  var uniqueConstraints: [[Int]] { get }
  var preservedIndexes: [Int] { get }
  /// The layout of a snapshot, which a registration keeps in its tail.
  var snapshotLayout: SnapshotLayout { get }
  /// A new model made from the current row (through the schema's loader, or
  /// `PersistentModel.makeForLoading()` and `load`), its values also in the registration's
  /// empty snapshot when one is given.
  func makeModel(
    into registration: ModelContext.Registration?, from statement: any StoreRow,
    firstColumn: Int32, cache: LoadCache
  ) throws -> AnyObject
  /// Loads a row into a model (see `Entity.load`).
  func load(
    _ model: AnyObject, isNew: Bool, into registration: ModelContext.Registration?,
    from statement: any StoreRow, firstColumn: Int32, cache: LoadCache) throws
  /// Copies the registered model's values into its snapshot (made on first use).
  func recordSnapshot(_ registration: ModelContext.Registration) throws
  /// The attributes whose values differ from the snapshot; all of them when there is none.
  func changedIndexes(_ registration: ModelContext.Registration) -> [Int]
  /// Puts the snapshot's values back into the model.
  func restore(_ registration: ModelContext.Registration)
  /// Deinitializes a snapshot's values (its memory belongs to the registration).
  func destroySnapshot(_ snapshot: UnsafeMutableRawPointer)
  func bind(_ model: AnyObject, attribute: Int, to statement: any StoreStatement, at index: Int32)
    throws
  /// Binds every attribute, in order, to parameters 1 to n (an insert's): through the schema's
  /// binder when it has one (``ModelSchema/saving(_:)``).
  func bindAll(_ model: AnyObject, to statement: any StoreStatement)
    throws
  func value(_ model: AnyObject, attribute: Int) throws -> SQLValue
  func assign(_ model: AnyObject, attribute: Int, value: SQLValue) throws
  func validate(_ model: AnyObject) throws
  /// Decodes every value loaded lazily now (see ``CodableFault``), throwing the first failure,
  /// with its column.
  func resolve(_ model: AnyObject) throws
  /// The model's relationships, as declared (empty for most models).
  var relationships: [RelationshipInfo] { get }
  /// Whether the model declares relationships.
  var hasRelationships: Bool { get }
  /// The to-ones that store a key to a row of the model's own table (a place's parent): a
  /// save inserts new rows of a tree a level at a time, and deletes children before parents.
  var selfReferences: [RelationshipInfo] { get }
  /// The many-to-manys, each with its join table as this side reads it.
  var joins: [(relationship: RelationshipInfo, table: JoinTable)] { get }
  /// How the model's ``LinkOrigin`` is set, when it has one (``LinksOnFirstUse``).
  var linkOrigin: LinkOriginAccess? { get }
  /// Whether the context tells a model where it is (its links, its ``LinkOrigin``) when it
  /// loads, inserts, saves, deletes or resets it: when the model has relationships or a
  /// ``LinkOrigin``.
  var attachesModels: Bool { get }
  /// The index of the `"_entity"` column in rows selected with the schema's select list, when
  /// the model's table holds subclasses (``ModelInheritance``); nil otherwise.
  var entityColumn: Int32? { get }
  /// The value of `"_entity"` for this model's own rows: its inheritance path, empty for a
  /// root model.
  var inheritancePath: String { get }
  /// How rows of this model's subclasses are read from rows of its select list, by their
  /// `"_entity"` value (set by the container when it opens).
  var subclassReaders: [String: SubclassReader] { get }
  /// The model type, as an `ObjectIdentifier` of its metatype.
  var modelType: ObjectIdentifier { get }
}

/// What the container sets on an entity whose table holds subclasses.
protocol SubclassReading: EntityOperations {
  /// The columns of a row of the entity's select list, after the primary key.
  var readColumns: [String] { get }
  /// Sets ``EntityOperations/subclassReaders``, once, before the entity is shared.
  func setSubclassReaders(_ readers: [String: SubclassReader])
}

/// How a row of a subclass is read from a row selected for one of its superclasses: the
/// subclass's entity, and for each of its columns (the primary key first), the index of the
/// column in the superclass's select list, which has every column of the table
/// (``Entity/readColumns``).
struct SubclassReader: Sendable {
  let operations: any EntityOperations
  let columns: [Int32]
}

/// A row read through a map of column indexes (``SubclassReader``): made once per query and
/// subclass, it forwards each read to the query's current row. O(1) a read.
final class MappedRow: StoreRow {
  unowned(unsafe) let row: any StoreRow
  let columns: [Int32]

  init(_ row: any StoreRow, columns: [Int32]) {
    self.row = row
    self.columns = columns
  }

  func storage(at index: Int32) -> ColumnStorage { row.storage(at: columns[Int(index)]) }
  func int64(at index: Int32) -> Int64 { row.int64(at: columns[Int(index)]) }
  func double(at index: Int32) -> Double { row.double(at: columns[Int(index)]) }
  func text(at index: Int32) -> String { row.text(at: columns[Int(index)]) }
  func bytes(at index: Int32) -> UnsafeRawBufferPointer { row.bytes(at: columns[Int(index)]) }
}

extension EntityOperations {
  /// What history records as the subentity of this entity's rows: the subclass's path below
  /// its root (``ModelInheritance``), nil for a root model's rows.
  var historySubentity: String? { inheritancePath.isEmpty ? nil : inheritancePath }

  /// How the current row is read when it is a row of a subclass of this entity (its
  /// `"_entity"`, at `column`, names another class); nil for a row of this entity itself.
  /// O(subclasses) byte comparisons of the path, no allocation.
  ///
  /// - Throws: ``PersistenceError/Code/unknownModel`` for a row of a subclass the container
  ///   does not list, rather than a model of the wrong class.
  func subclassReader(_ row: any StoreRow, column: Int32) throws -> SubclassReader? {
    let path = row.bytes(at: column)
    if path.count == inheritancePath.utf8.count, path.elementsEqual(inheritancePath.utf8) {
      return nil
    }
    // Compared byte by byte with each subclass's path: no string made per row.
    for (known, reader) in subclassReaders where known.utf8.elementsEqual(path) {
      return reader
    }
    let name = String(decoding: path, as: UTF8.self)
    throw PersistenceError(
      code: .unknownModel,
      message:
        "The row \(row.int64(at: 0)) of the table \(self.name) is of the subclass \(name.split(separator: "/").last.map(String.init) ?? name), which this container does not list: pass it to ModelContainer(for:)."
    )
  }

  /// A new model made from the current row as its own class: this entity's, or a subclass's
  /// when the row is one (``subclassReader(_:column:)``), read through a ``MappedRow``.
  func makeModelOfRowClass(from row: any StoreRow, cache: LoadCache) throws -> (
    model: AnyObject, entity: any EntityOperations
  ) {
    if let column = entityColumn, let reader = try subclassReader(row, column: column) {
      let model = try reader.operations.makeModel(
        into: nil, from: MappedRow(row, columns: reader.columns), firstColumn: 1, cache: cache)
      return (model, reader.operations)
    }
    return (try makeModel(into: nil, from: row, firstColumn: 1, cache: cache), self)
  }

  /// Gives each of `model`'s links the context it is registered in (and the links it will
  /// make on first use). O(relationships).
  func attach(_ model: AnyObject, to context: ModelContext?) {
    linkOrigin?.set(model, context?.linkReference, nil)
    for relationship in relationships {
      relationship.existingLink(model)?.context = context
    }
  }

  /// Detaches a model at its context's reset: a relationship read afterwards (every one is a
  /// fault again) traps, saying why (`reference`, ``ContextReference/reset(of:)``).
  /// O(relationships).
  func detachAtReset(_ model: AnyObject, reference: ContextReference) {
    linkOrigin?.set(model, reference, nil)
    for relationship in relationships {
      (relationship.existingLink(model) as? RelationshipObservation)?.contextReference = reference
    }
  }

  /// Attaches a model just loaded from the row `key`: its links know the row (their faults
  /// need no lookup of the model), and its to-ones whose inverse stores the key become faults.
  /// O(relationships).
  func attachLoaded(_ model: AnyObject, key: Int64, to context: ModelContext) {
    attachLoaded(model, key: key, reference: context.linkReference)
  }

  /// Attaches a model loaded from the row `key` to `reference`: a context's, or an observer's
  /// snapshots' (see ``SnapshotSource``). O(relationships).
  func attachLoaded(_ model: AnyObject, key: Int64, reference: ContextReference) {
    linkOrigin?.set(model, reference, key)
    for relationship in relationships where !relationship.isMadeOnFirstUse {
      relationship.observation(model).attachLoaded(
        reference, ownerKey: key, inverseFault: relationship.isInverseFaultOnLoad)
    }
  }
}

/// The SQL a context runs for one entity, built once per entity rather than once per row.
final class EntityStatements: Sendable {
  let table: String
  let quotedColumns: [String]
  let insert: String
  let selectByKey: String
  let delete: String
  /// `SELECT "_pk" FROM table WHERE "unique" = ? [AND "other" = ? …]`, by the index of the
  /// constraint's first attribute.
  let lookup: [Int: String]
  /// `SELECT preserved columns FROM table WHERE "_pk" = ?`, or nil.
  let tombstone: String?
  /// `SELECT "_pk", columns FROM table WHERE "_pk"`: a model's row by key, completed with
  /// ` = ?` or ` IN (…)`.
  let selectRowsWhereKey: String

  /// `inheritancePath`: a subclass's value of the `"_entity"` column, which its inserts write
  /// (``ModelInheritance``).
  init(
    name: String, columns: [String], unique: [[Int]], preserved: [Int],
    inheritancePath: String? = nil, selectList: String? = nil
  ) {
    let table = quoted(name)
    let quotedColumns = columns.map(quoted)
    self.table = table
    self.quotedColumns = quotedColumns
    let list = quotedColumns.joined(separator: ", ")
    let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ", ")
    if let inheritancePath {
      let column = quoted(EntityDescription.entityColumn)
      insert =
        "INSERT INTO \(table) (\(list)\(columns.isEmpty ? "" : ", ")\(column)) VALUES (\(placeholders)\(columns.isEmpty ? "" : ", ")'\(inheritancePath)')"
    } else {
      insert = "INSERT INTO \(table) (\(list)) VALUES (\(placeholders))"
    }
    // With the row's class, in a table that holds subclasses: an upsert checks it.
    selectByKey =
      selectList == nil
      ? "SELECT \(list) FROM \(table) WHERE \"_pk\" = ?"
      : "SELECT \(list)\(columns.isEmpty ? "" : ", ")\"_entity\" FROM \(table) WHERE \"_pk\" = ?"
    delete = "DELETE FROM \(table) WHERE \"_pk\" = ?"
    var lookup: [Int: String] = [:]
    for constraint in unique {
      let conditions = constraint.map { quotedColumns[$0] + " = ?" }.joined(separator: " AND ")
      lookup[constraint[0]] = "SELECT \"_pk\" FROM \(table) WHERE \(conditions)"
    }
    self.lookup = lookup
    let preservedColumns = preserved.map { quotedColumns[$0] }.joined(separator: ", ")
    tombstone =
      preserved.isEmpty ? nil : "SELECT \(preservedColumns) FROM \(table) WHERE \"_pk\" = ?"
    // A subclass's rows only; every column of the table when it holds subclasses.
    let selected = selectList ?? "\"_pk\", \(list)"
    selectRowsWhereKey =
      inheritancePath.map {
        "SELECT \(selected) FROM \(table) WHERE \(ModelInheritance.condition(path: $0)) AND \"_pk\""
      } ?? "SELECT \(selected) FROM \(table) WHERE \"_pk\""
  }

  /// `UPDATE table SET changed = ? … WHERE "_pk" = ?`.
  func update(_ changed: [Int]) -> String {
    "UPDATE \(table) SET \(changed.map { quotedColumns[$0] + " = ?" }.joined(separator: ", ")) WHERE \"_pk\" = ?"
  }
}

/// The operations on one model type, and the layout of its snapshots: one slot per attribute,
/// each holding a value of the attribute's own type, in the tail of the model's registration.
final class Entity<Model: PersistentModel>: EntityOperations, SubclassReading, Sendable {
  let schema: ModelSchema<Model>
  let name: String
  let columnNames: [String]
  let statements: EntityStatements
  let uniqueIndexes: [Int]
  let uniqueConstraints: [[Int]]
  let preservedIndexes: [Int]
  /// Each attribute's access closure, in a non-generic array (see `ModelAttribute.access`).
  let accesses: [AttributeAccess]
  /// The attributes a load may leave undecoded (`.codable` ones): all that ``resolve(_:)``
  /// visits.
  private let resolvableIndexes: [Int]
  let snapshotLayout: SnapshotLayout
  /// What a ``ModelRow`` reads through.
  let rowLayout: EntityLayout
  /// How many columns the schema's loader and binder handle (the attributes); the keys of
  /// to-ones that follow them are loaded and bound through their declarations.
  let declaredCount: Int
  let relationships: [RelationshipInfo]
  let hasRelationships: Bool
  let selfReferences: [RelationshipInfo]
  let joins: [(relationship: RelationshipInfo, table: JoinTable)]
  let linkOrigin: LinkOriginAccess?
  let attachesModels: Bool
  /// The ``ModelValue`` types whose initializers ``checkValueCode(_:_:)`` accepted.
  let checkedValueTypes = Mutex<Set<ObjectIdentifier>>([])
  let entityColumn: Int32?
  let inheritancePath: String
  /// The columns a row of the schema's select list holds after the primary key: the model's
  /// own, then, when its table holds subclasses, `"_entity"` and every other column of the
  /// table (what a subclass's row is read from, ``SubclassReader``).
  let readColumns: [String]
  /// Set once by the container that makes this entity, before it hands it to any context;
  /// read-only afterwards.
  nonisolated(unsafe) var subclassReaders: [String: SubclassReader] = [:]

  func setSubclassReaders(_ readers: [String: SubclassReader]) { subclassReaders = readers }

  var modelType: ObjectIdentifier { ObjectIdentifier(Model.self) }

  /// The entity of `Model`; `table` is the table it is kept in, when it holds subclasses
  /// (``EntityDescription/tables(_:)``): its rows are then selected with every column.
  init(table: EntityDescription? = nil) {
    var schema = Model.modelSchema
    let own = schema.storedAttributes.map(\.name)
    if let table, table.columns.contains(where: { $0.name == EntityDescription.entityColumn }) {
      let extras = table.columns.map(\.name).filter {
        $0 != EntityDescription.entityColumn && !own.contains($0)
      }
      readColumns = own + [EntityDescription.entityColumn] + extras
      schema.selectList = (["_pk"] + readColumns).map(quoted).joined(separator: ", ")
      entityColumn = Int32(1 + own.count)
    } else {
      readColumns = own
      entityColumn = nil
    }
    inheritancePath = schema.inheritance?.path ?? ""
    self.schema = schema
    name = schema.name
    let stored = schema.storedAttributes
    declaredCount = schema.attributes.count
    relationships = schema.relationships
    hasRelationships = !schema.relationships.isEmpty
    let table = schema.name
    selfReferences = schema.relationships.filter {
      $0.kind == .toOne && $0.storesKey && $0.targetTable() == table
    }
    joins = schema.relationships.compactMap { relationship in
      relationship.joinTable().map { (relationship, $0) }
    }
    linkOrigin = LinkOriginAccess.of(Model.self)
    attachesModels = hasRelationships || linkOrigin != nil
    columnNames = stored.map(\.name)
    let uniqueConstraints = stored.indices.filter { stored[$0].isUnique }.map { first in
      [first]
        + stored[first].uniqueCompanions.compactMap { name in
          stored.firstIndex { $0.name == name }
        }
    }
    self.uniqueConstraints = uniqueConstraints
    uniqueIndexes = Array(Set(uniqueConstraints.joined())).sorted()
    // A tombstone keeps the `.preserveValueOnDeletion` attributes and, when it keeps any, the
    // keys of the row's to-ones (the same SELECT, one more column each): what names the
    // parent of a deleted child. A model that preserves nothing pays no SELECT a delete.
    let preserves = stored.contains { $0.preservesValueOnDeletion }
    preservedIndexes = stored.indices.filter {
      stored[$0].preservesValueOnDeletion || (preserves && stored[$0].relationship != nil)
    }
    statements = EntityStatements(
      name: name, columns: columnNames, unique: uniqueConstraints, preserved: preservedIndexes,
      inheritancePath: schema.inheritance?.path,
      selectList: entityColumn == nil ? nil : schema.selectList)
    accesses = stored.map(\.access)
    resolvableIndexes = stored.indices.filter { stored[$0].isCodable }
    snapshotLayout = SnapshotLayout(
      stored.map {
        SnapshotLayout.Slot(
          size: $0.slotSize, alignment: $0.slotAlignment, type: $0.slotType,
          destroy: $0.destroySlot)
      })
    rowLayout = EntityLayout(
      layout: snapshotLayout, keyPaths: stored.map(\.keyPath),
      coders: stored.map(\.coder), modelName: "\(Model.self)")
  }

  @inline(__always) private func cast(_ model: AnyObject) -> Model {
    unsafeDowncast(model, to: Model.self)
  }

  func validate(_ model: AnyObject) throws { try cast(model).validateForSave() }

  func resolve(_ model: AnyObject) throws {
    for index in resolvableIndexes {
      do {
        _ = try accesses[index](model, .resolve)
      } catch var failure as PersistenceError where failure.attribute == nil {
        failure.attribute = columnNames[index]
        throw failure
      }
    }
  }

  func makeModel(
    into registration: ModelContext.Registration?, from statement: any StoreRow,
    firstColumn: Int32, cache: LoadCache
  ) throws -> AnyObject {
    guard let loader = schema.loader else {
      let model = Model.makeForLoading()
      try load(
        model, isNew: true, into: registration, from: statement, firstColumn: firstColumn,
        cache: cache)
      return model
    }
    let snapshot = registration?.snapshotStorage
    var count = 0
    let model: Model
    do {
      model = try loader(statement, cache, firstColumn, snapshot, rowLayout, &count)
    } catch {
      if let snapshot { snapshotLayout.destroy(snapshot, initialized: count) }
      if var failure = error as? PersistenceError, failure.attribute == nil,
        count < columnNames.count
      {
        failure.attribute = columnNames[count]
        throw failure
      }
      throw error
    }
    precondition(
      count == declaredCount,
      "The row loader of \(Model.self) read \(count) of its \(declaredCount) attributes.")
    if declaredCount < accesses.count {
      try loadKeys(
        model, from: statement, firstColumn: firstColumn, cache: cache, snapshot: snapshot,
        isInitialized: false)
    }
    registration?.hasSnapshot = true
    return model
  }

  func recordSnapshot(_ registration: ModelContext.Registration) throws {
    let model = registration.model
    if let binder = schema.binder {
      // The declaration's binder, copying each value into its slot (no closure per attribute).
      let existing = registration.snapshot
      let snapshot = existing ?? registration.snapshotStorage
      var count = 0
      do {
        try binder(cast(model), nil, snapshot, existing != nil, rowLayout, &count)
      } catch {
        if existing == nil { snapshotLayout.destroy(snapshot, initialized: count) }
        throw error
      }
      precondition(
        count == declaredCount,
        "The row binder of \(Model.self) bound \(count) of its \(declaredCount) attributes.")
      for index in declaredCount..<accesses.count {
        _ = try accesses[index](
          model, .record(snapshotLayout.slot(index, of: snapshot, isInitialized: existing != nil)))
      }
      registration.hasSnapshot = true
      return
    }
    if let snapshot = registration.snapshot {
      for index in accesses.indices {
        _ = try accesses[index](
          model, .record(snapshotLayout.slot(index, of: snapshot, isInitialized: true)))
      }
      return
    }
    try makeSnapshot(in: registration) { index, slot in
      _ = try accesses[index](model, .record(slot))
    }
  }

  /// Fills the registration's empty snapshot, `fill` initializing its slots one by one, in
  /// order; if it throws, the slots filled so far are deinitialized and the snapshot stays
  /// empty.
  private func makeSnapshot(
    in registration: ModelContext.Registration, _ fill: (Int, SnapshotSlot) throws -> Void
  ) throws {
    let snapshot = registration.snapshotStorage
    var done = 0
    do {
      for index in accesses.indices {
        try fill(index, snapshotLayout.slot(index, of: snapshot, isInitialized: false))
        done += 1
      }
    } catch {
      snapshotLayout.destroy(snapshot, initialized: done)
      throw error
    }
    registration.hasSnapshot = true
  }

  func changedIndexes(_ registration: ModelContext.Registration) -> [Int] {
    guard let snapshot = registration.snapshot else { return Array(accesses.indices) }
    let model = registration.model
    var changed: [Int] = []
    for index in accesses.indices {
      // A value that cannot be compared (its encoding throws) counts as changed: the save
      // then meets the same error and reports it.
      let slot = snapshotLayout.slot(index, of: snapshot, isInitialized: true)
      guard let answer = try? accesses[index](model, .matches(slot)) else {
        changed.append(index)
        continue
      }
      if !answer.isMatch(columnNames[index]) { changed.append(index) }
    }
    return changed
  }

  func restore(_ registration: ModelContext.Registration) {
    guard let snapshot = registration.snapshot else { return }
    for index in accesses.indices {
      let slot = snapshotLayout.slot(index, of: snapshot, isInitialized: true)
      // Only values that changed are written back: a write goes through the observed property
      // (observers are told, and it costs about 2k instructions), and a server resets its
      // context, so rolls back every model it read, after every request.
      if (try? accesses[index](registration.model, .matches(slot)))?.isMatch(columnNames[index])
        == true
      {
        continue
      }
      _ = try? accesses[index](registration.model, .restore(slot))
    }
  }

  func destroySnapshot(_ snapshot: UnsafeMutableRawPointer) {
    snapshotLayout.destroy(snapshot, initialized: accesses.count)
  }

  func bind(_ model: AnyObject, attribute: Int, to statement: any StoreStatement, at index: Int32)
    throws
  {
    _ = try accesses[attribute](model, .bind(BorrowedStatement(statement), index))
  }

  func bindAll(_ model: AnyObject, to statement: any StoreStatement) throws {
    guard let binder = schema.binder else {
      for index in accesses.indices {
        try bind(model, attribute: index, to: statement, at: Int32(index + 1))
      }
      return
    }
    var count = 0
    do {
      try binder(cast(model), statement, nil, false, rowLayout, &count)
    } catch var failure as PersistenceError where failure.attribute == nil {
      if count < columnNames.count { failure.attribute = columnNames[count] }
      throw failure
    }
    precondition(
      count == declaredCount,
      "The row binder of \(Model.self) bound \(count) of its \(declaredCount) attributes.")
    for index in declaredCount..<accesses.count {
      try bind(model, attribute: index, to: statement, at: Int32(index + 1))
    }
  }

  /// Loads the keys of the to-ones that store them, after the loader made `model` from the
  /// attributes (into the snapshot too, when given).
  private func loadKeys(
    _ model: Model, from statement: any StoreRow, firstColumn: Int32, cache: LoadCache,
    snapshot: UnsafeMutableRawPointer?, isInitialized: Bool
  ) throws {
    let row = BorrowedRow(statement)
    let borrowedCache = BorrowedCache(cache)
    for index in declaredCount..<accesses.count {
      let slot = snapshot.map {
        snapshotLayout.slot(index, of: $0, isInitialized: isInitialized)
      }
      _ = try accesses[index](
        model, .load(row, firstColumn + Int32(index), borrowedCache, slot, true))
    }
  }

  func value(_ model: AnyObject, attribute: Int) throws -> SQLValue {
    try accesses[attribute](model, .value).storedValue(columnNames[attribute])
  }

  func assign(_ model: AnyObject, attribute: Int, value: SQLValue) throws {
    _ = try accesses[attribute](model, .assign(value))
  }

  /// Loads every attribute from consecutive columns starting at `firstColumn` into `model`,
  /// and into the registration's snapshot when one is given (made here if it has none).
  /// `isNew` tells that nobody can observe the model yet (made for this row): attributes with
  /// backing storage then load through it.
  ///
  /// Cost: O(attributes), no allocation but the snapshot's and the values' own.
  func load(
    _ object: AnyObject, isNew: Bool, into registration: ModelContext.Registration?,
    from statement: any StoreRow, firstColumn: Int32, cache: LoadCache
  ) throws {
    // The column being read, to name it when its stored value cannot be read.
    var current = 0
    // The caller holds the row and the cache for the whole call.
    let row = BorrowedRow(statement)
    let borrowedCache = BorrowedCache(cache)
    do {
      guard let registration else {
        for index in accesses.indices {
          current = index
          _ = try accesses[index](
            object, .load(row, firstColumn + Int32(index), borrowedCache, nil, isNew))
        }
        return
      }
      if let snapshot = registration.snapshot {
        for index in accesses.indices {
          current = index
          let slot = snapshotLayout.slot(index, of: snapshot, isInitialized: true)
          _ = try accesses[index](
            object, .load(row, firstColumn + Int32(index), borrowedCache, slot, isNew))
        }
        return
      }
      // The common case, a row loaded for the first time: written out rather than through
      // `makeSnapshot`'s callback, a closure call per attribute and row.
      let snapshot = registration.snapshotStorage
      do {
        for index in accesses.indices {
          current = index
          let slot = snapshotLayout.slot(index, of: snapshot, isInitialized: false)
          _ = try accesses[index](
            object, .load(row, firstColumn + Int32(index), borrowedCache, slot, isNew))
        }
      } catch {
        snapshotLayout.destroy(snapshot, initialized: current)
        throw error
      }
      registration.hasSnapshot = true
    } catch var failure as PersistenceError where failure.attribute == nil {
      failure.attribute = columnNames[current]
      throw failure
    }
  }
}
