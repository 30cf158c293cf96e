import Foundation

/// Tracks models fetched from and inserted into a store, and saves their changes.
///
/// A context keeps one instance per row (an identity map): fetching a row twice returns the same
/// object. It records inserts and deletes, notices changed properties by comparing each
/// registered model with the values it was loaded with, and ``save()`` writes everything in one
/// transaction together with its history.
///
/// A context is not `Sendable`: use it from one task or thread, and give each its own (they
/// share the container). Each context has its own connection while it lives, so readers in
/// different contexts never block each other; a released context gives its connection back to
/// the container when it is idle (no transaction, no statement mid-step), and the next context
/// takes it with its page cache and prepared statements warm, so a context per request or per
/// task costs no new connection (the container keeps up to four idle).
///
/// ## Autosave
/// There is no UI run loop on a server to save "at the end of the event". Here,
/// ``autosaveEnabled`` (default `false`) means: pending changes are saved before each fetch of
/// this context (so a fetch always sees the context's own edits) and, best effort, when the
/// context is deinitialized, with any error passed to ``autosaveErrorHandler``. Call ``save()``
/// yourself whenever the outcome matters.
///
/// ## Costs
/// `insert` and `delete` are O(1); the first call that looks a model up after a fetch indexes
/// the registered models once, O(registered) (fetches register rows by key only, and a fetch
/// into a context with no rows of that model not even by key until a lookup needs it). Fetching
/// costs, per row, one lookup by key (none into an empty context), the load, and for a new row
/// the model and one allocation for its registration, which holds its snapshot.
/// ``hasChanges`` and ``save()`` compare every registered model with its snapshot:
/// O(registered models × attributes), plus the SQL for what changed.
public final class ModelContext {
  /// The container whose store this context reads and writes.
  public let container: ModelContainer
  /// Recorded as the author of the history transactions this context's saves make.
  public var author: String?
  /// The time the next save records for its history transaction; nil (the default) records
  /// the time of the save. Each save that writes a transaction resets it to nil. A sync that
  /// copies changes from another store sets it to when they were made there, so that history
  /// everywhere says when a change was made, not when it arrived.
  public var historyTimestamp: Date?
  /// Whether pending changes are saved before each fetch and at deinit (see the type's docs).
  public var autosaveEnabled = false
  /// Receives errors from saving at deinit when ``autosaveEnabled`` is true.
  public var autosaveErrorHandler: (@Sendable (any Error) -> Void)?
  /// Whether ``performExclusively(_:)`` holds the store's write lock in an open transaction
  /// that the next ``save()`` commits.
  var holdsWriteLock = false

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

  /// Every saved registered model is in its entity's row table; unsaved ones are in
  /// `pendingInserts`. This index by model is built only when a call needs it (see
  /// `registration(for:)`), so that a fetch registers each row in one map, not two. Touched
  /// per fetched row, by the context's one thread and never reentrantly: no dynamic
  /// exclusivity check (about 120 instructions a row).
  @exclusivity(unchecked) private var objectIndex: [ObjectIdentifier: Registration]?
  var rowTables: [String: RowTable] = [:]
  /// Inserted models not yet saved, in insertion order.
  var pendingInserts: [Registration] = []
  /// The models ``insert(_:)`` refused (of another context), as the next save names them.
  var refusedInserts: [String] = []
  /// The models of rows an upsert took over, each with the model that stands for its row
  /// (see ``merge(_:into:)``); empty unless an upsert met a registered model.
  var mergedModels: [MergedModel] = []
  /// Rows deleted by `delete(model:where:)` that have no registered model.
  var pendingRowDeletes: [String: Set<Int64>] = [:]
  var entities: [ObjectIdentifier: any EntityOperations] = [:]
  private var database: (any StoreConnection)?
  /// The keys rows inserted by the running save got, by model, until it finishes: what a
  /// related model's ``ToOne`` binds before the commit gives the keys to the registrations.
  var savingKeys: [ObjectIdentifier: Int64] = [:]
  /// How many queries relationships ran to load faults (for tests of the query counts).
  var relationshipQueryCount = 0
  /// This context as the links of its models reach it (see ``ContextReference``).
  private(set) lazy var linkReference = ContextReference(self)

