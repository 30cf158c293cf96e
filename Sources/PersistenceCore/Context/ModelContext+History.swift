import Foundation

extension ModelContext {
  /// The transactions `descriptor` selects: SwiftData's `fetchHistory(_:)`. Oldest first
  /// unless the descriptor sorts otherwise.
  ///
  /// Cost: an indexed range scan of the transactions the SQL part of the descriptor selects
  /// (see ``HistoryDescriptor``), then each one's changes by the changes' token index,
  /// O(transactions + changes); a predicate or sort SQL cannot run reads every transaction in
  /// the range.
  ///
  /// - Throws: ``PersistenceError/Code/historyTokenExpired`` when transactions after the token
  ///   (the descriptor's, or one its predicate compares with) were deleted
  ///   (do a full refetch, then continue from ``currentHistoryToken()``),
  ///   ``PersistenceError/Code/historyTokenForeign`` for a token of another store,
  ///   ``PersistenceError/Code/historyTokenUnknown`` for a token newer than any this store
  ///   issued.
  public func fetchHistory(
    _ descriptor: HistoryDescriptor<DefaultHistoryTransaction> = HistoryDescriptor()
  ) throws -> [DefaultHistoryTransaction] {
    let database = try connection()
    let plan = HistoryQueryPlan(descriptor)
    let after = try historyStart(descriptor, plan, database)
    var sql =
      "SELECT t.token, t.author, t.timestamp, t.bundle, t.process FROM _history_transactions t WHERE t.token > ?"
    var bindings: [SQLValue] = [.integer(after)]
    Self.addAuthorConditions(descriptor, to: &sql, &bindings)
    for condition in plan.conditions { sql += " AND \(condition)" }
    bindings += plan.bindings
    sql += plan.newestFirst ? " ORDER BY t.token DESC" : " ORDER BY t.token"
    let statement = try database.prepare(sql)
    statement.bindValues(bindings)
    var transactions: [DefaultHistoryTransaction] = []
    // With the order in SQL, the limit ends the scan; else every match is read, then sorted.
    let limit = plan.sortInSQL ? (descriptor.fetchLimit ?? Int.max) : Int.max
    while transactions.count < limit, try statement.step() {
      let token = statement.int64(at: 0)
      let changes = try self.changes(
        token: token, descriptor: descriptor, database: database)
      if descriptor.entityNames != nil && changes.isEmpty { continue }
      let transaction = DefaultHistoryTransaction(
        token: DefaultHistoryToken(storeIdentifier: container.storeIdentifier, value: token),
        author: statement.isNull(at: 1) ? nil : statement.text(at: 1),
        timestamp: Date(timeIntervalSinceReferenceDate: statement.double(at: 2)),
        bundleIdentifier: statement.isNull(at: 3) ? "" : statement.text(at: 3),
        processIdentifier: statement.isNull(at: 4) ? "" : statement.text(at: 4),
        changes: changes)
      if !plan.predicateInSQL, let predicate = descriptor.predicate,
        try !predicate.evaluate(transaction)
      {
        continue
      }
      transactions.append(transaction)
    }
    if !plan.sortInSQL {
      transactions.sort(using: descriptor.sortBy)
      if let limit = descriptor.fetchLimit { transactions = Array(transactions.prefix(limit)) }
    }
    return transactions
  }

