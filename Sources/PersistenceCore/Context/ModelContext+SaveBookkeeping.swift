import Foundation

// What a save did, and what follows its commit: the changes applied, the context's
// bookkeeping (snapshots, keys, unregistered deletes, merged models) and the notifications.
extension ModelContext {
  struct AppliedChanges {
    var deleted: [(entity: any EntityOperations, key: Int64, registration: Registration?)] = []
    var updated: [(Registration, Int64, [Int])] = []
    /// Inserted rows, with the changed attributes when the insert updated an existing row.
    var inserted: [(Registration, Int64, [Int]?)] = []
    /// Rows whose key column a delete rule set to `NULL` (``DeleteRule/nullify``).
    var nullified:
      [(entity: any EntityOperations, key: Int64, attribute: Int, registration: Registration?)] =
        []
    /// Many-to-many links written, each with the keys it links now.
    var linksSaved: [(any RelationshipLink, Set<Int64>)] = []
    /// Rows whose links the save made or broke, by entity and key, until recorded; then those
    /// recorded (each as an update).
    var linkedRows: [String: LinkedRow] = [:]
    var linked: [LinkedRow] = []

    /// The keys of the rows the save deleted, by table. O(deleted rows).
    var deletedKeys: [String: Set<Int64>] {
      var keys: [String: Set<Int64>] = [:]
      for delete in deleted { keys[delete.entity.name, default: []].insert(delete.key) }
      return keys
    }

    /// Notes that the row `key` of `entity` gained or lost a link of `relationship`.
    mutating func noteLinked(
      _ entity: String, _ subentity: String?, _ key: Int64, _ relationship: String
    ) {
      linkedRows[
        "\(entity)#\(key)",
        default: LinkedRow(
          entity: entity, subentity: subentity, key: key, relationships: [])
      ].relationships.insert(relationship)
    }
    /// A row that stays, linked to a deleted row through a many-to-many (`relationship` is the
    /// staying row's side).
    struct Unlinked {
      let entity: String
      let subentity: String?
      let key: Int64
      let relationship: RelationshipInfo
      let deletedEntity: String
      let deletedKey: Int64
    }
    var unlinked: [Unlinked] = []
  }

  /// Bookkeeping after a successful commit: new snapshots, keys, unregistered deletes, and the
  /// notification to observers.
  func finish(_ applied: AppliedChanges, writer: HistoryWriter) throws {
    var changes: [String: StoreChange.EntityChanges] = [:]
    if container.hasRelationships {
      try settleRelationships(applied)
      for nullified in applied.nullified {
        changes[nullified.entity.name, default: .init()].updated[nullified.key] = [
          nullified.entity.columnNames[nullified.attribute]
        ]
      }

    }
    for delete in applied.deleted {
      if let registration = delete.registration {
        if !mergedModels.isEmpty {
          forgetMerged(
            into: registration,
            reference: ContextReference.deleted(from: container.storeIdentifier))
        }
        unregister(registration)
      }
      changes[delete.entity.name, default: .init()].deleted.insert(delete.key)
    }
    pendingRowDeletes.removeAll()
    for (registration, key, changed) in applied.updated {
      try registration.entity.recordSnapshot(registration)
      changes[registration.entity.name, default: .init()].updated[key] = Set(
        changed.map { registration.entity.columnNames[$0] })
    }
    pendingInserts.removeAll()
    // Inserts come in runs of one entity: its row table and its new keys are kept for the run
    // (two lookups by the entity's name per row otherwise, about 600 instructions).
    var run: (entity: ObjectIdentifier, name: String, table: RowTable, inserted: Set<Int64>)?
    func endRun() {
      guard let ended = run, !ended.inserted.isEmpty else { return }
      if changes[ended.name] == nil {
        // The run's set as it is, not rehashed into an empty one.
        var entry = StoreChange.EntityChanges()
        entry.inserted = ended.inserted
        changes[ended.name] = entry
      } else {
        changes[ended.name, default: .init()].inserted.formUnion(ended.inserted)
      }
    }
    for (registration, key, changed) in applied.inserted {
      let entity = ObjectIdentifier(registration.entity)
      if run?.entity != entity {
        endRun()
        let name = registration.entity.name
        run = (entity, name, rowTable(name), [])
      }
      let table = run.unsafelyUnwrapped.table
      let previous = table[key].flatMap { $0 !== registration ? $0 : nil }
      if let previous, changed == nil { unregister(previous) }
      registration.primaryKey = key
      registration.entity.linkOrigin?.set(registration.model, linkReference, key)
      try registration.entity.recordSnapshot(registration)
      table[key] = registration
      // An upsert of a row this context held a model of: one row, one live model.
      if let previous, changed != nil { try merge(previous, into: registration) }
      if let changed {
        if !changed.isEmpty {
          changes[registration.entity.name, default: .init()].updated[key] = Set(
            changed.map { registration.entity.columnNames[$0] })
        }
      } else {
        run?.inserted.insert(key)
      }
    }
    endRun()
    for row in applied.linked {
      changes[row.entity, default: .init()].updated[row.key, default: []].formUnion(
        row.relationships)
    }
    if !mergedModels.isEmpty { copyHoldersToMerged() }
    if let token = writer.token, writer.changeCount > 0 {
      container.broadcaster.post(
        StoreChange(
          token: DefaultHistoryToken(storeIdentifier: container.storeIdentifier, value: token),
          author: author, entities: changes.filter { !$0.value.isEmpty }))
      container.broadcaster.settleAnnounced(token)
      postDidSave(changes)
    } else {
      // ``willSave`` was posted: what followed it is said, that nothing was written.
      postDidSave([:])
    }
  }

  /// Posts ``didSave`` for what a save committed, by table name and key. O(changed rows).
  func postDidSave(_ changes: [String: StoreChange.EntityChanges]) {
    var inserted: [PersistentIdentifier] = []
    var updated: [PersistentIdentifier] = []
    var deleted: [PersistentIdentifier] = []
    let store = container.storeIdentifier
    for (name, entity) in changes.sorted(by: { $0.key < $1.key }) {
      func identifiers(_ keys: some Sequence<Int64>) -> [PersistentIdentifier] {
        keys.sorted().map {
          PersistentIdentifier(storeIdentifier: store, entityName: name, primaryKey: $0)
        }
      }
      inserted += identifiers(entity.inserted)
      updated += identifiers(entity.updated.keys)
      deleted += identifiers(entity.deleted)
    }
    NotificationCenter.default.post(
      name: Self.didSave, object: self,
      userInfo: [
        NotificationKey.insertedIdentifiers.rawValue: inserted,
        NotificationKey.updatedIdentifiers.rawValue: updated,
        NotificationKey.deletedIdentifiers.rawValue: deleted,
      ])
  }
}
