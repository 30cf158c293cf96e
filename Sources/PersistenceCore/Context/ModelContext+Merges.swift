import Foundation

// One row, one live model: what a context does when a save's insert updates a row by its unique
// values (an upsert) while the context holds a model of that row already.

extension ModelContext {
  /// A model of a row an upsert took over: the model the context held for the row before
  /// (`merged`, with its own snapshot) and the inserted model that stands for the row since
  /// (`holder`, in the row table, what fetches return).
  struct MergedModel {
    let merged: Registration
    var holder: Registration
  }

  /// Makes the inserted model of `holder` the row's model in place of `previous`, which the
  /// context held for the row before the upsert: `previous` takes the values the save wrote
  /// (every attribute, as the row has them now), its relationships read the row again, and it
  /// stays tracked, so that both references see the row and a later change to either is saved.
  ///
  /// Cost: O(attributes), once per upsert that meets a registered model.
  func merge(_ previous: Registration, into holder: Registration) throws {
    let entity = holder.entity
    let keyColumns = Set(entity.relationships.lazy.filter(\.storesKey).map(\.name))
    for index in entity.columnNames.indices {
      let value = try entity.value(holder.model, attribute: index)
      // A to-one whose target has no key yet is left to read the row again (below).
      if keyColumns.contains(entity.columnNames[index]), value == .integer(Int64(unsavedKey)) {
        continue
      }
      try entity.assign(previous.model, attribute: index, value: value)
    }
    try entity.recordSnapshot(previous)
    previous.isDeleted = false
    // What either model held in memory of its relationships is the row's now, with what the
    // other brought: both read them from the store again.
    for relationship in entity.relationships {
      relationship.existingLink(previous.model)?.refault(relationship)
      if relationship.kind == .toMany {
        relationship.existingLink(holder.model)?.refault(relationship)
      }
    }
    // Models merged into `previous` before are merged into the holder now.
    for position in mergedModels.indices where mergedModels[position].holder === previous {
      mergedModels[position].holder = holder
      index(mergedModels[position].merged.model, as: holder)
    }
    mergedModels.append(MergedModel(merged: previous, holder: holder))
    index(previous.model, as: holder)
  }

  /// Whether `model` and `other` are two models of one row (one merged into the other by an
  /// upsert). O(1); false at once when no upsert met a registered model.
  func isSameRow(_ model: AnyObject?, _ other: AnyObject) -> Bool {
    guard !mergedModels.isEmpty, let model, let registration = registration(for: model) else {
      return false
    }
    return registration === self.registration(for: other)
  }

  /// Moves what was changed on a merged model since it was merged or last saved into its
  /// holder, the model the context saves for the row: its changes are saved with the holder's
  /// (where both changed an attribute, the merged model's value is the one saved). A to-one
  /// set on the merged model is set on the holder, to the same model (one not saved yet
  /// included), and the related model points back to the holder.
  ///
  /// Cost: O(merged models × attributes); nothing when no upsert met a registered model.
  func moveMergedChanges() {
    for entry in mergedModels {
      let merged = entry.merged
      let entity = merged.entity
      let changed = entity.changedIndexes(merged)
      guard !changed.isEmpty else { continue }
      var moved = true
      for index in changed {
        let column = entity.columnNames[index]
        if let relationship = entity.relationships.first(where: {
          $0.storesKey && $0.name == column
        }), let link = relationship.existingLink(merged.model),
          let target = link.loadedModels.first
        {
          // The same model, in memory: its key may not be known yet.
          relationship.updateInverse(merged.model, target, false)
          relationship.link(entry.holder.model).linkInverse(
            of: entry.holder.model, to: target, linked: true, info: relationship)
          relationship.updateInverse(entry.holder.model, target, true)
          continue
        }
        guard let value = try? entity.value(merged.model, attribute: index),
          (try? entity.assign(entry.holder.model, attribute: index, value: value)) != nil
        else {
          moved = false
          continue
        }
      }
      if moved { try? entity.recordSnapshot(merged) }
    }
  }

  /// The merged models whose changes could not move to their holder (see
  /// ``moveMergedChanges()``), described for the error a save throws.
  func unmovedMergedChanges() -> [String] {
    mergedModels.compactMap { entry in
      entry.merged.entity.changedIndexes(entry.merged).isEmpty
        ? nil : describeModel(entry.merged.model, entity: entry.merged.entity)
    }
  }

  /// Gives each merged model its holder's values, as saved or restored: after a save, and
  /// after a rollback. O(merged models × attributes).
  func copyHoldersToMerged() {
    for entry in mergedModels {
      let entity = entry.merged.entity
      for index in entity.columnNames.indices {
        guard let value = try? entity.value(entry.holder.model, attribute: index),
          value != .integer(Int64(unsavedKey))
            || !entity.relationships.contains(where: {
              $0.storesKey && $0.name == entity.columnNames[index]
            })
        else { continue }
        try? entity.assign(entry.merged.model, attribute: index, value: value)
      }
      try? entity.recordSnapshot(entry.merged)
    }
  }

  /// Forgets the models merged into `holder` (its row was deleted, or the context reset),
  /// telling each that it is in no context now when `reference` is given. O(merged models).
  func forgetMerged(into holder: Registration, reference: ContextReference?) {
    mergedModels.removeAll { entry in
      guard entry.holder === holder else { return false }
      unindex(entry.merged.model)
      if let reference { entry.merged.entity.linkOrigin?.set(entry.merged.model, reference, nil) }
      return true
    }
  }
}
