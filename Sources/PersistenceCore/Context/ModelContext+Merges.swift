import Foundation

// One row, one live model: what a context does when a save's insert updates a row by its unique
// values (an upsert) while the context holds a model of that row already.

extension ModelContext {
  /// A model of a row an upsert took over: the model the context held for the row before
  /// (`merged`, with its own snapshot) and the inserted model that stands for the row since
  /// (`holder`, in the row table, what fetches return). Kept while something outside the
  /// context can reach the merged model (``pruneMergedModels()``).
  struct MergedModel {
    let merged: Registration
    var holder: Registration
  }

  /// Makes the inserted model of `holder` the row's model in place of `previous`, which the
  /// context held for the row before the upsert: `previous` takes the values the save wrote
  /// (every attribute, as the row has them now), its relationships read the row again, and it
  /// stays tracked, so that both references see the row and a later change to either is saved.
  /// The models `previous` pointed to no longer list it (they list the holder, the row's model).
  ///
  /// Cost: O(attributes + merged models), once per upsert that meets a registered model.
  func merge(_ previous: Registration, into holder: Registration) throws {
    let entity = holder.entity
    for relationship in entity.relationships where relationship.storesKey {
      for old in relationship.existingLink(previous.model)?.registeredModels ?? [] {
        relationship.updateInverse(previous.model, old, false)
      }
    }
    copyValues(of: holder, to: previous)
    try entity.recordSnapshot(previous)
    previous.isDeleted = false
    // What either model held in memory of its to-manys is the row's now, with what the other
    // brought: both read them from the store again.
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
    pruneMergedModels()
  }

  /// Forgets the merged models nothing outside the context can reach any more (no variable,
  /// no related model holds them): an importer that upserts the same rows again and again
  /// keeps none. O(merged models).
  func pruneMergedModels() {
    mergedModels.removeAll { entry in
      // Its identifier leaves the index first: the model may be freed, its address reused.
      let identifier = ObjectIdentifier(entry.merged.model)
      guard entry.merged.releaseModelIfUnreachable() else { return false }
      unindex(identifier)
      return true
    }
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
  /// included) or to none, and the related models list the holder.
  ///
  /// Cost: O(merged models × attributes); nothing when no upsert met a registered model.
  func moveMergedChanges() {
    for entry in mergedModels {
      let merged = entry.merged
      let holder = entry.holder.model
      let entity = merged.entity
      let changed = entity.changedIndexes(merged)
      guard !changed.isEmpty else { continue }
      var moved = true
      for index in changed {
        let column = entity.columnNames[index]
        if let relationship = entity.relationships.first(where: {
          $0.storesKey && $0.name == column
        }), let link = relationship.existingLink(merged.model), link.knownCount != nil {
          // The same model as the merged one points to, in memory (its key may not be known
          // yet), or none; the merged model itself is listed by no related model.
          let target = link.loadedModels.first
          if let target { relationship.updateInverse(merged.model, target, false) }
          let holderLink = relationship.link(holder)
          for old in holderLink.registeredModels where old !== target {
            relationship.updateInverse(holder, old, false)
            holderLink.linkInverse(of: holder, to: old, linked: false, info: relationship)
          }
          if let target {
            holderLink.linkInverse(of: holder, to: target, linked: true, info: relationship)
            relationship.updateInverse(holder, target, true)
          } else if (try? entity.assign(holder, attribute: index, value: .null)) == nil {
            moved = false
          }
          continue
        }
        guard let value = try? entity.value(merged.model, attribute: index),
          (try? entity.assign(holder, attribute: index, value: value)) != nil
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
      copyValues(of: entry.holder, to: entry.merged)
      try? entry.merged.entity.recordSnapshot(entry.merged)
    }
  }

  /// Gives the models merged into `holder` its values, just refreshed from its row by a fetch.
  /// O(merged models × attributes); a fetch calls it only when a context has merged models.
  func refreshMerged(into holder: Registration) {
    for entry in mergedModels where entry.holder === holder {
      guard entry.merged.entity.changedIndexes(entry.merged).isEmpty else { continue }
      copyValues(of: holder, to: entry.merged)
      try? entry.merged.entity.recordSnapshot(entry.merged)
    }
  }

  /// Assigns every attribute of `source`'s model to `target`'s (one row's two models), the key
  /// of a to-one whose target has no key yet left as it is.
  private func copyValues(of source: Registration, to target: Registration) {
    let entity = source.entity
    for index in entity.columnNames.indices {
      guard let value = try? entity.value(source.model, attribute: index) else { continue }
      if value == .integer(Int64(unsavedKey)),
        entity.relationships.contains(where: {
          $0.storesKey && $0.name == entity.columnNames[index]
        })
      {
        continue
      }
      try? entity.assign(target.model, attribute: index, value: value)
    }
  }

  /// Forgets the models merged into `holder` (its row was deleted, or the context reset).
  /// With `reference` (the row was deleted), each is told it is in no context now, the models
  /// it points to stop listing it, and its relationships answer what is in memory: nothing.
  /// O(merged models).
  func forgetMerged(into holder: Registration, reference: ContextReference?) {
    mergedModels.removeAll { entry in
      guard entry.holder === holder else { return false }
      let model = entry.merged.model
      unindex(model)
      if let reference {
        for relationship in entry.merged.entity.relationships {
          guard let link = relationship.existingLink(model) else { continue }
          for related in link.registeredModels {
            relationship.updateInverse(model, related, false)
          }
          link.refault(relationship)
          link.context = nil
        }
        entry.merged.entity.linkOrigin?.set(model, reference, nil)
      }
      return true
    }
  }
}
