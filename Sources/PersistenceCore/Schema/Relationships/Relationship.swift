/// What happens to related rows when a model is deleted: declared on the side that does not
/// store the key (a to-many, or the to-one of a one-to-one whose inverse stores it), as
/// SwiftData's `@Relationship(deleteRule:)`.
///
/// The store enforces each rule with its foreign key's `ON DELETE` (so a row written by
/// another process or server cannot dangle either), and a save applies it itself first, so that
/// every row the rule touches is in the save's history transaction.
public enum DeleteRule: String, Sendable, CaseIterable {
  /// The related rows stay; their key is set to `NULL` (`ON DELETE SET NULL`). The default.
  case nullify
  /// The related rows are deleted with the model, and theirs with them (`ON DELETE CASCADE`).
  case cascade
  /// The save is refused while a related row exists, with a
  /// ``PersistenceError/Code/relationshipConstraint`` error naming the model, its row and the
  /// relationship; nothing is saved (`ON DELETE RESTRICT`).
  case deny
  /// The save does nothing to related rows: deleting a model that still has some is refused by
  /// the store (`ON DELETE NO ACTION`), as a ``PersistenceError/Code/relationshipConstraint``
  /// error. Delete or move the related rows yourself, in the same save or before it.
  case noAction

  /// The `ON DELETE` action of the foreign key that enforces the rule.
  package var onDelete: String {
    switch self {
    case .nullify: "SET NULL"
    case .cascade: "CASCADE"
    case .deny: "RESTRICT"
    case .noAction: "NO ACTION"
    }
  }
}

/// One relationship of a model, type-erased: what the container checks when it opens and what
/// a context needs to load, save and delete related rows.
///
/// A class: it holds a dozen closures, which a struct would retain and release one by one on
/// every copy (each lookup of a relationship copies it).
@usableFromInline
final class RelationshipInfo: Sendable {
  enum Kind: Sendable {
    case toOne
    case toMany
  }
  /// The relationship's name, for messages; for a to-one that stores the key, its column.
  let name: String
  let kind: Kind
  /// Whether this side keeps the related row's key in a column of its own table (a to-one
  /// whose inverse is a to-many, or the dependent side of a one-to-one).
  let storesKey: Bool
  let deleteRule: DeleteRule
  /// The model type on the other side.
  let target: any PersistentModel.Type
  /// The property as users read it (predicates and sorts go through it), and the inverse's on
  /// the target. Key paths are immutable values.
  nonisolated(unsafe) let keyPath: AnyKeyPath
  nonisolated(unsafe) let inverse: AnyKeyPath?
  /// For a to-many, the child's attributes it is ordered by, first to last (empty when none
  /// is declared).
  nonisolated(unsafe) let order: [AnyKeyPath]
  /// The fewest and the most related models a saved model may have (SwiftData's
  /// `minimumModelCount` and `maximumModelCount`); nil (or 0) for no bound. A save checks them
  /// (``ModelContext/save()``).
  let minimumModelCount: Int?
  let maximumModelCount: Int?
  /// The owner's link object (``ToOne`` or ``ToMany``), made now when the owner makes its
  /// links on first use (``LinksOnFirstUse``).
  let link: @Sendable (AnyObject) -> any RelationshipLink
  /// The owner's link if it has one already: what a context's passes over every registered
  /// model read, so that they make none.
  let existingLink: @Sendable (AnyObject) -> (any RelationshipLink)?
  /// The context reference of the owner: its link's, or for ``LinksOnFirstUse``, its
  /// ``LinkOrigin``'s.
  let ownerReference: @Sendable (AnyObject) -> ContextReference?
  /// Whether the owner makes this link on first use (``LinksOnFirstUse``): a loaded owner's
  /// ``LinkOrigin`` holds what the link will take.
  let isMadeOnFirstUse: Bool
  /// The same object as its base class: what attaching a loaded model needs, without an
  /// existential.
  let observation: @Sendable (AnyObject) -> RelationshipObservation
  /// Whether a loaded owner's link starts as a fault to look up by the inverse's key column
  /// (a to-one whose inverse stores the key).
  let isInverseFaultOnLoad: Bool
  /// The inverse relationship, looked up in the target's schema (nil when it declares none).
  let inverseInfo: @Sendable () -> RelationshipInfo?
  /// Whether `inverse` names a relationship whose own inverse is this one's key path.
  let inversePointsBack: @Sendable () -> Bool
  /// The target's table name.
  let targetTable: @Sendable () -> String
  /// The table of the model that declares the relationship (a subclass's: its root model's).
  let ownerTable: @Sendable () -> String
  /// The entity of the model that declares it: its table's name, or a subclass's own name.
  let ownerEntity: @Sendable () -> String
  /// What a predicate reads of the target.
  let predicateTable: @Sendable () -> PredicateTable
  /// Links `object` (an owner) to `related` on the inverse side only (the caller changed this
  /// side), or unlinks it when `linked` is false.
  let updateInverse: @Sendable (_ owner: AnyObject, _ related: AnyObject, _ linked: Bool) -> Void

