import Foundation

/// Writes one history transaction and its changes, inside the caller's transaction.
final class HistoryWriter {
  let database: any StoreConnection
  private(set) var token: Int64?
  private(set) var changeCount = 0
  /// The change insert, prepared once per save rather than looked up by its SQL per row; and
  /// the one whose new row's key is read (for a deletion's tombstone values). On an engine
  /// whose last inserted key needs no `RETURNING` the two are one statement.
  private var changeStatement: (any StoreStatement)?
  private var keyedChangeStatement: (any StoreStatement)?
  /// The token, entity and subentity each of those statements has bound, by the statement's
  /// identity: a statement that is rewound keeps its bindings, so a save of many rows of one
  /// entity binds those once, not per row (about 1k instructions a row). Taking a statement
  /// from the connection's cache resets it, which forgets its entry.
  private var bound:
    [(statement: ObjectIdentifier, token: Int64, entity: String, subentity: String?)] = []

  init(database: any StoreConnection) { self.database = database }

  /// The program that saves, as a transaction records it: its bundle identifier (on Linux,
  /// where programs have none, its process name) and its process identifier.
  static let program = (
    bundle: Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName,
    process: String(ProcessInfo.processInfo.processIdentifier)
  )

  func begin(author: String?, timestamp: Date) throws {
    let statement = try database.cachedInsert(
      "INSERT INTO _history_transactions (author, timestamp, bundle, process) VALUES (?, ?, ?, ?)",
      keyColumn: "token")
    // NFC, as stored text is: a history predicate's `author ==` runs in SQL on the bytes.
    if let author { statement.bindText(author.nfc, at: 1) } else { statement.bindNull(1) }
    statement.bindDouble(timestamp.timeIntervalSinceReferenceDate, at: 2)
    statement.bindText(Self.program.bundle, at: 3)
    statement.bindText(Self.program.process, at: 4)
    try statement.run()
    token = try database.lastInsertedKey
  }

  /// The statement that writes a change row (the one that returns the row's key when
  /// `needsKey`), rewound, with this transaction's token, `entity` and `subentity` bound.
  private func changeStatement(needsKey: Bool, entity: String, subentity: String?) throws
    -> any StoreStatement
  {
    let statement: any StoreStatement
    if let prepared = needsKey ? keyedChangeStatement : changeStatement {
      statement = prepared
      statement.rewind()
    } else {
      let sql =
        "INSERT INTO _history_changes (token, entity, pk, kind, attributes, subentity) VALUES (?, ?, ?, ?, ?, ?)"
      if needsKey {
        statement = try database.cachedInsert(sql, keyColumn: "id")
        keyedChangeStatement = statement
      } else {
        statement = try database.cachedStatement(sql)
        changeStatement = statement
      }
      // Reset by the cache: whatever it had bound is gone.
      bound.removeAll { $0.statement == ObjectIdentifier(statement) }
    }
    let token = token ?? 0
    let identity = ObjectIdentifier(statement)
    if let index = bound.firstIndex(where: { $0.statement == identity }) {
      if bound[index].token != token {
        statement.bindInt64(token, at: 1)
        bound[index].token = token
      }
      if bound[index].entity != entity {
        statement.bindText(entity, at: 2)
        bound[index].entity = entity
      }
      if bound[index].subentity != subentity {
        if let subentity { statement.bindText(subentity, at: 6) } else { statement.bindNull(6) }
        bound[index].subentity = subentity
      }
    } else {
      statement.bindInt64(token, at: 1)
      statement.bindText(entity, at: 2)
      if let subentity { statement.bindText(subentity, at: 6) } else { statement.bindNull(6) }
      bound.append((identity, token, entity, subentity))
    }
    return statement
  }

  /// Records the insert of each of `keys`, rows of `entity` (of its subclass at the path
  /// `subentity`, when one), in one ``StoreConnection/runBatch(_:count:answer:binding:)``.
  /// O(`keys`).
  func recordInserts(entity: String, subentity: String?, keys: [Int64]) throws {
    try recordBatch(.insert, entity: entity, subentity: subentity, keys: keys, attributes: nil)
  }

  /// Records the update of `attributes` in each of `keys`, rows of `entity`, in one
  /// ``StoreConnection/runBatch(_:count:answer:binding:)``. O(`keys` + `attributes`).
  func recordUpdates(entity: String, subentity: String?, keys: [Int64], attributes: [String])
    throws
  {
    try recordBatch(
      .update, entity: entity, subentity: subentity, keys: keys, attributes: attributes)
  }

  private func recordBatch(
    _ kind: ModelContext.ChangeKind, entity: String, subentity: String?, keys: [Int64],
    attributes: [String]?
  ) throws {
    guard token != nil, !keys.isEmpty else { return }
    let statement = try changeStatement(needsKey: false, entity: entity, subentity: subentity)
    let listed = attributes?.joined(separator: ",")
    _ = try database.runBatch(statement, count: keys.count, answer: .none) {
      statement.bindInt64(keys[$0], at: 3)
      statement.bindInt64(kind.rawValue, at: 4)
      if let listed { statement.bindText(listed, at: 5) } else { statement.bindNull(5) }
    }
    changeCount += keys.count
  }

  func record(
    _ kind: ModelContext.ChangeKind, entity: String, subentity: String?, key: Int64,
    attributes: [String] = [], tombstone: [(String, SQLValue)] = []
  ) throws {
    guard token != nil else { return }
    let statement = try changeStatement(
      needsKey: !tombstone.isEmpty, entity: entity, subentity: subentity)
    statement.bindInt64(key, at: 3)
    statement.bindInt64(kind.rawValue, at: 4)
    if kind == .update {
      statement.bindText(attributes.joined(separator: ","), at: 5)
    } else {
      statement.bindNull(5)
    }
    try statement.run()
    changeCount += 1
    guard !tombstone.isEmpty else { return }
    let change = try database.lastInsertedKey
    let insert = try database.cachedStatement(
      "INSERT INTO _history_tombstones (change, attribute, value) VALUES (?, ?, ?)")
    for (attribute, value) in tombstone {
      insert.reset()
      insert.bindInt64(change, at: 1)
      insert.bindText(attribute, at: 2)
      insert.bindValue(value, at: 3)
      try insert.run()
    }
  }
}
