import Foundation

extension ModelContext {
  /// Fetches the models matching `descriptor`, in its order.
  ///
  /// The predicate and sort descriptors run in the store's engine, as SQL; nothing is filtered in memory. Rows
  /// already registered in this context return their existing instance (refreshed from the
  /// store unless it has unsaved changes). Models inserted but not saved are not included;
  /// models marked for deletion are left out.
  ///
  /// Cost: the SQL query (an index serves equality, ranges and sorts on indexed attributes),
  /// then O(rows × attributes) to load. A fetch whose predicate shape, sorts and window this
  /// context ran before walks the predicate for its values and binds them to the statement
  /// it kept: no SQL text is built or looked up.
  ///
  /// - Throws: ``PersistenceError`` with ``PersistenceError/Code/unsupportedPredicate`` for a
  ///   predicate or sort that has no SQL translation.
  public func fetch<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>) throws -> [Model]
  {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    let database = try connection()
    // Collected as objects: appending to an array of the generic `Model` looked up the array's
    // type metadata on every append (about 400 instructions a row, measured with callgrind).
    var results: [AnyObject] = []
    // The rows' keys, when relationships are to be prefetched for them.
    let prefetches = !descriptor.prefetching.keyPaths.isEmpty
    var keys: [Int64] = []
    if let kept = try keptRows(descriptor, entity: entity, database: database) {
      try forEachRow(descriptor, prepared: kept) { model, row in
        results.append(model)
        if prefetches { keys.append(row.int64(at: 0)) }
      }
      if prefetches { try prefetch(descriptor, of: results, keys: keys, entity: entity) }
      return models(results, as: Model.self)
    }
    // One translation serves both the check for Swift's functions and the rows.
    let query = try Query(descriptor, schema: entity.schema, database: database)
    if let finished = try finishedInSwift(descriptor, query: query) {
      if prefetches {
        try prefetch(
          descriptor, of: finished.map(\.model), keys: finished.map(\.key), entity: entity)
      }
      return finished.map(\.model)
    }
    try forEachRow(descriptor, query: query) { model, row in
      results.append(model)
      if prefetches { keys.append(row.int64(at: 0)) }
    }
    if prefetches { try prefetch(descriptor, of: results, keys: keys, entity: entity) }
    return models(results, as: Model.self)
  }

  /// Fetches the models matching `descriptor` grouped into sections by the value at
  /// `sectionBy`: sections in ascending key order (code-point order), each holding its models
  /// in the descriptor's order. One query ordered by the key first, grouped in one pass.
  ///
  /// Sections follow the stored values, which the store sorted by: a model with an unsaved change
  /// to its key stays in the section of its stored key (save first, or enable autosave, to
  /// group by the new one).
  ///
  /// Cost: the query, then O(rows) with one comparison of the key's stored bytes per row.
  public func fetch<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, sectionBy keyPath: KeyPath<Model, String> & Sendable
  ) throws -> [ResultsSection<String, Model>] {
    try sectioned(descriptor, keyPath) { $0.text(at: $1) }
  }

  /// Fetches sections keyed by an optional string; the `nil` section comes first. The key may
  /// be read through to-one relationships (`\Room.hotel?.name`, see
  /// <doc:DeclaringRelationships>): a model whose relationship points to no row is in the `nil`
  /// section.
  ///
  /// Cost: as the other `sectionBy`, plus, for a key through relationships, one lookup by key
  /// per relationship and row in SQL.
  public func fetch<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, sectionBy keyPath: KeyPath<Model, String?> & Sendable
  ) throws -> [ResultsSection<String?, Model>] {
    try sectioned(descriptor, keyPath) { $0.isNull(at: $1) ? nil : $0.text(at: $1) }
  }

  /// Groups the rows by the stored bytes of the key's column (stored text is NFC, so equal
  /// bytes are equal keys), reading a key only where a section starts.
  private func sectioned<Model: PersistentModel, Key: Hashable & Sendable>(
    _ descriptor: FetchDescriptor<Model>, _ keyPath: KeyPath<Model, Key>,
    key makeKey: (any StoreRow, Int32) -> Key
  ) throws -> [ResultsSection<Key, Model>] {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    if let finished = try finishedInSwift(
      descriptor, sectionKey: { $0[keyPath: keyPath] as Any as? String })
    {
      var sections: [ResultsSection<Key, Model>] = []
      var current: (key: Key, models: [Model])?
      for (model, _) in finished {
        let key = model[keyPath: keyPath]
        if let open = current, open.key == key {
          current?.models.append(model)
        } else {
          if let open = current {
            sections.append(ResultsSection(id: open.key, elements: open.models))
          }
          current = (key, [model])
        }
      }
      if let open = current { sections.append(ResultsSection(id: open.key, elements: open.models)) }
      return sections
    }
    let (column, query) = try sectionQuery(descriptor, keyPath, entity: entity)
    // Per row only plain state (no generic tuple or optional, whose every copy goes through
    // the runtime's value witnesses in this unspecialized function): the models in order, and
    // where each section starts with its key, read once per section.
    var models: [AnyObject] = []  // objects, as in `fetch(_:)`
    var starts: [Int] = []
    var keys: [Key] = []
    var boundary = SectionBoundary()
    try forEachRow(descriptor, query: query) { model, statement in
      if boundary.startsSection(statement, column: column) {
        starts.append(models.count)
        keys.append(makeKey(statement, column))
      }
      models.append(model)
    }
    var sections: [ResultsSection<Key, Model>] = []
    sections.reserveCapacity(keys.count)
    // Every section a slice of one array: no allocation per section.
    let all = self.models(models, as: Model.self)
    // By index: an enumerated sequence's iterator is not specialized here (1,600 instructions
    // a section).
    for offset in starts.indices {
      let end = offset + 1 < starts.count ? starts[offset + 1] : all.count
      sections.append(ResultsSection(id: keys[offset], models: all[starts[offset]..<end]))
    }
    return sections
  }

  /// The query of a fetch sectioned by `keyPath`, ordered by the key first, and the column
  /// that holds the key: the attribute's own, or, for a key through to-ones
  /// (`\Room.hotel?.name`), the value selected after the row's columns.
  func sectionQuery<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, _ keyPath: AnyKeyPath, entity: Entity<Model>
  ) throws -> (column: Int32, query: Query) {
    let database = try connection()
    if let attribute = entity.schema.attribute(for: keyPath), !attribute.isCodable,
      let index = entity.columnNames.firstIndex(of: attribute.name)
    {
      let query = try Query(
        descriptor, schema: entity.schema, sectionColumn: attribute.name, database: database)
      return (Int32(index + 1), query)  // after the primary key
    }
    if entity.schema.attribute(for: keyPath) == nil, entity.hasRelationships,
      let related = RelatedKeyPath.resolve(keyPath, in: PredicateTable(entity.schema))
    {
      let expression = try related.sql(schema: entity.schema).sql
      let query = try Query(
        // Named, so that a sort by a column of the same name as the related attribute's is not
        // ambiguous to PostgreSQL.
        descriptor, schema: entity.schema,
        select: entity.schema.selectList + ", " + expression + " AS \"_section\"",
        sectionExpression: expression, database: database)
      return (Int32(entity.columnNames.count + 1), query)
    }
    throw PersistenceError(
      code: .unsupportedPredicate,
      message:
        "sectionBy needs a stored String attribute of \(Model.self), or one reached through to-one relationships; \(entity.schema.describe(keyPath)) is not one."
    )
  }

  /// The number of models matching `descriptor` (its limit and offset applied), counted in SQL.
  ///
  /// Cost: the predicate's translation (O(size of the predicate)), then one SQL query that an
  /// index on a compared attribute serves (O(log n + matches) in the index; a scan otherwise).
  /// A count of one predicate whose shape was translated before (the same `#Predicate` with
  /// other captured values) walks the predicate's tree for its values and binds them to the
  /// statement the context kept for that shape: no SQL text is built or hashed.
  public func fetchCount<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>) throws -> Int
  {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    let database = try connection()
    // A window (limit, offset) applies to the rows before they are counted: a subquery then;
    // otherwise the count itself is selected, and no second SQL text is built.
    let windowed = descriptor.fetchLimit != nil || descriptor.fetchOffset != nil
    if !windowed, !descriptor.hasConditions, let parts = descriptor.predicateParts,
      let (template, values) = keptCondition(parts, database),
      // The SQL the general path builds for this count (`Query`), so that both share one
      // prepared statement. The schema is read only then: copying the generic struct cost
      // about 700 instructions.
      let statement = try keptStatement(
        KeptQueryKey(template: ObjectIdentifier(template), purpose: .count, order: []),
        template: template, keyPaths: [],
        make: {
          try database.cachedStatement(
            "SELECT count(*) FROM \(entity.schema.quotedName) WHERE \(template.sql)")
        })
    {
      statement.bindValues(values)
      defer { statement.reset() }  // ends the read transaction
      _ = try statement.step()
      return Int(statement.int64(at: 0))
    }
    var query = try Query(
      descriptor, schema: entity.schema, select: windowed ? "1" : "count(*)", database: database,
      ordered: false)
    if query.finishesInSwift, let finished = try finishedInSwift(descriptor) {
      return finished.count
    }
    if windowed { query.sql = "SELECT count(*) FROM (\(query.sql)) AS counted" }
    let statement = try database.cachedStatement(query.sql)
    statement.bindValues(query.bindings)
    defer { statement.reset() }  // ends the read transaction
    _ = try statement.step()
    return Int(statement.int64(at: 0))
  }

  /// The statement kept for `key`, or the one `make` makes, kept now. O(1) once kept.
  private func keptStatement(
    _ key: KeptQueryKey, template: PredicateTemplate, keyPaths: [AnyKeyPath],
    make: () throws -> (any StoreStatement)?
  ) rethrows -> (any StoreStatement)? {
    if let kept = keptQueries[key] { return kept.statement }
    guard let statement = try make() else { return nil }
    if keptQueries.count >= Self.keptQueryCapacity {
      keptQueries.removeAll(keepingCapacity: true)
    }
    keptQueries[key] = KeptQuery(template: template, keyPaths: keyPaths, statement: statement)
    return statement
  }

  /// The kept template of a predicate's shape and its values
  /// (``PredicateTranslator/kept(_:narrowing:)``), when its condition runs as it is on
  /// `database` (not narrowed to rows checked in Swift). Not generic: O(size of the predicate).
  private func keptCondition(_ parts: PredicateParts, _ database: any StoreConnection)
    -> (template: PredicateTemplate, values: [SQLValue])?
  {
    guard
      let kept = PredicateTranslator.kept(parts, narrowing: !database.evaluatesSwiftFunctions),
      !kept.template.isNarrowed
    else { return nil }
    return kept
  }

  /// The statement and bindings of `descriptor`'s rows when a query of its predicate's shape,
  /// order and window was run before by this context: its predicate is walked for its values,
  /// and no SQL text is built or looked up. Nil for a descriptor the general path must run:
  /// no predicate, extra conditions, a sort with a string comparator or a localized one (their
  /// SQL depends on the engine's collations), a predicate not translated before or narrowed,
  /// or values `NULL` where the kept translation's were not.
  ///
  /// Cost: O(size of the predicate + sorts); a miss on a kept shape builds the query once.
  func keptRows<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, entity: Entity<Model>, database: any StoreConnection
  ) throws -> (statement: any StoreStatement, bindings: [SQLValue])? {
    guard !descriptor.hasConditions, let parts = descriptor.predicateParts else { return nil }
    var order: [Int] = []
    var keyPaths: [AnyKeyPath] = []
    for sort in descriptor.sortBy {
      guard let keyPath = sort.keyPath, sort.stringComparator == nil,
        descriptor.localizedStandardKeyPath(sort) == nil
      else { return nil }
      order.append(Int(bitPattern: ObjectIdentifier(keyPath)))
      order.append(sort.order == .forward ? 0 : 1)
      keyPaths.append(keyPath)
    }
    guard let (template, values) = keptCondition(parts, database) else { return nil }
    let window = Query.window(descriptor)
    let key = KeptQueryKey(
      template: ObjectIdentifier(template), purpose: .fetch(windowed: !window.isEmpty),
      order: order)
    let kept = try keptStatement(key, template: template, keyPaths: keyPaths) {
      // Built once, around the template's condition, as the general path builds it.
      let query = try Query(
        descriptor, schema: entity.schema, condition: template.condition(values: values),
        database: database)
      guard !query.finishesInSwift else { return nil }
      return try database.cachedStatement(query.sql)
    }
    guard let kept else { return nil }
    return (kept, window.isEmpty ? values : values + window)
  }

  /// The values of two attributes of the models matching `descriptor`, in its order, read
  /// straight from their columns: no model is made or registered (SwiftData's
  /// `propertiesToFetch`, for when only a few values are needed, such as coordinates).
  ///
  /// It reads the store: unsaved changes are not included (with ``autosaveEnabled`` they are
  /// saved first, as for any fetch).
  ///
  /// Cost: the SQL query, selecting two columns, then O(rows).
  ///
  /// - Throws: ``PersistenceError`` with ``PersistenceError/Code/unsupportedPredicate`` for a
  ///   key path that is not a stored attribute (`.codable` ones do not compile here: they are
  ///   not ``PersistableValue``s), or for a predicate or sort without a SQL translation.
  public func fetchValues<
    Model: PersistentModel, First: PersistableValue, Second: PersistableValue
  >(
    _ descriptor: FetchDescriptor<Model>, _ first: KeyPath<Model, First> & Sendable,
    _ second: KeyPath<Model, Second> & Sendable
  ) throws -> [(First, Second)] {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    let columns = try [first as AnyKeyPath, second].map { keyPath in
      guard let attribute = entity.schema.attribute(for: keyPath), !attribute.isCodable else {
        throw PersistenceError(
          code: .unsupportedPredicate,
          message:
            "fetchValues needs stored attributes of \(Model.self) of a native type; \(Model.modelSchema.describe(keyPath)) is not one."
        )
      }
      return quoted(attribute.name)
    }
    if let finished = try finishedInSwift(descriptor) {
      return finished.map { ($0.model[keyPath: first], $0.model[keyPath: second]) }
    }
    let database = try connection()
    let query = try Query(
      descriptor, schema: entity.schema, select: columns.joined(separator: ", "),
      database: database)
    let statement = try database.cachedStatement(query.sql)
    statement.returnsTableColumns()
    statement.bindValues(query.bindings)
    defer { statement.reset() }  // ends the read transaction, even after an error
    var values: [(First, Second)] = []
    while try statement.step() {
      values.append(
        (try First.read(from: statement, at: 0), try Second.read(from: statement, at: 1)))
    }
    return values
  }

  /// The engine's plan for the fetch `descriptor` makes (``StoreConnection/queryPlan(_:bindings:)``;
  /// SQLite's `EXPLAIN QUERY PLAN`), one line per step, such as
  /// `SEARCH trips USING INDEX trips_longitude (longitude>? AND longitude<?)`: to check that a
  /// query uses an index. Nothing is fetched.
  public func explainQueryPlan<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>)
    throws -> [String]
  {
    let entity = try entity(for: Model.self)
    let database = try connection()
    let query = try Query(descriptor, schema: entity.schema, database: database)
    return try database.queryPlan(query.sql, bindings: query.bindings)
  }

  /// How many models matching `descriptor` share each value of a `String` attribute, in the
  /// value's code-point order: one SQL aggregate (`GROUP BY`), no models made. The
  /// descriptor's sorts, limit and offset are not used.
  ///
  /// Cost: one SQL query; O(rows) to scan (an index on the attribute serves the grouping),
  /// O(groups) memory.
  public func fetchCounts<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, groupedBy keyPath: KeyPath<Model, String> & Sendable
  ) throws -> [(value: String, count: Int)] {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    guard let attribute = entity.schema.attribute(for: keyPath), !attribute.isCodable else {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "fetchCounts needs a stored String attribute of \(Model.self); \(Model.modelSchema.describe(keyPath)) is not one."
      )
    }
    let column = quoted(attribute.name)
    var unbounded = descriptor
    unbounded.sortBy = []
    unbounded.fetchLimit = nil
    unbounded.fetchOffset = nil
    if let finished = try finishedInSwift(unbounded) {
      var counts: [String: Int] = [:]
      for (model, _) in finished { counts[model[keyPath: keyPath], default: 0] += 1 }
      return counts.sorted { $0.key < $1.key }.map { (value: $0.key, count: $0.value) }
    }
    let database = try connection()
    let query = try Query(
      unbounded, schema: entity.schema, select: "\(column), count(*)", database: database,
      ordered: false)
    let statement = try database.cachedStatement(
      query.sql + " GROUP BY \(column) ORDER BY \(column)")
    statement.bindValues(query.bindings)
    defer { statement.reset() }  // ends the read transaction, even after an error
    var counts: [(value: String, count: Int)] = []
    while try statement.step() {
      counts.append((try String.read(from: statement, at: 0), Int(statement.int64(at: 1))))
    }
    return counts
  }

  /// The identifiers of the models matching `descriptor`, in its order, without loading them.
  public func fetchIdentifiers<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>
  ) throws -> [PersistentIdentifier] {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    return try fetchPrimaryKeys(descriptor).map {
      PersistentIdentifier(
        storeIdentifier: container.storeIdentifier, entityName: entity.name, primaryKey: $0)
    }
  }

  /// The model with `identifier`: the registered instance, or loaded from the store; nil when
  /// the row does not exist. A temporary identifier finds the model inserted in this context
  /// and not yet saved, if any.
  public func model<Model: PersistentModel>(
    for identifier: PersistentIdentifier, as _: Model.Type = Model.self
  ) throws -> Model? {
    let entity = try entity(for: Model.self)
    if identifier.isTemporary { return registeredModel(for: identifier) }
    guard identifier.storeIdentifier == container.storeIdentifier,
      identifier.entityName == entity.name
    else { return nil }
    if let registered: Model = registeredModel(for: identifier) { return registered }
    let database = try connection()
    let statement = try database.cachedStatement(entity.statements.selectRowsWhereKey + " = ?")
    statement.returnsTableColumns()
    statement.bindInt64(identifier.primaryKey, at: 1)
    defer { statement.reset() }  // ends the read transaction
    guard try statement.step() else { return nil }
    return try materialize(statement, entity: entity, cache: LoadCache())
  }

  /// Calls `block` with every model matching `descriptor`, loading `batchSize` rows at a time,
  /// so that a large result is never held whole. Models the block leaves unchanged are released
  /// after each batch; changed ones stay registered for the next ``save()``.
  ///
  /// One query runs from start to end (its own statement, so the block may fetch too), and every
  /// batch comes from the same snapshot of the store. The descriptor's
  /// ``FetchDescriptor/relationshipKeyPathsForPrefetching`` are loaded for each batch before
  /// the block sees it: one query per relationship and batch.
  ///
  /// Cost: O(rows) time, O(batchSize) memory (plus changed models).
  public func enumerate<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, batchSize: Int = 5000,
    block: (Model) throws -> Void
  ) throws {
    try autosaveIfNeeded()
    let batchSize = max(batchSize, 1)
    if let finished = try finishedInSwift(descriptor) {
      for (model, _) in finished { try block(model) }
      return
    }
    let entity = try entity(for: Model.self)
    let database = try connection()
    let query = try Query(descriptor, schema: entity.schema, database: database)
    let statement = try database.prepare(query.sql)
    statement.bindValues(query.bindings)
    let deleted = pendingRowDeletes[entity.name]
    let cache = LoadCache()
    let table = rowTable(entity.name)
    var batch: [(Model, Registration, Bool)] = []
    batch.reserveCapacity(batchSize)
    let prefetches = !descriptor.prefetching.keyPaths.isEmpty
    func deliver() throws {
      if prefetches, !batch.isEmpty {
        try prefetch(
          descriptor, of: batch.map { $0.0 }, keys: batch.map { $0.1.primaryKey ?? 0 },
          entity: entity)
      }
      for (model, _, _) in batch { try block(model) }
      for (_, registration, wasFresh) in batch where wasFresh {
        if !registration.isDeleted, registration.entity.changedIndexes(registration).isEmpty {
          unregister(registration)
        }
      }
      batch.removeAll(keepingCapacity: true)
    }
    while try statement.step() {
      if let deleted, deleted.contains(statement.int64(at: 0)) { continue }
      let registration = try materializeRow(
        statement, entity: entity, cache: cache, table: table)
      if registration.isDeleted { continue }
      batch.append(
        (unsafeDowncast(registration.model, to: Model.self), registration, registration.isFresh))
      if batch.count == batchSize { try deliver() }
    }
    try deliver()
  }

  /// Reads every stored row of `Model`'s table back into a model, as a fetch would, and
  /// validates it (`validateForSave()`): the check behind `trips check`, which SQLite's
  /// `integrity_check` cannot do (a damaged `.codable` value or an out-of-range number is a
  /// sound page to SQLite). Returns one error per bad row, each naming the row
  /// (``PersistenceError/row``); empty when every row reads back and is valid. Values loaded
  /// lazily (``CodableFault``) are decoded here, so that one that cannot be is reported.
  ///
  /// Cost: one pass over the table, O(rows); one model alive at a time. Models are not
  /// registered in the context.
  ///
  /// - Throws: ``PersistenceError`` when the table cannot be read at all (a damaged page).
  public func validateStoredRows<Model: PersistentModel>(of _: Model.Type) throws
    -> [PersistenceError]
  {
    let entity = try entity(for: Model.self)
    let database = try connection()
    let query = try Query(FetchDescriptor<Model>(), schema: entity.schema, database: database)
    let statement = try database.prepare(query.sql)
    statement.bindValues(query.bindings)
    let cache = LoadCache()
    var problems: [PersistenceError] = []
    while try statement.step() {
      do {
        let model = try entity.makeModel(
          into: nil, from: statement, firstColumn: 1, cache: cache)
        try entity.resolve(model)
        try entity.validate(model)
      } catch {
        let failure =
          error as? PersistenceError
          ?? PersistenceError(
            code: .invalidValue, message: String(describing: error))
        problems.append(failure.naming(row: describeRow(statement, entity: entity)))
      }
    }
    return problems
  }

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
  private func forEachRow<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, sectionColumn: String? = nil, query made: Query? = nil,
    prepared: (statement: any StoreStatement, bindings: [SQLValue])? = nil,
    _ body: (Model, any StoreRow) -> Void
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
      of: try database.cachedStatement(query.sql), bindings: query.bindings, entity: entity, body)
  }

  /// Runs `statement` with `bindings` and calls `body` with each row's registered model.
  func forEachRow<Model: PersistentModel>(
    of statement: any StoreStatement, bindings: [SQLValue], entity: Entity<Model>,
    _ body: (Model, any StoreRow) -> Void
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
        relates: relates)
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
  /// Cost: one lookup by key (none when `allNew`); a new row adds one table entry and two
  /// allocations (the model and its registration, which holds the snapshot). Never inlined:
  /// see `forEachRow(of:bindings:entity:_:)`.
  @inline(never)
  func materializeRow(
    _ statement: any StoreRow, entity: any EntityOperations, cache: LoadCache, table: RowTable,
    allNew: Bool = false, relates: Bool? = nil
  ) throws -> Registration {
    let primaryKey = statement.int64(at: 0)
    if !allNew, let registration = table[primaryKey] {
      if !registration.isDeleted, entity.changedIndexes(registration).isEmpty {
        do {
          try entity.load(
            registration.model, isNew: false, into: registration, from: statement,
            firstColumn: 1, cache: cache)
        } catch let error as PersistenceError {
          throw error.naming(row: describeRow(statement, entity: entity))
        }
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
    if autosaveEnabled && hasChanges { try save() }
  }
}

/// The row the statement is on, for an error: its primary key and its `.unique` values
/// (a 16-byte value is shown as a UUID).
func describeStoredRow(_ statement: any StoreRow, entity: any EntityOperations) -> String {
  var parts: [String] = []
  for index in entity.uniqueIndexes {
    let column = Int32(index) + 1
    let bytes = statement.bytes(at: column)
    let value: String
    if bytes.count == 16 {
      var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
      withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: bytes) }
      value = UUID(uuid: raw).uuidString.lowercased()
    } else {
      value = statement.text(at: column)
    }
    parts.append("\(entity.columnNames[index]) \(value)")
  }
  parts.append("row \(statement.int64(at: 0))")
  return "\(entity.name) " + parts.joined(separator: ", ")
}

