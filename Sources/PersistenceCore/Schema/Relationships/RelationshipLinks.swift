import Foundation
import Observation

/// What a context needs of a ``ToOne`` or ``ToMany`` whatever its types.
protocol RelationshipLink: AnyObject, SendableMetatype {
  /// The context the owner is registered in (``RelationshipObservation/context``).
  var context: ModelContext? { get set }
  /// Changes this side only, because the other side changed: `other` now points to `owner`
  /// (`linked`) or no longer does. `info` is this side's relationship.
  func linkInverse(of owner: AnyObject, to other: AnyObject, linked: Bool, info: RelationshipInfo)
  /// Whether this to-one points to `object`, or nil while it is a fault.
  func points(to object: AnyObject) -> Bool?
  /// The related models held in memory (the target, the array), none while a fault.
  var loadedModels: [AnyObject] { get }
  /// How many models the link relates, when known without a query: a loaded to-many's
  /// count, a to-one's 1 or 0 (a fault of a stored key is 1); nil for a to-many or inverse
  /// to-one not loaded.
  var knownCount: Int? { get }
  /// ``loadedModels``, and for a to-one that is a fault of a stored key, the model of that key
  /// when the context has it registered (no query): what must hear of the owner's deletion.
  var registeredModels: [AnyObject] { get }
  /// Forgets what was loaded or set, so that the next read comes from the store
  /// (`relationship` is this link's).
  func refault(_ relationship: RelationshipInfo)
  /// Points to nothing, as the store does after a nullify (a to-one; a to-many does nothing).
  func clearSaved()
  /// Takes the related models a prefetch loaded for `owner` (a to-many's rows, a to-one's by
  /// its inverse's key), when still a fault; `relationship` is this link's, `inverse` its
  /// inverse.
  func fill(
    _ models: [AnyObject], owner: AnyObject, relationship: RelationshipInfo,
    inverse: RelationshipInfo?)
  /// For a link of a many-to-many whose array changed since its links were read or saved:
  /// the keys of the rows it relates now (`key` gives a related model's, nil for one the save
  /// must not link, such as one it deletes) and those it related when read or last saved; nil
  /// for an unchanged link and every other relationship. O(related models).
  func linkChanges(key: (AnyObject) -> Int64?) -> (now: Set<Int64>, stored: Set<Int64>)?
  /// Whether ``linkChanges(key:)`` has changes to give: a many-to-many's array changed since
  /// read or saved. O(1).
  var hasLinkChanges: Bool { get }
  /// A save wrote `keys` as this many-to-many link's links.
  func linksSaved(_ keys: Set<Int64>)
  /// The rows `forgotten` were deleted, and their links with them: a many-to-many link forgets
  /// them (no query, and no change to save), in one pass over its array. Nothing for others.
  func forgetDeleted(_ forgotten: Forgotten)
}

extension RelationshipLink {
  func linkChanges(key: (AnyObject) -> Int64?) -> (now: Set<Int64>, stored: Set<Int64>)? { nil }
  var hasLinkChanges: Bool { false }
  func linksSaved(_ keys: Set<Int64>) {}
  func forgetDeleted(_ forgotten: Forgotten) {}
}

/// What ``ToOne`` and ``ToMany`` share: their observation. An observation-tracking block that
/// reads a relationship depends on its link, and is told when the link changes.
///
/// Not generic, so that the key path observation goes through is one constant: a key path
/// into a generic class is made anew, with metadata lookups, every time it is written (about
/// 1 µs, on every read of a relationship).
///
/// The registrar is made on the first read: a link nobody has read has no observer to tell,
/// so the links of the rows a fetch loads cost no registrar each.
public class RelationshipObservation: Observable {
  private var registrar: ObservationRegistrar?
  /// The index of this link's relationship in its owner's schema, found on first use.
  private var relationshipIndex: Int?
  /// Stands for the relationship's value in observation.
  var relationshipValue: Void { () }