  /// What a kept query is kept by: its predicate's template (see ``PredicateTemplate``), what
  /// the query is, and for a fetch its order (each sort's key path, by identity, and
  /// direction) and whether it has a window (`LIMIT ? OFFSET ?`).
  struct KeptQueryKey: Hashable {
    enum Purpose: Hashable {
      case count
      case fetch(windowed: Bool)
    }
    let template: ObjectIdentifier
    let purpose: Purpose
    let order: [Int]
  }
  /// A query's statement kept by its key (see ``fetchCount(_:)`` and ``fetch(_:)``).
  struct KeptQuery {
    /// Held, so that no other template or key path takes their identity while it is kept.
    let template: PredicateTemplate
    let keyPaths: [AnyKeyPath]
    let statement: any StoreStatement
  }
  /// The kept queries. A kept statement stays prepared (the connection's cache never drops a
  /// statement someone holds), so there are at most ``keptQueryCapacity``; emptied when full
  /// (the keys come from a program's `#Predicate`s and sorts, not from values).
  var keptQueries: [KeptQueryKey: KeptQuery] = [:]
  /// The most queries a context keeps.
  static let keptQueryCapacity = 64

  /// Creates a context for the container's store.
  public init(_ container: ModelContainer) {
    self.container = container
  }

  deinit {
    if autosaveEnabled, hasChanges {
      do { try save() } catch { autosaveErrorHandler?(error) }
    }
    // Its statements let go first: the connection is another context's once given back.
    keptQueries = [:]
    if let database { container.giveBack(database) }
  }

  /// The context's connection, taken on first use from the container (a released context's,
  /// with its page cache and prepared statements, or a new one) and given back on release.
  func connection() throws -> any StoreConnection {
    if let database { return database }
    let opened = try container.takeConnection()
    database = opened
    return opened
  }

  func entity<Model: PersistentModel>(for type: Model.Type) throws -> Entity<Model> {
    // Only this method stores under a model type's identifier, always that model's entity: a
    // checked cast (`as?`) cost ~700 instructions on every insert.
    if let known = entities[ObjectIdentifier(type)] {
      return unsafeDowncast(known, to: Entity<Model>.self)
    }
    // The container's, shared by its contexts: made once per container, not per context.
    let shared = try container.operations(for: type)
    entities[ObjectIdentifier(type)] = shared
    return shared
  }

  // MARK: Inserting and deleting

  /// Registers a new model; it is written by the next ``save()``. Inserting a model already in
  /// the context does nothing. A model whose `.unique` value exists in the store updates that
  /// row when saved (upsert).
  ///
  /// A model of another context (or loaded from a row of this store, or an observer's) is not
  /// inserted: its row would be written twice. The next ``save()`` throws
  /// ``PersistenceError/Code/modelInAnotherContext`` for it, saving nothing; fetch the row in
  /// this context to change it here (``model(for:as:)`` with its `persistentModelID`). Told
  /// for models that have a ``LinkOrigin`` (every `@Model`).
  ///
  /// The models it reaches through its relationships that no context holds (never inserted
  /// nor loaded) are inserted with it, as SwiftData inserts them, and so is a model later
  /// related to it: their `modelContext` is this context at once. Cost: O(1), plus
  /// O(relationships) for each model inserted with it.
  public func insert<Model: PersistentModel>(_ model: Model) {
    guard let registration = register(model) else { return }
    if registration.entity.hasRelationships { insertReachable(from: registration) }
  }

