import Foundation
import PersistenceCore

/// SQLite's words for the DDL the core writes (``SQLDialect``): the storage types' own names,
/// `AUTOINCREMENT` for a key never reused, untyped value columns, and `WITHOUT ROWID` for a
/// table keyed by its primary key alone. Text compares by code point, SQLite's default.
struct SQLiteDialect: SQLDialect {
  func typeName(of type: StorageType) -> String { type.rawValue }
  var textCollation: String? { nil }
  var neverReusedKey: String { "INTEGER PRIMARY KEY AUTOINCREMENT" }
  var assignedKey: String { "INTEGER PRIMARY KEY" }
  var anyValueType: String? { nil }
  var keyedTableSuffix: String { " WITHOUT ROWID" }

  func literal(_ value: SQLValue) -> String {
    switch value {
    case .null: "NULL"
    case .integer(let value): String(value)
    case .real(let value):
      value.isFinite ? "\(value)" : (value > 0 ? "9e999" : (value < 0 ? "-9e999" : "NULL"))
    case .text(let value): "'\(value.replacingOccurrences(of: "'", with: "''"))'"
    case .blob(let value): "x'\(hexadecimal(value))'"
    }
  }
}