  /// The owner's context, through the context's one shared weak reference
  /// (``ContextReference``), which the link holds strongly: attaching a loaded model's links
  /// then costs a retain each, where a weak reference each cost about 180 instructions
  /// (callgrind).
  final var contextReference: ContextReference?
  /// The owner's row, when it was loaded from the store (else the context knows it).
  final var ownerKey: Int64?
  /// For a ``ToOne`` whose inverse stores the key, of an owner loaded from the store: whether
  /// the target is still to be looked up by that key column.
  final var isInverseFault = false

  init() {}

  /// The context the owner is registered in; links fault related rows in through it.
  final var context: ModelContext? {
    get { contextReference?.context }
    set { contextReference = newValue?.linkReference }
  }

  /// The owner was just loaded from the store, from the row `key`, into the context of
  /// `reference`; `inverseFault` for a to-one whose inverse stores the key (looked up there on
  /// first read; a to-many is a fault already). O(1).
  final func attachLoaded(_ reference: ContextReference, ownerKey key: Int64, inverseFault: Bool) {
    contextReference = reference
    ownerKey = key
    if inverseFault { isInverseFault = true }
  }

  /// Records a read of the relationship.
  final func accessed() {
    if registrar == nil { registrar = ObservationRegistrar() }
    registrar?.access(self, keyPath: \RelationshipObservation.relationshipValue)
  }

  /// The relationship of `owner`'s schema this link holds. O(relationships) once, then O(1).
  final func relationship<Owner: PersistentModel>(of owner: Owner) -> RelationshipInfo {
    let relationships = Owner.modelSchema.relationships
    if let relationshipIndex { return relationships[relationshipIndex] }
    guard let index = relationships.firstIndex(where: { $0.existingLink(owner) === self }) else {
      preconditionFailure("This \(type(of: self)) is not declared in the schema of \(Owner.self).")
    }
    relationshipIndex = index
    return relationships[index]
  }

  /// The lock of an observer's snapshots (see ``SnapshotSource``), held while this link is
  /// read or loaded; nil in a context, whose models belong to one thread.
  final var snapshotLock: NSRecursiveLock? { contextReference?.snapshots?.lock }

  /// The context to load a fault of `owner`'s relationship `info` with: the owner's, or, for
  /// an observer's snapshot, one made for the load; nil for a model in no context (never
  /// inserted, or deleted and saved), which answers what was set in memory. Traps, naming the
  /// model and the relationship, when the owner's context is gone or was reset: an empty
  /// answer would be a wrong one.
  final func loadingContext(_ owner: AnyObject, _ info: RelationshipInfo) -> ModelContext? {
    guard let reference = contextReference else { return nil }
    if let context = reference.context { return context }
    if let snapshots = reference.snapshots { return ModelContext(snapshots.container) }
    guard let whyNone = reference.whyNone else { return nil }
    unanswerable(owner, info, whyNone)
  }

  /// Makes `models`, just loaded by `context` for an observer's snapshot, snapshots of the
  /// same source: their own relationships load from it too. Nothing for a context's model.
  /// O(models × relationships).
  final func adopt<Model: PersistentModel>(
    _ models: [AnyObject], as _: Model.Type, loadedBy context: ModelContext,
    owner: AnyObject, info: RelationshipInfo
  ) {
    guard let reference = contextReference, reference.snapshots != nil, !models.isEmpty else {
      return
    }
    let entity: Entity<Model>
    do { entity = try context.entity(for: Model.self) } catch { unanswerable(owner, info, error) }
    guard entity.hasRelationships else { return }
    for model in models {
      guard let key = context.savedKey(of: model) else { continue }
      entity.attachLoaded(model, key: key, reference: reference)
    }
  }

