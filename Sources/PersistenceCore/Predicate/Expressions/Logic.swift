import Foundation

extension PredicateExpressions.Conjunction: SQLTranslatable {
  /// `lhs AND rhs`; a constant side is folded away.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let left = try translator.translate(lhs)
    if translator.constantBool(left) == false { return .constant(false) }
    let right = try translator.translate(rhs)
    if translator.constantBool(right) == false { return .constant(false) }
    if translator.constantBool(left) == true { return right }
    if translator.constantBool(right) == true { return left }
    return .sql(logical(try translator.condition(left), "AND", try translator.condition(right)))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

extension PredicateExpressions.Disjunction: SQLTranslatable {
  /// `lhs OR rhs`; a constant side is folded away.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let left = try translator.translate(lhs)
    if translator.constantBool(left) == true { return .constant(true) }
    let right = try translator.translate(rhs)
    if translator.constantBool(right) == true { return .constant(true) }
    if translator.constantBool(left) == false { return right }
    if translator.constantBool(right) == false { return left }
    return .sql(logical(try translator.condition(left), "OR", try translator.condition(right)))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

extension PredicateExpressions.Negation: SQLTranslatable {
  /// `NOT x`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let inner = try translator.translate(wrapped)
    if let bool = translator.constantBool(inner) { return .constant(!bool) }
    if inner.isUnknown { return inner }
    let fragment = try translator.condition(inner)
    return .sql(
      SQLFragment(
        "(NOT \(fragment.sql))", fragment.bindings, isCondition: true,
        canBeNull: fragment.canBeNull))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(wrapped)
  }
}

extension PredicateExpressions.Conditional: SQLTranslatable {
  /// `CASE WHEN test THEN a ELSE b END`; a constant test picks its branch in Swift.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let condition = try translator.translate(test)
    if let bool = translator.constantBool(condition) {
      return try translator.translate(bool ? trueBranch : falseBranch)
    }
    let trueValue = try translator.translate(trueBranch)
    let falseValue = try translator.translate(falseBranch)
    if condition.isUnknown || trueValue.isUnknown || falseValue.isUnknown {
      return .sql(.unknown(isCondition: false))
    }
    let whenTrue = try translator.operand(trueValue)
    let whenFalse = try translator.operand(falseValue)
    let test = try translator.condition(condition)
    return .sql(
      SQLFragment(
        "(CASE WHEN \(test.sql) THEN \(whenTrue.sql) ELSE \(whenFalse.sql) END)",
        test.bindings + whenTrue.bindings + whenFalse.bindings,
        canBeNull: whenTrue.canBeNull || whenFalse.canBeNull))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(test)
    walker.visit(trueBranch)
    walker.visit(falseBranch)
  }
}

/// `(left AND right)` or `(left OR right)` between two conditions.
func logical(_ left: SQLFragment, _ symbol: String, _ right: SQLFragment) -> SQLFragment {
  var fragment = binary(left, symbol, right)
  fragment.isCondition = true
  return fragment
}
