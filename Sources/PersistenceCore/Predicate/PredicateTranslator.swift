import Foundation

/// A `PredicateExpressions` node that can become SQL.
///
/// Like Foundation's own `NSPredicate` conversion, each supported node conforms in an extension
/// of its own (see `Expressions/`), and the translator dispatches with `as? any …`. Sub-trees
/// that do not depend on the row are evaluated in Swift (`evaluate`) and bound as parameters,
/// so a captured value, a constant branch or `text.isEmpty` never reaches SQL as text.
protocol SQLTranslatable {
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression
}

/// Translates a Foundation `Predicate` into a SQL `WHERE` clause with bound parameters.
///
/// Cost: O(size of the predicate) to translate; the query it yields runs in SQLite (an index
/// serves `==`, ranges and `IN` on indexed attributes; `contains` scans).
struct PredicateTranslator {
  struct Column {
    var name: String
    var isCodable: Bool
    var typeName: String
  }
  let modelName: String
  let column: (AnyKeyPath) -> Column?
  var variables: [PredicateExpressions.VariableID: TranslatedExpression] = [:]

  init<Model: PersistentModel>(schema: ModelSchema<Model>) {
    modelName = "\(Model.self)"
    column = { keyPath in
      schema.attribute(for: keyPath).map {
        Column(name: $0.name, isCodable: $0.isCodable, typeName: $0.valueTypeName)
      }
    }
  }

  /// The `WHERE` condition for `predicate`, or nil when it is always true.
  static func whereClause<Model: PersistentModel>(
    _ predicate: Predicate<Model>, schema: ModelSchema<Model>
  ) throws -> SQLFragment? {
    var translator = PredicateTranslator(schema: schema)
    translator.variables[predicate.variable.key] = .row
    switch try translator.translate(predicate.expression) {
    case .constant(let value):
      guard let bool = value as? Bool else {
        throw translator.unsupported("a non-Boolean predicate")
      }
      return bool ? nil : SQLFragment("0")
    case .row:
      throw translator.unsupported("a predicate that returns the model")
    case .sql(let fragment):
      return fragment
    }
  }

  mutating func translate(_ expression: Any) throws -> TranslatedExpression {
    guard let node = expression as? any SQLTranslatable else {
      throw unsupported(Self.constructName(expression))
    }
    return try node.translate(&self)
  }

  /// The SQL for an operand: a parameter for a constant, the fragment for SQL.
  func operand(_ expression: TranslatedExpression) throws -> SQLFragment {
    switch expression {
    case .constant(let value): SQLFragment("?", [try Self.sqlValue(of: value)])
    case .sql(let fragment): fragment
    case .row: throw unsupported("a comparison of whole models (compare an attribute instead)")
    }
  }

  /// Converts a Swift constant to a bound value, the way the attribute would store it.
  static func sqlValue(of value: Any) throws -> SQLValue {
    if let optional = value as? any OptionalValue, optional.isNone { return .null }
    if let persistable = value as? any PersistableValue { return persistable.sqlValue }
    throw PersistenceError(
      code: .unsupportedPredicate,
      message:
        "The predicate compares with a value of type \(type(of: value)), which has no SQL form. Use String, Int, Double, Bool, Date, UUID or Data."
    )
  }

  func unsupported(_ construct: String) -> PersistenceError {
    PersistenceError(
      code: .unsupportedPredicate,
      message:
        "The predicate on \(modelName) uses \(construct), which cannot be translated to SQL. Supported: == != < <= > >=, && || !, + - * / %, ?? and flatMap on optionals, if/else, contains, starts(with:), localizedStandardContains, [values].contains(attribute), count and isEmpty."
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
    let left = try translate(lhs)
    let right = try translate(rhs)
    if left.isConstant && right.isConstant { return try Self.fold(node) }
    return .sql(try build(try operand(left), try operand(right)))
  }

  /// Folds a node whose operands are all constants by evaluating it in Swift.
  static func fold<E: PredicateExpression>(_ expression: E) throws -> TranslatedExpression {
    .constant(try expression.evaluate(PredicateBindings()))
  }
}

/// Lets the translator see whether a value boxed in `Any` is `nil`.
protocol OptionalValue {
  var isNone: Bool { get }
}

extension Optional: OptionalValue {
  var isNone: Bool { self == nil }
}

extension TranslatedExpression {
  var isConstant: Bool {
    if case .constant = self { return true }
    return false
  }
  var constantBool: Bool? {
    if case .constant(let value) = self { return value as? Bool }
    return nil
  }
}
