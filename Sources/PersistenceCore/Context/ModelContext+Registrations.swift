import Foundation

// The context's identity map: a registration per model, the row tables by primary key, and
// the index by model made when a lookup needs it.
extension ModelContext {
  /// The fields of a ``Registration``, kept in the header of its buffer.
  struct RegistrationState {
    var model: AnyObject
    let entity: any EntityOperations
    var primaryKey: Int64?
    /// Whether the snapshot in the tail holds values (it does once the model is first loaded
    /// or saved).
    var hasSnapshot = false
    var isDeleted = false
    /// Registered by the fetch that is running now (for `enumerate`'s release of batches).
    var isFresh = false
    /// The snapshot's alignment, kept here so that finding the snapshot asks the entity
    /// nothing (that call retained and released its layout, three pairs a row). Last, and
    /// small, so that the header stays 40 bytes: an `Int` among the first fields made every
    /// registration 8 bytes larger.
    let snapshotAlignment: UInt16
  }

  /// One registered model, with its snapshot (the values last loaded or saved, laid out by the
  /// entity, see `Entity`) in the same allocation: a fetched row costs one allocation here,
  /// not two.
  final class Registration: ManagedBuffer<RegistrationState, UInt64> {
    /// What a registration holds until its model is made (``Entity/makeModel``).
    private final class Unloaded: Sendable {}
    private static let unloaded = Unloaded()

    /// A registration whose model is made from a row after it (its snapshot is filled first).
    static func make(entity: any EntityOperations) -> Registration {
      make(model: unloaded, entity: entity)
    }

    /// A registration with room for the entity's snapshot, which holds no values yet.
    static func make(model: AnyObject, entity: any EntityOperations) -> Registration {
      // Words enough for the snapshot wherever its alignment puts it in the tail.
      let layout = entity.snapshotLayout
      let buffer = create(minimumCapacity: (layout.storageBytes + 7) / 8) { _ in
        RegistrationState(
          model: model, entity: entity, snapshotAlignment: UInt16(layout.alignment))
      }
      return unsafeDowncast(buffer, to: Registration.self)
    }

    // The fields are reached through the header's pointer: `header` is a stored property,
    // whose every access the runtime would check for exclusivity (a thread-local lookup, per
    // field, per row); a registration belongs to one context and is never accessed reentrantly.
    var model: AnyObject {
      get { state.pointee.model }
      set { state.pointee.model = newValue }
    }
    var entity: any EntityOperations { state.pointee.entity }
    var primaryKey: Int64? {
      get { state.pointee.primaryKey }
      set { state.pointee.primaryKey = newValue }
    }
    var isDeleted: Bool {
      get { state.pointee.isDeleted }
      set { state.pointee.isDeleted = newValue }
    }
    var isFresh: Bool {
      get { state.pointee.isFresh }
      set { state.pointee.isFresh = newValue }
    }
    var hasSnapshot: Bool {
      get { state.pointee.hasSnapshot }
      set { state.pointee.hasSnapshot = newValue }
    }

    /// Lets the model go when this registration holds the only strong reference to it
    /// (nothing else can reach it: no variable, no related model), and says whether it did;
    /// else keeps it. (`isKnownUniquelyReferenced` answers false for any `AnyObject` here, so
    /// the reference is dropped and a weak one tells whether the model outlived it.)
    func releaseModelIfUnreachable() -> Bool {
      weak let kept = state.pointee.model
      state.pointee.model = Self.unloaded
      guard let model = kept else { return true }
      state.pointee.model = model
      return false
    }

    /// The header, valid as long as this object.
    private var state: UnsafeMutablePointer<RegistrationState> {
      withUnsafeMutablePointerToHeader { $0 }
    }

    /// Where the snapshot lives: in this object's tail, so valid as long as it is.
    var snapshotStorage: UnsafeMutableRawPointer {
      let alignment = Int(state.pointee.snapshotAlignment)
      return withUnsafeMutablePointerToElements {
        SnapshotLayout.start(in: UnsafeMutableRawPointer($0), alignment: alignment)
      }
    }

    /// The snapshot when it holds values.
    var snapshot: UnsafeMutableRawPointer? { hasSnapshot ? snapshotStorage : nil }

    deinit {
      if hasSnapshot { entity.destroySnapshot(snapshotStorage) }
    }
  }

  /// The registered rows of one entity, by primary key.
  ///
  /// A fetch into an empty table cannot meet a registered row, so it appends its rows
  /// unindexed; the map by key is built from them on the first lookup, O(rows) once. A context
  /// that fetches once and is released never builds it (for 1M rows, about 32 MB and a
  /// hashed insert per row saved).
  final class RowTable {
    // Touched per fetched row, by one context (not Sendable) and never reentrantly: no
    // dynamic exclusivity checks.
    @exclusivity(unchecked) private var indexed: [Int64: Registration] = [:]
    /// Registrations with a key, not yet in `indexed` (no key is in both).
    @exclusivity(unchecked) private var unindexed: [Registration] = []

    /// Whether no row is registered.
    var isEmpty: Bool { indexed.isEmpty && unindexed.isEmpty }
    /// How many rows are registered.
    var count: Int { indexed.count + unindexed.count }
    /// How many rows are in the map by key (the rest wait for a lookup).
    var indexedCount: Int { indexed.count }
    /// Every registration, in no particular order.
    var registrations: Registrations {
      Registrations(indexed: indexed.values.makeIterator(), unindexed: unindexed.makeIterator())
    }

