internal import CSQLite
import Foundation
import PersistenceCore

/// One SQLite connection and its statement cache.
///
/// Not thread-safe: each owner (a `ModelContext`, the engine while it opens the store) uses its
/// own connection from one thread at a time.
final class Database: StoreConnection {
  let handle: OpaquePointer
  let path: String
  /// The statements `cached(_:)` keeps (at most ``StatementCache/defaultCapacity``; a dropped
  /// one is finalized when its last holder lets it go).
  private var cache = StatementCache<Statement>()
  var collations: [String.StandardComparator: String] = [:]

  /// Opens a connection. `flags` are `SQLITE_OPEN_*` flags; URI filenames are always allowed.
  init(path: String, flags: Int32) throws {
    var handle: OpaquePointer?
    let result = sqlite3_open_v2(path, &handle, flags | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nil)
    guard result == SQLITE_OK, let handle else {
      let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
      if let handle { sqlite3_close_v2(handle) }
      throw PersistenceError(
        code: .cannotOpen,
        message:
          "Cannot open the store at \(path): \(message). Check the path and its permissions.",
        cause: SQLiteResult(code: result, message: message))
    }
    self.handle = handle
    self.path = path
    sqlite3_extended_result_codes(handle, 1)
    // The deadline in force (a server's request's): checked every 1,000 steps of SQLite's
    // virtual machine (about 10–50 µs of work; a Swift function of a predicate is one step),
    // so that a query stops inside a long step; SQLite then answers SQLITE_INTERRUPT.
    sqlite3_progress_handler(
      handle, 1_000, { _ in WorkDeadline.current?.shouldStop == true ? 1 : 0 }, nil)
  }

  deinit {
    cache.removeAll()
    sqlite3_close_v2(handle)
  }

  /// Runs one or more statements that take no parameters and return no rows of interest.
  func execute(_ sql: String) throws {
    var errorMessage: UnsafeMutablePointer<CChar>?
    let result = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
    if result != SQLITE_OK {
      let message =
        errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
      sqlite3_free(errorMessage)
      throw error(result, message: message, sql: sql)
    }
  }

  /// Prepares a statement that is not cached (for one-off SQL).
  func prepare(_ sql: String) throws -> any StoreStatement { try prepareStatement(sql) }

  /// Prepares a statement that is not cached (for one-off SQL).
  func prepareStatement(_ sql: String) throws -> Statement {
    var statement: OpaquePointer?
    let result = sqlite3_prepare_v3(handle, sql, -1, 0, &statement, nil)
    guard result == SQLITE_OK, let statement else {
      throw error(result, sql: sql)
    }
    return Statement(handle: statement, database: self)
  }

  /// Returns a prepared, reset statement for `sql`, preparing it once per connection.
  func cachedStatement(_ sql: String) throws -> any StoreStatement { try cached(sql) }

