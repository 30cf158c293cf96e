import Foundation

// `is` and `as?` of a model's subclass (``ModelInheritance``), read from the `"_entity"`
// column of the root model's table: a row is of a subclass when its path starts with the
// subclass's.

extension PredicateTranslator {
  /// The row `input` translates to, as a row of `Desired`: the SQL naming its table (for its
  /// columns), the condition that it is a `Desired`, and `Desired`'s attributes. `Desired` must
  /// be a model kept in the row's table: the row's model, a superclass or a subclass of it.
  ///
  /// Cost in the query: none beyond the condition, a test of the row's own `"_entity"` column.
  mutating func classTest<Desired>(_ input: Any, as _: Desired.Type) throws -> (
    condition: SQLFragment, row: RelatedRow
  ) {
    guard let model = Desired.self as? any PersistentModel.Type else {
      throw unsupported("a cast to \(Desired.self), which is not a model")
    }
    func table<Model: PersistentModel>(_: Model.Type) -> (PredicateTable, ModelInheritance?) {
      let schema = Model.modelSchema
      return (PredicateTable(schema), schema.inheritance)
    }
    let (desired, inheritance) = table(model)
    let qualifier: String
    let inputTable: String
    switch try translate(input) {
    case .row:
      qualifier = rootTable
      inputTable = rootTable
    case .related(let row) where row.alias != nil:
      qualifier = row.alias!
      inputTable = row.table.quotedName
    default:
      throw unsupported("a cast of something other than a model or a to-many's row")
    }
    guard desired.quotedName == inputTable else {
      throw unsupported(
        "a cast to \(Desired.self), a model kept in another table than the row's")
    }
    // The root model itself: every row is one.
    let condition =
      inheritance.map {
        SQLFragment(
          ModelInheritance.condition(path: $0.path, qualifier: qualifier),
          isCondition: true, canBeNull: false)
      } ?? SQLFragment("1 = 1", isCondition: true, canBeNull: false)
    let key = "(CASE WHEN \(condition.sql) THEN \(qualifier).\"_pk\" END)"
    return (condition, RelatedRow(table: desired, key: key, alias: qualifier))
  }
}

extension PredicateExpressions.TypeCheck: SQLTranslatable {
  /// `model is Subclass`: whether the row's `"_entity"` path starts with the subclass's.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    .sql(try translator.classTest(input, as: Desired.self).condition)
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(input)
  }
}

extension PredicateExpressions.ConditionalCast: SQLTranslatable {
  /// `model as? Subclass`: the row, read as the subclass (its own attributes too), with no
  /// key (`nil`) where it is not one. Read through `flatMap` or `if let`, whose `nil` case the
  /// missing key decides.
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    .related(try translator.classTest(input, as: Desired.self).row)
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(input)
  }
}
