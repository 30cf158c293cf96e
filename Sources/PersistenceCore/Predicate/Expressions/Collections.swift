import Foundation

extension PredicateExpressions.SequenceContains: SQLTranslatable {
  /// `[a, b].contains($0.x)` as `x IN (?, ?)`, matching `nil` with `IS NULL`; through a
  /// to-one (`[a, b].contains($0.trip!.id)`), as a test of the key column. The list is
  /// padded to a power of two by repeating its last value (which selects nothing more), so
  /// that arrays of every length make a few SQL texts, not one each: a connection keeps a
  /// prepared statement per text.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let sequenceValue = try translator.translate(sequence)
    let elementValue = try translator.translate(element)
    if sequenceValue.isConstant && elementValue.isConstant {
      return try translator.fold(self)
    }
    // The SQL depends on how many values there are, and which are nil.
    translator.reusable = false
    guard case .constant(let values, _) = sequenceValue, let values = values as? any Sequence
    else {
      throw translator.unsupported("contains on a sequence that is not a captured array")
    }
    if elementValue.isUnknown { return .sql(.unknown(isCondition: true)) }
    let target = try translator.operand(elementValue)
    var bindings: [SQLValue] = []
    var matchesNil = false
    for value in values {
      let bound = try PredicateTranslator.sqlValue(of: value)
      if bound == .null { matchesNil = true } else { bindings.append(bound) }
    }
    if let last = bindings.last {
      var padded = 1
      while padded < bindings.count { padded <<= 1 }
      bindings += repeatElement(last, count: padded - bindings.count)
    }
    // A related row's attribute (`$0.trip!.id`, or `$0` inside `$0.trip.flatMap { … }`): a
    // test of the row's key against the keys of the related rows holding one of the values,
    // which the related table's index and the key column's serve (a subquery per row
    // otherwise: a scan). False for a row whose key is NULL, as Swift's answer for no row.
    if let related = target.relatedColumn, target.bindings.isEmpty, !matchesNil,
      !bindings.isEmpty
    {
      let list = Array(repeating: "?", count: bindings.count).joined(separator: ", ")
      return .sql(
        SQLFragment(
          related.membership("IN (\(list))"),
          FragmentBindings(bindings), isCondition: true, canBeNull: false))
    }
    var parts: [String] = []
    if !bindings.isEmpty {
      parts.append(
        "\(target.sql) IN (\(Array(repeating: "?", count: bindings.count).joined(separator: ", ")))"
      )
    }
    var allBindings = bindings.isEmpty ? [] : target.bindings + FragmentBindings(bindings)
    if matchesNil {
      parts.append("\(target.sql) IS NULL")
      allBindings += target.bindings
    }
    if parts.isEmpty { return .constant(false) }
    return .sql(
      SQLFragment(
        "(\(parts.joined(separator: " OR ")))", allBindings, isCondition: true,
        canBeNull: target.canBeNull && !matchesNil))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    // Its SQL depends on the array's length and its nils: translated every time.
    walker.fail()
  }
}

extension PredicateExpressions.CollectionContainsCollection: SQLTranslatable {
  /// `text.contains(other)` as `instr(text, other) > 0`: true for an empty `other`, as
  /// `Predicate.evaluate` answers.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, base, other) { haystack, needle in
      SQLFragment(
        "(instr(\(haystack.sql), \(needle.sql)) > 0)", haystack.bindings + needle.bindings,
        isCondition: true, canBeNull: haystack.canBeNull || needle.canBeNull)
    }
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(base)
    walker.visit(other)
  }
}

extension PredicateExpressions.SequenceStartsWith: SQLTranslatable {
  /// `text.starts(with: prefix)` as `substr(text, 1, length(prefix)) = prefix`.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    try translator.binaryOperation(self, base, prefix) { text, start in
      SQLFragment(
        "(substr(\(text.sql), 1, length(\(start.sql))) = \(start.sql))",
        text.bindings + start.bindings + start.bindings, isCondition: true,
        canBeNull: text.canBeNull || start.canBeNull)
    }
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(base)
    walker.visit(prefix)
  }
}

extension PredicateExpressions.SequenceContainsWhere: SQLTranslatable {
  /// `$0.bucketList.contains { test }` over a to-many as `EXISTS (SELECT 1 FROM items AS _rN
  /// WHERE _rN.trip = trips._pk AND test)`, the closure's variable standing for `_rN`'s row.
  /// Cost: the subquery runs per candidate row, over the index on the key column.
  ///
  /// A test that calls a Swift-only function the engine cannot run (narrowing) keeps each row
  /// whose answer depended on it (`IS NOT FALSE`): the `EXISTS` is then true for a superset,
  /// which Swift finishes.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let (rows, alias, translated, narrowed) = try translator.narrowingTest {
      try $0.relatedTest(
        sequence, variable: variable.key, test: test, construct: "contains(where:)")
    }
    if let constant = translator.constantBool(translated) {
      return constant
        ? .sql(translator.exists(rows, alias: alias, condition: nil)) : .constant(false)
    }
    if translated.isUnknown { return .sql(.unknown(isCondition: true)) }
    var condition = try translator.condition(translated)
    if narrowed { condition.sql = "(\(condition.sql)) IS NOT FALSE" }
    return .sql(translator.exists(rows, alias: alias, condition: condition))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(sequence)
    walker.variable(variable.key)
    walker.visit(test)
  }
}

extension PredicateExpressions.SequenceAllSatisfy: SQLTranslatable {
  /// `$0.bucketList.allSatisfy { test }` over a to-many as `NOT EXISTS` of a row whose test
  /// is not true. Cost: as `contains(where:)`.
  ///
  /// Narrowed (as `contains(where:)`), only a row whose test is surely false fails
  /// (`IS FALSE`): a superset again, which Swift finishes.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let (rows, alias, translated, narrowed) = try translator.narrowingTest {
      try $0.relatedTest(sequence, variable: variable.key, test: test, construct: "allSatisfy")
    }
    if translated.isUnknown { return .sql(.unknown(isCondition: true)) }
    let condition = try translator.condition(translated)
    var failing = condition
    failing.sql = "(\(condition.sql)) \(narrowed ? "IS FALSE" : "IS NOT TRUE")"
    return .sql(translator.exists(rows, alias: alias, condition: failing, negated: true))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(sequence)
    walker.variable(variable.key)
    walker.visit(test)
  }
}