  /// Returns a prepared, reset statement for `sql`, preparing it once per connection.
  func cached(_ sql: String) throws -> Statement {
    if let statement = cache.statement(for: sql) {
      statement.reset()
      return statement
    }
    var prepared: OpaquePointer?
    let result = sqlite3_prepare_v3(
      handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
    guard result == SQLITE_OK, let prepared else {
      throw error(result, sql: sql)
    }
    let statement = Statement(handle: prepared, database: self)
    _ = cache.insert(statement, for: sql)  // dropped statements finalize as they go
    return statement
  }

  /// How many statements the cache keeps (for tests).
  var cachedStatementCount: Int { cache.count }

  /// The rowid of the last successful `INSERT`.
  var lastInsertedKey: Int64 { sqlite3_last_insert_rowid(handle) }

  /// Rows changed by the last statement.
  var changedRowCount: Int { Int(sqlite3_changes64(handle)) }

  /// Whether the connection is inside a transaction.
  var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

  /// Whether another context may use the connection: no transaction open and no statement
  /// left mid-step (which would hold a read snapshot). O(prepared statements).
  var isReusable: Bool {
    guard !isInTransaction else { return false }
    var statement = sqlite3_next_stmt(handle, nil)
    while let current = statement {
      if sqlite3_stmt_busy(current) != 0 { return false }
      statement = sqlite3_next_stmt(handle, current)
    }
    return true
  }

  /// `BEGIN IMMEDIATE`: the write lock now (waiting up to the busy timeout). A store file
  /// removed or replaced since this connection opened it is refused here: a write would land
  /// in a file no one can open again, and be lost without a word. One `stat` of the path.
  func beginWriting() throws {
    try execute("BEGIN IMMEDIATE")
    if fileHasMoved {
      try? rollback()
      throw PersistenceError(
        code: .cannotOpen,
        message:
          "The store at \(path) was removed or replaced after it was opened; nothing was written. Open it again."
      )
    }
  }

  /// Whether the file this connection opened is no longer at its path (removed, or replaced
  /// by another file): `SQLITE_FCNTL_HAS_MOVED`. False for an in-memory store.
  var fileHasMoved: Bool {
    var moved: Int32 = 0
    let result = sqlite3_file_control(handle, "main", SQLITE_FCNTL_HAS_MOVED, &moved)
    return result == SQLITE_OK && moved != 0
  }
  /// `BEGIN`: a read transaction from the first read on.
  func beginReading() throws { try execute("BEGIN") }
  func commit() throws { try execute("COMMIT") }
  func rollback() throws { try execute("ROLLBACK") }

  /// `AUTOINCREMENT` keeps the largest token ever issued in `sqlite_sequence`.
  func lastIssuedHistoryToken() throws -> Int64 {
    try scalarInt("SELECT seq FROM sqlite_sequence WHERE name = '_history_transactions'") ?? 0
  }

  /// `EXPLAIN QUERY PLAN`: the detail column of each step.
  func queryPlan(_ sql: String, bindings: [SQLValue]) throws -> [String] {
    let statement = try prepareStatement("EXPLAIN QUERY PLAN " + sql)
    statement.bindValues(bindings)
    var lines: [String] = []
    while try statement.step() { lines.append(statement.text(at: 3)) }
    return lines
  }

  /// `PRAGMA data_version`: a read of shared memory that changes only when another
  /// connection commits.
  func externalChangeCounter() throws -> Int64 {
    try scalarInt("PRAGMA data_version") ?? 0
  }

  /// Makes a ``PersistenceError`` from a SQLite result code, mapping the codes users can act on.
  func error(_ result: Int32, message: String? = nil, sql: String? = nil) -> PersistenceError {
    let text = message ?? String(cString: sqlite3_errmsg(handle))
    let cause = SQLiteResult(code: result, message: text)
    if result & 0xFF == SQLITE_INTERRUPT, let deadline = WorkDeadline.current, deadline.shouldStop {
      let stopped = deadline.error
      return PersistenceError(code: stopped.code, message: stopped.message, cause: cause)
    }
    switch result & 0xFF {
    case SQLITE_NOTADB:
      return PersistenceError(
        code: .notAStore,
        message:
          "The file at \(path) is not a SQLite database, or it is damaged. It was left untouched.",
        cause: cause)
    case SQLITE_CORRUPT:
      return PersistenceError(
        code: .notAStore,
        message:
          "The store at \(path) is damaged. It was left untouched; restore it from a backup.",
        cause: cause)
    case SQLITE_BUSY, SQLITE_LOCKED:
      return PersistenceError(
        code: .busy,
        message:
          "The store at \(path) stayed locked by another writer past the busy timeout. Try again.",
        cause: cause)
    case SQLITE_READONLY:
      return PersistenceError(
        code: .readOnly,
        message:
          "The store at \(path) is read-only. Check the permissions of the file and its folder.",
        cause: cause)
    case SQLITE_CONSTRAINT where result == 787:  // SQLITE_CONSTRAINT_FOREIGNKEY
      return PersistenceError(
        code: .relationshipConstraint,
        message:
          "A relationship's foreign key failed: a row would point to a row that does not exist (deleted by another writer, or never saved), or a deleted row still has related rows. Nothing was saved.",
        cause: cause)
    case SQLITE_CONSTRAINT:
      return PersistenceError(
        code: .uniqueConstraint, message: "A constraint failed: \(text).", cause: cause)
    case SQLITE_FULL:
      return PersistenceError(
        code: .storeFull,
        message:
          "The disk (or the store's size limit) is full at \(path). Nothing was written; free space and try again.",
        cause: cause)
    default:
      let location = sql.map { " while running \($0.prefix(200))" } ?? ""
      return PersistenceError(code: .engine, message: "SQLite failed\(location).", cause: cause)
    }
  }
}
