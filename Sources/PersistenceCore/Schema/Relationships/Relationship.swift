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
    predicateTable: @escaping @Sendable () -> PredicateTable,
    updateInverse: @escaping @Sendable (AnyObject, AnyObject, Bool) -> Void
  ) {
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
    self.predicateTable = predicateTable
    self.updateInverse = updateInverse
  }

  var targetName: String { "\(target)" }
}

extension ModelAttribute {
  /// A to-one relationship whose inverse is a to-many: this model's table keeps the related
  /// row's key in the column `name` (a foreign key, indexed). Deleting this model takes it out
  /// of the inverse's array; the inverse's ``DeleteRule`` says what deleting the related model
  /// does to this one.
  ///
  /// ```swift
  /// @Observable final class BucketListItem: PersistentModel {
  ///   var title = ""
  ///   let tripLink = ToOne<Trip>()
  ///   var trip: Trip? {
  ///     get { tripLink.value(of: self) }
  ///     set { tripLink.set(newValue, of: self) }
  ///   }
  ///   static let schema = ModelSchema<BucketListItem>(
  ///     "bucket_list_items",
  ///     .attribute(\.title, "title"),
  ///     .toOne(\.trip, "trip", link: \.tripLink, inverse: \.bucketList))
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - keyPath: The property users read and write (through the link).
  ///   - name: The column of the related row's key: letters, digits and underscores.
  ///   - link: The model's ``ToOne`` that holds the relationship.
  ///   - inverse: The related model's to-many that lists this model.
  public static func toOne<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, Target?>, _ name: String,
    link: @escaping @Sendable (Model) -> ToOne<Target>, inverse: KeyPath<Target, [Model]>
  ) -> ModelAttribute {
    relationship(
      keyPath, name, link: link, kind: .toOne, storesKey: true, deleteRule: .nullify,
      inverse: inverse, order: [], keyColumn: keyColumn(name, link: link))
  }

  /// A to-one relationship whose inverse is a to-one (a one-to-one). Exactly one side stores
  /// the key (`storesKey`, true by default): the dependent one, whose rule must be
  /// ``DeleteRule/nullify``; the other side declares `storesKey: false` and the rule that
  /// deleting it applies to the dependent row.
  ///
  /// - Parameters:
  ///   - keyPath: The property users read and write (through the link).
  ///   - name: The column of the related row's key when this side stores it (a foreign key
  ///     with a unique index); else the relationship's name in messages.
  ///   - link: The model's ``ToOne`` that holds the relationship.
  ///   - inverse: The related model's to-one that points back.
  ///   - deleteRule: What deleting this model does to the related one (only on the side that
  ///     does not store the key).
  ///   - storesKey: Whether this model's table keeps the key.
  public static func toOne<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, Target?>, _ name: String,
    link: @escaping @Sendable (Model) -> ToOne<Target>, inverse: KeyPath<Target, Model?>,
    deleteRule: DeleteRule = .nullify, storesKey: Bool = true
  ) -> ModelAttribute {
    relationship(
      keyPath, name, link: link, kind: .toOne, storesKey: storesKey, deleteRule: deleteRule,
      inverse: inverse, order: [], keyColumn: storesKey ? keyColumn(name, link: link) : nil)
  }

  /// A to-many relationship: the related model's table keeps this model's key (its inverse
  /// to-one stores it). Read, the array is in the order of `orderBy` (attributes of the
  /// related model, such as a position or a date, the first first; rows equal in all of them,
  /// and arrays without `orderBy`, in the order the related rows were first saved, which two
  /// stores synced row by row need not share: end with a unique attribute, such as an id, for
  /// an order every store agrees on); changed in memory, it is as you set it until it is read
  /// again from the store.
  ///
  /// ```swift
  /// let bucketListLink = ToMany<BucketListItem>()
  /// var bucketList: [BucketListItem] {
  ///   get { bucketListLink.value(of: self) }
  ///   set { bucketListLink.set(newValue, of: self) }
  /// }
  /// // in the schema:
  /// .toMany(\.bucketList, "bucket_list", link: \.bucketListLink, inverse: \.trip,
  ///         deleteRule: .cascade, orderBy: \.position, \.id)
  /// ```
  ///
  /// - Parameters:
  ///   - keyPath: The property users read and write (through the link).
  ///   - name: The relationship's name in messages.
  ///   - link: The model's ``ToMany`` that holds the relationship.
  ///   - inverse: The related model's to-one that points back (and stores the key).
  ///   - deleteRule: What deleting this model does to the related rows. Removing a model from
  ///     the array deletes it under ``DeleteRule/cascade`` (it cannot live without its owner)
  ///     and sets its inverse to nil under every other rule.
  ///   - orderBy: The related model's attributes the array is sorted by when read, each one
  ///     breaking the ties of those before it.
  public static func toMany<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, [Target]>, _ name: String,
    link: @escaping @Sendable (Model) -> ToMany<Target>, inverse: KeyPath<Target, Model?>,
    deleteRule: DeleteRule = .nullify, orderBy: PartialKeyPath<Target>...
  ) -> ModelAttribute {
    relationship(
      keyPath, name, link: link, kind: .toMany, storesKey: false, deleteRule: deleteRule,
      inverse: inverse, order: orderBy, keyColumn: nil)
  }

  /// A to-many relationship whose link is made on first use (see ``LinksOnFirstUse``): as
  /// ``toMany(_:_:link:inverse:deleteRule:orderBy:)``, with `link` the property that makes it
  /// (`link(&storage)`) and `existing` its storage, read where no link must be made.
  public static func toMany<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, [Target]>, _ name: String,
    link: @escaping @Sendable (Model) -> ToMany<Target>,
    existing: @escaping @Sendable (Model) -> ToMany<Target>?, inverse: KeyPath<Target, Model?>,
    deleteRule: DeleteRule = .nullify, orderBy: PartialKeyPath<Target>...
  ) -> ModelAttribute where Model: LinksOnFirstUse {
    relationship(
      keyPath, name, link: link, existing: existing, kind: .toMany, storesKey: false,
      deleteRule: deleteRule, inverse: inverse, order: orderBy, keyColumn: nil)
  }

  /// The side of a one-to-one that does not store the key, its link made on first use (see
  /// ``LinksOnFirstUse``): as ``toOne(_:_:link:inverse:deleteRule:storesKey:)`` with
  /// `storesKey: false`, `link` the property that makes it and `existing` its storage.
  public static func toOne<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, Target?>, _ name: String,
    link: @escaping @Sendable (Model) -> ToOne<Target>,
    existing: @escaping @Sendable (Model) -> ToOne<Target>?, inverse: KeyPath<Target, Model?>,
    deleteRule: DeleteRule = .nullify
  ) -> ModelAttribute where Model: LinksOnFirstUse {
    relationship(
      keyPath, name, link: link, existing: existing, kind: .toOne, storesKey: false,
      deleteRule: deleteRule, inverse: inverse, order: [], keyColumn: nil)
  }

  /// What `@Model` writes for a to-one that names a to-many as its inverse: refused at compile
  /// time, saying where the inverse goes (the to-one of a one-to-many stores the key, so it is
  /// the side declared without `inverse:`).
  @available(
    *, unavailable,
    message:
      "a to-one whose inverse is a to-many stores the key: name the inverse on the to-many (@Relationship(inverse: \\Child.parent) var children: [Child] = []) and mark this to-one @Relationship without arguments"
  )
  public static func toOne<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, Target?>, _ name: String,
    link: @escaping @Sendable (Model) -> ToOne<Target>,
    existing: @escaping @Sendable (Model) -> ToOne<Target>?, inverse: KeyPath<Target, [Model]>,
    deleteRule: DeleteRule = .nullify
  ) -> ModelAttribute where Model: LinksOnFirstUse {
    fatalError("unavailable")
  }

  /// The entry of a relationship in the schema's list: for a side that stores the key, the
  /// `Int?` attribute of its column (`keyColumn`, the link's ``ToOne/key``); else an entry
  /// with no column.
  ///
  /// The link is read through a function (a key path literal at the declaration converts to
  /// one, made where the model's type is known): a key path applied here, in code generic over
  /// the model, cost about 1,000 instructions a read (callgrind), and a fetch reads each
  /// loaded model's links.
  fileprivate static func relationship<
    Target: PersistentModel, Value, Link: RelationshipObservation & RelationshipLink
  >(
    _ keyPath: KeyPath<Model, Value>, _ name: String,
    link: @escaping @Sendable (Model) -> Link,
    existing: (@Sendable (Model) -> Link?)? = nil, kind: RelationshipInfo.Kind,
    storesKey: Bool, deleteRule: DeleteRule, inverse: PartialKeyPath<Target>?,
    order: [PartialKeyPath<Target>], keyColumn: ModelAttribute?
  ) -> ModelAttribute {
    nonisolated(unsafe) let declaredInverse = inverse
    nonisolated(unsafe) let userPath = keyPath
    /// The target's relationship that is this one's inverse: the one it names, else the one
    /// of the target that names this one as its inverse (SwiftData's declarations name it on
    /// one side). O(the target's relationships).
    @Sendable func back() -> RelationshipInfo? {
      if let declaredInverse { return Target.modelSchema.relationship(for: declaredInverse) }
      return Target.modelSchema.relationships.first {
        ObjectIdentifier($0.target) == ObjectIdentifier(Model.self) && $0.inverse == userPath
      }
    }
    let origin = LinkOriginAccess.of(Model.self)
    let info = RelationshipInfo(
      name: name, kind: kind, storesKey: storesKey, deleteRule: deleteRule, target: Target.self,
      keyPath: keyPath, inverse: inverse, order: order,
      link: { link(unsafeDowncast($0, to: Model.self)) },
      existingLink: { owner in
        guard let existing else { return link(unsafeDowncast(owner, to: Model.self)) }
        return existing(unsafeDowncast(owner, to: Model.self))
      },
      ownerReference: { owner in
        if let origin, existing != nil { return origin.reference(owner) }
        return link(unsafeDowncast(owner, to: Model.self)).contextReference
      },
      isMadeOnFirstUse: origin != nil && existing != nil,
      observation: { link(unsafeDowncast($0, to: Model.self)) },
      inverseInfo: back,
      inversePointsBack: {
        guard let back = back() else { return false }
        return ObjectIdentifier(back.target) == ObjectIdentifier(Model.self)
          && (back.inverse == userPath || (back.inverse == nil && declaredInverse != nil))
      },
      targetTable: { Target.modelSchema.name },
      predicateTable: { PredicateTable(Target.modelSchema) },
      updateInverse: { owner, related, linked in
        guard let back = back() else { return }
        back.link(related).linkInverse(of: related, to: owner, linked: linked, info: back)
      })
    var entry: ModelAttribute
    if let keyColumn {
      entry = keyColumn
    } else {
      entry = ModelAttribute(
        name: name, options: [], storageType: .integer, isOptional: true, isCodable: false,
        valueType: Value.self, slot: Int?.self, keyPath: keyPath
      ) { _, _ in .done }
    }
    entry.relationship = info
    return entry
  }
}

extension ModelAttribute {
  /// The `Int?` column of a to-one's key, read and written through its ``ToOne`` (its
  /// ``ToOne/key``): a row loaded into a new model sets the key without telling observers
  /// (nobody can observe the model yet), as attributes with backing storage load. Its key path
  /// (``KeyColumnPath``) serves the schema's lookups only.
  fileprivate static func keyColumn<Target: PersistentModel>(
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
      case (.toMany, .toMany):
        throw bad(
          relationship,
          "a many-to-many relationship is not supported; declare a model for the pairs, with a to-one to each side"
        )
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
    storesKey ? name : inverseInfo()?.name
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
  /// ``toMany(_:_:link:existing:inverse:deleteRule:orderBy:)``, with the inverse (the related
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