  /// Deletes the transactions `descriptor` selects: SwiftData's `deleteHistory(_:)`. With
  /// ``HistoryDescriptor/entityNames`` (model types), only those models' changes are deleted,
  /// and a transaction left without a change.
  ///
  /// A token before the newest transaction deleted then expires: history fetched after it
  /// throws ``PersistenceError/Code/historyTokenExpired``, since transactions after it are gone
  /// (a reader that has seen everything up to that transaction reads on).
  ///
  /// Cost: the fetch of ``fetchHistory(_:)`` (changes and tombstones read, which the
  /// predicate and the model types may need), then per 500 transactions one delete of their
  /// tombstones, changes and transactions, in one write transaction.
  ///
  /// - Throws: the errors of ``fetchHistory(_:)``.
  public func deleteHistory(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>) throws {
    let tokens = try fetchHistory(descriptor).map(\.token.value).sorted()
    guard let newest = tokens.last else { return }
    // With model types, only their changes go; a transaction left without any goes too.
    let (ofEntities, entityBindings) = descriptor.changeCondition
    let database = try connection()
    try database.beginWriting()
    do {
      var start = 0
      while start < tokens.count {
        let batch = tokens[start..<min(start + 500, tokens.count)]
        start += 500
        let list = Array(repeating: "?", count: batch.count).joined(separator: ", ")
        for (sql, byEntity) in [
          (
            "DELETE FROM _history_tombstones WHERE change IN (SELECT id FROM _history_changes WHERE token IN (\(list))\(ofEntities))",
            true
          ),
          ("DELETE FROM _history_changes WHERE token IN (\(list))\(ofEntities)", true),
          (
            "DELETE FROM _history_transactions WHERE token IN (\(list))"
              + (descriptor.entityNames == nil
                ? ""
                : " AND NOT EXISTS (SELECT 1 FROM _history_changes c WHERE c.token = _history_transactions.token)"),
            false
          ),
        ] {
          let statement = try database.prepare(sql)
          statement.bindValues(
            batch.map { .integer($0) } + (byEntity ? entityBindings : []))
          try statement.run()
        }
      }
      try raiseHistoryFloor(to: newest + 1, database)
      try database.commit()
    } catch {
      try? database.rollback()
      throw error
    }
  }

  /// Deletes the transactions before `token` (keeping `token` itself and later ones). Fetching
  /// history after an older token then throws ``PersistenceError/Code/historyTokenExpired``.
  ///
  /// Cost: three range deletes by the token indexes, in one write transaction.
  ///
  /// - Returns: How many transactions were deleted.
  @discardableResult
  public func deleteHistory(before token: DefaultHistoryToken) throws -> Int {
    try check(token)
    let database = try connection()
    // One past the last issued deletes everything; further would expire tokens not issued.
    let latest = try database.lastIssuedHistoryToken()
    guard token.value <= latest + 1 else {
      throw PersistenceError(
        code: .historyTokenUnknown,
        message:
          "The history token \(token) is newer than this store's history, which ends at \(latest): deleting before it would expire tokens the store has not issued. Nothing was deleted."
      )
    }
    try database.beginWriting()
    var deleted = 0
    do {
      for sql in [
        "DELETE FROM _history_tombstones WHERE change IN (SELECT id FROM _history_changes WHERE token < ?)",
        "DELETE FROM _history_changes WHERE token < ?",
        "DELETE FROM _history_transactions WHERE token < ?",
      ] {
        let statement = try database.prepare(sql)
        statement.bindInt64(token.value, at: 1)
        try statement.run()
        if sql.hasPrefix("DELETE FROM _history_transactions") { deleted = database.changedRowCount }
      }
      try raiseHistoryFloor(to: token.value, database)
      try database.commit()
    } catch {
      try? database.rollback()
      throw error
    }
    return deleted
  }

  /// Raises the history floor (history before it was deleted) to `floor`, if it is lower.
  private func raiseHistoryFloor(to floor: Int64, _ database: any StoreConnection) throws {
    let statement = try database.prepare(
      "UPDATE \(StoreLayout.metaTable) SET value = ?1 WHERE key = 'history_floor' AND CAST(value AS BIGINT) < ?1"
    )
    statement.bindInt64(floor, at: 1)
    try statement.run()
  }

  /// Adds the descriptor's author filters to a query of `_history_transactions` aliased `t`.
  private static func addAuthorConditions(
    _ descriptor: HistoryDescriptor<DefaultHistoryTransaction>, to sql: inout String,
    _ bindings: inout [SQLValue]
  ) {
    if let authors = descriptor.authors {
      sql +=
        " AND t.author IN (\(Array(repeating: "?", count: authors.count).joined(separator: ", ")))"
      bindings += authors.sorted().map { .text($0) }
    }
    if !descriptor.excludedAuthors.isEmpty {
      let placeholders = Array(repeating: "?", count: descriptor.excludedAuthors.count)
      sql += " AND (t.author IS NULL OR t.author NOT IN (\(placeholders.joined(separator: ", "))))"
      bindings += descriptor.excludedAuthors.sorted().map { .text($0) }
    }
  }