    /// The indexed registrations, then the unindexed ones.
    struct Registrations: Sequence, IteratorProtocol {
      var indexed: Dictionary<Int64, Registration>.Values.Iterator
      var unindexed: IndexingIterator<[Registration]>
      mutating func next() -> Registration? { indexed.next() ?? unindexed.next() }
    }

    /// The registration of the row `key`; setting nil removes it. O(1) after the first lookup
    /// that follows unindexed appends.
    subscript(key: Int64) -> Registration? {
      get {
        indexPending()
        return indexed[key]
      }
      set {
        indexPending()
        indexed[key] = newValue
      }
    }

    /// Registers a row the caller knows is not registered (see the type's docs).
    func appendUnindexed(_ registration: Registration) {
      unindexed.append(registration)
    }

    private func indexPending() {
      guard !unindexed.isEmpty else { return }
      indexed.reserveCapacity(indexed.count + unindexed.count)
      for registration in unindexed {
        if let key = registration.primaryKey { indexed[key] = registration }
      }
      unindexed = []
    }
  }

  /// The model registered in this context for `identifier`, without touching the store: a
  /// row's of this context's store, or by its temporary identifier
  /// (``PersistentIdentifier/isTemporary``) a model inserted here, saved since or not (as
  /// SwiftData's, a temporary identifier goes on naming its model). O(1) (the first lookup
  /// by model indexes the registered models).
  public func registeredModel<Model: PersistentModel>(for identifier: PersistentIdentifier)
    -> Model?
  {
    if identifier.isTemporary {
      guard Model.schema.name == identifier.entityName else { return nil }
      return registeredModel(forTemporary: identifier) as? Model
    }
    guard identifier.storeIdentifier == container.storeIdentifier else { return nil }
    return rowTables[identifier.entityName]?[identifier.primaryKey]?.model as? Model
  }

  /// The registered rows of `entity` (made on first use).
  func rowTable(_ entity: String) -> RowTable {
    if let table = rowTables[entity] { return table }
    let table = RowTable()
    rowTables[entity] = table
    return table
  }

  /// The model a temporary identifier was made for, when it is registered here (inserted, and
  /// saved since or not; a merged one's holder stands for it): found by its identity in the
  /// index by model, so an identifier of a model gone names nothing. O(1) after the index.
  func registeredModel(forTemporary identifier: PersistentIdentifier) -> AnyObject? {
    guard let identity = identifier.temporaryModel else { return nil }
    guard let registration = indexedRegistration(identity) else { return nil }
    // The registration of that identity holds the model, alive: compare the identifier made
    // for it (of a merged model, the merged one's own identity named it).
    let model = registration.model
    if ObjectIdentifier(model) == identity,
      PersistentIdentifier(temporaryFor: model, entityName: identifier.entityName) == identifier
    {
      return model
    }
    for entry in mergedModels where ObjectIdentifier(entry.merged.model) == identity {
      return entry.merged.model
    }
    return nil
  }

  /// The registration of `model`, if registered. The first call after a fetch registered
  /// models indexes every registered model: O(registered) once, then O(1).
  func registration(for model: AnyObject) -> Registration? {
    indexedRegistration(ObjectIdentifier(model))
  }

  /// The registration of the model whose identity is `identity`, through the index by model
  /// (made now if there is none yet).
  private func indexedRegistration(_ identity: ObjectIdentifier) -> Registration? {
    if objectIndex == nil {
      var index: [ObjectIdentifier: Registration] = [:]
      index.reserveCapacity(registeredCount)
      for registration in savedRegistrations {
        index[ObjectIdentifier(registration.model)] = registration
      }
      for registration in pendingInserts {
        index[ObjectIdentifier(registration.model)] = registration
      }
      // A merged model is looked up as its holder: deleting it deletes the row, its
      // identifier is the row's.
      for entry in mergedModels { index[ObjectIdentifier(entry.merged.model)] = entry.holder }
      objectIndex = index
    }
    return objectIndex?[identity]
  }

  /// Adds a new registration to the index by model, when there is one yet.
  func index(_ registration: Registration) {
    objectIndex?[ObjectIdentifier(registration.model)] = registration
  }

  /// Indexes `model` as `registration`'s (a merged model as its holder's), when there is an
  /// index yet.
  func index(_ model: AnyObject, as registration: Registration) {
    objectIndex?[ObjectIdentifier(model)] = registration
  }

  /// Removes `model` from the index by model, when there is one yet.
  func unindex(_ model: AnyObject) {
    unindex(ObjectIdentifier(model))
  }

  /// Removes the model `identifier` names from the index by model, when there is one yet.
  func unindex(_ identifier: ObjectIdentifier) {
    objectIndex?[identifier] = nil
  }

  /// How many models are registered, saved or not.
  var registeredCount: Int {
    pendingInserts.count + rowTables.values.reduce(0) { $0 + $1.count }
  }

  /// Every registration of a saved row (in the row tables), the deleted ones included.
  var savedRegistrations: some Sequence<Registration> {
    rowTables.values.lazy.flatMap { $0.registrations }
  }

  func unregister(_ registration: Registration) {
    objectIndex?[ObjectIdentifier(registration.model)] = nil
    if let key = registration.primaryKey {
      let table = rowTable(registration.entity.name)
      if table[key] === registration { table[key] = nil }
      if !mergedModels.isEmpty { forgetMerged(into: registration, reference: nil) }
    } else {
      pendingInserts.removeAll { $0 === registration }
      // Never saved, it leaves the context (rolled back, or deleted before a save): a model
      // in memory again, in no context (`modelContext` nil).
      registration.entity.linkOrigin?.set(registration.model, nil, nil)
    }
  }
}
