import Foundation

/// A `PredicateExpressions` node that can become SQL.
///
/// Like Foundation's own `NSPredicate` conversion, each supported node conforms in an extension
/// of its own (see `Expressions/`), and the translator dispatches on the node's type, whose
/// conformance it looks up once (``TypeConformances``). Sub-trees
/// that do not depend on the row are evaluated in Swift (`evaluate`) and bound as parameters,
/// so a captured value, a constant branch or `text.isEmpty` never reaches SQL as text.
protocol SQLTranslatable: SendableMetatype {
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression
  /// Tells `walker` this node's part of the predicate's shape: its children, visited in the
  /// order ``translate(_:)`` translates them, and what its type does not fix (an operator, a
  /// key path, a variable, a leaf's value). See ``PredicateTemplate``.
  func shape(_ walker: inout PredicateShapeWalker)
}

/// A `Predicate`'s expression tree and the variable it binds to the model, without its
/// generic type (see ``FetchDescriptor/predicateParts``).
@usableFromInline
struct PredicateParts: Sendable {
  @usableFromInline let expression: any StandardPredicateExpression<Bool>
  @usableFromInline let variable: PredicateExpressions.VariableID

  @inlinable
  init<Model>(_ predicate: Predicate<Model>) {
    expression = predicate.expression
    variable = predicate.variable.key
  }
}

/// Translates a Foundation `Predicate` into a SQL `WHERE` clause with bound parameters.
///
/// Cost: O(size of the predicate) to translate; the query it yields runs in SQLite (an index
/// serves `==`, ranges and `IN` on indexed attributes; `contains` scans).
struct PredicateTranslator {
  /// The model's type, named in errors.
  let modelType: any PersistentModel.Type
  /// The model's type's name, for errors.
  var modelName: String { "\(modelType)" }
  /// The model's attributes by key path, and what a predicate needs of each (from the
  /// schema: no closure, nothing generic to look up per key path).
  private let attributeIndexes: [AnyKeyPath: Int]
  private let columns: [PredicateColumn]
  var variables: [PredicateExpressions.VariableID: TranslatedExpression] = [:]
  /// Whether Swift-only functions (``StoreFunctions``) become unknowns rather than SQL calls:
  /// for an engine that cannot run them (``StoreConnection/evaluatesSwiftFunctions``).
  var narrows = false
  /// Whether an unknown was made.
  var narrowed = false
  /// Whether the SQL depends on the predicate's captured values only through the parameters
  /// bound from its leaves (each `nil` or not as now), so that another predicate of the same
  /// shape can reuse it (``PredicateTemplate``). A translation that folds constants, or decides
  /// anything on a constant's value, is not.
  var reusable = true
  /// How many `PredicateExpressions.Value` leaves the translation met, in order.
  private(set) var leafCount: Int32 = 0
  /// Each leaf bound as a parameter, and whether its value was `NULL`: the SQL depends on
  /// that (`IS NULL` has no parameter), so a reuse checks it (``PredicateTemplate``).
  private(set) var boundLeaves: [(leaf: Int32, isNull: Bool)] = []

  /// The model's relationships, which key paths may follow into other tables.
  let relationships: [RelationshipInfo]
  /// How many subqueries enclose what is being translated: inside one, the model's own
  /// columns are named with its table (a subquery's table could have a column of that name).
  var depth = 0
  /// How many subquery names were made (`_r1`, `_r2` …), in translation order: the same for
  /// every predicate of one shape.
  var aliasCount = 0

  init<Model: PersistentModel>(schema: ModelSchema<Model>) {
    modelType = Model.self
    attributeIndexes = schema.attributeIndexes
    columns = schema.predicateColumns
    relationships = schema.relationships
    rootTable = schema.quotedName
  }

  /// The model's table, quoted.
  let rootTable: String
  /// The tables the translation reads through relationships (their names).
  var followedTables = Set<String>()