  /// The token of the newest transaction this context can read (position 0 when there is
  /// none): history fetched after it holds only what happens from now on. In a read
  /// transaction (``withSnapshot(_:)``) it is the snapshot's: every transaction up to it is in
  /// the snapshot, none after it.
  public func currentHistoryToken() throws -> DefaultHistoryToken {
    // Not the engine's count of tokens issued: PostgreSQL's sequence is outside transactions,
    // so it counts a writer's token before its commit is readable, and commits after this
    // snapshot began. History deleted before a token keeps that token (the floor) current.
    // One kept statement reads both (every bbox page of `trips serve` asks for the token).
    let statement = try connection().cachedStatement(Self.currentTokenSQL)
    defer { statement.reset() }
    guard try statement.step() else {
      return DefaultHistoryToken(storeIdentifier: container.storeIdentifier, value: 0)
    }
    let newest = statement.isNull(at: 0) ? 0 : statement.int64(at: 0)
    let floor = statement.isNull(at: 1) ? 0 : statement.int64(at: 1)
    return DefaultHistoryToken(
      storeIdentifier: container.storeIdentifier, value: max(newest, floor - 1))
  }

  /// When the row of `identifier` last changed, by the history still kept, leaving out
  /// transactions by `excludedAuthor`; nil when history has no such change for it.
  /// Cost: an index lookup, then the row's changes.
  public func lastChangeDate(
    for identifier: PersistentIdentifier, excludingAuthor excludedAuthor: String? = nil
  ) throws -> Date? {
    let database = try connection()
    // Two statements rather than `?3 IS NULL OR …`: PostgreSQL cannot type a parameter that
    // only `IS NULL` would see when it is NULL.
    let select = """
      SELECT max(t.timestamp) FROM _history_changes c JOIN _history_transactions t ON t.token = c.token
      WHERE c.entity = ? AND c.pk = ?
      """
    let statement = try database.cachedStatement(
      excludedAuthor == nil ? select : select + " AND (t.author IS NULL OR t.author <> ?)")
    statement.bindText(identifier.entityName, at: 1)
    statement.bindInt64(identifier.primaryKey, at: 2)
    if let excludedAuthor { statement.bindText(excludedAuthor, at: 3) }
    defer { statement.reset() }
    guard try statement.step(), !statement.isNull(at: 0) else { return nil }
    return Date(timeIntervalSinceReferenceDate: statement.double(at: 0))
  }

  /// When a row of `Model` whose preserved attribute at `keyPath` held `value` was last
  /// deleted, by the history still kept (its tombstones); nil when history has no such
  /// deletion. The attribute must be `.preserveValueOnDeletion` (a row that is gone has no
  /// identifier to ask ``lastChangeDate(for:excludingAuthor:)`` with; its preserved values are
  /// what is left of it). Cost: an index lookup of the tombstones with that value, then their
  /// changes and transactions.
  public func lastDeletionDate<Model: PersistentModel, Value: PersistableValue>(
    of type: Model.Type, where keyPath: KeyPath<Model, Value>, equals value: Value
  ) throws -> Date? {
    guard let attribute = Model.modelSchema.attribute(for: keyPath),
      let entity = container.entities[ObjectIdentifier(Model.self)]
    else { return nil }
    let database = try connection()
    let statement = try database.cachedStatement(
      """
      SELECT max(t.timestamp) FROM _history_tombstones s
      JOIN _history_changes c ON c.id = s.change JOIN _history_transactions t ON t.token = c.token
      WHERE s.attribute = ? AND s.value = \(database.tombstoneValueParameter) AND c.entity = ?
      """)
    statement.bindText(attribute.name, at: 1)
    statement.bindValue(value.sqlValue, at: 2)
    statement.bindText(entity.name, at: 3)
    defer { statement.reset() }
    guard try statement.step(), !statement.isNull(at: 0) else { return nil }
    return Date(timeIntervalSinceReferenceDate: statement.double(at: 0))
  }

