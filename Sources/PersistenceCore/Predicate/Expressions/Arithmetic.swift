import Foundation

extension PredicateExpressions.Arithmetic: SQLTranslatable {
  /// `+`, `-`, `*`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let symbol =
      switch op {
      case .add: "+"
      case .subtract: "-"
      case .multiply: "*"
      }
    return try translator.binaryOperation(self, lhs, symbol, rhs)
  }
}

extension PredicateExpressions.IntDivision: SQLTranslatable {
  /// Integer `/`, truncating toward zero like Swift.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, "/", rhs)
  }
}

extension PredicateExpressions.IntRemainder: SQLTranslatable {
  /// Integer `%`, with the sign of the dividend like Swift.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, "%", rhs)
  }
}

extension PredicateExpressions.FloatDivision: SQLTranslatable {
  /// Floating-point `/`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, rhs) { l, r in
      SQLFragment("(CAST(\(l.sql) AS DOUBLE PRECISION) / \(r.sql))", l.bindings + r.bindings)
    }
  }
}

extension PredicateExpressions.UnaryMinus: SQLTranslatable {
  /// Unary `-`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let inner = try translator.translate(wrapped)
    if inner.isConstant { return try PredicateTranslator.fold(self) }
    if inner.isUnknown { return inner }
    let fragment = try translator.operand(inner)
    return .sql(SQLFragment("(- \(fragment.sql))", fragment.bindings))
  }
}
