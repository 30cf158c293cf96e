import Foundation

extension PredicateExpressions.NilCoalesce: SQLTranslatable {
  /// `lhs ?? rhs` as `COALESCE(lhs, rhs)`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, lhs, rhs) { l, r in
      SQLFragment(
        "COALESCE(\(l.sql), \(r.sql))", l.bindings + r.bindings,
        canBeNull: l.canBeNull && r.canBeNull)
    }
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(lhs)
    walker.visit(rhs)
  }
}

extension PredicateExpressions.OptionalFlatMap: SQLTranslatable {
  /// `x.flatMap { … }`: `CASE WHEN x IS NULL THEN NULL ELSE … END`, with the closure's
  /// variable standing for `x`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let base = try translator.translate(wrapped)
    if case .constant(let value, _) = base {
      translator.reusable = false
      if let optional = value as? any OptionalValue, optional.isNone {
        return .constant(Any?.none as Any)
      }
      translator.variables[variable.key] = .constant(value)
      let result = try translator.translate(transform)
      translator.variables[variable.key] = nil
      return result
    }
    if base.isUnknown { return .sql(.unknown(isCondition: false)) }
    let fragment = try translator.operand(base)
    // A related row stays one, for the closure's key paths to read; `fragment` is its key.
    if case .related = base {
      translator.variables[variable.key] = base
    } else {
      translator.variables[variable.key] = .sql(fragment)
    }
    let translated = try translator.translate(transform)
    translator.variables[variable.key] = nil
    if translated.isUnknown { return .sql(.unknown(isCondition: false)) }
    switch translated {
    case .related, .relatedMany:
      // Another step through a relationship: its key is `NULL` (no rows) where this one's
      // is, as the optional's `nil`.
      return translated
    case .sql(let inner) where inner.relatedColumn != nil:
      // An attribute of the related row, read by its key: `NULL` where the key is.
      return translated
    default: break
    }
    // A condition stays one (its `NULL` is unknown, as the optional's `nil`).
    let body: SQLFragment
    if case .sql(let inner) = translated, inner.isCondition {
      body = inner
    } else {
      body = try translator.operand(translated)
    }
    return .sql(
      SQLFragment(
        "(CASE WHEN \(fragment.sql) IS NULL THEN NULL ELSE \(body.sql) END)",
        fragment.bindings + body.bindings, isCondition: body.isCondition))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(wrapped)
    walker.variable(variable.key)
    walker.visit(transform)
  }
}

extension PredicateExpressions.ForcedUnwrap: SQLTranslatable {
  /// `x!`: the value itself. A `nil` makes the row not match, where Swift would stop with an
  /// error.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let value = try translator.translate(inner)
    if value.isConstant { return try translator.fold(self) }
    return value
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(inner)
  }
}
