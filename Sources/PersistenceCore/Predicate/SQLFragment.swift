/// A piece of SQL with its bound parameters, in order of appearance.
///
/// The SQL is standard enough for every engine: a fragment knows whether it is a condition (SQL
/// boolean: a comparison, `AND`, `IN` …) or a value (a column, a number), because PostgreSQL
/// keeps the two apart where SQLite treats both as integers. Conditions used as values become
/// 1 and 0 (``PredicateTranslator/operand(_:)``), values used as conditions are compared with
/// 0 (``PredicateTranslator/condition(_:)``).
struct SQLFragment {
  var sql: String
  var bindings: FragmentBindings
  /// Whether the SQL is a condition (boolean) rather than a value.
  var isCondition: Bool
  /// Whether the SQL can be `NULL` (an optional attribute, a `NULL` parameter, an expression
  /// over one); a non-null fragment compares with `=`, which indexes serve in every engine.
  var canBeNull: Bool
  /// Whether the value is unknown to SQL: a Swift function the engine cannot run, left for
  /// Swift to decide (SQL `NULL`, which `AND`, `OR` and `NOT` carry as "unknown"; any other
  /// expression over it is unknown as a whole).
  var isUnknown = false
  /// Whether this `WHERE` condition was narrowed (it keeps every row whose answer depended on
  /// an unknown): Swift must then evaluate the predicate on the rows it selects.
  var isNarrowed = false
  /// When the fragment is an attribute of a related row read by its key (a subquery), what it
  /// reads: an equality with a value then becomes a test of the key against the rows that
  /// hold the value, which indexes serve (see ``equality(_:_:equal:)``).
  var relatedColumn: RelatedColumn?

  init(
    _ sql: String, _ bindings: FragmentBindings = [], isCondition: Bool = false,
    canBeNull: Bool = true
  ) {
    self.sql = sql
    self.bindings = bindings
    self.isCondition = isCondition
    self.canBeNull = canBeNull
  }

  /// An unknown value or condition (see ``isUnknown``).
  static func unknown(isCondition: Bool) -> SQLFragment {
    var fragment = SQLFragment("NULL", isCondition: isCondition)
    fragment.isUnknown = true
    return fragment
  }
}

/// The parameters of a ``SQLFragment``, in order of appearance, each with where it came from:
/// a ``PredicateTemplate`` rebinds a fragment's parameters from another predicate of the same
/// shape by these origins.
struct FragmentBindings: ExpressibleByArrayLiteral {
  /// The values, in order.
  private(set) var values: [SQLValue]
  /// For each value, the index of the `PredicateExpressions.Value` leaf it is (in the order
  /// ``PredicateShapeWalker`` meets them), or -1 for a value the predicate's shape fixes (a
  /// `nil` literal, or one derived from leaves, which makes the translation not reusable).
  private(set) var leaves: [Int32]

  init(arrayLiteral values: SQLValue...) { self.init(values) }

  /// Values that come from no leaf.
  init(_ values: [SQLValue]) {
    self.values = values
    leaves = Array(repeating: -1, count: values.count)
  }

  /// Values from these leaves (see ``leaves``).
  init(_ values: [SQLValue], leaves: [Int32]) {
    precondition(values.count == leaves.count)
    self.values = values
    self.leaves = leaves
  }

  /// One value, from `leaf` (-1 for none).
  init(_ value: SQLValue, leaf: Int32) {
    values = [value]
    leaves = [leaf]
  }

  var count: Int { values.count }
  var isEmpty: Bool { values.isEmpty }
  subscript(index: Int) -> SQLValue { values[index] }

  static func + (left: FragmentBindings, right: FragmentBindings) -> FragmentBindings {
    var joined = left
    joined += right
    return joined
  }

  static func += (left: inout FragmentBindings, right: FragmentBindings) {
    left.values += right.values
    left.leaves += right.leaves
  }
}

/// Where a constant of a translated predicate came from, which decides whether a translation
/// that binds it can serve another predicate of the same shape (``PredicateTemplate``).
enum ConstantOrigin {
  /// The `PredicateExpressions.Value` leaf with this index: a parameter that another predicate
  /// of the same shape fills with its own leaf.
  case leaf(Int32)
  /// A `nil` literal: the same in every predicate of the shape.
  case literal
  /// Computed from leaves in Swift (folded): the SQL may depend on the values.
  case derived
}

