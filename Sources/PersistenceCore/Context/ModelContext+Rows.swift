import Foundation

// Rows into models: primary keys, predicates finished in Swift, each row materialized and
// registered.

extension ModelContext {
  // MARK: Internals

  func fetchPrimaryKeys<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>
  ) throws -> [Int64] {
    if let finished = try finishedInSwift(descriptor) { return finished.map(\.key) }
    let entity = try entity(for: Model.self)
    let database = try connection()
    let query = try Query(descriptor, schema: entity.schema, select: "\"_pk\"", database: database)
    let statement = try database.cachedStatement(query.sql)
    statement.returnsTableColumns()
    statement.bindValues(query.bindings)
    defer { statement.reset() }  // ends the read transaction, even after an error
    var keys: [Int64] = []
    while try statement.step() { keys.append(statement.int64(at: 0)) }
    return keys
  }

  /// The models matching `descriptor` with their primary keys, when the engine cannot run all
  /// of its query (`Query.finishesInSwift`, see ``StoreFunctions``): every candidate row the
  /// SQL selects, loaded and registered as a fetch loads them, filtered with the predicate in
  /// Swift (a model with unsaved changes is matched by its current values), sorted in Swift
  /// (by `sectionKey` first when given, `nil` first), then the offset and limit applied. Nil
  /// when the SQL does it all.
  ///
  /// Cost: O(c) rows loaded for c candidates, plus one query per relationship the predicate
  /// reads (for all candidates), O(m log m) to sort the m matches.
  ///
  /// `query` is the descriptor's query when the caller has made it (saving a translation).
  func finishedInSwift<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, sectionKey: ((Model) -> String?)? = nil,
    query made: Query? = nil
  ) throws -> [(model: Model, key: Int64)]? {
    let database = try connection()
    // An engine that runs every function needs Swift to finish only a predicate with a
    // function SQL has not (no second translation otherwise).
    guard made != nil || !database.evaluatesSwiftFunctions || descriptor.callsSwiftFunctions()
    else { return nil }
    let entity = try entity(for: Model.self)
    let query = try made ?? Query(descriptor, schema: entity.schema, database: database)
    guard query.finishesInSwift else { return nil }
    var candidates: [(model: Model, key: Int64)] = []
    let deadline = WorkDeadline.current
    try forEachRow(descriptor, query: query) { model, row in
      candidates.append((model, row.int64(at: 0)))
    }
    // The relationships the predicate reads, loaded for every candidate in one query each:
    // no query per candidate, and a store that cannot be read fails here, with an error.
    let followed = try PredicateTranslator.followedTables(descriptor, schema: entity.schema)
    if !followed.isEmpty {
      try prefetch(
        entity.schema.relationships.filter { followed.contains($0.targetTable()) }.map(\.keyPath),
        of: candidates.map(\.model), keys: candidates.map(\.key), entity: entity)
    }
    // What Swift's evaluation throws (a force unwrap of nil, say) is no match, as SQL's NULL
    // is: the store's own failures were thrown above.
    // The work in force stops between rows when its deadline says so (``WorkDeadline``).
    var matches: [(model: Model, key: Int64)] = []
    for (index, candidate) in candidates.enumerated() {
      if index & 255 == 0 { try deadline?.check() }
      if (try? descriptor.matches(candidate.model)) == true { matches.append(candidate) }
    }
    matches.sort { a, b in
      if let sectionKey {
        let x = sectionKey(a.model)
        let y = sectionKey(b.model)
        if x != y {
          guard let x else { return true }
          guard let y else { return false }
          return x < y
        }
      }
      return descriptor.precedes(a.model, a.key, b.model, b.key)
    }
    let offset = max(descriptor.fetchOffset ?? 0, 0)
    let limit = descriptor.fetchLimit.flatMap { $0 >= 0 ? $0 : nil } ?? Int.max
    return Array(matches.dropFirst(offset).prefix(limit))
  }

  /// Loads every row of the descriptor's query (`query` when the caller made it, with no
  /// section column) and calls `body` with each model not deleted.
  func forEachRow<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, sectionColumn: String? = nil, query made: Query? = nil,
    prepared: (statement: any StoreStatement, bindings: [SQLValue])? = nil,
    partial: PartialLoad? = nil, _ body: (Model, any StoreRow) -> Void
  ) throws {
    let entity = try entity(for: Model.self)
    if let prepared {
      try forEachRow(of: prepared.statement, bindings: prepared.bindings, entity: entity, body)
      return
    }
    let database = try connection()
    let query =
      try made
      ?? Query(descriptor, schema: entity.schema, sectionColumn: sectionColumn, database: database)
    try forEachRow(
      of: try database.cachedStatement(query.sql), bindings: query.bindings, entity: entity,
      partial: partial, body)
  }

  /// Runs `statement` with `bindings` and calls `body` with each row's registered model.
  func forEachRow<Model: PersistentModel>(
    of statement: any StoreStatement, bindings: [SQLValue], entity: Entity<Model>,
    partial: PartialLoad? = nil, _ body: (Model, any StoreRow) -> Void
  ) throws {
    statement.returnsTableColumns()
    statement.bindValues(bindings)
    defer { statement.reset() }  // ends the read transaction, even after an error
    let deleted = pendingRowDeletes[entity.name]
    let cache = LoadCache()
    let table = rowTable(entity.name)
    // Into an empty table every row is new (a query returns each row once).
    let allNew = table.isEmpty
    // Erased and read once. (With `materializeRow` inlined here, the optimizer saw the
    // concrete entity through the existential and made a new existential per row, looking
    // `Entity<Model>`'s metadata up each time: about 330 instructions a row, by callgrind.)
    let operations: any EntityOperations = entity
    let relates = entity.attachesModels
    while try statement.step() {
      if let deleted, deleted.contains(statement.int64(at: 0)) { continue }
      let registration = try materializeRow(
        statement, entity: operations, cache: cache, table: table, allNew: allNew,
        relates: relates, partial: partial)
      if registration.isDeleted { continue }
      body(unsafeDowncast(registration.model, to: Model.self), statement)
    }
  }

  /// `objects`, every one a `Model`, as models, in O(1): an array of class references has one
  /// layout whatever their class (the standard library reuses a buffer so when it casts an
  /// array of objects). Checked in debug builds. The runtime's checked cast (`as!`) cost about
  /// 1,200 instructions a model, and mapping the array in this generic function about 1,500.
  func models<Model: PersistentModel>(_ objects: [AnyObject], as _: Model.Type) -> [Model] {
    assert(objects.allSatisfy { $0 is Model }, "not all objects are \(Model.self)")
    return unsafeBitCast(objects, to: [Model].self)
  }

  /// Turns the current row (primary key, then every attribute) into the registered model.
  func materialize<Model: PersistentModel>(
    _ statement: any StoreRow, entity: Entity<Model>, cache: LoadCache
  ) throws -> Model {
    let registration = try materializeRow(
      statement, entity: entity, cache: cache, table: rowTable(entity.name))
    return unsafeDowncast(registration.model, to: Model.self)
  }

  /// The registration of the current row's model (primary key, then every attribute): the
  /// registered one, refreshed unless it has changes, or a new one. Not generic, so that no
  /// generic metadata is looked up per row. `allNew` tells that the table was empty when the
  /// query started: rows are then appended without a lookup (see `RowTable`).
  ///
  /// With `partial` (a fetch with `propertiesToFetch`, whose row holds the empty values of
  /// the attributes it left), a registered model is returned as it is, and a new one is
  /// marked to load those attributes on first use.
  ///
  /// Cost: one lookup by key (none when `allNew`); a new row adds one table entry and two
  /// allocations (the model and its registration, which holds the snapshot). Never inlined:
  /// see `forEachRow(of:bindings:entity:_:)`.
  ///
  /// In a table that holds subclasses of the model (``ModelInheritance``), a row of a subclass
  /// is made as that subclass, read through a ``MappedRow`` (one allocation more a row of a
  /// subclass, none for the model's own rows).
  @inline(never)
  func materializeRow(
    _ statement: any StoreRow, entity: any EntityOperations, cache: LoadCache, table: RowTable,
    allNew: Bool = false, relates: Bool? = nil, partial: PartialLoad? = nil,
    readsClass: Bool = true
  ) throws -> Registration {
    if readsClass, let column = entity.entityColumn,
      let reader = try entity.subclassReader(statement, column: column)
    {
      return try materializeRow(
        MappedRow(statement, columns: reader.columns), entity: reader.operations, cache: cache,
        table: table, allNew: allNew, partial: partial, readsClass: false)
    }
    let primaryKey = statement.int64(at: 0)
    if !allNew, let registration = table[primaryKey] {
      if partial == nil, !registration.isDeleted, entity.changedIndexes(registration).isEmpty {
        do {
          try entity.load(
            registration.model, isNew: false, into: registration, from: statement,
            firstColumn: 1, cache: cache)
        } catch let error as PersistenceError {
          throw error.naming(row: describeRow(statement, entity: entity))
        }
        if !mergedModels.isEmpty { refreshMerged(into: registration) }
      }
      registration.isFresh = false
      return registration
    }
    let registration = Registration.make(entity: entity)
    do {
      registration.model = try entity.makeModel(
        into: registration, from: statement, firstColumn: 1, cache: cache)
    } catch let error as PersistenceError {
      throw error.naming(row: describeRow(statement, entity: entity))
    }
    registration.primaryKey = primaryKey
    registration.isFresh = true
    if relates ?? entity.attachesModels {
      entity.attachLoaded(registration.model, key: primaryKey, to: self)
    }
    if let partial {
      entity.linkOrigin?.setPartial(registration.model, partial)
      partial.keys.append(primaryKey)
    }
    index(registration)
    if allNew {
      table.appendUnindexed(registration)
    } else {
      table[primaryKey] = registration
    }
    return registration
  }

  func describeRow(_ statement: any StoreRow, entity: any EntityOperations) -> String {
    describeStoredRow(statement, entity: entity)
  }

  func autosaveIfNeeded() throws {
    // A merged model's changes are its holder's before the fetch refreshes it (a changed model
    // is not refreshed).
    if !mergedModels.isEmpty { moveMergedChanges() }
    if autosaveEnabled && hasChanges { try save() }
  }
}
