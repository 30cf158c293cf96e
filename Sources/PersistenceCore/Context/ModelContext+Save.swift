import Foundation

extension ModelContext {
  /// Kinds of change, as stored in `_history_changes.kind`.
  enum ChangeKind: Int64 {
    case insert = 0
    case update = 1
    case delete = 2
  }

  /// Writes every pending insert, change and delete in one transaction, together with a
  /// history transaction that records them (author, time, and per row: insert; update with the
  /// changed attributes; delete with a tombstone of `.preserveValueOnDeletion` attributes).
  ///
  /// A save after ``insert(_:)`` refused a model (one of another context) throws
  /// ``PersistenceError/Code/modelInAnotherContext``, naming it, and writes nothing; the next
  /// save writes the rest.
  ///
  /// It posts ``willSave`` first (what an observer changes or inserts then is saved too), and
  /// ``didSave`` once it has committed, with the identifiers of the rows it inserted, updated
  /// and deleted (``NotificationKey``), on `NotificationCenter.default`, on the saving thread:
  /// a save that succeeds posts both, with empty lists when it wrote nothing.
  ///
  /// A save with nothing to write writes nothing: no transaction, no history.
  /// If anything fails, the transaction is rolled back and the context is as it was before
  /// the call, so the save can be retried.
  ///
  /// An insert whose unique values name a row this context holds a model of already (one it
  /// fetched) updates the row, and the inserted model stands for the row from then on (what
  /// fetches return); the model held before takes the row's values and stays tracked, so that
  /// a later change made through either is saved (SwiftData's upsert, one live model a row).
  /// The inserted model's values are the row's: a change made to the model held before and
  /// not saved yet is replaced by them.
  ///
  /// Cost: O(registered models × attributes) to find changes, plus one statement per changed
  /// row (prepared once per connection). On an engine across a network (PostgreSQL) new rows
  /// go in batches: one round trip for up to 128 rows' unique lookups (whose answers rows to
  /// merge keep), one for their inserts, one for their history rows, where one row at a time
  /// costs three round trips a row; and so do changed rows (their updates, then their history
  /// rows), where they change the same attributes.
  public func save() throws {
    if !mergedModels.isEmpty {
      // Changes first: a merged model changed, then let go, has its change saved.
      moveMergedChanges()
      pruneMergedModels()
      let unmoved = unmovedMergedChanges()
      if !unmoved.isEmpty {
        throw PersistenceError(
          code: .relationshipConstraint,
          message:
            "\(unmoved.joined(separator: "; ")): its row was taken over by an inserted model with the same unique values (an upsert), and a change made on it could not be moved to that model. Make it on the model that stands for the row now (the one fetches return); nothing was saved."
        )
      }
    }
    let relates = container.hasRelationships
    // First: the models it inserts that another context or an observer holds are refused below,
    // in this save, not the next.
    if relates { try prepareRelationships() }
    defer { if relates { savingKeys = [:] } }
    if !refusedInserts.isEmpty {
      let refused = refusedInserts
      refusedInserts.removeAll()
      throw PersistenceError(
        code: .modelInAnotherContext,
        message:
          "Not inserted: \(refused.joined(separator: "; ")). A model belongs to the context that inserted or fetched it; fetch it in this one (model(for:) with its persistentModelID) to change it here. Nothing was saved."
      )
    }
    // First, so that what an observer changes or inserts is saved with the rest.
    NotificationCenter.default.post(name: Self.willSave, object: self)
    var deletes: [(entity: any EntityOperations, key: Int64, registration: Registration?)] = []
    var updates: [(Registration, [Int])] = []
    for registration in savedRegistrations {
      guard let key = registration.primaryKey else { continue }
      if registration.isDeleted {
        deletes.append((registration.entity, key, registration))
      } else {
        let changed = registration.entity.changedIndexes(registration)
        if !changed.isEmpty { updates.append((registration, changed)) }
      }
    }
    for (name, keys) in pendingRowDeletes {
      guard let entity = entities.values.first(where: { $0.name == name }) else { continue }
      // A row deleted unloaded may have been loaded since: its model goes with it.
      let table = rowTables[name]
      for key in keys.sorted() { deletes.append((entity, key, table?[key])) }
    }
    let inserts = pendingInserts
    let linkWrites = container.hasJoinTables ? changedLinks() : []
    guard !deletes.isEmpty || !updates.isEmpty || !inserts.isEmpty || !linkWrites.isEmpty else {
      postDidSave([:])
      return
    }
    // Rows that point to a model this save inserts are updated after the inserts.
    var lateUpdates: [(Registration, [Int])] = []
    if relates {
      updates.removeAll { update in
        guard waitsForInserts(update.0, changed: update.1) else { return false }
        lateUpdates.append(update)
        return true
      }
    }
    // A model of a type the container lists; or a subclass `@Model` did not declare, kept as
    // its model (its own attributes are not stored); not a subclass the container does not
    // list, which would be kept as its superclass.
    for registration in inserts where !isKept(registration) {
      throw PersistenceError(
        code: .unknownModel,
        message:
          "\(type(of: registration.model)) is not part of this container. Pass it to ModelContainer(for:)."
      )
    }
    for registration in inserts { try registration.entity.validate(registration.model) }
    if container.hasCountedRelationships { try checkModelCounts() }
    for (registration, _) in updates { try registration.entity.validate(registration.model) }
    guard container.configuration.allowsSave else {
      throw PersistenceError(
        code: .readOnly,
        message: "The container was opened with allowsSave: false; nothing was saved.")
    }

    let database = try connection()
    let writer = HistoryWriter(database: database)
    var applied = AppliedChanges()
    // Inside performExclusively the transaction, and the write lock, are open already; this
    // save commits or rolls them back.
    if holdsWriteLock {
      holdsWriteLock = false
    } else {
      try database.beginWriting()
    }
    do {
      try writer.begin(author: author, timestamp: historyTimestamp ?? Date())
      if !linkWrites.isEmpty {
        try writeLinks(linkWrites, additions: false, database: database, applied: &applied)
      }
      if relates {
        deletes = try applyDeleteRules(
          deletes, database: database, writer: writer, applied: &applied)
      } else {
        deletes.sort { ($0.entity.name, $0.key) < ($1.entity.name, $1.key) }
      }
      // A changed model this save deletes (a cascade's child, a row deleted unloaded and
      // loaded since) is not updated: its row is gone by then.
      if !deletes.isEmpty, !updates.isEmpty || !lateUpdates.isEmpty {
        let deleted = Set(deletes.compactMap { $0.registration.map(ObjectIdentifier.init) })
        updates.removeAll { deleted.contains(ObjectIdentifier($0.0)) }
        lateUpdates.removeAll { deleted.contains(ObjectIdentifier($0.0)) }
      }
      for delete in deletes {
        try deleteRow(delete.entity, key: delete.key, database: database, writer: writer)
        applied.deleted.append(delete)
      }
      if database.batchLimit > 1 {
        try updateInBatches(updates, database: database, writer: writer, applied: &applied)
      } else {
        for (registration, changed) in updates {
          let key = registration.primaryKey!
          try updateRow(registration, key: key, attributes: changed, database: database)
          try writer.record(
            .update, entity: registration.entity.name,
            subentity: registration.entity.historySubentity, key: key,
            attributes: changed.map { registration.entity.columnNames[$0] })
          applied.updated.append((registration, key, changed))
        }
      }
      var insertStatements: [PreparedKey: any StoreStatement] = [:]
      let limit = database.batchLimit
      // Models after those they point to, each group's keys known to the next.
      for group in relates ? try orderedByRank(inserts) : [inserts] {
        let first = applied.inserted.count
        if limit > 1 {
          try insertInBatches(
            group, limit: limit, database: database, writer: writer,
            statements: &insertStatements, applied: &applied)
        } else {
          for registration in group {
            let (key, changed) = try insertRow(
              registration, database: database, writer: writer,
              insertStatements: &insertStatements)
            applied.inserted.append((registration, key, changed))
          }
        }
        if relates {
          for (registration, key, _) in applied.inserted[first...] {
            savingKeys[ObjectIdentifier(registration.model)] = key
          }
        }
      }
      for (registration, _) in lateUpdates {
        let key = registration.primaryKey!
        let changed = registration.entity.changedIndexes(registration)
        try updateRow(registration, key: key, attributes: changed, database: database)
        try writer.record(
          .update, entity: registration.entity.name,
          subentity: registration.entity.historySubentity, key: key,
          attributes: changed.map { registration.entity.columnNames[$0] })
        applied.updated.append((registration, key, changed))
      }
      if !linkWrites.isEmpty {
        try writeLinks(linkWrites, additions: true, database: database, applied: &applied)
      }
      try recordLinkedRows(writer: writer, applied: &applied)
      if writer.changeCount == 0 {
        try database.rollback()
      } else {
        historyTimestamp = nil
        // Noted before the commit: a store monitor that sees the commit before `finish`
        // posts it must not post it again as another process's.
        if let token = writer.token { container.broadcaster.noteAnnounced(token) }
        do {
          try database.commit()
        } catch {
          if let token = writer.token { container.broadcaster.forgetAnnounced(token) }
          throw error
        }
      }
    } catch {
      if database.isInTransaction { try? database.rollback() }
      throw error
    }
    try finish(applied, writer: writer)
  }

