import Foundation

/// A database engine that keeps stores for ``ModelContainer``: the seam between the
/// engine-neutral core (schema, contexts, history, observers, the SQL builder) and one
/// engine's connections, statements and files, as SwiftData's `DataStore` is.
///
/// `PersistenceSQLite` provides `SQLiteEngine`, which `ModelContainer(for:configurations:)`
/// uses by default (through the `Persistence` module). An engine runs the SQL the core builds:
/// standard SQL with `?` parameters, double-quoted identifiers, and the functions and collations
/// listed in ``StoreConnection``.
public protocol StoreEngine: Sendable {
  /// Opens the store `configuration` names for `entities`: creates it when it is new, checks
  /// it (refusing a foreign or newer store untouched), and migrates it (adds tables and
  /// columns the entities declare) when the configuration allows saves.
  ///
  /// The store keeps the core's tables beside the entities' (see ``StoreLayout``).
  func openStore(
    _ configuration: ModelConfiguration, entities: [EntityDescription]
  ) throws -> any OpenStore

  /// Removes the store `configuration` names if nothing was ever committed to it (a store a
  /// failed first write created), under the store's write lock, so that what a writer elsewhere
  /// committed meanwhile is kept. A command line calls it when the command that created the
  /// store failed.
  ///
  /// - Returns: Whether the store was removed. An engine that does not create its stores keeps
  ///   every one (the default).
  func removeStoreIfUnwritten(_ configuration: ModelConfiguration) -> Bool
}

extension StoreEngine {
  /// Keeps the store: an engine that does not create stores has none to take back.
  public func removeStoreIfUnwritten(_ configuration: ModelConfiguration) -> Bool { false }
}

/// A store an engine has opened: what a ``ModelContainer`` keeps while it lives.
public protocol OpenStore: Sendable {
  /// The identity of the store, kept in it; history tokens carry it.
  var identifier: UUID { get }
  /// Whether the store is read as it was when opened (changes by others are not seen).
  var isImmutable: Bool { get }
  /// A new connection to the store. `cacheSizeKiB` overrides the configuration's cache
  /// (observers read little and keep a connection each).
  func makeConnection(cacheSizeKiB: Int?) throws -> any StoreConnection
  /// The problems the engine's own consistency check finds; empty when the store is sound.
  func checkIntegrity() throws -> [String]
}

/// The core's own tables, which every engine creates beside the entities' tables.
///
/// - `_persistence_meta (key TEXT PRIMARY KEY, value)`: `store_identifier` (a UUID string) and
///   `history_floor` (an integer: history before it was deleted).
/// - `_history_transactions (token INTEGER PRIMARY KEY, author TEXT, timestamp REAL, bundle TEXT,
///   process TEXT)`: tokens increase and are never reused, even after deletion; `bundle` and
///   `process` name the program that saved (``DefaultHistoryTransaction/bundleIdentifier``).
/// - `_history_changes (id INTEGER PRIMARY KEY, token, entity TEXT, pk INTEGER, kind INTEGER,
///   attributes TEXT, subentity TEXT)`, indexed by `token` and by `(entity, pk)`: `entity` is
///   the table, `subentity` the row's `"_entity"` when it is a subclass's (`NULL` otherwise).
/// - `_history_tombstones (change, attribute TEXT, value)`, keyed by `(change, attribute)`,
///   indexed by `(attribute, value)` (when was the row with this preserved value deleted).
///
/// Each entity's table has `"_pk" INTEGER PRIMARY KEY` (never reused) and one column per
/// attribute, named as the attribute.
public enum StoreLayout {
  /// The table of the store's own settings.
  public static let metaTable = "_persistence_meta"
  /// The history tables, in the order they are created.
  public static let historyTables = [
    "_history_transactions", "_history_changes", "_history_tombstones",
  ]
  /// The columns of the history tables that stores made before them lack, by table: opening
  /// such a store writable adds them (as nullable text), and reads before that refuse it.
  public static let addedHistoryColumns = [
    "_history_transactions": ["bundle", "process"], "_history_changes": ["subentity"],
  ]
  /// The indexes of the history tables.
  public static let historyIndexes = [
    "_history_changes_token", "_history_changes_row", "_history_tombstones_value",
  ]
}