  /// SwiftData's insert on relating: `owner` was just related to `related`; when one of them is
  /// in a context and the other in none (never inserted nor loaded), the other is inserted
  /// there now, with the models it reaches that are in none, so that its `modelContext` is set
  /// and a fetch that includes pending changes sees it. A model of another context is left to
  /// the save, which refuses it. O(1) when both are where they were; else O(models inserted ×
  /// their relationships).
  ///
  /// Where each model is comes from its ``LinkOrigin`` (its `modelContext`), not from this
  /// link's context, which a model forgotten by `rollback()` or `reset()` still holds.
  final func insertOnRelating<Owner: PersistentModel, Related: PersistentModel>(
    _ owner: Owner, _ related: Related
  ) {
    guard let linked = owner as? any LinksOnFirstUse else { return }
    if let context = linked.modelContext {
      context.insertOnRelating(related)
    } else if linked.linkOrigin.reference == nil,
      let other = (related as? any LinksOnFirstUse)?.modelContext
    {
      other.insertOnRelating(owner)
    }
  }

  /// Changes the relationship, telling observers (none, if it was never read).
  final func mutating<Result>(_ change: () throws -> Result) rethrows -> Result {
    guard let registrar else { return try change() }
    return try registrar.withMutation(
      of: self, keyPath: \RelationshipObservation.relationshipValue, change)
  }
}

/// Traps for a relationship read that cannot be answered: a property cannot throw, and an
/// empty or nil answer would be a wrong one. The message names the model, the relationship
/// and why, in every build.
func unanswerable(_ owner: AnyObject, _ info: RelationshipInfo, _ reason: String) -> Never {
  fatalError("The relationship '\(info.name)' of \(type(of: owner)) cannot be read: \(reason).")
}

/// Traps for a relationship whose load failed, with the error.
func unanswerable(_ owner: AnyObject, _ info: RelationshipInfo, _ error: any Error) -> Never {
  unanswerable(
    owner, info,
    "\(error) To have such failures thrown, load the relationship with the fetch (FetchDescriptor.relationshipKeyPathsForPrefetching) or with ModelContext.prefetch(_:of:)"
  )
}

/// The value ``ToOne`` binds for a related model the store has not given a key yet: no row has
/// it, so a save that wrote it would be refused by the foreign key.
let unsavedKey = Int.min

/// The storage of a to-one relationship: the related model, loaded from the store on first
/// read (a fault until then).
///
/// A model keeps one as a `let` and exposes the relationship as a computed property that goes
/// through it (see ``ModelAttribute/toOne(_:_:link:inverse:)``). Setting it updates the inverse
/// on the related model at once (a to-many array gains the model and its former owner's loses
/// it), before any save. Observable: reading the property in an observation-tracking block
/// tracks the relationship.
///
/// Cost: the first read of a fault is one query by primary key (none when the row is
/// registered in the context already); later reads are O(1). A model in no context (never
/// inserted, or deleted and saved) answers what was set in memory. A fault that cannot be
/// loaded traps, naming the model and the relationship: when the context the model was fetched
/// into is gone, or the query fails (prefetch the relationship to have that thrown instead).
public final class ToOne<Target: PersistentModel>: RelationshipObservation, RelationshipLink {
  /// The key the stored row holds, while ``isFault``.
  private var loadedKey: Int?
  /// Whether the target is still to be loaded (from `loadedKey`).
  private var isFault = false
  private var target: Target?

  /// A link holding no model.
  public override init() {}

  /// The related model, loaded on first read. `owner` is the model that holds this link.
  public func value<Owner: PersistentModel>(of owner: Owner) -> Target? {
    guard let lock = snapshotLock else { return read(owner) }
    lock.lock()
    defer { lock.unlock() }
    return read(owner)
  }

  private func read<Owner: PersistentModel>(_ owner: Owner) -> Target? {
    accessed()
    if isFault { resolve(owner, info: relationship(of: owner)) }
    if isInverseFault { resolveInverse(owner, info: relationship(of: owner)) }
    return target
  }

  /// Sets the related model, and updates the inverse on the former and the new one.
  public func set<Owner: PersistentModel>(_ newValue: Target?, of owner: Owner) {
    let info = relationship(of: owner)
    if isInverseFault { resolveInverse(owner, info: info) }
    let old = isFault ? registeredTarget() : target
    guard isFault || old !== newValue else { return }
    mutating {
      target = newValue
      isFault = false
    }
    if let old, old !== newValue { info.updateInverse(owner, old, false) }
    if let newValue {
      info.updateInverse(owner, newValue, true)
      insertOnRelating(owner, newValue)
    }
  }