  private func deleteRow(
    _ entity: any EntityOperations, key: Int64, database: any StoreConnection, writer: HistoryWriter
  ) throws {
    var tombstone: [(String, SQLValue)] = []
    if !entity.preservedIndexes.isEmpty {
      let names = entity.preservedIndexes.map { entity.columnNames[$0] }
      let select = try database.cachedStatement(entity.statements.tombstone ?? "")
      select.bindInt64(key, at: 1)
      if try select.step() {
        tombstone = names.enumerated().map { ($0.element, select.value(at: Int32($0.offset))) }
      }
      select.reset()
    }
    let statement = try database.cachedStatement(entity.statements.delete)
    statement.bindInt64(key, at: 1)
    try statement.run()
    guard database.changedRowCount > 0 else { return }  // already gone: nothing to record
    try writer.record(
      .delete, entity: entity.name, subentity: entity.historySubentity, key: key,
      tombstone: tombstone)
  }

  /// Updates changed rows on an engine that runs statements in batches
  /// (``StoreConnection/batchLimit`` above 1): consecutive rows of one entity with the same
  /// changed attributes (one `UPDATE` statement) in one
  /// ``StoreConnection/runBatch(_:count:answer:binding:)`` of at most the limit, then their
  /// history rows in another. Rows keep their order, and so do their history rows.
  ///
  /// Cost: O(rows × changed attributes); round trips O(2 × rows / limit) where rows change the
  /// same attributes, against 2 a row one at a time.
  private func updateInBatches(
    _ updates: [(Registration, [Int])], database: any StoreConnection, writer: HistoryWriter,
    applied: inout AppliedChanges
  ) throws {
    let limit = database.batchLimit
    var start = 0
    while start < updates.count {
      let (first, changed) = updates[start]
      let entity = first.entity
      var end = start + 1
      while end < updates.count, end - start < limit, updates[end].0.entity === entity,
        updates[end].1 == changed
      {
        end += 1
      }
      let batch = updates[start..<end]
      let firstIndex = start
      start = end
      let statement = try database.cachedStatement(entity.statements.update(changed))
      let keyIndex = Int32(changed.count + 1)
      let counts = try database.runBatch(statement, count: batch.count, answer: .changedRowCount) {
        let registration = updates[firstIndex + $0].0
        for (offset, attribute) in changed.enumerated() {
          try entity.bind(
            registration.model, attribute: attribute, to: statement, at: Int32(offset + 1))
        }
        statement.bindInt64(registration.primaryKey!, at: keyIndex)
      }
      if let gone = counts.firstIndex(where: { $0 == 0 }) {
        throw rowDeleted(updates[firstIndex + gone].0)
      }
      let keys = batch.map { $0.0.primaryKey! }
      try writer.recordUpdates(
        entity: entity.name, subentity: entity.historySubentity, keys: keys,
        attributes: changed.map { entity.columnNames[$0] })
      for (registration, changed) in batch {
        applied.updated.append((registration, registration.primaryKey!, changed))
      }
    }
  }

