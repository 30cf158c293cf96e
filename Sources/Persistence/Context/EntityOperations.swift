/// The type-erased operations a ``ModelContext`` needs on one model type, so that registrations
/// of different models can live in one identity map.
protocol EntityOperations {
  var name: String { get }
  var columnNames: [String] { get }
  var uniqueIndexes: [Int] { get }
  var preservedIndexes: [Int] { get }
  func snapshot(_ model: AnyObject) throws -> [Any]
  func changedIndexes(_ model: AnyObject, from snapshot: [Any]) -> [Int]
  func restore(_ model: AnyObject, from snapshot: [Any])
  func bind(_ model: AnyObject, attribute: Int, to statement: Statement, at index: Int32) throws
  func value(_ model: AnyObject, attribute: Int) throws -> SQLValue
  func assign(_ model: AnyObject, attribute: Int, value: SQLValue) throws
  func load(_ model: AnyObject, from statement: Statement, firstColumn: Int32) throws
  func validate(_ model: AnyObject) throws
}

struct Entity<Model: PersistentModel>: EntityOperations {
  let schema: ModelSchema<Model>
  let name: String
  let columnNames: [String]
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

  /// Loads every attribute from consecutive columns starting at `firstColumn`.
  func load(_ model: AnyObject, from statement: Statement, firstColumn: Int32) throws {
    let model = cast(model)
    var column = firstColumn
    for attribute in schema.attributes {
      try attribute.load(model, statement, column)
      column += 1
    }
  }
}