  /// The tables `descriptor`'s predicates and sorts read through relationships: a change to
  /// one of them can change which models match, or their order (``ResultsObserver`` then
  /// refetches). Empty for a model without relationships, without translating. Cost: a
  /// translation of each predicate.
  static func followedTables<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, schema: ModelSchema<Model>
  ) throws -> Set<String> {
    guard !schema.relationships.isEmpty else { return [] }
    var tables = Set<String>()
    for predicate in [descriptor.predicate].compactMap({ $0 }) + descriptor.conditions {
      var translator = PredicateTranslator(schema: schema)
      translator.variables[predicate.variable.key] = .row
      _ = try translator.translate(predicate.expression)
      tables.formUnion(translator.followedTables)
    }
    for path in relatedSorts(descriptor, schema: schema) { tables.formUnion(path.tables) }
    return tables
  }

  /// The sorts of `descriptor` that read through relationships (see ``RelatedKeyPath``).
  static func relatedSorts<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, schema: ModelSchema<Model>
  ) -> [RelatedKeyPath] {
    guard !schema.relationships.isEmpty, !descriptor.sortBy.isEmpty else { return [] }
    let table = PredicateTable(schema)
    return descriptor.sortBy.compactMap { sort in
      guard let keyPath = sort.keyPath, schema.attribute(for: keyPath) == nil else { return nil }
      return RelatedKeyPath.resolve(keyPath, in: table)
    }
  }

  /// A new name for a subquery's table.
  mutating func nextAlias() -> String {
    aliasCount += 1
    return "\"_r\(aliasCount)\""
  }

  /// What following `relationship` from a row reaches. The row is the model's (`from` nil:
  /// its table's columns, qualified) or a related one. A to-one that stores the key reaches
  /// the row of that key; one whose inverse stores it, the row whose key column holds this
  /// row's key; a to-many, the rows whose key column does.
  ///
  /// Cost: each step through a to-one is a subquery over a primary key or a unique index.
  mutating func follow(_ relationship: RelationshipInfo, from row: RelatedRow?) throws
    -> TranslatedExpression
  {
    let ownKey = row?.key ?? "\(rootTable).\"_pk\""
    let table = relationship.predicateTable()
    followedTables.insert(relationship.targetTable())
    if relationship.storesKey {
      let column = quoted(relationship.name)
      let key: String
      if let row {
        if let alias = row.alias {
          key = "\(alias).\(column)"
        } else {
          let alias = nextAlias()
          key =
            "(SELECT \(alias).\(column) FROM \(row.table.quotedName) AS \(alias) WHERE \(alias).\"_pk\" = \(row.key))"
        }
      } else {
        key = "\(rootTable).\(column)"
      }
      return .related(RelatedRow(table: table, key: key, alias: nil))
    }
    if let join = relationship.joinTable() {
      return .relatedMany(RelatedRows(table: table, column: "", ownerKey: ownKey, join: join))
    }
    guard let inverseColumn = relationship.keyColumn().map(quoted) else {
      throw unsupported("the relationship '\(relationship.name)', whose inverse is not declared")
    }
    if relationship.kind == .toMany {
      return .relatedMany(RelatedRows(table: table, column: inverseColumn, ownerKey: ownKey))
    }
    let alias = nextAlias()
    let key =
      "(SELECT \(alias).\"_pk\" FROM \(table.quotedName) AS \(alias) WHERE \(alias).\(inverseColumn) = \(ownKey))"
    return .related(
      RelatedRow(
        table: table, key: key, alias: nil,
        holder: RelatedRow.Holder(column: inverseColumn, ownerKey: ownKey)))
  }

  /// The attribute at `keyPath` of a related row: its column in the subquery's row, or a
  /// subquery by the row's key (`NULL` when there is none).
  mutating func attribute(_ keyPath: AnyKeyPath, of row: RelatedRow) throws
    -> TranslatedExpression
  {
    if let relationship = row.table.relationship(keyPath) {
      return try follow(relationship, from: row)
    }
    guard let column = row.table.column(keyPath) else {
      throw unsupported(
        "the key path \(keyPath) of \(row.table.modelName), which is not a stored attribute or relationship"
      )
    }
    guard !column.isCodable else {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "The attribute '\(column.name)' of \(row.table.modelName) is kept as JSON (.codable, or a Codable type that is no enum of raw values), which is opaque: it cannot be used in a predicate or a sort, as in SwiftData."
      )
    }
    if let alias = row.alias {
      return .sql(SQLFragment("\(alias).\(column.quotedName)", canBeNull: column.isOptional))
    }
    let alias = nextAlias()
    var fragment = SQLFragment(
      "(SELECT \(alias).\(column.quotedName) FROM \(row.table.quotedName) AS \(alias) WHERE \(alias).\"_pk\" = \(row.key))"
    )
    fragment.relatedColumn = RelatedColumn(
      key: row.key, table: row.table.quotedName, alias: alias, column: column.quotedName,
      holder: row.holder)
    return .sql(fragment)
  }

  /// The to-many `sequence` translates to, and `test` translated with `variable` standing for
  /// one of its rows, a row of a subquery named `alias` (inside which the model's own columns
  /// are named with its table). `construct` names the call in the error for a sequence that is
  /// not a to-many.
  mutating func relatedTest(
    _ sequence: Any, variable: PredicateExpressions.VariableID, test: Any, construct: String
  ) throws -> (rows: RelatedRows, alias: String, test: TranslatedExpression) {
    guard case .relatedMany(let rows) = try translate(sequence) else {
      throw unsupported("\(construct) on a sequence that is not a to-many relationship")
    }
    let alias = nextAlias()
    variables[variable] = .related(
      RelatedRow(table: rows.table, key: "\(alias).\"_pk\"", alias: alias))
    depth += 1
    defer {
      depth -= 1
      variables[variable] = nil
    }
    return (rows, alias, try translate(test))
  }

  /// A to-many's test (`relatedTest`), and whether translating it made an unknown (a
  /// Swift-only function the engine cannot run), which the caller's SQL must keep rows for.
  mutating func narrowingTest(
    _ test: (inout PredicateTranslator) throws -> (RelatedRows, String, TranslatedExpression)
  ) rethrows -> (RelatedRows, String, TranslatedExpression, Bool) {
    let before = narrowed
    narrowed = false
    defer { narrowed = narrowed || before }
    let (rows, alias, translated) = try test(&self)
    return (rows, alias, translated, narrowed)
  }

  /// `EXISTS` (or, `negated`, `NOT EXISTS`) over a to-many's rows matching `condition` (SQL
  /// over `alias`), or all of them.
  func exists(_ rows: RelatedRows, alias: String, condition: SQLFragment?, negated: Bool = false)
    -> SQLFragment
  {
    var sql =
      "\(negated ? "NOT " : "")EXISTS (SELECT 1 FROM \(rows.table.quotedName) AS \(alias) WHERE \(rows.links(alias))"
    if let condition { sql += " AND \(condition.sql)" }
    sql += ")"
    return SQLFragment(sql, condition?.bindings ?? [], isCondition: true, canBeNull: false)
  }

  /// The stored attribute at `keyPath`, if it is one: O(1).
  func column(_ keyPath: AnyKeyPath) -> PredicateColumn? {
    attributeIndexes[keyPath].map { columns[$0] }
  }

  /// The `WHERE` condition for `predicate`, or nil when it is always true.
  ///
  /// With `narrowing`, calls of Swift-only functions become unknowns and the condition keeps
  /// every row whose answer depended on one (`IS NOT FALSE`); it is then marked
  /// ``SQLFragment/isNarrowed``, and the predicate must be evaluated in Swift on the rows.
  ///
  /// A predicate of a shape translated before (same node types, key paths, operators and
  /// variables; other captured values) reuses that translation with its own values bound
  /// (``PredicateTemplate``). Cost: O(size of the predicate) either way; a reuse walks the tree
  /// once to collect its values and builds no SQL text (about a quarter of a translation's
  /// instructions for a one-comparison predicate).
  static func whereClause<Model: PersistentModel>(
    _ predicate: Predicate<Model>, schema: ModelSchema<Model>, narrowing: Bool = false
  ) throws -> SQLFragment? {
    var walker = PredicateShapeWalker(variable: predicate.variable.key)
    let shape = walker.shape(of: predicate.expression, narrowing: narrowing)
    if let shape, walker.leavesConvertible, let template = walker.template(for: shape),
      let fragment = template.fragment(leaves: walker.leaves)
    {
      return fragment
    }
    var translator = PredicateTranslator(schema: schema)
    translator.narrows = narrowing
    translator.variables[predicate.variable.key] = .row
    let result = try translator.translate(predicate.expression)
    if case .constant(let value, _) = result {
      guard let bool = value as? Bool else {
        throw translator.unsupported("a non-Boolean predicate")
      }
      return bool ? nil : SQLFragment("(1 = 0)", isCondition: true, canBeNull: false)
    }
    var condition = try translator.condition(result)
    if translator.narrowed {
      condition = SQLFragment(
        "((\(condition.sql)) IS NOT FALSE)", condition.bindings, isCondition: true,
        canBeNull: false)
      condition.isNarrowed = true
    }
    if let shape, translator.reusable, walker.leavesConvertible,
      translator.leafCount == walker.leaves.count
    {
      // Walked again for the key path objects the template keeps: once per shape.
      var keeper = PredicateShapeWalker(
        variable: predicate.variable.key, collectingKeyPaths: true)
      _ = keeper.shape(of: predicate.expression, narrowing: narrowing)
      walker.keep(
        PredicateTemplate(
          condition, boundLeaves: translator.boundLeaves, keyPaths: keeper.keyPaths),
        for: shape)
    }
    return condition
  }

  /// The template kept for the shape of a predicate (its `parts`), and its parameters' values
  /// for that predicate: nil when no predicate of its shape was translated into a reusable
  /// condition yet, or when its leaves are `NULL` where that one's were not (or the reverse).
  /// Then ``whereClause(_:schema:narrowing:)`` translates it (and keeps a template when it
  /// can).
  ///
  /// Not generic: the tree is opened once, by the walk. Cost: a walk of the predicate's tree
  /// (``PredicateShapeWalker``), an equality test of its shape (or a lock and a hash), and a
  /// copy of the template's values; no SQL text is built.
  static func kept(_ parts: PredicateParts, narrowing: Bool)
    -> (template: PredicateTemplate, values: [SQLValue])?
  {
    var walker = PredicateShapeWalker(variable: parts.variable)
    guard let shape = walker.shape(of: parts.expression, narrowing: narrowing),
      walker.leavesConvertible, let template = walker.template(for: shape),
      let values = template.values(leaves: walker.leaves)
    else { return nil }
    return (template, values)
  }

  /// A call of a Swift-only function (``StoreFunctions``): `sql` itself, or an unknown when
  /// the engine cannot run it.
  mutating func swiftFunction(_ sql: SQLFragment) -> SQLFragment {
    guard narrows else { return sql }
    narrowed = true
    return .unknown(isCondition: sql.isCondition)
  }

  /// Translates a node of the predicate's tree: one lookup of its type's conformance
  /// (``TypeConformances``), then the node's own ``SQLTranslatable/translate(_:)``.
  mutating func translate(_ expression: Any) throws -> TranslatedExpression {
    guard let node = TypeConformances.facts(for: type(of: expression)).node else {
      throw unsupported(Self.constructName(expression))
    }
    return try node.translate(opening: expression, &self)
  }

  /// The next `PredicateExpressions.Value` leaf's index.
  mutating func nextLeaf() -> Int32 {
    defer { leafCount += 1 }
    return leafCount
  }

  /// `expression`'s value when it is a constant `Bool`; the translation then depends on it
  /// (not ``reusable``).
  mutating func constantBool(_ expression: TranslatedExpression) -> Bool? {
    guard case .constant(let value, _) = expression, let bool = value as? Bool else { return nil }
    reusable = false
    return bool
  }

  /// The SQL for an operand used as a value: a parameter for a constant, the fragment for
  /// SQL; a condition becomes 1 or 0 (`NULL` when it is unknown), as a stored `Bool` is.
  mutating func operand(_ expression: TranslatedExpression) throws -> SQLFragment {
    switch expression {
    case .constant(let value, let origin):
      let bound = try Self.sqlValue(of: value)
      var leaf: Int32 = -1
      switch origin {
      case .leaf(let index):
        leaf = index
        boundLeaves.append((index, bound == .null))
      case .literal: break
      case .derived: reusable = false
      }
      return SQLFragment("?", FragmentBindings(bound, leaf: leaf), canBeNull: bound == .null)
    case .sql(let fragment):
      guard fragment.isCondition, !fragment.isUnknown else { return fragment }
      return SQLFragment(
        "(CASE WHEN \(fragment.sql) THEN 1 WHEN NOT \(fragment.sql) THEN 0 END)",
        fragment.bindings + fragment.bindings, canBeNull: fragment.canBeNull)
    case .row: throw unsupported("a comparison of whole models (compare an attribute instead)")
    case .related(let row):
      // Its key: compared with nil, whether there is a related row.
      return SQLFragment(row.key, canBeNull: true)
    case .relatedMany:
      throw unsupported(
        "a to-many relationship as a value (use contains(where:), isEmpty or count)")
    }
  }

  /// The SQL for an operand used as a condition (`AND`, `OR`, `NOT`, `CASE WHEN`, the whole
  /// predicate): a value, a stored `Bool`, is compared with 0.
  mutating func condition(_ expression: TranslatedExpression) throws -> SQLFragment {
    if case .sql(let fragment) = expression, fragment.isCondition || fragment.isUnknown {
      return fragment
    }
    let value = try operand(expression)
    return SQLFragment(
      "(\(value.sql) <> 0)", value.bindings, isCondition: true, canBeNull: value.canBeNull)
  }

  /// Converts a Swift constant to a bound value, the way the attribute would store it.
  static func sqlValue(of value: Any) throws -> SQLValue {
    // `value` opened: `Value` is its dynamic type.
    func converted<Value>(_ value: Value) -> SQLValue? {
      TypeConformances.facts(for: Value.self).sqlValue(unchecked: value)
    }
    if let converted = converted(value) { return converted }
    throw PersistenceError(
      code: .unsupportedPredicate,
      message:
        "The predicate compares with a value of type \(type(of: value)), which has no SQL form. Use a type an attribute may have (String, Int, Double, Bool, Date, UUID, Data, …: PersistableValue)."
    )
  }

  func unsupported(_ construct: String) -> PersistenceError {
    PersistenceError(
      code: .unsupportedPredicate,
      message:
        "The predicate on \(modelName) uses \(construct), which cannot be translated to SQL. Supported: == != < <= > >=, && || !, + - * / %, ?? and flatMap on optionals, if/else, contains, starts(with:), localizedStandardContains, [values].contains(attribute), count and isEmpty, is and as? of a model's subclass; through relationships, key paths of to-ones and contains(where:), allSatisfy, count and isEmpty of to-manys."
    )
  }

  static func constructName(_ expression: Any) -> String {
    let name = String(describing: type(of: expression))
    let base = name.prefix { $0 != "<" }
    return "PredicateExpressions.\(base)"
  }

  /// `lhs symbol rhs` for a binary node, folded in Swift when both operands are constants.
  mutating func binaryOperation<E: PredicateExpression>(
    _ node: E, _ lhs: Any, _ symbol: String, _ rhs: Any
  ) throws -> TranslatedExpression {
    try binaryOperation(node, lhs, rhs) { binary($0, symbol, $1) }
  }

  /// The one pattern of every two-operand node: translate both operands; when both are
  /// constants, evaluate the node in Swift (folding it); otherwise build its SQL from the two
  /// operands' fragments with `build`.
  mutating func binaryOperation<E: PredicateExpression>(
    _ node: E, _ lhs: Any, _ rhs: Any,
    _ build: (SQLFragment, SQLFragment) throws -> SQLFragment
  ) throws -> TranslatedExpression {
    try binaryOperation(node, translated: translate(lhs), translate(rhs), build)
  }

  /// ``binaryOperation(_:_:_:_:)`` on operands already translated.
  mutating func binaryOperation<E: PredicateExpression>(
    _ node: E, translated left: TranslatedExpression, _ right: TranslatedExpression,
    _ build: (SQLFragment, SQLFragment) throws -> SQLFragment
  ) throws -> TranslatedExpression {
    if left.isConstant && right.isConstant { return try fold(node) }
    let built = try build(try operand(left), try operand(right))
    // Over an unknown, the whole node is unknown (`COALESCE`, `IS NULL` … would decide).
    if left.isUnknown || right.isUnknown { return .sql(.unknown(isCondition: built.isCondition)) }
    return .sql(built)
  }

  /// Folds a node whose operands are all constants by evaluating it in Swift (the SQL then
  /// depends on their values: not ``reusable``).
  mutating func fold<E: PredicateExpression>(_ expression: E) throws -> TranslatedExpression {
    reusable = false
    return .constant(try expression.evaluate(PredicateBindings()))
  }
}

/// Lets the translator see whether a value boxed in `Any` is `nil`.
protocol OptionalValue: SendableMetatype {
  var isNone: Bool { get }
  /// The column form of a non-nil `value` of this very type whose wrapped type is not a
  /// ``PersistableValue`` (see ``TypeConformances/Facts/sqlValue(unchecked:)``).
  static func wrappedSQLValue<Value>(unchecked value: Value) -> SQLValue?
}

extension Optional: OptionalValue {
  var isNone: Bool { self == nil }
}

extension TranslatedExpression {
  var isConstant: Bool {
    if case .constant = self { return true }
    return false
  }
  var isUnknown: Bool {
    if case .sql(let fragment) = self { return fragment.isUnknown }
    return false
  }
}
