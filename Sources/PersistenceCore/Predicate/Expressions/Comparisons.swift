import Foundation

extension PredicateExpressions.Equal: SQLTranslatable {
  /// `lhs IS rhs`: null-safe, like Swift's `==` on optionals.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, "IS", rhs)
  }
}

extension PredicateExpressions.NotEqual: SQLTranslatable {
  /// `lhs IS NOT rhs`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, "IS NOT", rhs)
  }
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
    return try translator.binaryOperation(self, lhs, symbol, rhs)
  }
}

func binary(_ left: SQLFragment, _ symbol: String, _ right: SQLFragment) -> SQLFragment {
  SQLFragment("(\(left.sql) \(symbol) \(right.sql))", left.bindings + right.bindings)
}