/// One connection to a store, used by one owner (a ``ModelContext``, an observer) on one
/// thread at a time.
///
/// Besides standard SQL, the core's queries use these, which an engine provides:
/// - `swift_count(text)`: the number of `Character`s, as `String.count`;
/// - `swift_localized_standard_contains(text, text)`: as `localizedStandardContains`;
/// - the collation `swift_localized_standard`: as `localizedStandardCompare`;
/// - a collation per `String.StandardComparator` (``collation(for:)``).
public protocol StoreConnection: AnyObject {
  /// Runs one or more statements that take no parameters and return no rows of interest.
  func execute(_ sql: String) throws
  /// Prepares a statement for one use.
  func prepare(_ sql: String) throws -> any StoreStatement
  /// A prepared, reset statement for `sql`, prepared once per connection and kept.
  func cachedStatement(_ sql: String) throws -> any StoreStatement
  /// A prepared, reset `INSERT` statement for `sql` whose new row's key is read afterwards with
  /// ``lastInsertedKey``: `keyColumn` (quoted as the SQL quotes names) is the table's integer
  /// key, which an engine that cannot ask for the last key cheaply returns with the insert
  /// itself (PostgreSQL's `RETURNING`). Prepared once per connection and kept, as
  /// ``cachedStatement(_:)`` is.
  func cachedInsert(_ sql: String, keyColumn: String) throws -> any StoreStatement
  /// The primary key of the row the last successful `INSERT` made (read it right after a
  /// statement from ``cachedInsert(_:keyColumn:)``); throws when the engine cannot tell (a key
  /// read as 0 would be a wrong row, worse than an error).
  var lastInsertedKey: Int64 { get throws }
  /// How many rows the last statement changed.
  var changedRowCount: Int { get }
  /// Whether a transaction is open.
  var isInTransaction: Bool { get }
  /// Opens a write transaction, taking the store's write lock now (so that a writer waits
  /// for another at the start, not in the middle).
  func beginWriting() throws
  /// Opens a read transaction: every query until ``commit()`` sees one state of the store.
  func beginReading() throws
  /// Commits the open transaction.
  func commit() throws
  /// Rolls the open transaction back.
  func rollback() throws
  /// The name of a collation ordering text exactly as `comparator` does, made on first use.
  func collation(for comparator: String.StandardComparator) throws -> String
  /// The newest history token the store ever issued, deleted or not (0 for none).
  func lastIssuedHistoryToken() throws -> Int64
  /// The SQL of a parameter compared with a tombstone's value, as the tombstone table stores
  /// values: `?` where it keeps each value's own storage class (SQLite), a cast to the one
  /// type where it keeps them all as one (PostgreSQL's text).
  var tombstoneValueParameter: String { get }
  /// A condition that the SQL `column` is one of a list of keys bound as one text parameter
  /// (``keyListText(_:)``): what a prefetch binds any number of keys to, in one query, whatever
  /// the engine's limit on parameters. By default SQLite's: a JSON array read by `json_each`.
  func keyListCondition(_ column: String) -> String
  /// The text the parameter of ``keyListCondition(_:)`` holds for `keys`.
  func keyListText(_ keys: [Int64]) -> String
  /// How the engine would run `sql`, one line per step (for tests and tools that check that a
  /// query uses an index). Runs nothing.
  func queryPlan(_ sql: String, bindings: [SQLValue]) throws -> [String]
  /// A number that changes when another connection commits (and only then, as far as
  /// possible): what observers poll. O(1).
  func externalChangeCounter() throws -> Int64
  /// Whether the engine runs ``StoreFunctions`` with Swift's exact answers; see there.
  var evaluatesSwiftFunctions: Bool { get }
  /// Whether the connection can serve another context after its context is released: idle
  /// (no transaction, no statement left mid-step) and sound. Checked before the container keeps
  /// it for the next context.
  var isReusable: Bool { get }
  /// Waits until another connection may have committed, or `timeout` passes: what an
  /// observer's monitor does between two reads of ``externalChangeCounter()``. An engine told
  /// of commits (PostgreSQL's `LISTEN`) returns as soon as one is, and may wait longer than
  /// `timeout` for it (the counter is read after every wait, so a lost notice is made up for
  /// by the next one); the default sleeps for `timeout` (polling).
  func waitForExternalChange(timeout: Duration)
  /// How many runs of one statement a save hands ``runBatch(_:count:answer:binding:)`` at
  /// once: 1 (the default) for an engine in the process, where a run costs no round trip;
  /// more for an engine across a network.
  var batchLimit: Int { get }
  /// Runs `statement` `count` times, each after `binding(i)` has bound run `i`'s parameters
  /// (parameters a run leaves unbound keep the values bound before), and returns each run's
  /// `answer`.
  ///
  /// An engine across a network sends every run before it reads any answer: one round trip
  /// for the batch. The default runs them one after another. If a run fails, or `binding`
  /// throws, the first error is thrown once every answer sent for was read; the runs after a
  /// failed one do not happen, and those before it are undone with the transaction, which the
  /// caller rolls back.
  func runBatch(
    _ statement: any StoreStatement, count: Int, answer: BatchAnswer,
    binding: (Int) throws -> Void
  ) throws -> [Int64?]
}

