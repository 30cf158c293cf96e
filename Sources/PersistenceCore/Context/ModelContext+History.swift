import Foundation

extension ModelContext {
  /// The transactions matching `descriptor`, oldest first.
  ///
  /// Cost: an indexed range scan of the history after the token, O(transactions + changes).
  ///
  /// - Throws: ``PersistenceError/Code/historyTokenExpired`` when transactions after the token
  ///   were deleted by ``deleteHistory(before:)`` (do a full refetch, then continue from
  ///   ``currentHistoryToken()``), ``PersistenceError/Code/historyTokenForeign`` for a token of
  ///   another store, ``PersistenceError/Code/historyTokenUnknown`` for a token newer than any
  ///   this store issued.
  public func fetchHistory(_ descriptor: HistoryDescriptor = HistoryDescriptor()) throws
    -> [HistoryTransaction]
  {
    let database = try connection()
    let after = try historyStart(descriptor, database)
    var sql = "SELECT token, author, timestamp FROM _history_transactions WHERE token > ?"
    var bindings: [SQLValue] = [.integer(after)]
    if let authors = descriptor.authors {
      sql +=
        " AND author IN (\(Array(repeating: "?", count: authors.count).joined(separator: ", ")))"
      bindings += authors.sorted().map { .text($0) }
    }
    if !descriptor.excludedAuthors.isEmpty {
      let placeholders = Array(repeating: "?", count: descriptor.excludedAuthors.count)
      sql += " AND (author IS NULL OR author NOT IN (\(placeholders.joined(separator: ", "))))"
      bindings += descriptor.excludedAuthors.sorted().map { .text($0) }
    }
    sql += " ORDER BY token"
    let statement = try database.prepare(sql)
    statement.bindValues(bindings)
    var transactions: [HistoryTransaction] = []
    let limit = descriptor.fetchLimit ?? Int.max
    while transactions.count < limit, try statement.step() {
      let token = statement.int64(at: 0)
      let changes = try self.changes(
        token: token, entityNames: descriptor.entityNames, database: database)
      if descriptor.entityNames != nil && changes.isEmpty { continue }
      transactions.append(
        HistoryTransaction(
          token: HistoryToken(storeIdentifier: container.storeIdentifier, value: token),
          author: statement.isNull(at: 1) ? nil : statement.text(at: 1),
          timestamp: Date(timeIntervalSinceReferenceDate: statement.double(at: 2)),
          changes: changes))
    }
    return transactions
  }

  /// Deletes the transactions before `token` (keeping `token` itself and later ones). Fetching
  /// history after an older token then throws ``PersistenceError/Code/historyTokenExpired``.
  ///
  /// - Returns: How many transactions were deleted.
  @discardableResult
  public func deleteHistory(before token: HistoryToken) throws -> Int {
    try check(token)
    let database = try connection()
    try database.beginWriting()
    var deleted = 0
    do {
      for sql in [
        "DELETE FROM _history_tombstones WHERE change IN (SELECT id FROM _history_changes WHERE token < ?)",
        "DELETE FROM _history_changes WHERE token < ?",
        "DELETE FROM _history_transactions WHERE token < ?",
        "UPDATE \(StoreLayout.metaTable) SET value = ?1 WHERE key = 'history_floor' AND CAST(value AS BIGINT) < ?1",
      ] {
        let statement = try database.prepare(sql)
        statement.bindInt64(token.value, at: 1)
        try statement.run()
        if sql.hasPrefix("DELETE FROM _history_transactions") { deleted = database.changedRowCount }
      }
      try database.commit()
    } catch {
      try? database.rollback()
      throw error
    }
    return deleted
  }

  /// The token of the newest transaction this context can read (position 0 when there is
  /// none): history fetched after it holds only what happens from now on. In a read
  /// transaction (``withSnapshot(_:)``) it is the snapshot's: every transaction up to it is in
  /// the snapshot, none after it.
  public func currentHistoryToken() throws -> HistoryToken {
    // Not the engine's count of tokens issued: PostgreSQL's sequence is outside transactions,
    // so it counts a writer's token before its commit is readable, and commits after this
    // snapshot began. History deleted before a token keeps that token (the floor) current.
    // One kept statement reads both (every bbox page of `trips serve` asks for the token).
    let statement = try connection().cachedStatement(Self.currentTokenSQL)
    defer { statement.reset() }
    guard try statement.step() else {
      return HistoryToken(storeIdentifier: container.storeIdentifier, value: 0)
    }
    let newest = statement.isNull(at: 0) ? 0 : statement.int64(at: 0)
    let floor = statement.isNull(at: 1) ? 0 : statement.int64(at: 1)
    return HistoryToken(storeIdentifier: container.storeIdentifier, value: max(newest, floor - 1))
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
  ) throws -> [Value: HistoryTombstone] {
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
    var tombstones: [Value: HistoryTombstone] = [:]
    for (value, change) in changes {
      tombstones[value] = try tombstone(change: change, entity: entity.name, database: database)
    }
    return tombstones
  }

  /// The tombstone of the deletion of the row `identifier` names, by the history still kept;
  /// nil when it has none (the row exists, or its deletion was pruned, or its model preserves
  /// nothing). Cost: one query over the changes' index by row, one for the values.
  public func tombstone(of identifier: PersistentIdentifier) throws -> HistoryTombstone? {
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
    return try tombstone(change: change, entity: identifier.entityName, database: database)
  }