  /// Registers a new model for the next save, alone (``insert(_:)`` without the models it
  /// reaches); nil when it was registered already or is refused. O(1).
  @discardableResult
  func register<Model: PersistentModel>(_ model: Model) -> Registration? {
    if let registration = registration(for: model) {
      registration.isDeleted = false
      return nil
    }
    // Unknown model types are reported by save(), which can throw. A subclass's model is
    // kept as its own class, whatever the static type it is inserted as.
    let operations: any EntityOperations
    if type(of: model) == Model.self {
      operations = (try? entity(for: Model.self)) ?? Entity<Model>()
    } else {
      // Looked up by the model's own class: no generic call opened on its metatype.
      let key = ObjectIdentifier(type(of: model) as AnyObject.Type)
      operations = entities[key] ?? container.operations(ofType: key) ?? Entity<Model>()
    }
    if let origin = operations.linkOrigin, let reference = origin.reference(model) {
      let key = origin.key(model)
      let elsewhere =
        reference.context.map { $0 !== self }
        ?? (reference.snapshots != nil || reference.isDeletedModel
          || (reference.whyNone != nil && key != nil))
      if elsewhere {
        refusedInserts.append("\(Model.self) (\(describeOrigin(reference, key: key)))")
        return nil
      }
    }
    let registration = Registration.make(model: model, entity: operations)
    index(registration)
    pendingInserts.append(registration)
    if operations.attachesModels { operations.attach(model, to: self) }
    return registration
  }

  /// Marks a model for deletion at the next ``save()``. Deleting a model that was inserted and
  /// not saved simply forgets it.
  public func delete<Model: PersistentModel>(_ model: Model) {
    deleteObject(model)
  }

  /// Marks every model matching `predicate` (all of them when nil) for deletion at the next
  /// ``save()``, without loading them. History records each deleted row.
  ///
  /// Cost: one indexed or scanning query for the matching keys, O(matches) memory. In a table
  /// that holds subclasses of a model, the matching models are loaded, so that each row is
  /// deleted as its own class.
  ///
  /// With `includeSubclasses` false, only models of `Model`'s own class are deleted, not those
  /// of its subclasses (<doc:AdoptingInheritance>).
  public func delete<Model: PersistentModel>(
    model: Model.Type, where predicate: Predicate<Model>? = nil, includeSubclasses: Bool = true
  ) throws {
    let entity = try entity(for: Model.self)
    if entity.entityColumn != nil {
      // A table that holds subclasses: each row deleted as its own class (its tombstone
      // keeps its class's preserved values), so its model is loaded.
      var stored = FetchDescriptor<Model>(predicate: predicate)
      stored.includePendingChanges = false
      for model in try fetch(stored) where includeSubclasses || type(of: model) == Model.self {
        deleteObject(model)
      }
    } else {
      for key in try fetchPrimaryKeys(FetchDescriptor<Model>(predicate: predicate)) {
        if let registration = rowTable(entity.name)[key] {
          registration.isDeleted = true
        } else {
          pendingRowDeletes[entity.name, default: []].insert(key)
        }
      }
    }
    // The unsaved inserts of this model (and its subclasses) that match; not those of other
    // models of its table.
    for registration in pendingInserts where registration.entity.name == entity.name {
      guard let model = registration.model as? Model,
        includeSubclasses || type(of: model) == Model.self
      else { continue }
      if let predicate, (try? predicate.evaluate(model)) != true { continue }
      unregister(registration)
    }
  }

  /// Whether the context has inserts, deletes or changed models not yet saved.
  ///
  /// Cost: O(registered models × attributes).
  public var hasChanges: Bool {
    if !mergedModels.isEmpty { moveMergedChanges() }
    if !pendingInserts.isEmpty || pendingRowDeletes.values.contains(where: { !$0.isEmpty }) {
      return true
    }
    return savedRegistrations.contains { registration in
      registration.isDeleted
        || (registration.primaryKey != nil
          && !registration.entity.changedIndexes(registration).isEmpty)
    } || (container.hasJoinTables && !changedLinks().isEmpty)
  }

  /// Discards unsaved work: forgets inserted models, cancels deletes, and puts the values of
  /// changed models back to what was last loaded or saved.
  public func rollback() {
    refusedInserts.removeAll()
    for registration in pendingInserts { unregister(registration) }
    pendingInserts.removeAll()
    pendingRowDeletes.removeAll()
    for registration in savedRegistrations {
      registration.isDeleted = false
      registration.entity.restore(registration)
    }
    if !mergedModels.isEmpty {
      // A merged model's unsaved changes are undone as its holder's are.
      for entry in mergedModels { entry.merged.entity.restore(entry.merged) }
      copyHoldersToMerged()
    }
    refaultRelationships()
  }