  private func updateRow(
    _ registration: Registration, key: Int64, attributes: [Int], database: any StoreConnection
  ) throws {
    let entity = registration.entity
    let statement = try database.cachedStatement(entity.statements.update(attributes))
    for (offset, attribute) in attributes.enumerated() {
      try entity.bind(
        registration.model, attribute: attribute, to: statement, at: Int32(offset + 1))
    }
    statement.bindInt64(key, at: Int32(attributes.count + 1))
    try statement.run()
    guard database.changedRowCount > 0 else { throw rowDeleted(registration) }
  }

  /// The error of a save that changed a model whose row is gone from the store.
  private func rowDeleted(_ registration: Registration) -> PersistenceError {
    PersistenceError(
      code: .rowDeleted,
      message:
        "\(describeModel(registration.model, entity: registration.entity)) was deleted from the store (by another context, process or server) after it was loaded here, so its changes cannot be saved. Delete it in this context too (delete(_:)), or roll back; nothing was saved."
    )
  }

  /// Which statement of an entity a save keeps prepared: its insert (`lookup` nil), or the
  /// lookup by a unique attribute.
  struct PreparedKey: Hashable {
    let entity: ObjectIdentifier
    let lookup: Int?
  }

  /// The statement for `key`, prepared once per save: later rows rewind it instead of looking
  /// it up by its SQL text for every row.
  private func prepared(
    _ key: PreparedKey, _ sql: String, in statements: inout [PreparedKey: any StoreStatement],
    database: any StoreConnection, insertKey: String? = nil
  ) throws -> any StoreStatement {
    if let statement = statements[key] {
      statement.rewind()
      return statement
    }
    let statement =
      try insertKey.map { try database.cachedInsert(sql, keyColumn: $0) }
      ?? database.cachedStatement(sql)
    statements[key] = statement
    return statement
  }

