import Foundation

// How a context loads related models for ``ToOne`` and ``ToMany`` faults, and what a save does
// for relationships: the related models it must insert too, the order of inserts (a row after
// the rows it points to), and the delete rules.
extension ModelContext {
  /// The primary key of a registered model, or the one the running save gave it. O(1) after
  /// the first lookup that indexes the registered models.
  func savedKey(of object: AnyObject) -> Int64? {
    if let key = registration(for: object)?.primaryKey { return key }
    return savingKeys.isEmpty ? nil : savingKeys[ObjectIdentifier(object)]
  }

  /// The model registered for `key`, without a query.
  func registeredModel<Model: PersistentModel>(forKey key: Int64, as _: Model.Type) -> Model? {
    guard let entity = try? entity(for: Model.self),
      let model = rowTables[entity.name]?[key]?.model
    else { return nil }
    return unsafeDowncast(model, to: Model.self)
  }

  /// A to-one's target: the registered model of `key`, or one query by primary key.
  func relatedModel<Model: PersistentModel>(_ type: Model.Type, key: Int64) throws -> Model? {
    if let registered = registeredModel(forKey: key, as: type) { return registered }
    let entity = try entity(for: type)
    relationshipQueryCount += 1
    return try model(
      for: PersistentIdentifier(
        storeIdentifier: container.storeIdentifier, entityName: entity.name, primaryKey: key),
      as: type)
  }

  /// A to-many's rows: the related models whose key column holds `key`, or for a
  /// many-to-many those the join table links to the row `key`, in the relationship's order
  /// (then by primary key). One query over the index on the key column (or over the join
  /// table's index from this side, then the related table's primary key), O(rows).
  func relatedModels(_ relationship: RelationshipInfo, key: Int64) throws -> [AnyObject] {
    let condition: String
    if let join = relationship.joinTable() {
      condition = "\"_pk\" IN (\(join.linkedKeysSQL))"
    } else if let column = relationship.keyColumn() {
      condition = "\(quoted(column)) = ?"
    } else {
      return []
    }
    let order = relationship.orderColumns()
    func load<Target: PersistentModel>(_ type: Target.Type) throws -> [AnyObject] {
      let entity = try entity(for: type)
      let schema = entity.schema
      let sorting = order.map(quoted) + ["\"_pk\""]
      let sql =
        "SELECT \(schema.selectList) FROM \(schema.quotedName) WHERE \(condition) ORDER BY \(sorting.joined(separator: ", "))"
      let database = try connection()
      relationshipQueryCount += 1
      var results: [AnyObject] = []
      try forEachRow(
        of: try database.cachedStatement(sql), bindings: [.integer(key)], entity: entity
      ) { model, _ in results.append(model) }
      return results
    }
    return try load(relationship.target)
  }

