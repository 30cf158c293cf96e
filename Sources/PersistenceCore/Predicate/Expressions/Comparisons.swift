import Foundation

extension PredicateExpressions.Equal: SQLTranslatable {
  /// `lhs = rhs` when neither side can be `NULL` (what indexes serve), else
  /// `lhs IS NOT DISTINCT FROM rhs`: null-safe, like Swift's `==` on optionals.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    if let test = try translator.truthTest(self, lhs, rhs, equal: true) { return test }
    return try translator.binaryOperation(self, lhs, rhs) { left, right in
      equality(left, right, equal: true)
    }
  }
}

extension PredicateExpressions.NotEqual: SQLTranslatable {
  /// `lhs <> rhs`, or `lhs IS DISTINCT FROM rhs` when a side can be `NULL`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    if let test = try translator.truthTest(self, lhs, rhs, equal: false) { return test }
    return try translator.binaryOperation(self, lhs, rhs) { left, right in
      equality(left, right, equal: false)
    }
  }
}

extension PredicateTranslator {
  /// A condition compared with a constant `Bool` (`x.flatMap { … } == true`): `c IS TRUE`,
  /// `c IS NOT FALSE` …, which are never `NULL` (an unknown condition is not true, as `nil` is
  /// not `true`). Nil for other comparisons. The operands are translated again by the caller
  /// then; translation has no side effects.
  mutating func truthTest<E: PredicateExpression>(
    _ node: E, _ lhs: Any, _ rhs: Any, equal: Bool
  ) throws -> TranslatedExpression? {
    let left = try translate(lhs)
    let right = try translate(rhs)
    for (side, other) in [(left, right), (right, left)] {
      guard case .sql(let condition) = side, condition.isCondition,
        let bool = other.constantBool
      else { continue }
      if condition.isUnknown { return .sql(.unknown(isCondition: true)) }
      return .sql(
        SQLFragment(
          "(\(condition.sql) IS \(equal ? "" : "NOT ")\(bool ? "TRUE" : "FALSE"))",
          condition.bindings, isCondition: true, canBeNull: false))
    }
    return nil
  }
}

/// `=` or `<>` between two fragments that cannot be `NULL`, the null-safe `IS [NOT] DISTINCT
/// FROM` otherwise (standard SQL; SQLite reads it as `IS`). Never `NULL` itself.
func equality(_ left: SQLFragment, _ right: SQLFragment, equal: Bool) -> SQLFragment {
  // A comparison with nil is a test for NULL.
  for (side, other) in [(left, right), (right, left)]
  where other.sql == "?" && other.bindings == [.null] {
    return SQLFragment(
      "(\(side.sql) IS \(equal ? "" : "NOT ")NULL)", side.bindings, isCondition: true,
      canBeNull: false)
  }
  let symbol =
    left.canBeNull || right.canBeNull
    ? (equal ? "IS NOT DISTINCT FROM" : "IS DISTINCT FROM") : (equal ? "=" : "<>")
  var fragment = binary(left, symbol, right)
  fragment.isCondition = true
  fragment.canBeNull = false
  return fragment
}

extension PredicateExpressions.Comparison: SQLTranslatable {
  /// `<`, `<=`, `>`, `>=`. Text compares by code point on NFC text, as Swift's `<` does.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let symbol =
      switch op {
      case .lessThan: "<"
      case .lessThanOrEqual: "<="
      case .greaterThan: ">"
      case .greaterThanOrEqual: ">="
      }
    return try translator.binaryOperation(self, lhs, rhs) { left, right in
      var fragment = binary(left, symbol, right)
      fragment.isCondition = true
      return fragment
    }
  }
}

/// `(left symbol right)`: `NULL` when either side is.
func binary(_ left: SQLFragment, _ symbol: String, _ right: SQLFragment) -> SQLFragment {
  SQLFragment(
    "(\(left.sql) \(symbol) \(right.sql))", left.bindings + right.bindings,
    canBeNull: left.canBeNull || right.canBeNull)
}
