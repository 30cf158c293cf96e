import Foundation

extension PredicateExpressions.Equal: SQLTranslatable {
  /// `lhs = rhs` when neither side can be `NULL` (what indexes serve), else
  /// `lhs IS NOT DISTINCT FROM rhs`: null-safe, like Swift's `==` on optionals.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let (left, right) = (try translator.translate(lhs), try translator.translate(rhs))
    if let test = truthTest(left, right, equal: true, &translator) { return test }
    return try translator.binaryOperation(self, translated: left, right) { left, right in
      equality(left, right, equal: true)
    }
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

extension PredicateExpressions.NotEqual: SQLTranslatable {
  /// `lhs <> rhs`, or `lhs IS DISTINCT FROM rhs` when a side can be `NULL`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let (left, right) = (try translator.translate(lhs), try translator.translate(rhs))
    if let test = truthTest(left, right, equal: false, &translator) { return test }
    return try translator.binaryOperation(self, translated: left, right) { left, right in
      equality(left, right, equal: false)
    }
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

/// A condition compared with a constant `Bool` (`x.flatMap { … } == true`): `c IS TRUE`,
/// `c IS NOT FALSE` …, which are never `NULL` (an unknown condition is not true, as `nil` is
/// not `true`). Nil for other comparisons.
func truthTest(
  _ left: TranslatedExpression, _ right: TranslatedExpression, equal: Bool,
  _ translator: inout PredicateTranslator
) -> TranslatedExpression? {
  // Each order tried in turn, without an array of the two pairs (an allocation and a copy of
  // both expressions on every comparison a predicate translates).
  truthTest(side: left, other: right, equal: equal, &translator)
    ?? truthTest(side: right, other: left, equal: equal, &translator)
}

/// ``truthTest(_:_:equal:)`` with `side` the condition and `other` the constant.
private func truthTest(
  side: TranslatedExpression, other: TranslatedExpression, equal: Bool,
  _ translator: inout PredicateTranslator
) -> TranslatedExpression? {
  guard case .sql(let condition) = side, condition.isCondition,
    let bool = translator.constantBool(other)
  else { return nil }
  if condition.isUnknown { return .sql(.unknown(isCondition: true)) }
  return .sql(
    SQLFragment(
      "(\(condition.sql) IS \(equal ? "" : "NOT ")\(bool ? "TRUE" : "FALSE"))",
      condition.bindings, isCondition: true, canBeNull: false))
}

/// `=` or `<>` between two fragments that cannot be `NULL`, the null-safe `IS [NOT] DISTINCT
/// FROM` otherwise (standard SQL; SQLite reads it as `IS`). Never `NULL` itself.
func equality(_ left: SQLFragment, _ right: SQLFragment, equal: Bool) -> SQLFragment {
  // A comparison with nil is a test for NULL (each order tried in turn: an array of the two
  // pairs cost an allocation and copies on every comparison).
  func isNil(_ fragment: SQLFragment) -> Bool {
    fragment.bindings.count == 1 && fragment.bindings[0] == .null && fragment.sql == "?"
  }
  func nullTest(_ side: SQLFragment) -> SQLFragment {
    SQLFragment(
      "(\(side.sql) IS \(equal ? "" : "NOT ")NULL)", side.bindings, isCondition: true,
      canBeNull: false)
  }
  if isNil(right) { return nullTest(left) }
  if isNil(left) { return nullTest(right) }
  if let test = relatedEquality(left, right, equal: equal)
    ?? relatedEquality(right, left, equal: equal)
  {
    return test
  }
  let symbol =
    left.canBeNull || right.canBeNull
    ? (equal ? "IS NOT DISTINCT FROM" : "IS DISTINCT FROM") : (equal ? "=" : "<>")
  var fragment = binary(left, symbol, right)
  fragment.isCondition = true
  fragment.canBeNull = false
  return fragment
}

/// A related row's attribute (`$0.trip?.destination`) equal to a value that is not `nil`, as
/// a test of the row's key against the keys of the rows holding the value: `(key IS NOT NULL
/// AND key IN (SELECT _pk FROM table WHERE column = ?))`, which the related table's index and
/// the key column's serve, where comparing the subquery's answer row by row scans. Never
/// `NULL`, as Swift's `nil == value` is `false`. Nil for other comparisons.
private func relatedEquality(_ side: SQLFragment, _ value: SQLFragment, equal: Bool)
  -> SQLFragment?
{
  guard let related = side.relatedColumn, side.bindings.isEmpty, value.sql == "?",
    value.bindings.count == 1, value.bindings[0] != .null
  else { return nil }
  let test = related.membership("= ?")
  return SQLFragment(
    equal ? test : "(NOT \(test))", value.bindings, isCondition: true, canBeNull: false)
}

extension PredicateExpressions.Comparison: SQLTranslatable {
  /// `<`, `<=`, `>`, `>=`. Text compares by code point on NFC text, as Swift's `<` does. An
  /// enum kept as its raw value is refused: SQL would order its raw values, which its own `<`
  /// need not follow (and Swift's evaluation of the predicate, an observer's, would not).
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let facts = TypeConformances.facts(for: LHS.Output.self)
    if facts.persistable == nil, facts.rawRepresentable != nil {
      throw translator.unsupported(
        "an ordering comparison (<, <=, >, >=) of \(LHS.Output.self), an enum stored as its raw value: its own < need not order as its raw values do. Compare with == or !=, or [values].contains"
      )
    }
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

  func shape(_ walker: inout PredicateShapeWalker) {
    let code =
      switch op {
      case .lessThan: 0
      case .lessThanOrEqual: 1
      case .greaterThan: 2
      case .greaterThanOrEqual: 3
      }
    walker.part(code)
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

/// `(left symbol right)`: `NULL` when either side is.
func binary(_ left: SQLFragment, _ symbol: String, _ right: SQLFragment) -> SQLFragment {
  SQLFragment(
    "(\(left.sql) \(symbol) \(right.sql))", left.bindings + right.bindings,
    canBeNull: left.canBeNull || right.canBeNull)
}
