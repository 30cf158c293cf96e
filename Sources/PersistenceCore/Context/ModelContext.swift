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

  /// Every saved registered model is in its entity's row table; unsaved ones are in
  /// `pendingInserts`. This index by model is built only when a call needs it (see
  /// `registration(for:)`), so that a fetch registers each row in one map, not two. Touched
  /// per fetched row, by the context's one thread and never reentrantly: no dynamic
  /// exclusivity check (about 120 instructions a row).
  @exclusivity(unchecked) var objectIndex: [ObjectIdentifier: Registration]?
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
      relationship.existingLink(model)?.hasLinkChanges == true
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

}