  init(
    name: String, kind: Kind, storesKey: Bool, deleteRule: DeleteRule,
    target: any PersistentModel.Type, keyPath: AnyKeyPath, inverse: AnyKeyPath?,
    order: [AnyKeyPath], link: @escaping @Sendable (AnyObject) -> any RelationshipLink,
    existingLink: @escaping @Sendable (AnyObject) -> (any RelationshipLink)?,
    ownerReference: @escaping @Sendable (AnyObject) -> ContextReference?,
    isMadeOnFirstUse: Bool,
    observation: @escaping @Sendable (AnyObject) -> RelationshipObservation,
    inverseInfo: @escaping @Sendable () -> RelationshipInfo?,
    inversePointsBack: @escaping @Sendable () -> Bool,
    targetTable: @escaping @Sendable () -> String,
    ownerTable: @escaping @Sendable () -> String,
    ownerEntity: @escaping @Sendable () -> String,
    predicateTable: @escaping @Sendable () -> PredicateTable,
    updateInverse: @escaping @Sendable (AnyObject, AnyObject, Bool) -> Void,
    minimumModelCount: Int? = nil, maximumModelCount: Int? = nil
  ) {
    self.minimumModelCount = minimumModelCount.flatMap { $0 > 0 ? $0 : nil }
    self.maximumModelCount = maximumModelCount.flatMap { $0 > 0 ? $0 : nil }
    self.name = name
    self.kind = kind
    self.storesKey = storesKey
    self.deleteRule = deleteRule
    self.target = target
    self.keyPath = keyPath
    self.inverse = inverse
    self.order = order
    self.link = link
    self.existingLink = existingLink
    self.ownerReference = ownerReference
    self.isMadeOnFirstUse = isMadeOnFirstUse
    self.observation = observation
    isInverseFaultOnLoad = kind == .toOne && !storesKey
    self.inverseInfo = inverseInfo
    self.inversePointsBack = inversePointsBack
    self.targetTable = targetTable
    self.ownerTable = ownerTable
    self.ownerEntity = ownerEntity
    self.predicateTable = predicateTable
    self.updateInverse = updateInverse
  }

  var targetName: String { "\(target)" }

  /// This relationship, read by users through `keyPath`: a subclass's key path of the
  /// property its superclass declares (``ModelAttribute/inherited(_:_:from:)``). Every
  /// closure is the superclass's, which a subclass's model passes as it is.
  func rerooted(_ keyPath: AnyKeyPath) -> RelationshipInfo {
    copy(keyPath: keyPath, minimum: minimumModelCount, maximum: maximumModelCount)
  }

  /// This relationship with the bounds on its count given (see ``minimumModelCount``).
  func counted(minimum: Int?, maximum: Int?) -> RelationshipInfo {
    copy(keyPath: keyPath, minimum: minimum, maximum: maximum)
  }