extension ModelContext {
  /// Decodes now every value of `models` that was loaded lazily (``CodableFault``), so that a
  /// caller about to read them all (an export, a listing) gets a clear error for a damaged one
  /// instead of a `nil`: the first failure, naming its row and column.
  ///
  /// Cost: one decode per distinct stored value not yet decoded; O(models × attributes).
  public func resolveFaults<Model: PersistentModel>(_ models: some Sequence<Model>) throws {
    let entity = try entity(for: Model.self)
    for model in models {
      do {
        try entity.resolve(model)
      } catch let failure as PersistenceError {
        throw failure.naming(row: describeModel(model, entity: entity))
      }
    }
  }

  /// A model's row as `describeStoredRow` names it: its table, unique attributes and key.
  func describeModel(_ model: AnyObject, entity: any EntityOperations) -> String {
    var parts: [String] = []
    for index in entity.uniqueIndexes {
      let value: String
      switch try? entity.value(model, attribute: index) {
      case .blob(let data) where data.count == 16:
        value = UUID(bytes16: data).uuidString.lowercased()
      case .text(let text): value = text
      case let other?: value = other.description
      case nil: value = "?"
      }
      parts.append("\(entity.columnNames[index]) \(value)")
    }
    if let key = registration(for: model)?.primaryKey { parts.append("row \(key)") }
    return "\(entity.name) " + parts.joined(separator: ", ")
  }
}
