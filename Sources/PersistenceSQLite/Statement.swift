internal import CSQLite
import Foundation
import PersistenceCore

/// A prepared SQLite statement.
final class Statement: StoreStatement {
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
  // MARK: Reading

  /// The storage class of column `index` of the current row.
  @inline(__always) func storage(at index: Int32) -> ColumnStorage {
    switch sqlite3_column_type(handle, index) {
    case SQLITE_INTEGER: .integer
    case SQLITE_FLOAT: .real
    case SQLITE_TEXT: .text
    case SQLITE_BLOB: .blob
    default: .null
    }
  }
  @inline(__always) func int64(at index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }
  @inline(__always) func double(at index: Int32) -> Double { sqlite3_column_double(handle, index) }
  @inline(__always) func text(at index: Int32) -> String {
    guard let pointer = sqlite3_column_text(handle, index) else { return "" }
    let count = Int(sqlite3_column_bytes(handle, index))
    return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
  }
  /// The bytes of a BLOB or TEXT column, valid until the statement steps or resets.
  func bytes(at index: Int32) -> UnsafeRawBufferPointer {
    let pointer = sqlite3_column_blob(handle, index)
    let count = Int(sqlite3_column_bytes(handle, index))
    guard let pointer, count > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
    return UnsafeRawBufferPointer(start: pointer, count: count)
  }

  var columnCount: Int32 { sqlite3_column_count(handle) }
}
