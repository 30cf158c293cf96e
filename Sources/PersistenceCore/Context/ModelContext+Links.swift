import Foundation

// What a save does for many-to-many relationships: the links their arrays gained and lost,
// written to join tables (``JoinTable``) and recorded in history as updates of the rows on
// both sides, and the delete rules applied through the links of deleted rows.
extension ModelContext {
  /// A many-to-many link a save writes: the owning side's link of one model.
  struct LinkWrite {
    let registration: Registration
    let relationship: RelationshipInfo
    let table: JoinTable
    let link: any RelationshipLink
  }

  /// A row whose links a save made or broke, with the names of its relationships they were of.
  struct LinkedRow {
    let entity: String
    let subentity: String?
    let key: Int64
    var relationships: Set<String>
  }

  /// The owning side's many-to-many links whose arrays changed since they were read or saved,
  /// of models this save inserts, keeps or deletes. A change made through the other side reached the
  /// owning side's array already (``ToMany/set(_:of:)`` updates the inverse).
  ///
  /// Cost: O(registered models of models with many-to-manys × their many-to-manys).
  func changedLinks() -> [LinkWrite] {
    var writes: [LinkWrite] = []
    func collect(_ registration: Registration) {
      for (relationship, table) in registration.entity.joins where table.isOwner {
        guard let link = relationship.existingLink(registration.model), link.hasLinkChanges
        else { continue }
        writes.append(
          LinkWrite(
            registration: registration, relationship: relationship, table: table, link: link))
      }
    }
    for registration in pendingInserts where !registration.entity.joins.isEmpty {
      collect(registration)
    }
    // A deleted model's too: the links it lost are removed before the delete rules look.
    for registration in savedRegistrations where !registration.entity.joins.isEmpty {
      collect(registration)
    }
    // A model an upsert merged keeps its own links: what it changed is saved for the row.
    for entry in mergedModels where !entry.merged.entity.joins.isEmpty {
      collect(entry.merged)
    }
    return writes
  }

  /// Writes the links `writes` lost (`additions` false: before the save's deletes, so that a
  /// delete rule sees the links as the save leaves them) or gained (`additions`: after the
  /// save's inserts, every key known), noting each row on either side whose links changed,
  /// with the relationship's name on its side (``recordLinkedRows(writer:applied:)`` records
  /// them). A link to a model the save deletes is not made (the delete takes its links); a
  /// link the store has already (another context made it) or lacks already (another deleted
  /// it) changes nothing and notes nothing.
  ///
  /// Cost: one statement per link gained or lost (each an index lookup).
  func writeLinks(
    _ writes: [LinkWrite], additions: Bool, database: any StoreConnection,
    applied: inout AppliedChanges
  ) throws {
    // The rows the save deleted (cascades included): no link is made to or from them.
    let deleted = additions ? applied.deletedKeys : [:]
    for write in writes {
      guard let ownerKey = savedKey(of: write.registration.model),
        !additions
          || (!write.registration.isDeleted
            && deleted[write.registration.entity.name]?.contains(ownerKey) != true)
      else { continue }
      let targetTable = write.relationship.targetTable()
      let deletedTargets = deleted[targetTable] ?? []
      // Before the deletes, a related model marked deleted is still linked: its delete takes
      // the link, through the rules (a removal now would hide it from them).
      let changes = write.link.linkChanges { related in
        guard let registration = self.registration(for: related) else { return nil }
        guard additions else { return registration.primaryKey }
        guard !registration.isDeleted,
          let key = registration.primaryKey ?? self.savingKeys[ObjectIdentifier(related)],
          !deletedTargets.contains(key)
        else { return nil }
        return key
      }
      guard let (now, stored) = changes else { continue }
      let join = quoted(write.table.name)
      let (owner, target) = (quoted(JoinTable.ownerColumn), quoted(JoinTable.targetColumn))
      let statement = try database.cachedStatement(
        additions
          ? "INSERT INTO \(join) (\(owner), \(target)) VALUES (?, ?) ON CONFLICT (\(owner), \(target)) DO NOTHING"
          : "DELETE FROM \(join) WHERE \(owner) = ? AND \(target) = ?")
      let inverse = write.relationship.inverseInfo()?.name ?? write.relationship.name
      let targetRows = rowTable(targetTable)
      let keys = additions ? now.subtracting(stored) : stored.subtracting(now)
      for key in keys.sorted() {
        statement.reset()
        statement.bindInt64(ownerKey, at: 1)
        statement.bindInt64(key, at: 2)
        try statement.run()
        guard database.changedRowCount > 0 else { continue }
        applied.noteLinked(
          write.registration.entity.name, write.registration.entity.historySubentity, ownerKey,
          write.relationship.name)
        applied.noteLinked(targetTable, targetRows[key]?.entity.historySubentity, key, inverse)
      }
      if additions { applied.linksSaved.append((write.link, now)) }
    }
  }