  /// The tombstone of the last deletion of each row of `Model` whose preserved attribute at
  /// `keyPath` held one of `values`, by the history still kept, by value; a value no kept
  /// deletion had is left out. The attribute must be `.preserveValueOnDeletion`. With the
  /// tombstone's keys (``HistoryTombstone/key(of:)``), what a row that is gone belonged to:
  /// a service that gives an id one row for its whole life asks it before an insert.
  ///
  /// Cost: per 500 values, one query over the tombstones' index by (attribute, value); then
  /// one query a tombstone found, for its values.
  public func lastTombstones<Model: PersistentModel, Value: PersistableValue & Hashable>(
    of type: Model.Type, where keyPath: KeyPath<Model, Value>, in values: [Value]
  ) throws -> [Value: HistoryTombstone<Model>] {
    guard !values.isEmpty, let attribute = Model.modelSchema.attribute(for: keyPath),
      let entity = container.entities[ObjectIdentifier(Model.self)]
    else { return [:] }
    let database = try connection()
    var changes: [(Value, Int64)] = []
    var start = 0
    while start < values.count {
      let batch = Array(values[start..<min(start + 500, values.count)])
      start += 500
      let list = Array(repeating: database.tombstoneValueParameter, count: batch.count)
        .joined(separator: ", ")
      let statement = try database.prepare(
        """
        SELECT s.value, max(s.change) FROM _history_tombstones s
        JOIN _history_changes c ON c.id = s.change
        WHERE s.attribute = ? AND c.entity = ? AND s.value IN (\(list)) GROUP BY s.value
        """)
      statement.bindText(attribute.name, at: 1)
      statement.bindText(entity.name, at: 2)
      for (index, value) in batch.enumerated() {
        statement.bindValue(value.sqlValue, at: Int32(index + 3))
      }
      let storage = entity.columns.first { $0.name == attribute.name }?.storageType
      while try statement.step() {
        let stored = statement.value(at: 0)
        guard let value = try? Value(sqlValue: storage.map { stored.coerced(to: $0) } ?? stored)
        else { continue }
        changes.append((value, statement.int64(at: 1)))
      }
    }
    var tombstones: [Value: HistoryTombstone<Model>] = [:]
    for (value, change) in changes {
      tombstones[value] = HistoryTombstone(
        values: try preservedValues(change: change, entity: entity.name, database: database))
    }
    return tombstones
  }

  /// The tombstone of the deletion of the row `identifier` names, by the history still kept;
  /// nil when it has none (the row exists, or its deletion was pruned, or its model preserves
  /// nothing, or `identifier` names a row of another model than `Model`). Cost: one query
  /// over the changes' index by row, one for the values.
  public func tombstone<Model: PersistentModel>(
    of identifier: PersistentIdentifier, as _: Model.Type
  ) throws -> HistoryTombstone<Model>? {
    guard identifier.entityName == Model.entityName else { return nil }
    let database = try connection()
    let statement = try database.cachedStatement(
      """
      SELECT max(s.change) FROM _history_tombstones s JOIN _history_changes c ON c.id = s.change
      WHERE c.entity = ? AND c.pk = ?
      """)
    statement.bindText(identifier.entityName, at: 1)
    statement.bindInt64(identifier.primaryKey, at: 2)
    let change: Int64? = try {
      defer { statement.reset() }
      guard try statement.step(), !statement.isNull(at: 0) else { return nil }
      return statement.int64(at: 0)
    }()
    guard let change else { return nil }
    return HistoryTombstone(
      values: try preservedValues(change: change, entity: identifier.entityName, database: database)
    )
  }

  private func check(_ token: DefaultHistoryToken) throws {
    guard token.storeIdentifier == container.storeIdentifier else {
      throw PersistenceError(
        code: .historyTokenForeign,
        message:
          "The history token \(token) belongs to another store (\(token.storeIdentifier)); this store is \(container.storeIdentifier)."
      )
    }
  }

  private func historyFloor(_ database: any StoreConnection) throws -> Int64 {
    try database.scalarInt(Self.historyFloorSQL) ?? 0
  }

  /// The history floor: history before it was deleted (none: no row, or 0).
  private static let historyFloorSQL =
    "SELECT value FROM \(StoreLayout.metaTable) WHERE key = 'history_floor'"
  /// The newest transaction's token and the history floor, in one row.
  private static let currentTokenSQL =
    "SELECT (SELECT max(token) FROM _history_transactions), (\(historyFloorSQL))"

