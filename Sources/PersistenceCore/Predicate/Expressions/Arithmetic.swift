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

  func shape(_ walker: inout PredicateShapeWalker) {
    let code =
      switch op {
      case .add: 0
      case .subtract: 1
      case .multiply: 2
      }
    walker.part(code)
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

extension PredicateExpressions.IntDivision: SQLTranslatable {
  /// Integer `/`, truncating toward zero like Swift.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, "/", rhs)
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

extension PredicateExpressions.IntRemainder: SQLTranslatable {
  /// Integer `%`, with the sign of the dividend like Swift.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, "%", rhs)
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

extension PredicateExpressions.FloatDivision: SQLTranslatable {
  /// Floating-point `/`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, rhs) { l, r in
      SQLFragment("(CAST(\(l.sql) AS DOUBLE PRECISION) / \(r.sql))", l.bindings + r.bindings)
    }
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

extension PredicateExpressions.UnaryMinus: SQLTranslatable {
  /// Unary `-`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let inner = try translator.translate(wrapped)
    if inner.isConstant { return try translator.fold(self) }
    if inner.isUnknown { return inner }
    let fragment = try translator.operand(inner)
    return .sql(SQLFragment("(- \(fragment.sql))", fragment.bindings))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(wrapped)
  }
}