  /// Records an update of each row whose links the save made or broke (``writeLinks``, and
  /// the delete rules), naming its relationships, but of rows the save deleted. One history
  /// row per row.
  func recordLinkedRows(writer: HistoryWriter, applied: inout AppliedChanges) throws {
    guard !applied.linkedRows.isEmpty else { return }
    // A row the save deleted or inserted is recorded as that, with nothing more.
    var skipped = applied.deletedKeys
    for (registration, key, changed) in applied.inserted where changed == nil {
      skipped[registration.entity.name, default: []].insert(key)
    }
    for row in applied.linkedRows.values.sorted(by: { ($0.entity, $0.key) < ($1.entity, $1.key) })
    where skipped[row.entity]?.contains(row.key) != true {
      try writer.record(
        .update, entity: row.entity, subentity: row.subentity, key: row.key,
        attributes: row.relationships.sorted())
      applied.linked.append(row)
    }
  }

  /// The rows linked to the row `key` of `entity` (being deleted) through its many-to-manys,
  /// by relationship, each with its class's path when the related table holds subclasses
  /// (read from its `"_entity"`): what the delete rules act on. One query per many-to-many,
  /// over the join table's index from this side (and the related table's primary key).
  func linkedRows(of entity: any EntityOperations, key: Int64, database: any StoreConnection)
    throws -> [(relationship: RelationshipInfo, keys: [Int64], paths: [Int64: String])]
  {
    var result: [(relationship: RelationshipInfo, keys: [Int64], paths: [Int64: String])] = []
    for (relationship, table) in entity.joins {
      let subclassed = try operations(for: relationship.target).entityColumn != nil
      let sql =
        subclassed
        ? "SELECT j.\(quoted(table.otherColumn)), t.\(quoted(EntityDescription.entityColumn)) FROM \(quoted(table.name)) AS j JOIN \(quoted(relationship.targetTable())) AS t ON t.\"_pk\" = j.\(quoted(table.otherColumn)) WHERE j.\(quoted(table.ownColumn)) = ?"
        : table.linkedKeysSQL
      let statement = try database.cachedStatement(sql)
      statement.bindInt64(key, at: 1)
      var keys: [Int64] = []
      var paths: [Int64: String] = [:]
      do {
        defer { statement.reset() }
        while try statement.step() {
          keys.append(statement.int64(at: 0))
          if subclassed, !statement.isNull(at: 1), case let path = statement.text(at: 1),
            !path.isEmpty
          {
            paths[statement.int64(at: 0)] = path
          }
        }
      }
      result.append((relationship, keys, paths))
    }
    return result
  }

  /// After a commit: the links a save wrote are the links' stored ones, and the models linked
  /// to deleted rows forget them. O(links written + links of deleted rows).
  func settleLinks(_ applied: AppliedChanges) {
    for (link, keys) in applied.linksSaved { link.linksSaved(keys) }
    // The other side's arrays are as the store has them now too: no change left to save.
    func settleOtherSide(_ registration: Registration) {
      guard !registration.entity.joins.isEmpty, !registration.isDeleted else { return }
      for (relationship, table) in registration.entity.joins where !table.isOwner {
        guard let link = relationship.existingLink(registration.model), link.hasLinkChanges,
          let (now, _) = link.linkChanges(key: { self.savedKey(of: $0) })
        else { continue }
        link.linksSaved(now)
      }
    }
    pendingInserts.forEach(settleOtherSide)
    savedRegistrations.forEach(settleOtherSide)
    // Each link of a model linked to deleted rows forgets them all at once.
    var forgetting: [ObjectIdentifier: (link: any RelationshipLink, forgotten: Forgotten)] = [:]
    func forget(_ link: any RelationshipLink, _ object: AnyObject?, key: Int64) {
      forgetting[ObjectIdentifier(link), default: (link, Forgotten())].forgotten.add(object, key)
    }
    for unlinked in applied.unlinked {
      guard let registration = rowTable(unlinked.entity)[unlinked.key],
        let link = unlinked.relationship.existingLink(registration.model)
      else { continue }
      forget(
        link, rowTable(unlinked.deletedEntity)[unlinked.deletedKey]?.model, key: unlinked.deletedKey
      )
    }
    // Models the deleted ones held in memory (linked in memory only, or loaded).
    for delete in applied.deleted {
      guard let registration = delete.registration else { continue }
      for (relationship, _) in delete.entity.joins {
        guard let inverse = relationship.inverseInfo(),
          let link = relationship.existingLink(registration.model)
        else { continue }
        for related in link.loadedModels {
          guard let other = inverse.existingLink(related) else { continue }
          forget(other, registration.model, key: delete.key)
        }
      }
    }
    for (link, forgotten) in forgetting.values { link.forgetDeleted(forgotten) }
  }
}

/// The deleted rows a many-to-many link forgets at once: their models (those loaded) and keys.
struct Forgotten {
  var objects: Set<ObjectIdentifier> = []
  var keys: Set<Int64> = []

  mutating func add(_ object: AnyObject?, _ key: Int64) {
    if let object { objects.insert(ObjectIdentifier(object)) }
    keys.insert(key)
  }
}
