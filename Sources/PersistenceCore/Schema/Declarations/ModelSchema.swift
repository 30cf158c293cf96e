/// Where a subclass of a model sits in its root model's table (see
/// ``ModelSchema/init(subclassOf:entity:_:)``).
@usableFromInline
struct ModelInheritance: Sendable {
  /// The subclass's entity name (its class's name).
  let entity: String
  /// The entity names from the root's first subclass down to this one, each followed by `/`:
  /// the value of the table's `"_entity"` column for the subclass's rows.
  let path: String
  /// The superclass.
  let superclass: any PersistentModel.Type

  /// The rows of this class and of its subclasses: those whose `"_entity"` starts with
  /// ``path``, tested as exactly on every engine (no collation, no `LIKE` folding case).
  var condition: String { Self.condition(path: path) }

  /// The rows whose `"_entity"` (of the table `qualifier` names, when given) starts with
  /// `path`: `substr` counts characters (code points) on both engines, as the path is counted
  /// here.
  static func condition(path: String, qualifier: String? = nil) -> String {
    let column = (qualifier.map { $0 + "." } ?? "") + quoted(EntityDescription.entityColumn)
    return "substr(\(column), 1, \(path.unicodeScalars.count)) = '\(path)'"
  }
}

/// An attribute as a predicate sees it (see ``ModelSchema/predicateColumns``).
struct PredicateColumn: Sendable {
  /// The column's name, quoted for SQL.
  var quotedName: String
  /// The column's name, for errors.
  var name: String
  /// Whether the attribute is `.codable` (opaque to predicates).
  var isCodable: Bool
  /// Whether the column can hold `NULL`.
  var isOptional: Bool
}

/// The table and attributes of a ``PersistentModel``, declared once with key paths.
///
/// ```swift
/// static let schema = ModelSchema<Trip>(
///   "trips",
///   .attribute(\.id, "id", .unique),
///   .attribute(\.destination, "destination", .indexed),
///   .codable(\.placeIdentifier, "place_id"))
/// ```
///
/// The container checks the declaration when it opens a store and throws a
/// ``PersistenceError`` naming any problem (a bad or repeated name, a `.unique` `.codable`).
public struct ModelSchema<Model: PersistentModel>: Sendable {
  /// The table name.
  public let name: String
  /// The attributes, in column order (relationships not included).
  public let attributes: [ModelAttribute<Model>]
  /// Every entry of the declaration, attributes and relationships, as declared.
  @usableFromInline let declarations: [ModelAttribute<Model>]
  /// The relationships, as declared.
  let relationships: [RelationshipInfo]
  /// Every column after the primary key: the attributes, then the key of each to-one that
  /// stores it (``ModelAttribute/toOne(_:_:link:inverse:)``), in declaration order.
  let storedAttributes: [ModelAttribute<Model>]
  /// Makes a new model from a row, when the declaration gives one (see ``loading(_:)``).
  @usableFromInline let loader: RowLoader?
  /// Binds a model's attributes for an insert, when the declaration gives a binder (see
  /// ``saving(_:)``).
  @usableFromInline let binder: RowBinder?