  /// The stored column's value: the related row's key, ``unsavedKey`` for a related model not
  /// saved yet, nil for none. Loading a row sets it, which makes the target a fault unless it
  /// is the registered model of that key.
  var key: Int? {
    get {
      if isFault { return loadedKey }
      guard let target else { return nil }
      return context?.savedKey(of: target).map { Int($0) } ?? unsavedKey
    }
    set {
      if !isFault {
        if let target, let saved = context?.savedKey(of: target), Int(saved) == newValue { return }
        if target == nil, newValue == nil { return }
      } else if loadedKey == newValue {
        return
      }
      loadedKey = newValue
      mutating {
        target = nil
        isFault = newValue != nil
      }
    }
  }

  /// Whether the link points to a model: one set in memory, or a stored key (not loaded: no
  /// query). What a model's `validateForSave()` can check without reading the related row.
  public var hasTarget: Bool { key != nil }

  /// Sets the key a row holds into a link nobody can observe yet (its model was just made for
  /// the row): no notification.
  func loadKey(_ value: Int?) {
    loadedKey = value
    target = nil
    isFault = value != nil
  }

  /// The registered model of the loaded key, without a query.
  private func registeredTarget() -> Target? {
    guard let loadedKey, let context else { return nil }
    return context.registeredModel(forKey: Int64(loadedKey), as: Target.self)
  }

  /// Loads the target of the stored key (from the context's identity map, or one query): nil
  /// when no row has the key any more. Traps when it cannot be loaded (see the type's docs).
  private func resolve(_ owner: AnyObject, info: RelationshipInfo) {
    guard let loadedKey, let context = loadingContext(owner, info) else { return }
    let model: Target?
    do {
      model = try context.relatedModel(Target.self, key: Int64(loadedKey))
    } catch {
      unanswerable(owner, info, error)
    }
    if let model { adopt([model], as: Target.self, loadedBy: context, owner: owner, info: info) }
    target = model
    isFault = false
  }

  /// Looks the target up by the inverse's key column: one query (the first row, the column
  /// has a unique index). Traps when it cannot be loaded (see the type's docs).
  private func resolveInverse(_ owner: AnyObject, info: RelationshipInfo) {
    guard let context = loadingContext(owner, info),
      let key = ownerKey ?? context.savedKey(of: owner)
    else {
      isInverseFault = false
      return
    }
    let found: [AnyObject]
    do {
      found = try context.relatedModels(info, key: key)
    } catch {
      unanswerable(owner, info, error)
    }
    adopt(found, as: Target.self, loadedBy: context, owner: owner, info: info)
    isInverseFault = false
    target = found.first.map { unsafeDowncast($0, to: Target.self) }
  }

  func fill(
    _ models: [AnyObject], owner: AnyObject, relationship: RelationshipInfo,
    inverse: RelationshipInfo?
  ) {
    guard isInverseFault else { return }
    isInverseFault = false
    target = models.first.map { unsafeDowncast($0, to: Target.self) }
  }

  func linkInverse(of owner: AnyObject, to other: AnyObject, linked: Bool, info: RelationshipInfo) {
    if isInverseFault { resolveInverse(owner, info: info) }
    if linked {
      let previous = isFault ? registeredTarget() : target
      guard isFault || previous !== other else { return }
      mutating {
        target = unsafeDowncast(other, to: Target.self)
        isFault = false
      }
      // A one-to-one: the model this one pointed to no longer points back.
      if let previous, previous !== other { info.updateInverse(owner, previous, false) }
    } else if isFault ? registeredTarget() === other : target === other {
      mutating {
        target = nil
        isFault = false
      }
    }
  }

  func points(to object: AnyObject) -> Bool? {
    isFault || isInverseFault ? nil : target === object
  }