/// What ``StoreConnection/runBatch(_:count:answer:binding:)`` reads of each run.
public enum BatchAnswer: Sendable {
  /// Nothing: every run's answer is nil.
  case none
  /// The first column of the run's first row as an integer; nil when it returns no row.
  case firstColumn
  /// The key of the row the run inserted (``StoreConnection/lastInsertedKey``), for a statement
  /// from ``StoreConnection/cachedInsert(_:keyColumn:)``.
  case insertedKey
  /// How many rows the run changed (``StoreConnection/changedRowCount``).
  case changedRowCount
}

extension StoreConnection {
  /// `column IN (SELECT value FROM json_each(?))`.
  public func keyListCondition(_ column: String) -> String {
    "\(column) IN (SELECT value FROM json_each(?))"
  }

  /// The keys as a JSON array.
  public func keyListText(_ keys: [Int64]) -> String {
    "[" + keys.map(String.init).joined(separator: ",") + "]"
  }

  /// Whether the engine runs the functions and the collation of ``StoreFunctions`` with Swift's
  /// exact answers (SQLite calls Swift itself). When it does not, queries that need them are
  /// narrowed in SQL and finished in Swift (see ``StoreFunctions``). True unless an engine says
  /// otherwise.
  public var evaluatesSwiftFunctions: Bool { true }

  /// Reusable when no transaction is open.
  public var isReusable: Bool { !isInTransaction }

  /// ``cachedStatement(_:)``: an engine whose last inserted key is a cheap call needs nothing
  /// more.
  public func cachedInsert(_ sql: String, keyColumn: String) throws -> any StoreStatement {
    try cachedStatement(sql)
  }

  /// Sleeps for `timeout`: an engine without notices of other connections' commits is polled.
  public func waitForExternalChange(timeout: Duration) {
    let (seconds, attoseconds) = timeout.components
    Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
  }

  /// One run at a time: nothing is gained by sending ahead to an engine in the process.
  public var batchLimit: Int { 1 }

  /// Runs `statement` once per run, one after another: O(`count`) runs, no round trip saved.
  public func runBatch(
    _ statement: any StoreStatement, count: Int, answer: BatchAnswer,
    binding: (Int) throws -> Void
  ) throws -> [Int64?] {
    try runInTurn(statement, count: count, answer: answer, binding: binding)
  }

  /// ``runBatch(_:count:answer:binding:)`` one run after another, as the default does: for an
  /// engine's own batches too small to send ahead. O(`count`) runs.
  public func runInTurn(
    _ statement: any StoreStatement, count: Int, answer: BatchAnswer,
    binding: (Int) throws -> Void
  ) throws -> [Int64?] {
    var answers: [Int64?] = []
    answers.reserveCapacity(count)
    defer { statement.rewind() }
    for index in 0..<count {
      statement.rewind()
      try binding(index)
      switch answer {
      case .none:
        try statement.run()
        answers.append(nil)
      case .firstColumn:
        answers.append(try statement.step() ? statement.int64(at: 0) : nil)
      case .insertedKey:
        try statement.run()
        answers.append(try lastInsertedKey)
      case .changedRowCount:
        try statement.run()
        answers.append(Int64(changedRowCount))
      }
    }
    return answers
  }

  /// The first column of the first row of `sql` as an integer, or nil.
  public func scalarInt(_ sql: String) throws -> Int64? {
    let statement = try prepare(sql)
    guard try statement.step() else { return nil }
    return statement.isNull(at: 0) ? nil : statement.int64(at: 0)
  }

  /// The first column of the first row of `sql` as text, or nil.
  public func scalarText(_ sql: String) throws -> String? {
    let statement = try prepare(sql)
    guard try statement.step() else { return nil }
    return statement.isNull(at: 0) ? nil : statement.text(at: 0)
  }
}

/// What a column of the current row holds.
public enum ColumnStorage: Sendable, Equatable {
  /// `NULL`.
  case null
  /// A 64-bit integer.
  case integer
  /// A 64-bit float.
  case real
  /// UTF-8 text.
  case text
  /// Bytes.
  case blob
}

