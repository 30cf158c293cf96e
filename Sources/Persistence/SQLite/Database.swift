import CSQLite
import Foundation

/// One SQLite connection and its statement cache.
///
/// Not thread-safe: each owner (a ``ModelContext``, the container while it opens the store)
/// uses its own connection from one thread at a time.
final class Database {
  let handle: OpaquePointer
  let path: String
  private var cache: [String: Statement] = [:]
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
  func prepare(_ sql: String) throws -> Statement {
    var statement: OpaquePointer?
    let result = sqlite3_prepare_v3(handle, sql, -1, 0, &statement, nil)
    guard result == SQLITE_OK, let statement else {
      throw error(result, sql: sql)
    }
    return Statement(handle: statement, database: self)
  }

  /// Returns a prepared, reset statement for `sql`, preparing it once per connection.
  func cachedStatement(_ sql: String) throws -> Statement {
    if let statement = cache[sql] {
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
    cache[sql] = statement
    return statement
  }

  /// The rowid of the last successful `INSERT`.
  var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

  /// Rows changed by the last statement.
  var changes: Int { Int(sqlite3_changes64(handle)) }

  /// Whether the connection is inside a transaction.
  var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

  /// Returns the first column of the first row of `sql` as an integer, or nil.
  func scalarInt(_ sql: String) throws -> Int64? {
    let statement = try prepare(sql)
    guard try statement.step() else { return nil }
    return statement.isNull(at: 0) ? nil : statement.int64(at: 0)
  }

  /// Returns the first column of the first row of `sql` as text, or nil.
  func scalarText(_ sql: String) throws -> String? {
    let statement = try prepare(sql)
    guard try statement.step() else { return nil }
    return statement.isNull(at: 0) ? nil : statement.text(at: 0)
  }

  /// Makes a ``PersistenceError`` from a SQLite result code, mapping the codes users can act on.
  func error(_ result: Int32, message: String? = nil, sql: String? = nil) -> PersistenceError {
    let text = message ?? String(cString: sqlite3_errmsg(handle))
    let cause = SQLiteResult(code: result, message: text)
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
      return PersistenceError(code: .sqlite, message: "SQLite failed\(location).", cause: cause)
    }
  }
}

/// A prepared SQLite statement, opaque outside this library: ``PersistableValue``s read from
/// and bind to it.
public final class Statement {
  let handle: OpaquePointer
  unowned let database: Database

  init(handle: OpaquePointer, database: Database) {
    self.handle = handle
    self.database = database
  }

  deinit { sqlite3_finalize(handle) }

  /// Resets the statement and clears its bindings.
  func reset() {
    sqlite3_reset(handle)
    sqlite3_clear_bindings(handle)
  }

  /// Resets the statement to run again, keeping its bindings (the caller rebinds them all).
  @inline(__always) func rewind() { sqlite3_reset(handle) }

  /// Steps once. Returns true when a row is available, false when done.
  @inline(__always)
  func step() throws -> Bool {
    let result = sqlite3_step(handle)
    switch result {
    case SQLITE_ROW: return true
    case SQLITE_DONE: return false
    default:
      let sql = sqlite3_sql(handle).map { String(cString: $0) }
      sqlite3_reset(handle)
      throw database.error(result, sql: sql)
    }
  }

  /// Steps to completion, ignoring rows.
  func run() throws {
    while try step() {}
  }

  // MARK: Binding

  @inline(__always) func bindNull(_ index: Int32) { sqlite3_bind_null(handle, index) }
  @inline(__always) func bindInt64(_ value: Int64, at index: Int32) {
    sqlite3_bind_int64(handle, index, value)
  }
  @inline(__always) func bindDouble(_ value: Double, at index: Int32) {
    sqlite3_bind_double(handle, index, value)
  }
  @inline(__always) func bindText(_ value: String, at index: Int32) {
    var value = value
    value.withUTF8 { buffer in
      buffer.withMemoryRebound(to: CChar.self) { chars in
        if let base = chars.baseAddress {
          _ = sqlite3_bind_text(handle, index, base, Int32(chars.count), csqlite_transient())
        } else {
          _ = sqlite3_bind_text(handle, index, "", 0, csqlite_transient())
        }
      }
    }
  }
  @inline(__always) func bindData(_ value: Data, at index: Int32) {
    value.withUnsafeBytes { buffer in
      _ = sqlite3_bind_blob(
        handle, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(buffer.count),
        csqlite_transient())
    }
  }
  /// Binds a copy of `bytes` as a BLOB.
  @inline(__always) func bindBytes(_ bytes: UnsafeRawBufferPointer, at index: Int32) {
    _ = sqlite3_bind_blob(
      handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count),
      csqlite_transient())
  }
  func bindValue(_ value: SQLValue, at index: Int32) {
    switch value {
    case .null: bindNull(index)
    case .integer(let value): bindInt64(value, at: index)
    case .real(let value): bindDouble(value, at: index)
    case .text(let value): bindText(value, at: index)
    case .blob(let value): bindData(value, at: index)
    }
  }
  func bindValues(_ values: [SQLValue]) {
    for (offset, value) in values.enumerated() { bindValue(value, at: Int32(offset + 1)) }
  }

  // MARK: Reading

  @usableFromInline @inline(__always) func isNull(at index: Int32) -> Bool {
    sqlite3_column_type(handle, index) == SQLITE_NULL
  }
  /// The storage class of column `index` of the current row: `SQLITE_INTEGER`, `SQLITE_FLOAT`,
  /// `SQLITE_TEXT`, `SQLITE_BLOB` or `SQLITE_NULL`.
  @usableFromInline @inline(__always) func storageClass(at index: Int32) -> Int32 {
    sqlite3_column_type(handle, index)
  }
  @inline(__always) func int64(at index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }
  @inline(__always) func double(at index: Int32) -> Double { sqlite3_column_double(handle, index) }
  @inline(__always) func text(at index: Int32) -> String {
    guard let pointer = sqlite3_column_text(handle, index) else { return "" }
    let count = Int(sqlite3_column_bytes(handle, index))
    return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
  }
  @usableFromInline @inline(__always) func data(at index: Int32) -> Data {
    let count = Int(sqlite3_column_bytes(handle, index))
    guard count > 0, let pointer = sqlite3_column_blob(handle, index) else { return Data() }
    return Data(bytes: pointer, count: count)
  }
  /// The bytes of a BLOB or TEXT column, valid until the statement steps or resets.
  @usableFromInline func bytes(at index: Int32) -> UnsafeRawBufferPointer {
    let pointer = sqlite3_column_blob(handle, index)
    let count = Int(sqlite3_column_bytes(handle, index))
    guard let pointer, count > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
    return UnsafeRawBufferPointer(start: pointer, count: count)
  }

  func value(at index: Int32) -> SQLValue {
    switch sqlite3_column_type(handle, index) {
    case SQLITE_NULL: .null
    case SQLITE_INTEGER: .integer(int64(at: index))
    case SQLITE_FLOAT: .real(double(at: index))
    case SQLITE_TEXT: .text(text(at: index))
    default: .blob(data(at: index))
    }
  }
  var columnCount: Int32 { sqlite3_column_count(handle) }
}
