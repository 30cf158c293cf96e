import Foundation

// Counts, and the statements a context keeps for the predicate shapes it ran.

extension ModelContext {
  /// The number of models matching `descriptor` (its limit and offset applied), counted in SQL,
  /// with the models inserted and not saved that match (evaluated in Swift) unless the
  /// descriptor leaves them out (``FetchDescriptor/includePendingChanges``).
  ///
  /// Cost: the predicate's translation (O(size of the predicate)), then one SQL query that an
  /// index on a compared attribute serves (O(log n + matches) in the index; a scan otherwise).
  /// A count of one predicate whose shape was translated before (the same `#Predicate` with
  /// other captured values) walks the predicate's tree for its values and binds them to the
  /// statement the context kept for that shape: no SQL text is built or hashed.
  public func fetchCount<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>) throws -> Int
  {
    try autosaveIfNeeded()
    if !pendingInserts.isEmpty, descriptor.includePendingChanges {
      let inserted = try pendingInserts(matching: descriptor).count
      if inserted > 0 {
        var stored = descriptor
        stored.includePendingChanges = false
        stored.fetchLimit = nil
        stored.fetchOffset = nil
        // A negative offset is none and a negative limit no limit, as the SQL window reads them.
        let all = try fetchCount(stored) + inserted
        let past = max(all - max(descriptor.fetchOffset ?? 0, 0), 0)
        guard let limit = descriptor.fetchLimit, limit >= 0 else { return past }
        return min(past, limit)
      }
    }
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
            entity.schema.inheritance.map {
              "SELECT count(*) FROM \(entity.schema.quotedName) WHERE \($0.condition) AND (\(template.sql))"
            } ?? "SELECT count(*) FROM \(entity.schema.quotedName) WHERE \(template.sql)")
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
  func keptStatement(
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
  func keptCondition(_ parts: PredicateParts, _ database: any StoreConnection)
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
}
