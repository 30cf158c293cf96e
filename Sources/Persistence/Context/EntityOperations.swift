/// The type-erased operations a ``ModelContext`` needs on one model type, so that registrations
/// of different models can live in one identity map.
protocol EntityOperations {
  var name: String { get }
  var columnNames: [String] { get }
  /// SQL the context runs for this entity, made once.
  var statements: EntityStatements { get }
  var uniqueIndexes: [Int] { get }
  var preservedIndexes: [Int] { get }
  func snapshot(_ model: AnyObject) throws -> [Any]
  func changedIndexes(_ model: AnyObject, from snapshot: [Any]) -> [Int]
  func restore(_ model: AnyObject, from snapshot: [Any])
  func bind(_ model: AnyObject, attribute: Int, to statement: Statement, at index: Int32) throws
  func value(_ model: AnyObject, attribute: Int) throws -> SQLValue
  func assign(_ model: AnyObject, attribute: Int, value: SQLValue) throws
  func load(_ model: AnyObject, from statement: Statement, firstColumn: Int32, cache: LoadCache)
    throws -> [Any]
  func validate(_ model: AnyObject) throws
}

/// The SQL a context runs for one entity, built once per entity rather than once per row.
struct EntityStatements {
  let table: String
  let quotedColumns: [String]
  let insert: String
  let selectByKey: String
  let delete: String
  /// `SELECT "_pk" FROM table WHERE "unique" = ?`, by attribute index.
  let lookup: [Int: String]
  /// `SELECT preserved columns FROM table WHERE "_pk" = ?`, or nil.
  let tombstone: String?

  init(name: String, columns: [String], unique: [Int], preserved: [Int]) {
    let table = quoted(name)
    let quotedColumns = columns.map(quoted)
    self.table = table
    self.quotedColumns = quotedColumns
    let list = quotedColumns.joined(separator: ", ")
    insert =
      "INSERT INTO \(table) (\(list)) VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))"
    selectByKey = "SELECT \(list) FROM \(table) WHERE \"_pk\" = ?"
    delete = "DELETE FROM \(table) WHERE \"_pk\" = ?"
    var lookup: [Int: String] = [:]
    for index in unique {
      lookup[index] = "SELECT \"_pk\" FROM \(table) WHERE \(quotedColumns[index]) = ?"
    }
    self.lookup = lookup
    let preservedColumns = preserved.map { quotedColumns[$0] }.joined(separator: ", ")
    tombstone =
      preserved.isEmpty ? nil : "SELECT \(preservedColumns) FROM \(table) WHERE \"_pk\" = ?"
  }

  /// `UPDATE table SET changed = ? … WHERE "_pk" = ?`.
  func update(_ changed: [Int]) -> String {
    "UPDATE \(table) SET \(changed.map { quotedColumns[$0] + " = ?" }.joined(separator: ", ")) WHERE \"_pk\" = ?"
  }
}

struct Entity<Model: PersistentModel>: EntityOperations {
  let schema: ModelSchema<Model>
  let name: String
  let columnNames: [String]
  let statements: EntityStatements
  let uniqueIndexes: [Int]
  let preservedIndexes: [Int]

  init() {
    let schema = Model.schema
    self.schema = schema
    name = schema.name
    columnNames = schema.attributes.map(\.name)
    uniqueIndexes = schema.attributes.indices.filter { schema.attributes[$0].isUnique }
    preservedIndexes = schema.attributes.indices.filter {
      schema.attributes[$0].preservesValueOnDeletion
    }
    statements = EntityStatements(
      name: name, columns: columnNames, unique: uniqueIndexes, preserved: preservedIndexes)
  }

  @inline(__always) private func cast(_ model: AnyObject) -> Model {
    unsafeDowncast(model, to: Model.self)
  }

  func validate(_ model: AnyObject) throws { try cast(model).validateForSave() }

  func snapshot(_ model: AnyObject) throws -> [Any] {
    let model = cast(model)
    return try schema.attributes.map { try $0.snapshot(model) }
  }

  func changedIndexes(_ model: AnyObject, from snapshot: [Any]) -> [Int] {
    let model = cast(model)
    return schema.attributes.indices.filter { !schema.attributes[$0].matches(model, snapshot[$0]) }
  }

  func restore(_ model: AnyObject, from snapshot: [Any]) {
    let model = cast(model)
    for (attribute, value) in zip(schema.attributes, snapshot) { attribute.restore(model, value) }
  }

  func bind(_ model: AnyObject, attribute: Int, to statement: Statement, at index: Int32) throws {
    try schema.attributes[attribute].bind(cast(model), statement, index)
  }

  func value(_ model: AnyObject, attribute: Int) throws -> SQLValue {
    try schema.attributes[attribute].value(cast(model))
  }

  func assign(_ model: AnyObject, attribute: Int, value: SQLValue) throws {
    try schema.attributes[attribute].assign(cast(model), value)
  }

  /// Loads every attribute from consecutive columns starting at `firstColumn`; returns the
  /// values loaded, the model's snapshot.
  func load(_ model: AnyObject, from statement: Statement, firstColumn: Int32, cache: LoadCache)
    throws -> [Any]
  {
    let model = cast(model)
    var snapshot: [Any] = []
    snapshot.reserveCapacity(schema.attributes.count)
    var column = firstColumn
    for attribute in schema.attributes {
      snapshot.append(try attribute.load(model, statement, column, cache))
      column += 1
    }
    return snapshot
  }
}