  var loadedModels: [AnyObject] { isFault || isInverseFault ? [] : target.map { [$0] } ?? [] }

  var knownCount: Int? {
    if isFault { return 1 }
    if isInverseFault { return nil }
    return target == nil ? 0 : 1
  }

  var registeredModels: [AnyObject] {
    if isFault { return registeredTarget().map { [$0] } ?? [] }
    return loadedModels
  }

  func refault(_ relationship: RelationshipInfo) {
    guard !isFault, !isInverseFault else { return }
    guard relationship.storesKey else {
      mutating {
        target = nil
        isInverseFault = true
      }
      return
    }
    let current = key
    loadedKey = current == unsavedKey ? nil : current
    guard target != nil else { return }
    mutating {
      target = nil
      isFault = loadedKey != nil
    }
  }

  /// Sets the target to nil after the store did (a nullify, or the target's delete), as what
  /// was saved.
  func clearSaved() {
    loadedKey = nil
    mutating {
      target = nil
      isFault = false
    }
  }
}

/// The storage of a to-many relationship: the related models, loaded from the store on first
/// read (a fault until then), in the declared order.
///
/// A model keeps one as a `let` and exposes the relationship as a computed array property
/// that goes through it (see
/// ``ModelAttribute/toMany(_:_:link:inverse:deleteRule:orderBy:)-(_,_,_,KeyPath<Target,Model?>,_,_)``).
/// Setting the array updates the inverse of every model it gains or loses, before any save.
/// Observable, as ``ToOne``.
///
/// Cost: the first read is one query over the related table's index on its key column,
/// O(related rows); later reads are O(1). Setting is O(old + new elements). A model in no
/// context answers what was set in memory; a fault that cannot be loaded traps, as
/// ``ToOne``'s does.
public final class ToMany<Element: PersistentModel>: RelationshipObservation, RelationshipLink {
  /// The related models, nil while a fault.
  private var elements: [Element]?
  /// For a many-to-many: the keys of the rows the store linked the owner to when the array
  /// was read or last saved (empty for an owner not saved), and whether the array changed
  /// since (what a save writes to the join table).
  private var storedLinks: Set<Int64> = []
  private var linksChanged = false
  /// Whether the relationship is a many-to-many, found on first use.
  private var joined: Bool?

  private func isJoined(_ info: RelationshipInfo) -> Bool {
    if let joined { return joined }
    let found = info.joinTable() != nil
    joined = found
    return found
  }

  /// A link holding no models.
  public override init() {}

  /// The related models, loaded on first read. `owner` is the model that holds this link.
  public func value<Owner: PersistentModel>(of owner: Owner) -> [Element] {
    guard let lock = snapshotLock else { return read(owner) }
    lock.lock()
    defer { lock.unlock() }
    return read(owner)
  }

  private func read<Owner: PersistentModel>(_ owner: Owner) -> [Element] {
    accessed()
    if elements == nil { load(owner, info: relationship(of: owner)) }
    return elements ?? []
  }

  /// Sets the related models: those added point back to `owner` (leaving their former
  /// owner's array), those removed are deleted under ``DeleteRule/cascade`` and else point to
  /// nothing. In a many-to-many, those added list `owner` in their inverse too, and those
  /// removed are unlinked only, whatever the rule (they may be related to other models).
  public func set<Owner: PersistentModel>(_ newValue: [Element], of owner: Owner) {
    let info = relationship(of: owner)
    let old = value(of: owner)
    let joined = isJoined(info)
    mutating { elements = newValue }
    if joined { linksChanged = true }
    let before = Set(old.map(ObjectIdentifier.init))
    let after = Set(newValue.map(ObjectIdentifier.init))
    for element in newValue where !before.contains(ObjectIdentifier(element)) {
      info.updateInverse(owner, element, true)
      insertOnRelating(owner, element)
    }
    for element in old where !after.contains(ObjectIdentifier(element)) {
      info.updateInverse(owner, element, false)
      if info.deleteRule == .cascade, !joined { context?.deleteObject(element) }
    }
  }