  private func copy(keyPath: AnyKeyPath, minimum: Int?, maximum: Int?) -> RelationshipInfo {
    RelationshipInfo(
      name: name, kind: kind, storesKey: storesKey, deleteRule: deleteRule, target: target,
      keyPath: keyPath, inverse: inverse, order: order, link: link, existingLink: existingLink,
      ownerReference: ownerReference, isMadeOnFirstUse: isMadeOnFirstUse,
      observation: observation, inverseInfo: inverseInfo, inversePointsBack: inversePointsBack,
      targetTable: targetTable, ownerTable: ownerTable, ownerEntity: ownerEntity,
      predicateTable: predicateTable,
      updateInverse: updateInverse, minimumModelCount: minimum, maximumModelCount: maximum)
  }

  /// Whether the relationship bounds its count.
  var isCounted: Bool { minimumModelCount != nil || maximumModelCount != nil }
}

extension ModelAttribute {
  /// The relationship `name` of `base`, a superclass's schema, as a subclass declares it:
  /// read through the subclass's `keyPath` to the same property, every operation the
  /// superclass's (what `@Model` writes in a subclass's schema for each relationship it
  /// inherits).
  public static func inherited<Base: PersistentModel, Value>(
    _ keyPath: KeyPath<Model, Value>, _ name: String, from base: ModelSchema<Base>
  ) -> ModelAttribute {
    inherited(keyPath as AnyKeyPath, name, from: base)
  }

  /// The relationship `name` of `base`, read through `keyPath` (see
  /// ``inherited(_:_:from:)``).
  static func inherited<Base: PersistentModel>(
    _ keyPath: AnyKeyPath, _ name: String, from base: ModelSchema<Base>
  ) -> ModelAttribute {
    guard let declared = base.declarations.first(where: { $0.relationship?.name == name }),
      let relationship = declared.relationship
    else {
      fatalError("\(Base.self) declares no relationship '\(name)' for \(Model.self) to inherit")
    }
    // A key column's entry keeps its own key path; another entry is the property's.
    let isProperty = declared.keyPath == relationship.keyPath
    var entry = ModelAttribute(
      inheriting: declared, keyPath: isProperty ? keyPath : declared.keyPath, options: nil)
    entry.relationship = relationship.rerooted(keyPath)
    return entry
  }
}

extension ModelAttribute {
  /// The `Int?` column of a to-one's key, read and written through its ``ToOne`` (its
  /// ``ToOne/key``): a row loaded into a new model sets the key without telling observers
  /// (nobody can observe the model yet), as attributes with backing storage load. Its key path
  /// (``KeyColumnPath``) serves the schema's lookups only.
  static func keyColumn<Target: PersistentModel>(
    _ name: String, link: @escaping @Sendable (Model) -> ToOne<Target>
  ) -> ModelAttribute {
    ModelAttribute(
      name: name, options: [], storageType: .integer, isOptional: true, isCodable: false,
      valueType: Int?.self, slot: Int?.self, keyPath: \KeyColumnPath.[column: name]
    ) { object, operation in
      let toOne = link(unsafeDowncast(object, to: Model.self))
      switch operation {
      case .load(let row, let index, _, let slot, let isNew):
        let value = try Int?.read(from: row.object, at: index)
        slot?.store(value)
        if isNew { toOne.loadKey(value) } else { toOne.key = value }
      case .bind(let statement, let index): try toOne.key.bind(to: statement.object, at: index)
      case .value: return .value(toOne.key.sqlValue)
      case .assign(let value): toOne.key = try Int?(sqlValue: value)
      case .record(let slot): slot.store(toOne.key)
      case .matches(let slot): return .matches(slot.load(as: Int?.self) == toOne.key)
      case .restore(let slot): toOne.key = slot.load(as: Int?.self)
      case .resolve: break
      }
      return .done
    }
  }
}

/// Where the key paths of key columns are rooted: `\KeyColumnPath.[column: "trip"]` names the
/// column `trip` in its schema's lookups, and no model's key path can equal it.
struct KeyColumnPath {
  subscript(column column: String) -> Int? { nil }
}

extension ModelSchema {
  /// The relationship whose user-facing property is `keyPath`, if any. O(relationships).
  func relationship(for keyPath: AnyKeyPath) -> RelationshipInfo? {
    relationships.first { $0.keyPath == keyPath }
  }