  /// Inserts `inserts` on an engine that runs statements in batches (``StoreConnection/batchLimit``
  /// above 1: one round trip a batch): in runs of one entity, at most `limit` rows a batch, each
  /// batch's unique lookups, then its inserts, then its history rows, a
  /// ``StoreConnection/runBatch(_:count:answer:binding:)`` each. A batch with a row to merge
  /// (its unique value already stored, or repeated within the batch) goes row by row
  /// (``insertRow(_:database:writer:insertStatements:found:)``), so an upsert means the same as
  /// one row at a time, history rows in the same order; each row keeps its answers from the
  /// batch's lookups unless a value repeated.
  ///
  /// Cost: O(rows × attributes); round trips O(rows / `limit` × (unique attributes + 2)) where
  /// rows are new, against (unique attributes + 2) a row one at a time; where rows are stored
  /// already, unique attributes / `limit` + 1 a row (the stored values read to compare), plus 2
  /// for each row that changes.
  private func insertInBatches(
    _ inserts: [Registration], limit: Int, database: any StoreConnection, writer: HistoryWriter,
    statements: inout [PreparedKey: any StoreStatement], applied: inout AppliedChanges
  ) throws {
    var start = 0
    while start < inserts.count {
      let entity = inserts[start].entity
      var end = start + 1
      while end < inserts.count, end - start < limit, inserts[end].entity === entity { end += 1 }
      let batch = inserts[start..<end]
      start = end
      let found = try lookUp(batch, entity: entity, database: database, statements: &statements)
      guard let found, found.allSatisfy({ $0.allSatisfy { $0 == nil } }) else {
        // Rows to merge: one at a time, each with its lookups' answers when the batch's hold
        // (no unique value repeats in it, so no row of the batch can match another).
        for (offset, registration) in batch.enumerated() {
          let (key, changed) = try insertRow(
            registration, database: database, writer: writer, insertStatements: &statements,
            found: found?.map { $0[offset] })
          applied.inserted.append((registration, key, changed))
        }
        continue
      }
      let insert = try prepared(
        PreparedKey(entity: ObjectIdentifier(entity), lookup: nil), entity.statements.insert,
        in: &statements, database: database, insertKey: "\"_pk\"")
      let first = batch.startIndex
      let keys = try database.runBatch(insert, count: batch.count, answer: .insertedKey) {
        try entity.bindAll(batch[first + $0].model, to: insert)
      }
      var made: [Int64] = []
      made.reserveCapacity(keys.count)
      for key in keys {
        guard let key else {
          throw PersistenceError(
            code: .engine,
            message: "The store gave no key for a new \(entity.name) row. Nothing was saved.")
        }
        made.append(key)
      }
      try writer.recordInserts(
        entity: entity.name, subentity: entity.historySubentity, keys: made)
      for (offset, registration) in batch.enumerated() {
        applied.inserted.append((registration, made[offset], nil))
      }
    }
  }

