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
  /// ``toMany(_:_:link:inverse:deleteRule:orderBy:)-(_,_,_,KeyPath<Target,Model?>,_,_)``, with `link` the property that makes it
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

  /// One side of a many-to-many: a to-many whose inverse is a to-many of the related model
  /// (a trip's travelers, each traveler's trips). Neither table keeps a key: the links are rows
  /// of a join table the store keeps for the pair (`_<table>_<relationship>` of
  /// the side that names its inverse), written by the save from what this side's and the
  /// inverse's arrays gained and lost; each row of the join table is a link, unique, and
  /// deleting either model deletes its links. Removing a model from the array unlinks it
  /// whatever the rule (it may belong to other models); deleting the owner applies `deleteRule`
  /// to the related models: ``DeleteRule/nullify`` (the default) and ``DeleteRule/noAction``
  /// delete the links only, ``DeleteRule/cascade`` deletes the related models too,
  /// ``DeleteRule/deny`` refuses the save while links exist.
  ///
  /// ```swift
  /// // Trip: var travelers: [Traveler] (no inverse named there)
  /// // Traveler, in the schema:
  /// .toMany(\.trips, "trips", link: \.tripsLink, inverse: \.travelers)
  /// ```
  ///
  /// The array's order is `orderBy` (the related model's attributes), then the order the related
  /// rows were first saved in.
  public static func toMany<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, [Target]>, _ name: String,
    link: @escaping @Sendable (Model) -> ToMany<Target>, inverse: KeyPath<Target, [Model]>,
    deleteRule: DeleteRule = .nullify, orderBy: PartialKeyPath<Target>...
  ) -> ModelAttribute {
    relationship(
      keyPath, name, link: link, kind: .toMany, storesKey: false, deleteRule: deleteRule,
      inverse: inverse, order: orderBy, keyColumn: nil)
  }

  /// One side of a many-to-many, its link made on first use (see ``LinksOnFirstUse``): as the
  /// eager one above (`inverse:` a to-many), with `link` the property that makes it and
  /// `existing` its storage.
  public static func toMany<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, [Target]>, _ name: String,
    link: @escaping @Sendable (Model) -> ToMany<Target>,
    existing: @escaping @Sendable (Model) -> ToMany<Target>?, inverse: KeyPath<Target, [Model]>,
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
  static func relationship<
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
      ownerTable: { Model.modelSchema.name },
      ownerEntity: { Model.modelSchema.inheritance?.entity ?? Model.modelSchema.name },
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
