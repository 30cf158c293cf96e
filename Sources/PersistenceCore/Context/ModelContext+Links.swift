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
        guard let link = relationship.existingLink(registration.model),
          link.linkChanges(key: { _ in nil }) != nil
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
    for write in writes {
      guard let ownerKey = savedKey(of: write.registration.model),
        !additions || !write.registration.isDeleted
      else { continue }
      let changes = write.link.linkChanges { related in
        guard let registration = self.registration(for: related), !registration.isDeleted else {
          return nil
        }
        return registration.primaryKey ?? self.savingKeys[ObjectIdentifier(related)]
      }
      guard let (now, stored) = changes else { continue }
      let join = quoted(write.table.name)
      let (owner, target) = (quoted(JoinTable.ownerColumn), quoted(JoinTable.targetColumn))
      let statement = try database.cachedStatement(
        additions
          ? "INSERT INTO \(join) (\(owner), \(target)) VALUES (?, ?) ON CONFLICT (\(owner), \(target)) DO NOTHING"
          : "DELETE FROM \(join) WHERE \(owner) = ? AND \(target) = ?")
      let inverse = write.relationship.inverseInfo()?.name ?? write.relationship.name
      let targetTable = write.relationship.targetTable()
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
    var deleted: [String: Set<Int64>] = [:]
    for delete in applied.deleted { deleted[delete.entity.name, default: []].insert(delete.key) }
    for row in applied.linkedRows.values.sorted(by: { ($0.entity, $0.key) < ($1.entity, $1.key) })
    where deleted[row.entity]?.contains(row.key) != true {
      try writer.record(
        .update, entity: row.entity, subentity: row.subentity, key: row.key,
        attributes: row.relationships.sorted())
      applied.linked.append(row)
    }
  }

  /// The rows linked to the row `key` of `entity` (being deleted) through its many-to-manys,
  /// by relationship: what the delete rules act on. One query per many-to-many, over the join
  /// table's index from this side.
  func linkedRows(of entity: any EntityOperations, key: Int64, database: any StoreConnection)
    throws -> [(relationship: RelationshipInfo, keys: [Int64])]
  {
    var result: [(relationship: RelationshipInfo, keys: [Int64])] = []
    for (relationship, table) in entity.joins {
      let statement = try database.cachedStatement(table.linkedKeysSQL)
      statement.bindInt64(key, at: 1)
      var keys: [Int64] = []
      do {
        defer { statement.reset() }
        while try statement.step() { keys.append(statement.int64(at: 0)) }
      }
      result.append((relationship, keys))
    }
    return result
  }

  /// After a commit: the links a save wrote are the links' stored ones, and the models linked
  /// to deleted rows forget them. O(links written + links of deleted rows).
  func settleLinks(_ applied: AppliedChanges) {
    for (link, keys) in applied.linksSaved { link.linksSaved(keys) }
    for unlinked in applied.unlinked {
      guard let registration = rowTable(unlinked.entity)[unlinked.key],
        let link = unlinked.relationship.existingLink(registration.model)
      else { continue }
      let deleted = rowTable(unlinked.deletedEntity)[unlinked.deletedKey]?.model
      link.forgetDeleted(deleted, key: unlinked.deletedKey)
    }
  }
}