  /// A loader: builds the ``ModelRow`` (row, cache, first column, snapshot, layout) and calls
  /// the declaration's initializer with it, telling how many attributes it read (also when
  /// it throws). Made where the schema is declared, so that the row's type is concrete there
  /// (made generically, each row asked for `ModelRow<Model>`'s metadata: about 330
  /// instructions).
  @usableFromInline
  typealias RowLoader =
    @Sendable (
      any StoreRow, LoadCache, Int32, UnsafeMutableRawPointer?, EntityLayout, inout Int
    ) throws -> Model
  /// A binder: builds the ``ModelRowBinder`` (statement, layout) and calls the declaration's
  /// closure with the model, telling how many attributes it bound (also when it throws).
  @usableFromInline
  typealias RowBinder =
    @Sendable (
      Model, (any StoreStatement)?, UnsafeMutableRawPointer?, Bool, EntityLayout, inout Int
    ) throws -> Void
  /// Each attribute's index by its key path (the first, if two share one: ``validate()``
  /// refuses that). Key paths to stored properties are immutable values, read-only here (as
  /// ``ModelAttribute/keyPath``).
  nonisolated(unsafe) let attributeIndexes: [AnyKeyPath: Int]
  /// What a predicate needs of each attribute, in column order: made once, so that a
  /// predicate's key path costs one lookup and no copy of its ``ModelAttribute``.
  let predicateColumns: [PredicateColumn]
  /// The primary key and every attribute's column, quoted and comma-separated: what a fetch
  /// of models selects, made once (built per query it cost about 13k instructions, a third of
  /// a small indexed fetch's own work).
  var selectList: String
  /// The table's name, quoted.
  let quotedName: String
  /// Each attribute's property name and documentation, by column (``described(_:)``).
  @usableFromInline let descriptions: [String: (name: String, documentation: String)]
  /// The persisted attributes as formats see them, in column order (``ModelField``).
  public let fields: [ModelField<Model>]
  /// Where a subclass of a model sits in its root model's table (nil for a root model).
  @usableFromInline let inheritance: ModelInheritance?

  /// Declares a schema: the table name, then the attributes.
  public init(_ name: String, _ attributes: ModelAttribute<Model>...) {
    self.init(name: name, attributes: attributes, loader: nil, binder: nil)
  }

  /// Declares the schema of a subclass of the model `Base` (what `@Model` writes for
  /// `@Model class BusinessTrip: Trip`): `attributes` are every attribute of the class, the
  /// inherited ones first (as `Base` declares them, over this class), then its own.
  ///
  /// A subclass is kept in its root model's table, which has a column for each attribute of
  /// every subclass the container lists and a column `"_entity"` naming each row's class (the
  /// path of entity names below the root, `BusinessTrip/`, empty for the root's own rows). A
  /// fetch of the subclass reads the rows whose path starts with its own; a fetch of the root,
  /// every row, each made as its own class.
  ///
  /// - Parameters:
  ///   - base: The superclass, itself a model (a root model or a subclass of one).
  ///   - entity: The subclass's entity name: the class's name.
  ///   - attributes: Every attribute and relationship of the class, its superclass's first.
  public init<Base: PersistentModel>(
    subclassOf base: Base.Type, entity: String, _ attributes: [ModelAttribute<Model>]
  ) {
    let baseSchema = Base.modelSchema
    // Each relationship the superclass declares is the superclass's, whatever entry declared
    // it here (a to-one the macro found only at run time is declared anew otherwise, its
    // inverse looked for on this class).
    let inheritedNames = Set(baseSchema.relationships.map(\.name))
    let attributes = attributes.map { attribute -> ModelAttribute<Model> in
      guard let relationship = attribute.relationship, inheritedNames.contains(relationship.name)
      else { return attribute }
      return .inherited(relationship.keyPath, relationship.name, from: baseSchema)
    }
    self.init(
      name: baseSchema.name, attributes: attributes, descriptions: baseSchema.descriptions,
      loader: nil, binder: nil,
      inheritance: ModelInheritance(
        entity: entity, path: (baseSchema.inheritance?.path ?? "") + entity + "/",
        superclass: Base.self))
  }

  /// The schema, with rows becoming new models through `make`: an initializer call that reads
  /// every attribute from the ``ModelRow``, in the schema's order, and returns the model.
  ///
  /// Without it, a fetch makes each new model with `PersistentModel.makeForLoading()` and sets
  /// its attributes one by one through their key paths: a closure call, a key-path write and,
  /// on a class, a runtime exclusivity check per attribute and row. An initializer's stores
  /// need none of that: a fetch of Trip's eight attributes, 2×20,000 rows, went from 466M to
  /// 387M instructions (callgrind). Registered models refreshed by a later fetch, and
  /// `ModelContext.rollback()`, still go through the key paths, so observers are told.
  ///
  /// `make` must read each attribute exactly once, in order, and must not keep the row. The
  /// container checks it when it opens (it loads probe rows whose columns tell each other
  /// apart): a read out of order, of another type, missing or extra is a
  /// ``PersistenceError/Code/invalidValue`` naming the attribute, before any row is read.
  @inlinable
  public func loading(_ make: @escaping @Sendable (inout ModelRow<Model>) throws -> Model)
    -> ModelSchema
  {
    ModelSchema(
      name: name, attributes: declarations, descriptions: descriptions,
      loader: { statement, cache, firstColumn, snapshot, layout, count in
        var row = ModelRow<Model>(
          statement, cache: cache, firstColumn: firstColumn, snapshot: snapshot, entity: layout)
        defer { count = row.count }
        return try make(&row)
      }, binder: binder, inheritance: inheritance)
  }