  private func check(_ token: HistoryToken) throws {
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
  /// `fetchLimit` counts transactions.
  ///
  /// Cost: one range scan of the changes' token index after the token, O(changes after it,
  /// of every model), a delete's tombstone read with it; nothing for a token that is current.
  ///
  /// - Throws: the errors of ``fetchHistory(_:)``, and `body`'s, which end the read.
  public func enumerateHistory(
    _ descriptor: HistoryDescriptor = HistoryDescriptor(),
    _ body: (_ transaction: HistoryTransaction, _ change: HistoryChange) throws -> Void
  ) throws {
    let database = try connection()
    let after = try historyStart(descriptor, database)
    // Driven by the changes' token index (a range after `after`, in order); the models are
    // told apart here, not in SQL, where a test of the entity would have the engine read its
    // whole index by entity and sort.
    var sql = """
      SELECT t.token, t.author, t.timestamp, c.id, c.entity, c.pk, c.kind, c.attributes
      FROM _history_changes c JOIN _history_transactions t ON t.token = c.token
      WHERE c.token > ?
      """
    var bindings: [SQLValue] = [.integer(after)]
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
    sql += " ORDER BY c.token, c.id"
    let statement = try database.prepare(sql)
    statement.bindValues(bindings)
    let limit = descriptor.fetchLimit ?? Int.max
    var transaction: HistoryTransaction?
    var count = 0
    while try statement.step() {
      if let entityNames = descriptor.entityNames, !entityNames.contains(statement.text(at: 4)) {
        continue
      }
      let token = statement.int64(at: 0)
      if transaction?.token.value != token {
        count += 1
        if count > limit { break }
        transaction = HistoryTransaction(
          token: HistoryToken(storeIdentifier: container.storeIdentifier, value: token),
          author: statement.isNull(at: 1) ? nil : statement.text(at: 1),
          timestamp: Date(timeIntervalSinceReferenceDate: statement.double(at: 2)), changes: [])
      }
      try body(transaction!, try change(statement, from: 3, database: database))
    }
  }

  /// The value after which `descriptor`'s history starts (0 for all kept), its token checked:
  /// of this store, not expired, not newer than any issued.
  private func historyStart(_ descriptor: HistoryDescriptor, _ database: any StoreConnection)
    throws -> Int64
  {
    guard let token = descriptor.token else { return 0 }
    try check(token)
    let floor = try historyFloor(database)
    guard token.value >= floor - 1 else {
      throw PersistenceError(
        code: .historyTokenExpired,
        message:
          "The history token \(token) has expired: the store no longer keeps the history after it (history before \(floor) was deleted). Refetch everything, then continue from the current token."
      )
    }
    let latest = try database.lastIssuedHistoryToken()
    guard token.value <= latest else {
      throw PersistenceError(
        code: .historyTokenUnknown,
        message:
          "The history token \(token) is newer than this store's history, which ends at \(latest): it was not issued by this copy of the store (was the store restored from an older backup?). Take a full copy instead of resuming from it."
      )
    }
    return token.value
  }

  /// The change of the row the current row of `statement` holds from column `first` on (id,
  /// entity, pk, kind, attributes), with its tombstone when it is a delete.
  private func change(
    _ statement: any StoreStatement, from first: Int32, database: any StoreConnection
  )
    throws -> HistoryChange
  {
    let entity = statement.text(at: first + 1)
    let kind: HistoryChange.Kind =
      switch statement.int64(at: first + 3) {
      case 0: .insert
      case 1: .update
      default: .delete
      }
    var change = HistoryChange(
      kind: kind,
      changedIdentifier: PersistentIdentifier(
        storeIdentifier: container.storeIdentifier, entityName: entity,
        primaryKey: statement.int64(at: first + 2)),
      updatedAttributes: statement.isNull(at: first + 4)
        ? [] : Set(statement.text(at: first + 4).split(separator: ",").map(String.init)),
      tombstone: nil)
    if kind == .delete {
      change.tombstone = try tombstone(
        change: statement.int64(at: first), entity: entity, database: database)
    }
    return change
  }

  private func changes(
    token: Int64, entityNames: Set<String>?, database: any StoreConnection
  ) throws -> [HistoryChange] {
    let statement = try database.cachedStatement(
      "SELECT id, entity, pk, kind, attributes FROM _history_changes WHERE token = ? ORDER BY id")
    statement.bindInt64(token, at: 1)
    var changes: [HistoryChange] = []
    while try statement.step() {
      if let entityNames, !entityNames.contains(statement.text(at: 1)) { continue }
      changes.append(try change(statement, from: 0, database: database))
    }
    return changes
  }

  /// The preserved values of a deleted row. An engine whose tombstone column has one type
  /// (PostgreSQL keeps them as text) gives them back as text; each is read back into its
  /// column's storage class (``SQLValue/coerced(to:)``).
  private func tombstone(
    change: Int64, entity: String, database: any StoreConnection
  ) throws -> HistoryTombstone {
    let statement = try database.cachedStatement(
      "SELECT attribute, value FROM _history_tombstones WHERE change = ?")
    statement.bindInt64(change, at: 1)
    let columns = container.entities.values.first { $0.name == entity }?.columns ?? []
    var values: [String: SQLValue] = [:]
    while try statement.step() {
      let attribute = statement.text(at: 0)
      let value = statement.value(at: 1)
      values[attribute] =
        columns.first { $0.name == attribute }.map { value.coerced(to: $0.storageType) } ?? value
    }
    return HistoryTombstone(values: values)
  }
}