/// What a predicate expression became.
enum TranslatedExpression {
  /// A value known without looking at a row, folded in Swift; bound as a parameter when used.
  case constant(Any, origin: ConstantOrigin = .derived)
  /// The model itself (the predicate's variable).
  case row
  /// SQL computed per row. SQL `NULL` stands for Swift's `nil`; stored booleans are 0 and 1.
  case sql(SQLFragment)
  /// Another model's row, reached through a relationship (see ``RelatedRow``).
  case related(RelatedRow)
  /// The rows of a to-many relationship (see ``RelatedRows``).
  case relatedMany(RelatedRows)
}

/// What a predicate can read of one model type: its table, attributes and relationships.
struct PredicateTable {
  /// The table's name, quoted.
  let quotedName: String
  /// The model type's name, for errors.
  let modelName: String
  let attributeIndexes: [AnyKeyPath: Int]
  let columns: [PredicateColumn]
  let relationships: [RelationshipInfo]
  /// The model's type: the root of its key paths.
  let modelType: Any.Type

  init<Model: PersistentModel>(_ schema: ModelSchema<Model>) {
    quotedName = schema.quotedName
    modelName = "\(Model.self)"
    modelType = Model.self
    attributeIndexes = schema.attributeIndexes
    columns = schema.predicateColumns
    relationships = schema.relationships
  }

  func column(_ keyPath: AnyKeyPath) -> PredicateColumn? {
    attributeIndexes[keyPath].map { columns[$0] }
  }

  func relationship(_ keyPath: AnyKeyPath) -> RelationshipInfo? {
    relationships.first { $0.keyPath == keyPath }
  }
}

/// A row of another model that a predicate reaches: through a to-one (its primary key is the
/// SQL `key`, `NULL` for none), or as the element a to-many's `contains(where:)` tests (a row
/// of a subquery, named `alias`).
struct RelatedRow {
  let table: PredicateTable
  /// SQL of the row's primary key, usable at any depth of the query.
  let key: String
  /// The subquery's name for the row, when it is one of a subquery's rows.
  let alias: String?
  /// For a row reached through a to-one whose inverse keeps the key (a one-to-one kept on the
  /// other side): the row's column (quoted) holding the key of the row it was reached from.
  var holder: Holder? = nil

  /// The row of `table` whose `column` holds `ownerKey` (unique: a one-to-one's key).
  struct Holder {
    let column: String
    let ownerKey: String
  }
}

/// The rows of a to-many: those of `table` whose `column` (quoted) holds `ownerKey`, or for a
/// many-to-many (`join`) those its join table links to the row `ownerKey`.
struct RelatedRows {
  let table: PredicateTable
  let column: String
  let ownerKey: String
  var join: JoinTable? = nil

  /// The condition that a row of `table` named `alias` is one of them: `alias.column = key`,
  /// or for a many-to-many `alias._pk IN (SELECT other FROM join WHERE own = key)` (the join
  /// table read through its index from this side).
  func links(_ alias: String) -> String {
    guard let join else { return "\(alias).\(column) = \(ownerKey)" }
    return
      "\(alias).\"_pk\" IN (SELECT \(quoted(join.otherColumn)) FROM \(quoted(join.name)) WHERE \(quoted(join.ownColumn)) = \(ownerKey))"
  }
}

/// An attribute of a related row read by its key: `(SELECT alias.column FROM table AS alias
/// WHERE alias._pk = key)`.
struct RelatedColumn {
  let key: String
  let table: String
  let alias: String
  let column: String
  /// See ``RelatedRow/holder``.
  var holder: RelatedRow.Holder? = nil

  /// Whether the related row exists and its column passes `test` (SQL after the column, such
  /// as `= ?`), as a test of keys the indexes serve: the row's key among the keys of the rows
  /// passing (`key IS NOT NULL AND key IN (SELECT _pk FROM table WHERE column = ?)`), or, for
  /// a row that holds the key of the row it was reached from, that row's key among the held
  /// keys (`owner IS NOT NULL AND owner IN (SELECT held FROM table WHERE column = ? AND held
  /// IS NOT NULL)`). The
  /// related table is read once, by the column's index where it has one; never per row.
  /// Never `NULL`.
  func membership(_ test: String) -> String {
    if let holder {
      return
        "(\(holder.ownerKey) IS NOT NULL AND \(holder.ownerKey) IN (SELECT \(alias).\(holder.column) FROM \(table) AS \(alias) WHERE \(alias).\(column) \(test) AND \(alias).\(holder.column) IS NOT NULL))"
    }
    return
      "(\(key) IS NOT NULL AND \(key) IN (SELECT \(alias).\"_pk\" FROM \(table) AS \(alias) WHERE \(alias).\(column) \(test)))"
  }
}
