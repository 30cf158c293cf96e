import Foundation

/// The words in which one engine's DDL differs from another's. The core writes every table a
/// store holds — its own (``StoreLayout``) and each entity's — from these; an engine supplies
/// its dialect and runs the statements.
///
/// SQLite's and PostgreSQL's stores have the same tables, columns and indexes under the same
/// names; only the spelling of a type, a key that is never reused, a collation and a table
/// without a row id differs.
package protocol SQLDialect: Sendable {
  /// The type of a column holding `type`, as the engine's catalog reports it (the schema check
  /// compares the two).
  func typeName(of type: StorageType) -> String
  /// The collation of text columns (compare by code point), or nil for the engine's default.
  var textCollation: String? { get }
  /// An integer primary key the engine never reuses, even after the latest row is deleted.
  var neverReusedKey: String { get }
  /// An integer primary key the engine assigns.
  var assignedKey: String { get }
  /// The type of a column that holds a value of any type (for SQLite, none: the value keeps its
  /// own).
  var anyValueType: String? { get }
  /// What follows the closing parenthesis of a table keyed by its primary key alone.
  var keyedTableSuffix: String { get }
  /// `value` as a literal, for `DEFAULT` clauses (never for user data in queries).
  func literal(_ value: SQLValue) -> String
}

extension SQLDialect {
  /// The type of a column holding `type`, with the text collation when it is text.
  package func columnType(_ type: StorageType) -> String {
    let name = typeName(of: type)
    guard type == .text, let collation = textCollation else { return name }
    return "\(name) COLLATE \(quoted(collation))"
  }

  /// The core's tables and indexes (``StoreLayout``), each created where it is missing, and the
  /// history floor's first value. One script, run in the transaction that creates a store.
  package var coreTables: String {
    let integer = columnType(.integer)
    let real = columnType(.real)
    let text = columnType(.text)
    let anyValue = anyValueType.map { " \($0)" } ?? ""
    let meta = StoreLayout.metaTable
    return """
      CREATE TABLE IF NOT EXISTS \(meta) (
        key \(text) PRIMARY KEY, value\(anyValue))\(keyedTableSuffix);
      CREATE TABLE IF NOT EXISTS _history_transactions (
        token \(neverReusedKey), author \(text), timestamp \(real) NOT NULL, bundle \(text),
        process \(text));
      CREATE TABLE IF NOT EXISTS _history_changes (
        id \(assignedKey), token \(integer) NOT NULL, entity \(text) NOT NULL,
        pk \(integer) NOT NULL, kind \(integer) NOT NULL, attributes \(text), subentity \(text));
      CREATE INDEX IF NOT EXISTS _history_changes_token ON _history_changes (token);
      CREATE INDEX IF NOT EXISTS _history_changes_row ON _history_changes (entity, pk);
      CREATE TABLE IF NOT EXISTS _history_tombstones (
        change \(integer) NOT NULL, attribute \(text) NOT NULL, value\(anyValue),
        PRIMARY KEY (change, attribute))\(keyedTableSuffix);
      CREATE INDEX IF NOT EXISTS _history_tombstones_value ON _history_tombstones (attribute, value);
      INSERT INTO \(meta) (key, value) VALUES ('history_floor', \(literal(.integer(0))))
        ON CONFLICT (key) DO NOTHING;
      """
  }

  /// `CREATE TABLE` for `entity`: `_pk` a key never reused, then one column per attribute.
  package func createTable(_ entity: EntityDescription) -> String {
    let definitions = ["\"_pk\" \(neverReusedKey)"] + entity.columns.map(definition)
    return "CREATE TABLE \(quoted(entity.name)) (\(definitions.joined(separator: ", ")))"
  }

  /// `CREATE INDEX` statements for `entity`'s `.unique` and `.indexed` columns
  /// (``EntityDescription/indexes``), each doing nothing where the index exists.
  package func createIndexes(_ entity: EntityDescription) -> [String] {
    entity.indexes.map { index in
      let columns = index.columns.map(quoted).joined(separator: ", ")
      return
        "CREATE \(index.isUnique ? "UNIQUE " : "")INDEX IF NOT EXISTS \(quoted(index.name)) ON \(quoted(entity.name)) (\(columns))"
    }
  }

  /// `ALTER TABLE … ADD COLUMN` for `column`, existing rows filled with its default value.
  package func addColumn(_ column: EntityDescription.Column, to entity: EntityDescription) -> String
  {
    "ALTER TABLE \(quoted(entity.name)) ADD COLUMN \(definition(column))"
  }

  /// A column's definition. A non-optional column gets the model's default value, so a column
  /// added later fills existing rows with it; a to-one's key is a foreign key whose
  /// `ON DELETE` is the related side's rule.
  package func definition(_ column: EntityDescription.Column) -> String {
    var text = "\(quoted(column.name)) \(columnType(column.storageType))"
    if !column.isOptional {
      text += " NOT NULL DEFAULT \(literal(column.defaultValue))"
    }
    if let reference = column.reference {
      text +=
        " REFERENCES \(quoted(reference.table)) (\"_pk\") ON DELETE \(reference.onDelete.onDelete)"
    }
    return text
  }
}

/// `bytes` as lowercase hexadecimal digits, two per byte (for blob literals).
package func hexadecimal(_ bytes: Data) -> String {
  let digits = Array("0123456789abcdef".utf8)
  var text: [UInt8] = []
  text.reserveCapacity(bytes.count * 2)
  for byte in bytes {
    text.append(digits[Int(byte >> 4)])
    text.append(digits[Int(byte & 15)])
  }
  return String(decoding: text, as: UTF8.self)
}