  /// The stored row each of `batch`'s unique values names, per unique constraint (one batch
  /// of lookups each), or nil when a unique value (or combination) repeats within the batch
  /// (`NULL`s never match), where a row of the batch may match another once inserted.
  /// O(rows × unique attributes).
  private func lookUp(
    _ batch: ArraySlice<Registration>, entity: any EntityOperations,
    database: any StoreConnection, statements: inout [PreparedKey: any StoreStatement]
  ) throws -> [[Int64?]]? {
    let first = batch.startIndex
    if batch.count > 1 {
      for constraint in entity.uniqueConstraints {
        if constraint.count == 1 {
          // One column (a trip's id): its values, without an array a row.
          var seen = Set<SQLValue>(minimumCapacity: batch.count)
          for registration in batch {
            let value = try entity.value(registration.model, attribute: constraint[0])
            if value != .null, !seen.insert(value).inserted { return nil }
          }
          continue
        }
        var seen = Set<[SQLValue]>(minimumCapacity: batch.count)
        for registration in batch {
          let values = try constraint.map { try entity.value(registration.model, attribute: $0) }
          if !values.contains(.null), !seen.insert(values).inserted { return nil }
        }
      }
    }
    var found: [[Int64?]] = []
    for constraint in entity.uniqueConstraints {
      let lookup = try prepared(
        PreparedKey(entity: ObjectIdentifier(entity), lookup: constraint[0]),
        entity.statements.lookup[constraint[0]] ?? "", in: &statements, database: database)
      found.append(
        try database.runBatch(lookup, count: batch.count, answer: .firstColumn) { row in
          for (offset, attribute) in constraint.enumerated() {
            try entity.bind(
              batch[first + row].model, attribute: attribute, to: lookup, at: Int32(offset + 1))
          }
        })
    }
    return found
  }