  /// Checks the relationships against the other models of a container (`types`), when it
  /// opens: each related type is in the container, each inverse points back, exactly one side
  /// of each pair stores the key, rules are declared where they apply, orders are attributes.
  func validateRelationships(in types: [ObjectIdentifier]) throws {
    func bad(_ relationship: RelationshipInfo, _ why: String) -> PersistenceError {
      PersistenceError(
        code: .invalidValue,
        message:
          "The relationship '\(relationship.name)' of \(Model.self) is invalid: \(why).")
    }
    for relationship in relationships {
      guard types.contains(ObjectIdentifier(relationship.target)) else {
        throw bad(
          relationship,
          "it points to \(relationship.targetName), which is not part of this container; pass it to ModelContainer(for:) too"
        )
      }
      for order in relationship.order where relationship.target.columnName(of: order) == nil {
        throw bad(
          relationship,
          "it is ordered by \(order), which is not a stored attribute of \(relationship.targetName) (nor .codable)"
        )
      }
      guard let inverse = relationship.inverseInfo() else {
        throw bad(
          relationship,
          relationship.inverse == nil
            ? "it names no inverse, and no relationship of \(relationship.targetName) names it as its inverse; name the inverse on one side (@Relationship(inverse:), or inverse: in the schema)"
            : "its inverse is not declared in the schema of \(relationship.targetName); declare it there with .toOne or .toMany"
        )
      }
      if relationship.inverse == nil && inverse.inverse == nil {
        throw bad(
          relationship,
          "neither it nor '\(inverse.name)' of \(relationship.targetName) names its inverse; name it on one side"
        )
      }
      guard relationship.inversePointsBack() else {
        throw bad(
          relationship,
          "its inverse '\(inverse.name)' of \(relationship.targetName) does not name it as its own inverse"
        )
      }
      switch (relationship.kind, inverse.kind) {
      case (.toOne, .toOne):
        guard relationship.storesKey != inverse.storesKey else {
          throw bad(
            relationship,
            relationship.storesKey
              ? "both sides of the one-to-one with '\(inverse.name)' of \(relationship.targetName) store the key; declare storesKey: false on one"
              : "neither side of the one-to-one with '\(inverse.name)' of \(relationship.targetName) stores the key; declare storesKey: true on one"
          )
        }
      default: break
      }
      if relationship.storesKey, relationship.deleteRule != .nullify {
        throw bad(
          relationship,
          "the side that stores the key cannot have the delete rule .\(relationship.deleteRule.rawValue) (deleting a dependent row never deletes or blocks what it points to); declare the rule on '\(inverse.name)' of \(relationship.targetName)"
        )
      }
    }
  }
}

extension RelationshipInfo {
  /// The target's columns the order key paths are stored in (the container refuses an order
  /// that is not a native attribute).
  func orderColumns() -> [String] {
    order.compactMap { target.columnName(of: $0) }
  }

  /// The column of the key the inverse stores in the target's table (for a side that does not
  /// store it), or this side's own column.
  func keyColumn() -> String? {
    if storesKey { return name }
    guard let inverse = inverseInfo(), inverse.kind == .toOne else { return nil }
    return inverse.name
  }

  /// The join table of a many-to-many (a to-many whose inverse is a to-many), as this side
  /// reads it; nil for every other relationship. O(the target's relationships).
  func joinTable() -> JoinTable? {
    guard kind == .toMany, let inverse = inverseInfo(), inverse.kind == .toMany else {
      return nil
    }
    let owns = ownsJoinTable(inverse: inverse)
    let owner = owns ? self : inverse
    return JoinTable(
      name: "_\(owner.ownerEntity())_\(owner.name)",
      ownColumn: owns ? JoinTable.ownerColumn : JoinTable.targetColumn,
      otherColumn: owns ? JoinTable.targetColumn : JoinTable.ownerColumn, isOwner: owns)
  }

  /// Whether this side of a many-to-many names its join table: the side that names its
  /// inverse (`inverse:`); when both do, the one first by table and name.
  private func ownsJoinTable(inverse: RelationshipInfo) -> Bool {
    switch (self.inverse != nil, inverse.inverse != nil) {
    case (true, false): return true
    case (false, true): return false
    default: return (ownerTable(), name) <= (inverse.ownerTable(), inverse.name)
    }
  }
}