  /// Loads the related rows of `owner`'s key (none for an owner not saved or in no context),
  /// leaving out those whose inverse was set to another model in memory. Traps when they
  /// cannot be loaded (see the type's docs).
  private func load(_ owner: AnyObject, info: RelationshipInfo) {
    guard let context = loadingContext(owner, info),
      let key = ownerKey ?? context.savedKey(of: owner)
    else {
      elements = []
      storedLinks = []
      return
    }
    let loaded: [AnyObject]
    do {
      loaded = try context.relatedModels(info, key: key)
    } catch {
      unanswerable(owner, info, error)
    }
    adopt(loaded, as: Element.self, loadedBy: context, owner: owner, info: info)
    take(loaded, owner: owner, inverse: info.inverseInfo())
    if isJoined(info) { storedLinks = linkedKeys(loaded, in: context) }
  }

  /// The keys of `models`, rows `context` just loaded.
  private func linkedKeys(_ models: [AnyObject], in context: ModelContext) -> Set<Int64> {
    Set(models.compactMap { context.savedKey(of: $0) })
  }

  /// The loaded rows as the elements, but those whose inverse was set to another model in
  /// memory (not another model of the same row: one an upsert merged, see
  /// ``ModelContext/merge(_:into:)``).
  private func take(_ loaded: [AnyObject], owner: AnyObject, inverse: RelationshipInfo?) {
    var taken: [Element] = []
    taken.reserveCapacity(loaded.count)
    for object in loaded {
      if let inverse, let link = inverse.existingLink(object), link.points(to: owner) == false,
        context?.isSameRow(link.loadedModels.first, owner) != true
      {
        continue
      }
      taken.append(unsafeDowncast(object, to: Element.self))
    }
    elements = taken
  }

  func fill(
    _ models: [AnyObject], owner: AnyObject, relationship: RelationshipInfo,
    inverse: RelationshipInfo?
  ) {
    guard elements == nil else { return }
    take(models, owner: owner, inverse: inverse)
    if isJoined(relationship), let context {
      storedLinks = linkedKeys(models, in: context)
    }
  }

  func linkInverse(of owner: AnyObject, to other: AnyObject, linked: Bool, info: RelationshipInfo) {
    // A many-to-many's removal is a change to save: the array is read first to know it.
    if elements == nil, linked || isJoined(info) { load(owner, info: info) }
    if linked {
      guard elements?.contains(where: { $0 === other }) == false else { return }
      mutating {
        elements?.append(unsafeDowncast(other, to: Element.self))
      }
      if isJoined(info) { linksChanged = true }
    } else if let index = elements?.firstIndex(where: { $0 === other }) {
      _ = mutating {
        elements?.remove(at: index)
      }
      if isJoined(info) { linksChanged = true }
    }
  }

  var hasLinkChanges: Bool { linksChanged && elements != nil }

  func linkChanges(key: (AnyObject) -> Int64?) -> (now: Set<Int64>, stored: Set<Int64>)? {
    guard linksChanged, let elements else { return nil }
    return (Set(elements.compactMap { key($0) }), storedLinks)
  }

  func linksSaved(_ keys: Set<Int64>) {
    storedLinks = keys
    linksChanged = false
  }

  func forgetDeleted(_ forgotten: Forgotten) {
    storedLinks.subtract(forgotten.keys)
    guard !forgotten.objects.isEmpty,
      elements?.contains(where: { forgotten.objects.contains(ObjectIdentifier($0)) }) == true
    else { return }
    mutating {
      elements?.removeAll { forgotten.objects.contains(ObjectIdentifier($0)) }
    }
  }

  func points(to object: AnyObject) -> Bool? { nil }

  var loadedModels: [AnyObject] { elements ?? [] }

  var knownCount: Int? { elements?.count }

  var registeredModels: [AnyObject] { loadedModels }

  func refault(_ relationship: RelationshipInfo) {
    storedLinks = []
    linksChanged = false
    guard elements != nil else { return }
    mutating { elements = nil }
  }

  func clearSaved() {}
}