  /// Loads the relationships `descriptor` asks to prefetch for `owners` (its results): one
  /// query per relationship whatever the number of owners, their keys bound as one parameter
  /// (``StoreConnection/keyListCondition(_:)``). A to-one that stores the key loads the
  /// targets not registered yet by primary key (its owners then find them in the identity
  /// map); a to-many, or a to-one whose inverse stores the key, loads the related rows by
  /// their key column, ordered, and fills each owner's link that is still a fault.
  ///
  /// Cost: per relationship, one query over an index (the primary key, or the key column),
  /// O(owners + related rows) to bind, load and group.
  ///
  /// - Throws: ``PersistenceError/Code/unsupportedPredicate`` for a key path that is not a
  ///   relationship of the model; what the queries throw.
  func prefetch<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, of owners: [AnyObject], keys: [Int64],
    entity: Entity<Model>
  ) throws {
    try prefetch(descriptor.prefetching.keyPaths, of: owners, keys: keys, entity: entity)
  }

  /// Loads the relationships `keyPaths` of `models`, registered in this context, now: as a
  /// fetch's `relationshipKeyPathsForPrefetching` does, one query per relationship whatever
  /// the number of models. Reading those relationships afterwards runs no query and cannot
  /// fail, so a service that must answer an error rather than trap loads them here or with
  /// the fetch. A model not saved yet, or of another context, is left as it is; a
  /// relationship already loaded keeps what it holds.
  ///
  /// ```swift
  /// let trips = try context.fetch(FetchDescriptor<Trip>())
  /// try context.prefetch([\.bucketList, \.livingAccommodation], of: trips)
  /// ```
  ///
  /// Cost: per relationship, one query over an index (the primary key, or the key column),
  /// O(models + related rows).
  ///
  /// - Throws: ``PersistenceError/Code/unsupportedPredicate`` for a key path that is not a
  ///   relationship of the model; what the queries throw.
  public func prefetch<Model: PersistentModel>(
    _ keyPaths: [PartialKeyPath<Model>], of models: [Model]
  ) throws {
    let entity = try entity(for: Model.self)
    var owners: [AnyObject] = []
    var keys: [Int64] = []
    for model in models {
      guard let key = registration(for: model)?.primaryKey else { continue }
      owners.append(model)
      keys.append(key)
    }
    try prefetch(keyPaths, of: owners, keys: keys, entity: entity)
  }

  /// Prefetches the relationships `keyPaths` for `owners`, the rows `keys`.
  func prefetch<Model: PersistentModel>(
    _ keyPaths: [AnyKeyPath], of owners: [AnyObject], keys: [Int64], entity: Entity<Model>
  ) throws {
    for keyPath in keyPaths {
      guard let relationship = entity.schema.relationship(for: keyPath) else {
        throw PersistenceError(
          code: .unsupportedPredicate,
          message:
            "The key path \(Model.modelSchema.describe(keyPath)) to prefetch is not a relationship of \(Model.self); name a .toOne or .toMany."
        )
      }
      guard !owners.isEmpty else { continue }
      try prefetch(relationship, of: owners, keys: keys, entity: entity)
    }
  }

  /// Prefetches one relationship for `owners`, the rows `ownerKeys` (in the same order).
  private func prefetch(
    _ relationship: RelationshipInfo, of owners: [AnyObject], keys ownerKeys: [Int64],
    entity: any EntityOperations
  ) throws {
    let database = try connection()
    func load<Target: PersistentModel>(_ type: Target.Type) throws {
      let target = try self.entity(for: type)
      let schema = target.schema
      if relationship.storesKey {
        guard let attribute = entity.columnNames.firstIndex(of: relationship.name) else { return }
        var keys = Set<Int64>()
        let table = rowTable(target.name)
        for owner in owners {
          guard case .integer(let key) = try entity.value(owner, attribute: attribute),
            key != Int64(unsavedKey), table[key] == nil
          else { continue }
          keys.insert(key)
        }
        guard !keys.isEmpty else { return }
        relationshipQueryCount += 1
        let statement = try database.cachedStatement(
          "SELECT \(schema.selectList) FROM \(schema.quotedName) WHERE \(database.keyListCondition("\"_pk\""))"
        )
        try forEachRow(
          of: statement, bindings: [.text(database.keyListText(keys.sorted()))], entity: target
        ) { _, _ in }
        return
      }
      if let join = relationship.joinTable() {
        try prefetchLinks(relationship, join: join, of: owners, keys: ownerKeys, target: target)
        return
      }
      guard let column = relationship.keyColumn(),
        let attribute = target.columnNames.firstIndex(of: column)
      else { return }
      let keys = ownerKeys
      let sorting =
        [quoted(column)] + relationship.orderColumns().map(quoted) + ["\"_pk\""]
      relationshipQueryCount += 1
      let statement = try database.cachedStatement(
        "SELECT \(schema.selectList) FROM \(schema.quotedName) WHERE \(database.keyListCondition(quoted(column))) ORDER BY \(sorting.joined(separator: ", "))"
      )
      var groups: [Int64: [AnyObject]] = [:]
      try forEachRow(
        of: statement, bindings: [.text(database.keyListText(keys))], entity: target
      ) { model, row in
        groups[row.int64(at: Int32(attribute + 1)), default: []].append(model)
      }
      let inverse = relationship.inverseInfo()
      for (owner, key) in zip(owners, ownerKeys) {
        relationship.link(owner).fill(
          groups[key] ?? [], owner: owner, relationship: relationship, inverse: inverse)
      }
    }
    try load(relationship.target)
  }

  /// Prefetches a many-to-many for `owners`, the rows `ownerKeys`: one query for their links
  /// (the join table's index from this side), one for the related rows not registered yet (by
  /// primary key), each in the relationship's order; then fills each owner's link that is
  /// still a fault. O(owners + links + related rows).
  private func prefetchLinks<Target: PersistentModel>(
    _ relationship: RelationshipInfo, join: JoinTable, of owners: [AnyObject],
    keys ownerKeys: [Int64],
    target: Entity<Target>
  ) throws {
    let database = try connection()
    let schema = target.schema
    relationshipQueryCount += 1
    let links = try database.cachedStatement(
      "SELECT \(quoted(join.ownColumn)), \(quoted(join.otherColumn)) FROM \(quoted(join.name)) WHERE \(database.keyListCondition(quoted(join.ownColumn)))"
    )
    links.bindValues([.text(database.keyListText(ownerKeys))])
    var linked: [Int64: [Int64]] = [:]
    var related = Set<Int64>()
    do {
      defer { links.reset() }
      while try links.step() {
        linked[links.int64(at: 0), default: []].append(links.int64(at: 1))
        related.insert(links.int64(at: 1))
      }
    }
    // Each related row's model and place in the relationship's order (the rows are read in
    // it): one lookup a link, not one per comparison of a sort.
    var found: [Int64: (rank: Int, model: AnyObject)] = [:]
    if !related.isEmpty {
      found.reserveCapacity(related.count)
      let sorting = relationship.orderColumns().map(quoted) + ["\"_pk\""]
      relationshipQueryCount += 1
      let statement = try database.cachedStatement(
        "SELECT \(schema.selectList) FROM \(schema.quotedName) WHERE \(database.keyListCondition("\"_pk\"")) ORDER BY \(sorting.joined(separator: ", "))"
      )
      try forEachRow(
        of: statement, bindings: [.text(database.keyListText(related.sorted()))], entity: target
      ) { model, row in found[row.int64(at: 0)] = (found.count, model) }
    }
    let inverse = relationship.inverseInfo()
    for (owner, key) in zip(owners, ownerKeys) {
      var entries = (linked[key] ?? []).compactMap { found[$0] }
      entries.sort { $0.rank < $1.rank }
      relationship.link(owner).fill(
        entries.map(\.model), owner: owner, relationship: relationship, inverse: inverse)
    }
  }

  /// Deletes a model whatever its type (`delete(_:)`, and a to-many's cascade on an element
  /// removed from its array).
  func deleteObject(_ object: AnyObject) {
    guard let registration = registration(for: object) else { return }
    if registration.primaryKey == nil {
      unregister(registration)
      // Never saved: it leaves the models it is related to (a save would otherwise find it
      // there and insert it again), and takes its cascaded new models with it.
      for relationship in registration.entity.relationships {
        guard let link = relationship.existingLink(object) else { continue }
        for related in link.loadedModels {
          relationship.updateInverse(object, related, false)
          if relationship.deleteRule == .cascade, !relationship.storesKey {
            deleteObject(related)
          }
        }
      }
    } else {
      registration.isDeleted = true
    }
  }

  // MARK: Saving

  /// Inserts `model`, just related to a model of this context, when no context holds it (it
  /// was never inserted nor loaded), with every model it reaches through a loaded relationship
  /// that no context holds either: SwiftData inserts them as they are related. A model with no
  /// ``LinkOrigin`` (a hand-written model that is not ``LinksOnFirstUse``), which cannot say
  /// where it is, is left to the save. O(models inserted × their relationships).
  func insertOnRelating<Model: PersistentModel>(_ model: Model) {
    if isUnattached(model) { insert(model) }
  }

  /// Inserts the models `registration`'s model reaches through its loaded relationships that
  /// no context holds, and those they reach in turn (iteratively: a long chain needs no deep
  /// stack). O(models inserted × their relationships).
  func insertReachable(from registration: Registration) {
    var work = [registration]
    while let next = work.popLast() {
      for relationship in next.entity.relationships {
        for related in relationship.existingLink(next.model)?.loadedModels ?? []
        where isUnattached(related) {
          func register<Target: PersistentModel>(_: Target.Type) -> Registration? {
            self.register(unsafeDowncast(related, to: Target.self))
          }
          if let inserted = register(relationship.target), inserted.entity.hasRelationships {
            work.append(inserted)
          }
        }
      }
    }
  }

  /// Whether `model` is in no context: not registered here, and its ``LinkOrigin`` names none
  /// (it was never inserted nor loaded). False for a model without one.
  private func isUnattached(_ model: AnyObject) -> Bool {
    // The origin first: O(1), where the first lookup by model indexes every registered one.
    guard let linked = model as? any LinksOnFirstUse, linked.linkOrigin.reference == nil else {
      return false
    }
    return registration(for: model) == nil
  }

  /// Before a save: inserts every model that a registered model reaches through a loaded
  /// relationship and that no context holds (as SwiftData does), and refuses what would break
  /// a relationship. O(registered models with relationships × their loaded related models).
  ///
  /// - Throws: ``PersistenceError/Code/relationshipConstraint`` for a model that points to one
  ///   deleted in this context, or to one registered in another context.
  func prepareRelationships() throws {
    var work = pendingInserts.filter { $0.entity.hasRelationships }
    for registration in savedRegistrations
    where registration.entity.hasRelationships && !registration.isDeleted {
      work.append(registration)
    }
    var index = 0
    while index < work.count {
      let registration = work[index]
      index += 1
      for relationship in registration.entity.relationships {
        for related in relationship.existingLink(registration.model)?.loadedModels ?? [] {
          if let other = self.registration(for: related) {
            // A new or changed key that points to a deleted model (an unchanged one is the
            // delete rule's to apply).
            if other.isDeleted, relationship.storesKey,
              registration.primaryKey == nil
                || registration.entity.changedIndexes(registration).contains(where: {
                  registration.entity.columnNames[$0] == relationship.name
                })
            {
              throw PersistenceError(
                code: .relationshipConstraint,
                message:
                  "\(describeModel(registration.model, entity: registration.entity)) points through '\(relationship.name)' to \(describeModel(related, entity: other.entity)), which is deleted in the same save. Set the relationship to another model or nil; nothing was saved."
              )
            }
            continue
          }
          if let inverse = relationship.inverseInfo(),
            let owner = inverse.ownerReference(related)?.context, owner !== self
          {
            throw PersistenceError(
              code: .relationshipConstraint,
              message:
                "\(describeModel(registration.model, entity: registration.entity)) points through '\(relationship.name)' to a \(relationship.targetName) of another context. Fetch it in this context (model(for:)) and set that one; nothing was saved."
            )
          }
          func insertRelated<Target: PersistentModel>(_: Target.Type) {
            insert(unsafeDowncast(related, to: Target.self))
          }
          insertRelated(relationship.target)
          if let inserted = self.registration(for: related) { work.append(inserted) }
        }
      }
    }
  }

  /// Whether a changed row binds a related model's key that the save has not made yet (the
  /// related model is inserted by the same save): its update then waits for the inserts.
  func waitsForInserts(_ registration: Registration, changed: [Int]) -> Bool {
    let entity = registration.entity
    return changed.contains { index in
      (try? entity.value(registration.model, attribute: index)) == .integer(Int64(unsavedKey))
    }
  }

  /// `inserts` in groups, each model in a group after those it points to (stable: insertion
  /// order within a rank, see ``ModelContainer/ranks``). A model that points to a model of its
  /// own table inserted by the same save (a new place under a new parent) goes in a group
  /// after its target's, one group per level of the new tree, so that each group's keys are
  /// known when the next is bound (a batch binds its rows before any key is made).
  ///
  /// Cost: O(inserts); for a table that points to itself, O(inserts × its self-references).
  ///
  /// - Throws: ``PersistenceError/Code/relationshipConstraint`` when new models of one table
  ///   point to each other in a cycle (a place that is its own ancestor): no order can insert
  ///   them; nothing is saved.
  func orderedByRank(_ inserts: [Registration]) throws -> [[Registration]] {
    var groups: [Int: [Registration]] = [:]
    var trees: [Registration] = []
    for registration in inserts {
      if registration.entity.hasRelationships, !registration.entity.selfReferences.isEmpty {
        trees.append(registration)
        continue
      }
      groups[container.ranks[registration.entity.name] ?? 0, default: []].append(registration)
    }
    guard !trees.isEmpty else { return groups.keys.sorted().map { groups[$0]! } }
    // The level of each new model in a tree: 0 when it points to no new model of its table.
    var pending: [ObjectIdentifier: Registration] = [:]
    for registration in trees { pending[ObjectIdentifier(registration.model)] = registration }
    // The new models of its table each one points to (every self-reference, not only one).
    func parents(_ registration: Registration) -> [Registration] {
      registration.entity.selfReferences.compactMap { relationship in
        relationship.existingLink(registration.model)?.loadedModels.first.flatMap {
          pending[ObjectIdentifier($0)]
        }
      }
    }
    // Levels by a depth-first walk with a stack of its own (a deep tree needs no deep call
    // stack): a model's level is one more than its highest new parent's. A model met again
    // while its parents are being walked is its own ancestor.
    var levels: [ObjectIdentifier: Int] = [:]
    var walking: Set<ObjectIdentifier> = []
    func level(_ registration: Registration) throws -> Int {
      var stack: [(registration: Registration, parents: [Registration]?)] = [(registration, nil)]
      while let (current, known) = stack.last {
        let id = ObjectIdentifier(current.model)
        if levels[id] != nil {
          stack.removeLast()
          continue
        }
        let above = known ?? parents(current)
        if known == nil {
          walking.insert(id)
          stack[stack.count - 1].parents = above
        }
        if let next = above.first(where: { levels[ObjectIdentifier($0.model)] == nil }) {
          guard !walking.contains(ObjectIdentifier(next.model)) else {
            throw PersistenceError(
              code: .relationshipConstraint,
              message:
                "\(describeModel(next.model, entity: next.entity)) is its own ancestor through new models of its table (a cycle of '\(current.entity.selfReferences.map(\.name).joined(separator: "', '"))'): no order can insert them. Break the cycle; nothing was saved."
            )
          }
          stack.append((next, nil))
          continue
        }
        levels[id] = (above.map { levels[ObjectIdentifier($0.model)]! }.max() ?? -1) + 1
        walking.remove(id)
        stack.removeLast()
      }
      return levels[ObjectIdentifier(registration.model)]!
    }
    var byRankAndLevel: [Int: [Int: [Registration]]] = [:]
    for registration in trees {
      let rank = container.ranks[registration.entity.name] ?? 0
      byRankAndLevel[rank, default: [:]][try level(registration), default: []].append(
        registration)
    }
    // Each rank's other models, then its trees' levels, root level first.
    var result: [[Registration]] = []
    for rank in Set(groups.keys).union(byRankAndLevel.keys).sorted() {
      if let group = groups[rank] { result.append(group) }
      if let byLevel = byRankAndLevel[rank] {
        for level in byLevel.keys.sorted() { result.append(byLevel[level]!) }
      }
    }
    return result
  }

  /// After a commit: related models in memory follow what the save did. A deleted model
  /// leaves its owners' arrays and its links; a nullified one points to nothing.
  /// O(deleted + nullified rows × relationships).
  func settleRelationships(_ applied: AppliedChanges) throws {
    if container.hasJoinTables { settleLinks(applied) }
    // One reference for every model the save deleted (made only when there is one).
    lazy var deleted = ContextReference.deleted(from: container.storeIdentifier)
    for delete in applied.deleted {
      guard let registration = delete.registration, delete.entity.attachesModels else {
        continue
      }
      let model = registration.model
      delete.entity.linkOrigin?.set(model, deleted, nil)
      for relationship in delete.entity.relationships {
        guard let link = relationship.existingLink(model) else { continue }
        if relationship.joinTable() != nil {
          // Its links went with the row: the models it held forget it (``settleLinks(_:)``).
          link.context = nil
          continue
        }
        // A to-one still a fault of its key included: the registered model it points to
        // must stop pointing back (a one-to-one's other side would still hold the deleted).
        for related in link.registeredModels { relationship.updateInverse(model, related, false) }
        link.context = nil
      }
    }
    for (entity, _, attribute, registration) in applied.nullified {
      guard let registration, !registration.isDeleted else { continue }
      let column = entity.columnNames[attribute]
      if let relationship = entity.relationships.first(where: { $0.storesKey && $0.name == column })
      {
        let link = relationship.link(registration.model)
        for related in link.loadedModels {
          relationship.updateInverse(registration.model, related, false)
        }
        link.clearSaved()
      }
      try entity.recordSnapshot(registration)
    }
  }

  /// The operations of a model type known only as a metatype.
  func operations(for type: any PersistentModel.Type) throws -> any EntityOperations {
    func open<Model: PersistentModel>(_ type: Model.Type) throws -> any EntityOperations {
      try entity(for: type)
    }
    return try open(type)
  }

  /// Every registered model's relationships read from the store again on next access (after
  /// a rollback, which may have put keys back). O(registered models with relationships).
  func refaultRelationships() {
    guard container.hasRelationships else { return }
    for registration in savedRegistrations where registration.entity.hasRelationships {
      for relationship in registration.entity.relationships {
        relationship.existingLink(registration.model)?.refault(relationship)
      }
    }
    for entry in mergedModels where entry.merged.entity.hasRelationships {
      for relationship in entry.merged.entity.relationships {
        relationship.existingLink(entry.merged.model)?.refault(relationship)
      }
    }
  }
}