/// The current row of a running query: columns by 0-based index, valid until the query steps
/// again. ``PersistableValue``s read themselves from it.
public protocol StoreRow: AnyObject {
  /// What column `index` holds.
  func storage(at index: Int32) -> ColumnStorage
  /// Column `index` as an integer.
  func int64(at index: Int32) -> Int64
  /// Column `index` as a float.
  func double(at index: Int32) -> Double
  /// Column `index` as text.
  func text(at index: Int32) -> String
  /// The bytes of a blob or text column, valid until the query steps or resets.
  func bytes(at index: Int32) -> UnsafeRawBufferPointer
}

extension StoreRow {
  /// Whether column `index` is `NULL`.
  @inlinable public func isNull(at index: Int32) -> Bool { storage(at: index) == .null }

  /// Column `index` as bytes.
  public func data(at index: Int32) -> Data {
    let bytes = bytes(at: index)
    return bytes.isEmpty ? Data() : Data(bytes)
  }

  /// Column `index` as a value.
  public func value(at index: Int32) -> SQLValue {
    switch storage(at: index) {
    case .null: .null
    case .integer: .integer(int64(at: index))
    case .real: .real(double(at: index))
    case .text: .text(text(at: index))
    case .blob: .blob(data(at: index))
    }
  }
}

/// A prepared statement: parameters (1-based) bound before it runs, rows read as it steps.
public protocol StoreStatement: StoreRow {
  /// Binds `NULL`.
  func bindNull(_ index: Int32)
  /// Binds an integer.
  func bindInt64(_ value: Int64, at index: Int32)
  /// Binds a float.
  func bindDouble(_ value: Double, at index: Int32)
  /// Binds text.
  func bindText(_ value: String, at index: Int32)
  /// Binds a copy of `bytes` as a blob.
  func bindBytes(_ bytes: UnsafeRawBufferPointer, at index: Int32)
  /// Steps once: true when a row is available, false when done.
  func step() throws -> Bool
  /// Resets the statement to run again and clears its bindings.
  func reset()
  /// Resets the statement to run again, keeping its bindings (the caller rebinds those that
  /// change).
  func rewind()
  /// Tells the statement that every column it returns is a column of the layer's own tables
  /// (the primary key, an attribute) or a count, whose types the engine knows: an engine that
  /// reads some types in a binary form can then ask for it from the first run (PostgreSQL
  /// otherwise learns the types when it prepares the statement, on its second run). Does
  /// nothing by default.
  func returnsTableColumns()
}

extension StoreStatement {
  /// Nothing to do for an engine that reads every column the same way.
  public func returnsTableColumns() {}

  /// Binds bytes as a blob.
  public func bindData(_ value: Data, at index: Int32) {
    value.withUnsafeBytes { bindBytes($0, at: index) }
  }

  /// Binds a value.
  public func bindValue(_ value: SQLValue, at index: Int32) {
    switch value {
    case .null: bindNull(index)
    case .integer(let value): bindInt64(value, at: index)
    case .real(let value): bindDouble(value, at: index)
    case .text(let value): bindText(value, at: index)
    case .blob(let value): bindData(value, at: index)
    }
  }

  /// Binds values to parameters 1, 2, ….
  public func bindValues(_ values: [SQLValue]) {
    for (offset, value) in values.enumerated() { bindValue(value, at: Int32(offset + 1)) }
  }

  /// Steps to completion, ignoring rows.
  public func run() throws {
    while try step() {}
  }
}

/// The names of the SQL functions and the collation the core's queries use, with exactly Swift's
/// answers.
///
/// An engine that cannot give Swift's answers (a server that cannot call Swift) says so with
/// ``StoreConnection/evaluatesSwiftFunctions``; the core then never asks it for them: a predicate
/// using one is narrowed in SQL (the call taken as unknown, rows kept unless the rest of the
/// predicate rules them out) and finished in Swift with `Predicate.evaluate`, and a sort using
/// the collation is done in Swift, before the offset and limit are applied. Answers are then
/// exact on every engine; such a query costs O(candidate rows) in Swift.
public enum StoreFunctions {
  /// `swift_count(text)`: the number of `Character`s, as `String.count`.
  public static let count = "swift_count"
  /// `swift_localized_standard_contains(text, text)`: 1 or 0, as `localizedStandardContains`.
  public static let localizedStandardContains = "swift_localized_standard_contains"
  /// The collation `swift_localized_standard`: as `localizedStandardCompare`.
  public static let localizedStandardCollation = "swift_localized_standard"
}
