import Foundation

// The delete rules a save applies inside its transaction: the rows a deleted row's
// relationships reach in the store (by their key columns, or a many-to-many's links), cascaded,
// nullified or denied, and the order that deletes children before the rows they point to.
extension ModelContext {
  /// Applies the delete rules of the relationships of the rows `deletes` removes, inside the
  /// save's transaction, and returns every row to delete (cascades added, children before
  /// the rows they point to). Nullified rows are updated here, each recorded in history.
  ///
  /// Cost: one indexed query per deleted row and relationship whose inverse stores the key,
  /// plus a statement per cascaded or nullified row.
  ///
  /// - Throws: ``PersistenceError/Code/relationshipConstraint`` when a ``DeleteRule/deny``
  ///   relationship still has a row that is not deleted too, naming both.
  func applyDeleteRules(
    _ deletes: [(entity: any EntityOperations, key: Int64, registration: Registration?)],
    database: any StoreConnection, writer: HistoryWriter, applied: inout AppliedChanges
  ) throws -> [(entity: any EntityOperations, key: Int64, registration: Registration?)] {
    var all = deletes
    var deleting: [String: Set<Int64>] = [:]
    for delete in deletes { deleting[delete.entity.name, default: []].insert(delete.key) }
    // With the row's subclass path, when its table holds subclasses (history records it).
    var nullified:
      [(entity: any EntityOperations, key: Int64, attribute: Int, subentity: String?)] = []
    var denied:
      [(parent: String, key: Int64, relationship: String, child: String, row: Int64, linked: Bool)] =
        []
    // Rows a many-to-many linked to a deleted row, whose link the delete takes (nullify).
    var unlinked: [AppliedChanges.Unlinked] = []
    // Rows of a table that points to itself (a tree), each with a row that points to it: a
    // child deleted with its parent goes first, whatever its rule (the store's key would
    // cascade, restrict or fail on the parent's delete otherwise).
    var treeEdges: [String: [TreeEdge]] = [:]
    var index = 0
    while index < all.count {
      let (entity, key, _) = all[index]
      index += 1
      for relationship in entity.relationships where !relationship.storesKey {
        guard let column = relationship.keyColumn() else { continue }
        let child = try operations(for: relationship.target)
        guard let attribute = child.columnNames.firstIndex(of: column) else { continue }
        let subclassed = child.entityColumn != nil
        let statement = try database.cachedStatement(
          "SELECT \"_pk\"\(subclassed ? ", \"_entity\"" : "") FROM \(quoted(child.name)) WHERE \(quoted(column)) = ?"
        )
        statement.bindInt64(key, at: 1)
        var keys: [Int64] = []
        var subentities: [Int64: String] = [:]
        while try statement.step() {
          keys.append(statement.int64(at: 0))
          if subclassed, !statement.isNull(at: 1), case let path = statement.text(at: 1),
            !path.isEmpty
          {
            subentities[statement.int64(at: 0)] = path
          }
        }
        statement.reset()
        for childKey in keys {
          if child.name == entity.name {
            treeEdges[child.name, default: []].append(
              TreeEdge(parent: key, child: childKey, column: column))
          }
          guard deleting[child.name]?.contains(childKey) != true else { continue }
          let registration = rowTable(child.name)[childKey]
          // A row moved to another model in memory keeps its new owner: its key is cleared
          // now and written by its update later in this save (which history records).
          if let registration,
            (try? child.value(registration.model, attribute: attribute)) != .integer(key)
          {
            let clear = try database.cachedStatement(
              "UPDATE \(quoted(child.name)) SET \(quoted(column)) = NULL WHERE \"_pk\" = ?")
            clear.bindInt64(childKey, at: 1)
            try clear.run()
            continue
          }
          switch relationship.deleteRule {
          case .cascade:
            deleting[child.name, default: []].insert(childKey)
            // Deleted as its own class: its history typed by it, its tombstone its class's.
            let rowEntity =
              registration?.entity
              ?? subentities[childKey].flatMap { container.subentities[child.name]?[$0] } ?? child
            all.append((rowEntity, childKey, registration))
          case .nullify:
            nullified.append((child, childKey, attribute, subentities[childKey]))
          case .deny:
            denied.append((entity.name, key, relationship.name, child.name, childKey, false))
          case .noAction:
            break
          }
        }
      }
      guard !entity.joins.isEmpty else { continue }
      for (relationship, keys, paths) in try linkedRows(of: entity, key: key, database: database) {
        let other = try operations(for: relationship.target)
        let inverse = relationship.inverseInfo()
        for otherKey in keys {
          // As its own class: its history typed by it, its rules and tombstone its class's.
          let registration = rowTable(other.name)[otherKey]
          let rowEntity =
            registration?.entity
            ?? paths[otherKey].flatMap { container.subentities[other.name]?[$0] } ?? other
          switch relationship.deleteRule {
          case .cascade:
            guard deleting[other.name]?.contains(otherKey) != true else { continue }
            deleting[other.name, default: []].insert(otherKey)
            all.append((rowEntity, otherKey, registration))
          case .deny:
            denied.append((entity.name, key, relationship.name, other.name, otherKey, true))
          case .nullify, .noAction:
            guard let inverse else { continue }
            unlinked.append(
              AppliedChanges.Unlinked(
                entity: other.name, subentity: rowEntity.historySubentity, key: otherKey,
                relationship: inverse, deletedEntity: entity.name, deletedKey: key))
          }
        }
      }
    }
    if let refusal = denied.first(where: { deleting[$0.child]?.contains($0.row) != true }) {
      throw PersistenceError(
        code: .relationshipConstraint,
        message:
          refusal.linked
          ? "Deleting \(refusal.parent) row \(refusal.key) is denied by its relationship '\(refusal.relationship)': it is still linked to \(refusal.child) row \(refusal.row). Remove the link (or delete that row) first; nothing was saved."
          : "Deleting \(refusal.parent) row \(refusal.key) is denied by its relationship '\(refusal.relationship)': \(refusal.child) row \(refusal.row) still points to it. Delete it or point it elsewhere first; nothing was saved."
      )
    }
    // Each row that stays and loses links is recorded (once, with the save's other link
    // changes), naming its relationships.
    for entry in unlinked where deleting[entry.entity]?.contains(entry.key) != true {
      applied.noteLinked(entry.entity, entry.subentity, entry.key, entry.relationship.name)
      applied.unlinked.append(entry)
    }
    for (child, key, attribute, subentity) in nullified
    where deleting[child.name]?.contains(key) != true {
      let column = child.columnNames[attribute]
      let update = try database.cachedStatement(
        "UPDATE \(quoted(child.name)) SET \(quoted(column)) = NULL WHERE \"_pk\" = ?")
      update.bindInt64(key, at: 1)
      try update.run()
      try writer.record(
        .update, entity: child.name, subentity: subentity, key: key, attributes: [column])
      applied.nullified.append((child, key, attribute, rowTable(child.name)[key]))
    }
    let ranks = container.ranks
    var depths: [String: [Int64: Int]] = [:]
    for (table, edges) in treeEdges {
      let (depth, cyclic) = Self.treeDepths(edges, deleting: deleting[table] ?? [])
      depths[table] = depth
      // Rows of a cycle stored in the table (and rows below one) have no order that deletes
      // children first: their keys to the table are cleared first (not recorded: the rows
      // are deleted in the same transaction), so that each row's own delete is recorded.
      for edge in edges where cyclic.contains(edge.child) {
        let clear = try database.cachedStatement(
          "UPDATE \(quoted(table)) SET \(quoted(edge.column)) = NULL WHERE \"_pk\" = ?")
        clear.bindInt64(edge.child, at: 1)
        try clear.run()
      }
    }
    return all.sorted {
      let (a, b) = (ranks[$0.entity.name] ?? 0, ranks[$1.entity.name] ?? 0)
      if a != b { return a > b }
      if $0.entity.name == $1.entity.name, let depth = depths[$0.entity.name] {
        let (c, d) = (depth[$0.key] ?? 0, depth[$1.key] ?? 0)
        if c != d { return c > d }
      }
      return ($0.entity.name, $0.key) < ($1.entity.name, $1.key)
    }
  }

  /// A row of a tree that a delete found pointing to a deleted row through `column`.
  struct TreeEdge {
    let parent: Int64
    let child: Int64
    let column: String
  }

  /// The depth of each deleted row of a tree among the deleted rows (`deleting`; 0 for a row
  /// whose parent stays), from the pairs of a parent and a row pointing to it: deleting deeper
  /// rows first deletes every child before its parent. Also the deleted rows no order can
  /// put after their children: those of a cycle stored in the table, and those below one.
  ///
  /// Cost: O(pairs), one pass in topological order (Kahn's).
  static func treeDepths(_ edges: [TreeEdge], deleting: Set<Int64>) -> (
    depth: [Int64: Int], cyclic: Set<Int64>
  ) {
    var children: [Int64: [Int64]] = [:]
    var parentsLeft: [Int64: Int] = [:]
    for edge in edges where deleting.contains(edge.child) && deleting.contains(edge.parent) {
      children[edge.parent, default: []].append(edge.child)
      parentsLeft[edge.child, default: 0] += 1
      if parentsLeft[edge.parent] == nil { parentsLeft[edge.parent] = 0 }
    }
    var depth: [Int64: Int] = [:]
    var ready = parentsLeft.filter { $0.value == 0 }.map(\.key)
    while let row = ready.popLast() {
      let below = (depth[row] ?? 0) + 1
      for child in children[row] ?? [] {
        depth[child] = max(depth[child] ?? 0, below)
        parentsLeft[child]! -= 1
        if parentsLeft[child] == 0 { ready.append(child) }
      }
    }
    return (depth, Set(parentsLeft.filter { $0.value > 0 }.map(\.key)))
  }
}