  /// The schema, with a new model's attributes bound for its insert by `bind`: a closure that
  /// binds every attribute's value through the ``ModelRowBinder``, in the schema's order.
  ///
  /// Without it, an insert binds each attribute through its declaration: a closure call that
  /// takes an operation and answers with an enum, and a key-path read of the model, per
  /// attribute and row (about 300 instructions each). The binder reads the model's stored
  /// properties directly; after the save commits, the same closure records the saved values in
  /// the model's snapshot. Updates, which bind only the changed attributes, still go through
  /// the declarations.
  ///
  /// `bind` must bind each attribute exactly once, in order, with the attribute's value. The
  /// container checks it when it opens, binding a model whose attributes tell each other
  /// apart: a bind out of order, of another type, missing, extra or of another value is a
  /// ``PersistenceError/Code/invalidValue`` naming the attribute. A failure to bind (a NaN)
  /// throws, naming the attribute.
  ///
  /// ```swift
  /// .saving { trip, row in
  ///   try row.bind(\.id, trip._id)
  ///   try row.bind(\.name, trip._name)
  ///   try row.bind(\.placeIdentifier, fault: trip._placeFault)
  /// }
  /// ```
  @inlinable
  public func saving(
    _ bind: @escaping @Sendable (Model, inout ModelRowBinder<Model>) throws -> Void
  ) -> ModelSchema {
    ModelSchema(
      name: name, attributes: declarations, descriptions: descriptions, loader: loader,
      binder: { model, statement, snapshot, isInitialized, layout, count in
        var row = ModelRowBinder<Model>(
          statement, snapshot: snapshot, isInitialized: isInitialized, entity: layout)
        defer { count = row.count }
        try bind(model, &row)
      }, inheritance: inheritance)
  }

  /// The schema, with each attribute's property name and documentation (by column): what
  /// ``fields`` tells formats. `@Model` writes it from the declaration; a schema declared by
  /// hand without it names each field as its column.
  ///
  /// ```swift
  /// .described([("start_date", "startDate", "When it starts.")])
  /// ```
  public func described(_ fields: [(column: String, name: String, documentation: String)])
    -> ModelSchema
  {
    var descriptions = self.descriptions
    for field in fields { descriptions[field.column] = (field.name, field.documentation) }
    return ModelSchema(
      name: name, attributes: declarations, descriptions: descriptions, loader: loader,
      binder: binder, inheritance: inheritance)
  }

  @usableFromInline
  init(
    name: String, attributes: [ModelAttribute<Model>],
    descriptions: [String: (name: String, documentation: String)] = [:], loader: RowLoader?,
    binder: RowBinder?, inheritance: ModelInheritance? = nil
  ) {
    self.name = name
    self.inheritance = inheritance
    self.descriptions = descriptions
    declarations = attributes
    let plain = attributes.filter { $0.relationship == nil }
    self.attributes = plain
    relationships = attributes.compactMap(\.relationship)
    let stored = plain + attributes.filter { $0.relationship?.storesKey == true }
    storedAttributes = stored
    self.loader = loader
    self.binder = binder
    var indexes: [AnyKeyPath: Int] = [:]
    for (index, attribute) in stored.enumerated() where indexes[attribute.keyPath] == nil {
      indexes[attribute.keyPath] = index
    }
    attributeIndexes = indexes
    predicateColumns = stored.map {
      PredicateColumn(
        quotedName: quoted($0.name), name: $0.name, isCodable: $0.isCodable,
        isOptional: $0.isOptional)
    }
    selectList = (["\"_pk\""] + predicateColumns.map(\.quotedName)).joined(separator: ", ")
    quotedName = quoted(name)
    fields = plain.compactMap {
      ModelField(
        $0, name: descriptions[$0.name]?.name, documentation: descriptions[$0.name]?.documentation)
    }
  }

