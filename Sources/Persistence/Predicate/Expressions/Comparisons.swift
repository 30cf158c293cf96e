import Foundation

extension PredicateExpressions.Equal: SQLTranslatable {
  /// `lhs IS rhs`: null-safe, like Swift's `==` on optionals.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let left = try translator.translate(lhs)
    let right = try translator.translate(rhs)
    if left.isConstant && right.isConstant { return try PredicateTranslator.fold(self) }
    return .sql(try binary(translator.operand(left), "IS", translator.operand(right)))
  }
}

extension PredicateExpressions.NotEqual: SQLTranslatable {
  /// `lhs IS NOT rhs`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let left = try translator.translate(lhs)
    let right = try translator.translate(rhs)
    if left.isConstant && right.isConstant { return try PredicateTranslator.fold(self) }
    return .sql(try binary(translator.operand(left), "IS NOT", translator.operand(right)))
  }
}

extension PredicateExpressions.Comparison: SQLTranslatable {
  /// `<`, `<=`, `>`, `>=`. Text compares by code point on NFC text, as Swift's `<` does.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let left = try translator.translate(lhs)
    let right = try translator.translate(rhs)
    if left.isConstant && right.isConstant { return try PredicateTranslator.fold(self) }
    let symbol =
      switch op {
      case .lessThan: "<"
      case .lessThanOrEqual: "<="
      case .greaterThan: ">"
      case .greaterThanOrEqual: ">="
      }
    return .sql(try binary(translator.operand(left), symbol, translator.operand(right)))
  }
}

func binary(_ left: SQLFragment, _ symbol: String, _ right: SQLFragment) -> SQLFragment {
  SQLFragment("(\(left.sql) \(symbol) \(right.sql))", left.bindings + right.bindings)
}
