/// The type-erased description of one model type, as the container and history see it.
struct EntityDescription: Sendable {
  struct Column: Sendable {
    var name: String
    var storageType: StorageType
    var isOptional: Bool
    var isUnique: Bool
    var isIndexed: Bool
    /// The further columns of its index, if it spans several.
    var indexCompanions: [String]
    var defaultValue: SQLValue
  }
  var name: String
  var columns: [Column]
  var modelType: ObjectIdentifier

  init<Model: PersistentModel>(_: Model.Type) throws {
    let schema = Model.schema
    try schema.validate()
    let defaults = Model()
    name = schema.name
    modelType = ObjectIdentifier(Model.self)
    columns = try schema.attributes.map { attribute in
      Column(
        name: attribute.name, storageType: attribute.storageType, isOptional: attribute.isOptional,
        isUnique: attribute.isUnique, isIndexed: attribute.isIndexed,
        indexCompanions: attribute.indexCompanions,
        defaultValue: try attribute.value(defaults))
    }
  }

  /// `CREATE TABLE` for a new store.
  var createTableSQL: String {
    let definitions = ["\"_pk\" INTEGER PRIMARY KEY AUTOINCREMENT"] + columns.map(\.definition)
    return "CREATE TABLE \(quoted(name)) (\(definitions.joined(separator: ", ")))"
  }

  /// The names of the indexes for `.unique` and `.indexed` columns.
  var indexNames: [String] {
    columns.compactMap { column in
      if column.isUnique { return "\(name)_\(column.name)_unique" }
      if !column.indexCompanions.isEmpty {
        return "\(name)_" + ([column.name] + column.indexCompanions).joined(separator: "_")
          + "_index"
      }
      if column.isIndexed { return "\(name)_\(column.name)_index" }
      return nil
    }
  }

  /// `CREATE INDEX` statements for `.unique` and `.indexed` columns.
  var createIndexSQL: [String] {
    columns.compactMap { column in
      if column.isUnique {
        return
          "CREATE UNIQUE INDEX IF NOT EXISTS \(quoted("\(name)_\(column.name)_unique")) ON \(quoted(name)) (\(quoted(column.name)))"
      }
      if !column.indexCompanions.isEmpty {
        let columns = [column.name] + column.indexCompanions
        let indexName = "\(name)_" + columns.joined(separator: "_") + "_index"
        return
          "CREATE INDEX IF NOT EXISTS \(quoted(indexName)) ON \(quoted(name)) (\(columns.map(quoted).joined(separator: ", ")))"
      }
      if column.isIndexed {
        return
          "CREATE INDEX IF NOT EXISTS \(quoted("\(name)_\(column.name)_index")) ON \(quoted(name)) (\(quoted(column.name)))"
      }
      return nil
    }
  }
}

extension EntityDescription.Column {
  /// The column definition. A non-optional column gets the model's default value, so a column
  /// added later fills existing rows with it.
  var definition: String {
    var text = "\(quoted(name)) \(storageType.rawValue)"
    if !isOptional {
      text += " NOT NULL DEFAULT \(defaultValue.sqlLiteral)"
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