  /// The index of the attribute stored at `keyPath`, if any: O(1), one hash of the key path
  /// (a comparison of two key paths costs about 900 instructions, and predicates, sorts and
  /// sections look attributes up on every query).
  func attributeIndex(for keyPath: AnyKeyPath) -> Int? {
    attributeIndexes[keyPath]
  }

  /// The attribute stored at `keyPath`, if any.
  public func attribute(for keyPath: AnyKeyPath) -> ModelAttribute<Model>? {
    attributeIndex(for: keyPath).map { storedAttributes[$0] }
  }

  func validate() throws {
    func bad(_ why: String) -> PersistenceError {
      PersistenceError(
        code: .invalidValue, message: "The schema of \(Model.self) is invalid: \(why).")
    }
    guard isIdentifier(name) else {
      throw bad(
        "the table name '\(name)' must be letters, digits and underscores, not starting with '_' or a digit"
      )
    }
    var seen = Set<String>()
    for attribute in declarations {
      guard isIdentifier(attribute.name) else {
        throw bad(
          "the column name '\(attribute.name)' must be letters, digits and underscores, not starting with '_' or a digit"
        )
      }
      guard seen.insert(attribute.name.lowercased()).inserted else {
        throw bad(
          "the name '\(attribute.name)' is used twice (attributes and relationships share names)")
      }
      if attribute.options.contains(.codable) {
        throw bad(
          "the attribute '\(attribute.name)' has the option .codable, which is @Attribute's: declare it with .codable(…)"
        )
      }
      if attribute.isCodable && (attribute.isUnique || attribute.isIndexed) {
        throw bad(
          "the .codable attribute '\(attribute.name)' cannot be .unique or .indexed: its value is opaque"
        )
      }
    }
    for attribute in attributes {
      if options(of: attribute, unique: true) > 1 || options(of: attribute, unique: false) > 1 {
        throw bad(
          "the attribute '\(attribute.name)' has more than one .unique or more than one .indexed option; declare each constraint once"
        )
      }
      for companion in attribute.uniqueCompanions
      where !attributes.contains(where: {
        $0.name == companion && !$0.isCodable && $0.name != attribute.name
      }) {
        throw bad(
          "the attribute '\(attribute.name)' is unique with '\(companion)', which is not another stored attribute"
        )
      }
      for companion in attribute.indexCompanions
      where !attributes.contains(where: {
        $0.name == companion && !$0.isCodable && $0.name != attribute.name
      }) {
        throw bad(
          "the attribute '\(attribute.name)' is indexed with '\(companion)', which is not another stored attribute"
        )
      }
    }
    let keyPaths = declarations.map(\.keyPath)
    if Set(keyPaths).count != keyPaths.count {
      throw bad("a key path is declared twice")
    }
  }
}

/// How many of `attribute`'s options are unique constraints (`unique`), or indexes.
private func options<Model>(of attribute: ModelAttribute<Model>, unique: Bool) -> Int {
  attribute.options.filter {
    unique
      ? ($0 == .unique || !$0.uniqueCompanions.isEmpty)
      : ($0 == .indexed || !$0.companions.isEmpty)
  }.count
}

func isIdentifier(_ name: String) -> Bool {
  guard let first = name.unicodeScalars.first, first != "_", !("0"..."9").contains(first) else {
    return false
  }
  return name.unicodeScalars.allSatisfy {
    ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
  }
}

/// Quotes an identifier for SQL.
package func quoted(_ identifier: String) -> String {
  guard identifier.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + identifier + "\"" }
  return "\"\(identifier.replacingOccurrences(of: "\"", with: "\"\""))\""
}
