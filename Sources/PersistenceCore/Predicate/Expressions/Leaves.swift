import Foundation

extension PredicateExpressions.Value: SQLTranslatable {
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    .constant(value, origin: .leaf(translator.nextLeaf()))
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.leaf(value)
  }
}

extension PredicateExpressions.NilLiteral: SQLTranslatable {
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    .constant(Wrapped?.none as Any, origin: .literal)
  }

  /// Nothing: its type (`nil` of which type) is all there is.
  func shape(_ walker: inout PredicateShapeWalker) {}
}

extension PredicateExpressions.Variable: SQLTranslatable {
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    guard let bound = translator.variables[key] else {
      throw translator.unsupported("a variable outside its closure")
    }
    return bound
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.variable(key)
  }
}

extension PredicateExpressions.KeyPath: SQLTranslatable {
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    switch try translator.translate(root) {
    case .row:
      guard let column = translator.column(keyPath) else {
        if let relationship = translator.relationships.first(where: { $0.keyPath == keyPath }) {
          return try translator.follow(relationship, from: nil)
        }
        throw translator.unsupported(
          "the key path \(keyPath), which is not a stored attribute or relationship")
      }
      guard !column.isCodable else {
        throw PersistenceError(
          code: .unsupportedPredicate,
          message:
            "The attribute '\(column.name)' of \(translator.modelName) is kept as JSON (.codable, or a Codable type that is no enum of raw values), which is opaque: it cannot be used in a predicate or a sort, as in SwiftData."
        )
      }
      // Inside a subquery, named with the table: the subquery's could have such a column.
      let name =
        translator.depth > 0 ? "\(translator.rootTable).\(column.quotedName)" : column.quotedName
      return .sql(SQLFragment(name, canBeNull: column.isOptional))
    case .related(let row):
      return try translator.attribute(keyPath, of: row)
    case .relatedMany(let rows):
      guard let collection = Root.Output.self as? any ToManyCollection.Type else {
        throw translator.unsupported("the key path \(keyPath) on a to-many relationship")
      }
      let alias = translator.nextAlias()
      if keyPath == collection.isEmptyKeyPath {
        return .sql(translator.exists(rows, alias: alias, condition: nil, negated: true))
      }
      if keyPath == collection.countKeyPath {
        return .sql(
          SQLFragment(
            "(SELECT count(*) FROM \(rows.table.quotedName) AS \(alias) WHERE \(rows.links(alias)))",
            canBeNull: false))
      }
      throw translator.unsupported(
        "the key path \(keyPath) on a to-many relationship (use contains(where:), isEmpty or count)"
      )
    case .constant(let value, _):
      translator.reusable = false
      guard let root = value as? Root.Output else {
        throw translator.unsupported("a key path on \(type(of: value))")
      }
      return .constant(root[keyPath: keyPath])
    case .sql(let fragment):
      if fragment.isUnknown { return .sql(.unknown(isCondition: false)) }
      let path = keyPath as AnyKeyPath
      if path == \String.count as AnyKeyPath || path == \Substring.count as AnyKeyPath {
        return .sql(
          translator.swiftFunction(
            SQLFragment(
              "\(StoreFunctions.count)(\(fragment.sql))", fragment.bindings,
              canBeNull: fragment.canBeNull)))
      }
      if path == \String.isEmpty as AnyKeyPath {
        return .sql(
          SQLFragment(
            "(\(fragment.sql) = '')", fragment.bindings, isCondition: true,
            canBeNull: fragment.canBeNull))
      }
      if path == \Data.count as AnyKeyPath {
        return .sql(
          SQLFragment(
            "length(\(fragment.sql))", fragment.bindings, canBeNull: fragment.canBeNull))
      }
      if path == \Data.isEmpty as AnyKeyPath {
        return .sql(
          SQLFragment(
            "(length(\(fragment.sql)) = 0)", fragment.bindings, isCondition: true,
            canBeNull: fragment.canBeNull))
      }
      throw translator.unsupported("the key path \(keyPath) on a computed value")
    }
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    walker.visit(root)
    // By its address: converting it to `AnyKeyPath` looks up its generic class's metadata
    // (about 340 instructions), which only a template's keeper needs.
    walker.keyPath(ObjectIdentifier(keyPath), object: keyPath)
  }
}

/// A to-many's array, whose `count` and `isEmpty` a predicate may read.
protocol ToManyCollection {
  static var countKeyPath: AnyKeyPath { get }
  static var isEmptyKeyPath: AnyKeyPath { get }
}

extension Array: ToManyCollection where Element: PersistentModel {
  static var countKeyPath: AnyKeyPath { \[Element].count }
  static var isEmptyKeyPath: AnyKeyPath { \[Element].isEmpty }
}
