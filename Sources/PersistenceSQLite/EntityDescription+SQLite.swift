import Foundation
import PersistenceCore

// The SQL SQLite's stores are made of: tables, columns and indexes for each entity.
extension EntityDescription {
  /// `CREATE TABLE` for a new store.
  var createTableSQL: String {
    let definitions = ["\"_pk\" INTEGER PRIMARY KEY AUTOINCREMENT"] + columns.map(\.definition)
    return "CREATE TABLE \(quoted(name)) (\(definitions.joined(separator: ", ")))"
  }

  /// `CREATE INDEX` statements for `.unique` and `.indexed` columns (``indexes``).
  var createIndexSQL: [String] {
    indexes.map { index in
      "CREATE \(index.isUnique ? "UNIQUE " : "")INDEX IF NOT EXISTS \(quoted(index.name)) ON \(quoted(name)) (\(index.columns.map(quoted).joined(separator: ", ")))"
    }
  }
}

extension EntityDescription.Column {
  /// The column definition. A non-optional column gets the model's default value, so a column
  /// added later fills existing rows with it; a to-one's key is a foreign key whose `ON DELETE`
  /// is the related side's rule (SQLite adds it to existing tables too, its default `NULL`).
  var definition: String {
    var text = "\(quoted(name)) \(storageType.rawValue)"
    if !isOptional {
      text += " NOT NULL DEFAULT \(defaultValue.sqlLiteral)"
    }
    if let reference {
      text +=
        " REFERENCES \(quoted(reference.table)) (\"_pk\") ON DELETE \(reference.onDelete.onDelete)"
    }
    return text
  }
}

extension SQLValue {
  /// The value as a SQL literal, for `DEFAULT` clauses only (never for user data in queries).
  var sqlLiteral: String {
    switch self {
    case .null: "NULL"
    case .integer(let value): String(value)
    case .real(let value):
      value.isFinite ? "\(value)" : (value > 0 ? "9e999" : (value < 0 ? "-9e999" : "NULL"))
    case .text(let value): "'\(value.replacingOccurrences(of: "'", with: "''"))'"
    case .blob(let value): "x'\(value.map { hexDigits[Int($0)] }.joined())'"
    }
  }
}

private let hexDigits: [String] = (0..<256).map { byte in
  let digits = Array("0123456789abcdef")
  return String([digits[byte >> 4], digits[byte & 15]])
}
