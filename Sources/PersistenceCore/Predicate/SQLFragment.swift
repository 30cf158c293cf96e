/// A piece of SQL with its bound parameters, in order of appearance.
///
/// The SQL is standard enough for every engine: a fragment knows whether it is a condition (SQL
/// boolean: a comparison, `AND`, `IN` …) or a value (a column, a number), because PostgreSQL
/// keeps the two apart where SQLite treats both as integers. Conditions used as values become
/// 1 and 0 (``PredicateTranslator/operand(_:)``), values used as conditions are compared with
/// 0 (``PredicateTranslator/condition(_:)``).
struct SQLFragment {
  var sql: String
  var bindings: [SQLValue]
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

  init(
    _ sql: String, _ bindings: [SQLValue] = [], isCondition: Bool = false, canBeNull: Bool = true
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

/// What a predicate expression became.
enum TranslatedExpression {
  /// A value known without looking at a row, folded in Swift; bound as a parameter when used.
  case constant(Any)
  /// The model itself (the predicate's variable).
  case row
  /// SQL computed per row. SQL `NULL` stands for Swift's `nil`; stored booleans are 0 and 1.
  case sql(SQLFragment)
}