  /// Inserts a model's row, or, when a `.unique` value already exists, updates that row
  /// (upsert). Returns the key and, for an upsert, the attributes it changed. `found`, when
  /// given, holds the row each unique constraint's lookup found (in
  /// ``EntityOperations/uniqueConstraints`` order), looked up already in this transaction.
  private func insertRow(
    _ registration: Registration, database: any StoreConnection, writer: HistoryWriter,
    insertStatements: inout [PreparedKey: any StoreStatement], found: [Int64?]? = nil
  ) throws -> (Int64, [Int]?) {
    let entity = registration.entity
    let model = registration.model
    var existing: Int64?
    for (position, constraint) in entity.uniqueConstraints.enumerated() {
      let match: Int64?
      if let found {
        match = found[position]
      } else {
        let statement = try prepared(
          PreparedKey(entity: ObjectIdentifier(entity), lookup: constraint[0]),
          entity.statements.lookup[constraint[0]] ?? "", in: &insertStatements,
          database: database)
        for (offset, attribute) in constraint.enumerated() {
          try entity.bind(model, attribute: attribute, to: statement, at: Int32(offset + 1))
        }
        match = try statement.step() ? statement.int64(at: 0) : nil
        statement.reset()
      }
      guard let key = match else { continue }
      if let other = existing, other != key {
        throw PersistenceError(
          code: .uniqueConstraint,
          message:
            "The new \(entity.name) row matches two existing rows by different unique attributes; it cannot be merged into either. Nothing was saved."
        )
      }
      existing = key
    }
    if let key = existing {
      let select = try database.cachedStatement(entity.statements.selectByKey)
      select.bindInt64(key, at: 1)
      _ = try select.step()
      // A model is not turned into another class: a row of another class (a superclass, a
      // subclass or a sibling sharing the unique column) is not updated as this one.
      if entity.entityColumn != nil {
        let path = select.text(at: Int32(entity.columnNames.count))
        if path != entity.inheritancePath {
          select.reset()
          let other = path.split(separator: "/").last.map(String.init) ?? entity.name
          throw PersistenceError(
            code: .uniqueConstraint,
            message:
              "The new \(type(of: model)) has the unique values of a stored \(other) (row \(key) of \(entity.name)), which is of another class: a model is not changed into another class. Delete the stored one first, or change the values. Nothing was saved."
          )
        }
      }
      var changed: [Int] = []
      for index in entity.columnNames.indices
      where try select.value(at: Int32(index)) != entity.value(model, attribute: index) {
        changed.append(index)
      }
      select.reset()
      if !changed.isEmpty {
        let update = try database.cachedStatement(entity.statements.update(changed))
        for (offset, attribute) in changed.enumerated() {
          try entity.bind(model, attribute: attribute, to: update, at: Int32(offset + 1))
        }
        update.bindInt64(key, at: Int32(changed.count + 1))
        try update.run()
        try writer.record(
          .update, entity: entity.name, subentity: entity.historySubentity, key: key,
          attributes: changed.map { entity.columnNames[$0] })
      }
      return (key, changed)
    }
    let statement = try prepared(
      PreparedKey(entity: ObjectIdentifier(entity), lookup: nil), entity.statements.insert,
      in: &insertStatements, database: database, insertKey: "\"_pk\"")
    try entity.bindAll(model, to: statement)
    try statement.run()
    let key = try database.lastInsertedKey
    try writer.record(.insert, entity: entity.name, subentity: entity.historySubentity, key: key)
    return (key, nil)
  }
}

extension ModelContext {
  /// Whether the container keeps the model of `registration`: its class is listed, or it is a
  /// subclass `@Model` did not declare (kept as the model it was inserted as) of a listed model.
  /// O(1).
  fileprivate func isKept(_ registration: Registration) -> Bool {
    let dynamicType: AnyObject.Type = Swift.type(of: registration.model)
    let key = ObjectIdentifier(dynamicType)
    // Kept as its own class, by that class's entity.
    if key == registration.entity.modelType { return container.entities[key] != nil }
    guard let type = dynamicType as? any PersistentModel.Type else { return false }
    return type._$subclassSchema == nil
      && container.entities[registration.entity.modelType] != nil
  }
}

extension ModelContext {
  /// Refuses the save when a model relates fewer or more models than its relationship's
  /// bounds (``ModelAttribute/modelCount(minimum:maximum:)``), as far as this context knows
  /// the count: a loaded to-many, a to-one, and every relationship of a model not saved yet.
  /// O(registered models of models with bounds).
  fileprivate func checkModelCounts() throws {
    func check(_ registration: Registration) throws {
      guard !registration.isDeleted else { return }
      for relationship in registration.entity.relationships where relationship.isCounted {
        let count: Int
        if let link = relationship.existingLink(registration.model) {
          guard let known = link.knownCount else { continue }
          // Related models this save deletes do not count.
          count = known - link.registeredModels.count { isMarkedDeleted($0) }
        } else {
          guard registration.primaryKey == nil else { continue }
          count = 0
        }
        let tooFew = relationship.minimumModelCount.map { count < $0 } ?? false
        let tooMany = relationship.maximumModelCount.map { count > $0 } ?? false
        guard tooFew || tooMany else { continue }
        let bound =
          tooFew
          ? "at least \(relationship.minimumModelCount!) (minimumModelCount)"
          : "at most \(relationship.maximumModelCount!) (maximumModelCount)"
        throw PersistenceError(
          code: .invalidValue,
          message:
            "\(describeModel(registration.model, entity: registration.entity)) relates \(count) through '\(relationship.name)', which allows \(bound). Nothing was saved."
        )
      }
    }
    for registration in pendingInserts where registration.entity.hasRelationships {
      try check(registration)
    }
    for registration in savedRegistrations where registration.entity.hasRelationships {
      try check(registration)
    }
  }
}
