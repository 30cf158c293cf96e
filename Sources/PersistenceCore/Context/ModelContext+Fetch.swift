import Foundation

extension ModelContext {
  /// Fetches the models matching `descriptor`, in its order.
  ///
  /// The predicate and sort descriptors run in the store's engine, as SQL; nothing is filtered in memory. Rows
  /// already registered in this context return their existing instance (refreshed from the
  /// store unless it has unsaved changes). Models inserted and not saved that match are
  /// included, unless the descriptor says otherwise
  /// (``FetchDescriptor/includePendingChanges``); models marked for deletion are left out.
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
    if !pendingInserts.isEmpty, descriptor.includePendingChanges {
      let inserted = try pendingInserts(matching: descriptor)
      if !inserted.isEmpty { return try merging(inserted, into: descriptor) }
    }
    let entity = try entity(for: Model.self)
    let database = try connection()
    // Collected as objects: appending to an array of the generic `Model` looked up the array's
    // type metadata on every append (about 400 instructions a row, measured with callgrind).
    var results: [AnyObject] = []
    // The rows' keys, when relationships are to be prefetched for them.
    let prefetches = !descriptor.prefetching.keyPaths.isEmpty
    var keys: [Int64] = []
    if !descriptor.fetching.keyPaths.isEmpty,
      let partial = try partialFetch(descriptor, entity: entity, database: database)
    {
      try forEachRow(descriptor, query: partial.query, partial: partial.load) { model, row in
        results.append(model)
        if prefetches { keys.append(row.int64(at: 0)) }
      }
      if prefetches { try prefetch(descriptor, of: results, keys: keys, entity: entity) }
      return models(results, as: Model.self)
    }
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
      return (Int32(entity.readColumns.count + 1), query)  // after the selected row
    }
    throw PersistenceError(
      code: .unsupportedPredicate,
      message:
        "sectionBy needs a stored String attribute of \(Model.self), or one reached through to-one relationships; \(entity.schema.describe(keyPath)) is not one."
    )
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
    if !pendingInserts.isEmpty, descriptor.includePendingChanges {
      let inserted = try pendingInserts(matching: descriptor)
      if !inserted.isEmpty {
        let widened = widenedForMerge(descriptor)
        func identifier(_ key: Int64) -> PersistentIdentifier {
          PersistentIdentifier(
            storeIdentifier: container.storeIdentifier, entityName: entity.name, primaryKey: key)
        }
        // Models are loaded only when a sort must compare them with the inserted ones.
        let stored: [(element: PersistentIdentifier, model: Model?)] =
          descriptor.sortBy.isEmpty
          ? try fetchPrimaryKeys(widened).map { (identifier($0), nil) }
          : try fetch(widened).map { model in
            (identifier(registration(for: model)?.primaryKey ?? 0), model)
          }
        return merged(
          stored,
          inserted.map { (PersistentIdentifier(temporaryFor: $0, entityName: entity.name), $0) },
          descriptor)
      }
    }
    return try fetchPrimaryKeys(descriptor).map {
      PersistentIdentifier(
        storeIdentifier: container.storeIdentifier, entityName: entity.name, primaryKey: $0)
    }
  }

  /// The model with `identifier`: the registered instance, or loaded from the store; nil when
  /// the row does not exist. A temporary identifier finds the model it was made for when this
  /// context holds it (inserted here, saved since or not), else nil.
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
    return parts.isEmpty ? entity.name : "\(entity.name) " + parts.joined(separator: ", ")
  }
}