  /// Calls `body` with each change of the transactions `descriptor` selects, in order (by
  /// token, then as they were recorded), each with its transaction (token, author and time;
  /// its `changes` left empty), as the rows are read: no transaction's changes are held, so a
  /// history of a million changes is read in O(1) memory. What ``fetchHistory(_:)`` returns,
  /// one change at a time, less the transactions without a change of `entityNames`' models;
  /// `fetchLimit` counts transactions. The descriptor's predicate may only compare the token,
  /// timestamp or author (what runs in SQL: see ``HistoryDescriptor``), and its sort only
  /// order oldest first; others throw ``PersistenceError/Code/unsupportedPredicate``.
  ///
  /// Cost: one range scan of the changes' token index after the token, O(changes after it,
  /// of every model), a delete's tombstone read with it; nothing for a token that is current.
  ///
  /// - Throws: the errors of ``fetchHistory(_:)``, and `body`'s, which end the read.
  public func enumerateHistory(
    _ descriptor: HistoryDescriptor<DefaultHistoryTransaction> = HistoryDescriptor(),
    _ body: (_ transaction: DefaultHistoryTransaction, _ change: HistoryChange) throws -> Void
  ) throws {
    let database = try connection()
    let plan = HistoryQueryPlan(descriptor)
    guard plan.predicateInSQL, plan.sortInSQL, !plan.newestFirst else {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "enumerateHistory reads changes as they stream, oldest first: its predicate may only compare the token, timestamp or author with values, joined by &&, and it cannot sort otherwise. Use fetchHistory for other predicates and orders."
      )
    }
    let after = try historyStart(descriptor, plan, database)
    // Driven by the changes' token index (a range after `after`, in order); the models are
    // told apart here, not in SQL, where a test of the entity would have the engine read its
    // whole index by entity and sort.
    var sql = """
      SELECT t.token, t.author, t.timestamp, t.bundle, t.process,
        c.id, c.entity, c.pk, c.kind, c.attributes, c.subentity
      FROM _history_changes c JOIN _history_transactions t ON t.token = c.token
      WHERE c.token > ?
      """
    var bindings: [SQLValue] = [.integer(after)]
    Self.addAuthorConditions(descriptor, to: &sql, &bindings)
    for condition in plan.conditions { sql += " AND \(condition)" }
    bindings += plan.bindings
    sql += " ORDER BY c.token, c.id"
    let statement = try database.prepare(sql)
    statement.bindValues(bindings)
    let limit = descriptor.fetchLimit ?? Int.max
    var transaction: DefaultHistoryTransaction?
    var count = 0
    while try statement.step() {
      if descriptor.entityNames != nil,
        !descriptor.selects(
          entity: statement.text(at: 6),
          subentity: statement.isNull(at: 10) ? nil : statement.text(at: 10))
      {
        continue
      }
      let token = statement.int64(at: 0)
      guard let change = try change(statement, from: 5, token: token, database: database) else {
        continue
      }
      if transaction?.token.value != token {
        count += 1
        if count > limit { break }
        transaction = DefaultHistoryTransaction(
          token: DefaultHistoryToken(storeIdentifier: container.storeIdentifier, value: token),
          author: statement.isNull(at: 1) ? nil : statement.text(at: 1),
          timestamp: Date(timeIntervalSinceReferenceDate: statement.double(at: 2)),
          bundleIdentifier: statement.isNull(at: 3) ? "" : statement.text(at: 3),
          processIdentifier: statement.isNull(at: 4) ? "" : statement.text(at: 4), changes: [])
      }
      try body(transaction!, change)
    }
  }

  /// The value after which `descriptor`'s history starts (0 for all kept), and the tokens it
  /// and its predicate hold checked: every one of this store; the start the query reads from
  /// (the descriptor's token, or the latest lower bound its SQL sets), and, when that start
  /// is in deleted history, every lower bound the predicate sets anywhere, not expired; no
  /// lower bound newer than any token issued. A negative `fetchLimit` is refused.
  private func historyStart(
    _ descriptor: HistoryDescriptor<DefaultHistoryTransaction>, _ plan: HistoryQueryPlan,
    _ database: any StoreConnection
  ) throws -> Int64 {
    if let limit = descriptor.fetchLimit, limit < 0 {
      throw PersistenceError(
        code: .invalidValue,
        message: "A history descriptor's fetchLimit is \(limit); give 0 or more, or nil for all.")
    }
    if let token = descriptor.token { try check(token) }
    for token in plan.tokens { try check(token) }
    let start = max(descriptor.token?.value ?? 0, plan.sqlStart)
    let bounds = (descriptor.token.map { [$0.value] } ?? []) + plan.lowerBounds
    guard !bounds.isEmpty else { return descriptor.token?.value ?? 0 }
    let floor = try historyFloor(database)
    if start < floor - 1, let expired = bounds.filter({ $0 < floor - 1 }).min() {
      throw PersistenceError(
        code: .historyTokenExpired,
        message:
          "The history token \(DefaultHistoryToken(storeIdentifier: container.storeIdentifier, value: expired)) has expired: the store no longer keeps the history after it (history before \(floor) was deleted). Refetch everything, then continue from the current token."
      )
    }
    let latest = try database.lastIssuedHistoryToken()
    if let newest = bounds.max(), newest > latest {
      throw PersistenceError(
        code: .historyTokenUnknown,
        message:
          "The history token \(DefaultHistoryToken(storeIdentifier: container.storeIdentifier, value: newest)) is newer than this store's history, which ends at \(latest): it was not issued by this copy of the store (was the store restored from an older backup?). Take a full copy instead of resuming from it."
      )
    }
    return descriptor.token?.value ?? 0
  }

  /// The change of the row the current row of `statement` holds from column `first` on (id,
  /// entity, pk, kind, attributes, subentity), with its tombstone when it is a delete, typed by
  /// its model (a subclass's row by the subclass); nil for a row of a table this container's
  /// schema does not hold. A row of a subclass the container does not list is typed by the
  /// table's root model.
  private func change(
    _ statement: any StoreStatement, from first: Int32, token: Int64,
    database: any StoreConnection
  ) throws -> HistoryChange? {
    let entity = statement.text(at: first + 1)
    guard var modelType = container.modelTypesByEntity[entity] else { return nil }
    let subentity = statement.isNull(at: first + 5) ? nil : statement.text(at: first + 5)
    if let subentity, let subclass = container.modelTypesBySubentity[entity]?[subentity] {
      modelType = subclass
    }
    let kind: HistoryChange.Kind =
      switch statement.int64(at: first + 3) {
      case 0: .insert
      case 1: .update
      default: .delete
      }
    let changeID = statement.int64(at: first)
    let record = HistoryChangeRecord(
      kind: kind,
      identifier: PersistentIdentifier(
        storeIdentifier: container.storeIdentifier, entityName: entity,
        primaryKey: statement.int64(at: first + 2)),
      changeIdentifier: changeID, transactionIdentifier: token,
      attributeNames: statement.isNull(at: first + 4)
        ? [] : Set(statement.text(at: first + 4).split(separator: ",").map(String.init)),
      preserved: kind == .delete
        ? try preservedValues(change: changeID, entity: entity, database: database) : [:],
      subentity: subentity)
    func make<Model: PersistentModel>(_ type: Model.Type) -> HistoryChange {
      HistoryChange.make(type, record)
    }
    return make(modelType)
  }

  private func changes(
    token: Int64, descriptor: HistoryDescriptor<DefaultHistoryTransaction>,
    database: any StoreConnection
  ) throws -> [HistoryChange] {
    let statement = try database.cachedStatement(
      "SELECT id, entity, pk, kind, attributes, subentity FROM _history_changes WHERE token = ? ORDER BY id"
    )
    statement.bindInt64(token, at: 1)
    var changes: [HistoryChange] = []
    while try statement.step() {
      if descriptor.entityNames != nil,
        !descriptor.selects(
          entity: statement.text(at: 1),
          subentity: statement.isNull(at: 5) ? nil : statement.text(at: 5))
      {
        continue
      }
      if let change = try change(statement, from: 0, token: token, database: database) {
        changes.append(change)
      }
    }
    return changes
  }

  /// The preserved values of a deleted row. An engine whose tombstone column has one type
  /// (PostgreSQL keeps them as text) gives them back as text; each is read back into its
  /// column's storage class (``SQLValue/coerced(to:)``).
  private func preservedValues(
    change: Int64, entity: String, database: any StoreConnection
  ) throws -> [String: SQLValue] {
    let statement = try database.cachedStatement(
      "SELECT attribute, value FROM _history_tombstones WHERE change = ?")
    statement.bindInt64(change, at: 1)
    // The table's columns: a subclass's are among them.
    let columns = container.tables.first { $0.name == entity }?.columns ?? []
    var values: [String: SQLValue] = [:]
    while try statement.step() {
      let attribute = statement.text(at: 0)
      let value = statement.value(at: 1)
      values[attribute] =
        columns.first { $0.name == attribute }.map { value.coerced(to: $0.storageType) } ?? value
    }
    return values
  }
}