/// The table a many-to-many keeps its links in: one row per pair of related rows, `owner` the
/// key of a row of the side that names the table (``RelationshipInfo/joinTable()``), `target`
/// the other's, both foreign keys that cascade (a row's delete takes its links), unique as a
/// pair, and indexed each way (`owner` first in the unique index, `target` alone), so that one
/// row's links are read through an index from either side.
struct JoinTable: Equatable, Sendable {
  static let ownerColumn = "owner"
  static let targetColumn = "target"
  /// `_<entity of the owning side>_<its relationship>`: `_travelers_trips` (a subclass's
  /// relationship is named by its class, so two subclasses of one table may declare the same
  /// name).
  let name: String
  /// The column holding this side's row's key, and the one holding the other side's.
  let ownColumn: String
  let otherColumn: String
  /// Whether this side names the table (its links are the ones a save writes).
  let isOwner: Bool

  /// `SELECT other FROM join WHERE own = ?`: the keys of the rows one row is linked to, read
  /// through the index whose first column is `own`.
  var linkedKeysSQL: String {
    "SELECT \(quoted(otherColumn)) FROM \(quoted(name)) WHERE \(quoted(ownColumn)) = ?"
  }
}

extension PersistentModel {
  /// The column of a native (not `.codable`) attribute stored at `keyPath`.
  static func columnName(of keyPath: AnyKeyPath) -> String? {
    guard let attribute = schema.attribute(for: keyPath), !attribute.isCodable,
      attribute.relationship == nil
    else { return nil }
    return attribute.name
  }
}

extension ModelAttribute {
  /// A to-one that stores the key, whose inverse names it: the "many" side of a one-to-many
  /// whose to-many says `inverse:` (as `@Relationship` declares a relationship's inverse on one
  /// side). As ``toOne(_:_:link:inverse:)``, with the inverse found in the related model's
  /// schema when the container opens.
  public static func toOne<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, Target?>, _ name: String,
    link: @escaping @Sendable (Model) -> ToOne<Target>
  ) -> ModelAttribute {
    relationship(
      keyPath, name, link: link, kind: .toOne, storesKey: true, deleteRule: .nullify,
      inverse: nil as PartialKeyPath<Target>?, order: [], keyColumn: keyColumn(name, link: link))
  }

  /// A to-many whose inverse names it, its link made on first use: as
  /// ``toMany(_:_:link:existing:inverse:deleteRule:orderBy:)-(_,_,_,_,KeyPath<Target,Model?>,_,_)``, with the inverse (the related
  /// model's to-one that says `inverse:`) found in the related model's schema when the
  /// container opens.
  public static func toMany<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, [Target]>, _ name: String,
    link: @escaping @Sendable (Model) -> ToMany<Target>,
    existing: @escaping @Sendable (Model) -> ToMany<Target>?,
    deleteRule: DeleteRule = .nullify, orderBy: PartialKeyPath<Target>...
  ) -> ModelAttribute where Model: LinksOnFirstUse {
    relationship(
      keyPath, name, link: link, existing: existing, kind: .toMany, storesKey: false,
      deleteRule: deleteRule, inverse: nil as PartialKeyPath<Target>?, order: orderBy,
      keyColumn: nil)
  }
}

extension ModelAttribute {
  /// This relationship with bounds on how many models it relates, SwiftData's
  /// `@Relationship(minimumModelCount:maximumModelCount:)` (what `@Model` writes for them): a
  /// save refuses a model whose relationship, as the save knows it, relates fewer or more
  /// (``PersistenceError/Code/invalidValue``, naming the model and the relationship). nil or 0
  /// is no bound, as in SwiftData.
  ///
  /// What the save knows: a to-many loaded in memory (inserted models', and those read or
  /// changed), and a to-one's key. A to-many never read by this context is not counted (its
  /// rows changed elsewhere are those writers' to check). Cost: O(registered models of the
  /// model) per save, for models that declare a bound; nothing for the others.
  public func modelCount(minimum: Int?, maximum: Int?) -> ModelAttribute {
    var copy = self
    copy.relationship = relationship?.counted(minimum: minimum, maximum: maximum)
    return copy
  }
}