  /// Forgets every model: unsaved work is discarded (as by ``rollback()``) and the registered
  /// models are no longer tracked, nor returned by later fetches (those that hold them keep
  /// them as detached values, whose relationships cannot be read: a read traps, saying so).
  /// The connection stays open. Use it between independent units of
  /// work on a long-lived context, such as a server's requests, so that the identity map does
  /// not grow with every row ever read. O(registered models).
  public func reset() {
    rollback()
    let detached = ContextReference.reset(of: container.storeIdentifier)
    for registration in savedRegistrations where registration.entity.attachesModels {
      registration.entity.detachAtReset(registration.model, reference: detached)
    }
    for entry in mergedModels where entry.merged.entity.attachesModels {
      entry.merged.entity.detachAtReset(entry.merged.model, reference: detached)
    }
    mergedModels = []
    rowTables = [:]
    objectIndex = nil
    pendingInserts = []
    pendingRowDeletes = [:]
  }

  /// Runs `block`, then saves. If `block` throws, its unsaved changes are rolled back and the
  /// error is rethrown; if saving throws, nothing was written.
  public func transaction(block: () throws -> Void) throws {
    do {
      try block()
    } catch {
      rollback()
      throw error
    }
    try save()
  }

  /// Runs `body` holding the store's write lock, then saves what it changed, all in one
  /// transaction: what `body` fetches is the latest committed state, and no other connection,
  /// process or server can commit between those reads and the save. The first ``save()`` in
  /// `body` (or the one after it) commits; a later save in `body` is a transaction of its
  /// own. If `body` throws, its unsaved changes are rolled back and nothing is written.
  ///
  /// This is the read-check-write of a conditional update (compare a version, then change
  /// only what the caller named) or a delete that must know whether the row was still there.
  /// Other writers wait for the lock meanwhile (SQLite's busy timeout, PostgreSQL's advisory
  /// lock), so keep `body` short. Cost: a `BEGIN` that takes the write lock, `body`, and the
  /// save. Nested calls run `body` in the outer one's transaction.
  ///
  /// - Throws: ``PersistenceError/Code/readOnly`` on a container that does not allow saving;
  ///   ``PersistenceError/Code/busy`` inside ``withSnapshot(_:)``; what `body` or the save
  ///   throws.
  public func performExclusively<Result>(_ body: () throws -> Result) throws -> Result {
    if holdsWriteLock { return try body() }
    guard container.configuration.allowsSave else {
      throw PersistenceError(
        code: .readOnly,
        message: "The container was opened with allowsSave: false; nothing was saved.")
    }
    let database = try connection()
    guard !database.isInTransaction else {
      throw PersistenceError(
        code: .busy,
        message: "performExclusively cannot start inside a read transaction (withSnapshot).")
    }
    try database.beginWriting()
    holdsWriteLock = true
    defer {
      if holdsWriteLock {
        holdsWriteLock = false
        if database.isInTransaction { try? database.rollback() }
      }
    }
    do {
      let result = try body()
      try save()
      return result
    } catch {
      rollback()
      throw error
    }
  }

  /// Whether `model` is inserted or changed in this context and not yet saved.
  public func insertedOrChanged<Model: PersistentModel>(_ model: Model) -> Bool {
    if !mergedModels.isEmpty { moveMergedChanges() }
    guard let registration = registration(for: model) else { return false }
    if registration.primaryKey == nil { return true }
    if !registration.entity.changedIndexes(registration).isEmpty { return true }
    // A many-to-many's array changed (either side: the other side's change is this one's).
    return registration.entity.joins.contains { relationship, _ in
      relationship.existingLink(model)?.linkChanges(key: { _ in nil }) != nil
    }
  }

