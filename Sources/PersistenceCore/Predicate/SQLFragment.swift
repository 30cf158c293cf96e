/// A piece of SQL with its bound parameters, in order of appearance.
struct SQLFragment {
  var sql: String
  var bindings: [SQLValue]

  init(_ sql: String, _ bindings: [SQLValue] = []) {
    self.sql = sql
    self.bindings = bindings
  }
}

/// What a predicate expression became.
enum TranslatedExpression {
  /// A value known without looking at a row, folded in Swift; bound as a parameter when used.
  case constant(Any)
  /// The model itself (the predicate's variable).
  case row
  /// SQL computed per row. SQL `NULL` stands for Swift's `nil`; booleans are 0 and 1.
  case sql(SQLFragment)
}