  /// The identifier of a model's row, or nil when the model is not saved in this context.
  public func persistentIdentifier<Model: PersistentModel>(for model: Model)
    -> PersistentIdentifier?
  {
    guard let registration = registration(for: model),
      let key = registration.primaryKey
    else { return nil }
    return PersistentIdentifier(
      storeIdentifier: container.storeIdentifier, entityName: registration.entity.name,
      primaryKey: key)
  }

  /// Where a refused insert's model belongs, for the error ``save()`` throws.
  private func describeOrigin(_ reference: ContextReference, key: Int64?) -> String {
    let row = key.map { "row \($0)" } ?? "not saved"
    if reference.isDeletedModel {
      return "deleted from the store: a deleted model is not inserted again; make a new one"
    }
    if reference.context != nil { return "\(row), in another context" }
    if reference.snapshots != nil { return "\(row), a results observer's" }
    return "\(row) of the store it was loaded from"
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

/// A context as links reach it: one weak reference a context, made once, that the links of
/// its models hold strongly (see ``RelationshipObservation/contextReference``). It reads as nil
/// once the context is gone, as a weak reference of each link's would; a link that must then
/// load a fault traps, naming its model and relationship, rather than read as empty.
///
/// Or, for the snapshots a ``ResultsObserver`` hands out (``snapshots``): the source their
/// relationships are loaded from, kept as long as any of them lives.
final class ContextReference {
  weak var context: ModelContext?
  /// Set for the models of an observer: no context, but a source for their relationships.
  let snapshots: SnapshotSource?
  /// Why a link of this reference cannot load when its context is nil; nil when it need not
  /// (a deleted model's: it answers what is in memory).
  let whyNone: String?
  /// Whether the models that hold the reference were deleted from the store (and saved).
  let isDeletedModel: Bool
  /// The store of the models that hold the reference: what names their rows
  /// (``LinksOnFirstUse/persistentModelID``) after their context is gone.
  let storeIdentifier: UUID

  init(_ context: ModelContext) {
    self.context = context
    snapshots = nil
    isDeletedModel = false
    storeIdentifier = context.container.storeIdentifier
    whyNone =
      "its context is gone. Keep the context for as long as its models' relationships are read, or load them with the fetch (FetchDescriptor.relationshipKeyPathsForPrefetching)"
  }

  init(snapshots: SnapshotSource) {
    context = nil
    self.snapshots = snapshots
    storeIdentifier = snapshots.container.storeIdentifier
    whyNone = "its observer's store is gone"
    isDeletedModel = false
  }

  private init(storeIdentifier: UUID, whyNone: String?, isDeletedModel: Bool = false) {
    context = nil
    snapshots = nil
    self.storeIdentifier = storeIdentifier
    self.whyNone = whyNone
    self.isDeletedModel = isDeletedModel
  }

  /// What the models of a context reset (``ModelContext/reset()``) hold: they are detached
  /// values, whose relationships (made faults again by the reset's rollback) cannot be read.
  static func reset(of storeIdentifier: UUID) -> ContextReference {
    ContextReference(
      storeIdentifier: storeIdentifier,
      whyNone:
        "its context was reset (ModelContext.reset()), which detached the model; fetch it again to read its relationships"
    )
  }

  /// What a model deleted from the store holds: no context; its relationships answer what is
  /// in memory. Such a model is not inserted again (its row is gone, its identity with it).
  static func deleted(from storeIdentifier: UUID) -> ContextReference {
    ContextReference(storeIdentifier: storeIdentifier, whyNone: nil, isDeletedModel: true)
  }
}

/// Where the relationships of an observer's models are loaded from: the container, through a
/// context made for each load (its connection comes from the container's idle ones), under a
/// lock, since those models are read from any thread. The related models loaded become
/// snapshots of the same source: their relationships load the same way. No model is kept
/// here, so nothing keeps a cycle alive.
///
/// Cost: a relationship's first read is one query (as in a context), plus taking the lock;
/// later reads O(1) under the lock. What is read is the store as it is at that first read,
/// not as it was when the observer loaded the model.
final class SnapshotSource: Sendable {
  let container: ModelContainer
  /// Held while a snapshot's link is read or loaded.
  let lock = NSRecursiveLock()

  init(container: ModelContainer) { self.container = container }
}
