import Dispatch
import Foundation
import Observation
import Synchronization

/// Fetches models and keeps following the store: SwiftData's `ResultsObserver`, usable
/// anywhere (no UI), with Swift Observation.
///
/// It fetches in `init` (which throws) and updates ``results`` and ``sections`` after every
/// commit that touches its model type: from any context of the container, and from other
/// processes writing the same file (through persistent history). No commit, no update; a
/// commit that changes nothing the observer shows, no new value.
///
/// ## Cost of an update
/// A commit says which rows it changed (across processes, history says it). The observer
/// loads just those rows, with the descriptor's predicate, and patches the sorted results in
/// place: O(k · (log n + 512 + n/512)) for k changed rows and n results (binary search, then a
/// chunk of at most 512 models), plus O(log s + section size) per row for s sections. It never
/// refetches the whole query, except when the descriptor has a `fetchLimit` or `fetchOffset`
/// (a window cannot be patched from the changed rows alone) or when history it needed was
/// deleted: then it refetches, O(n).
///
/// A predicate or a sort that reads through a relationship (`$0.trip?.destination == "Kyoto"`,
/// `SortDescriptor(\.trip?.name)`) makes the observer depend on the related tables too: a
/// commit that changes one of them refetches, O(n), since any model's match or place may have
/// changed. A sort through a relationship refetches on every commit to the model's table too
/// (placing a changed row among the observer's snapshots would load a relationship per model
/// compared, a query each), and so does
/// a descriptor that reads relationships and that Swift must finish (PostgreSQL cannot run
/// `localizedStandardContains`, say): which rows match, and their order, then come from a fetch
/// in a context of the container, O(n) per commit.
///
/// ## Models
/// The observer's models are its own snapshots, loaded by a connection of its own and never
/// changed afterwards: a changed row arrives as a new instance. Treat them as read-only values;
/// to edit one, fetch it into your context with ``identifier(for:)``. They belong to no
/// context; their relationships load from the container on first read (one query each, from
/// any thread, under a lock the observer's models share), as the store is at that read, and
/// the related models are snapshots too. A load that fails traps, naming the model and the
/// relationship.
///
/// Updates are applied on a serial queue of the observer's, shortly after the commit; use
/// ``waitForPendingUpdates()`` to wait for them.
public final class ResultsObserver<Model: PersistentModel>: Observable {
  /// One applied update: the models that left the results and those that entered (a changed
  /// row leaves as its old snapshot and enters as its new one).
  public struct Change {
    /// The ``ResultsObserver/version`` this change produced.
    public var version: Int
    /// Models no longer in the results.
    public var removed: [Model]
    /// Models now in the results.
    public var inserted: [Model]
  }

  /// What readers see, replaced whole under the lock.
  fileprivate struct State {
    var results = ObservedResults<Model>()
    var sections: [ResultsSection<String, Model>] = []
    var version = 0
    var log: [Change] = []
    var lastError: PersistenceError?
    /// Set while the store monitor cannot read other processes' commits.
    var monitorFailure: PersistenceError?
  }

  /// The models by row key, touched only on `queue` (and in `init`): kept out of `State` so
  /// that an update never copies them (a copy would cost O(n) per change).
  final class Keys {
    var byKey: [Int64: Model] = [:]
  }

  private let registrar = ObservationRegistrar()
  private let state = Mutex<State>(State())
  private let queue = DispatchQueue(label: "persistence.results-observer")
  private let container: ModelContainer
  private let descriptor: FetchDescriptor<Model>
  private let sectionKeyPath: (KeyPath<Model, String> & Sendable)?
  private let loader: UncheckedSendable<Loader>
  private let index = UncheckedSendable(Keys())
  /// The row key of each model: read by ``identifier(for:)`` from any thread and by the
  /// updates' ordering on `queue`, changed only on `queue`. One dictionary, never shared: a
  /// second one sharing its storage made the first change after each load copy all n entries.
  private let keysByModel = Mutex<[ObjectIdentifier: Int64]>([:])
  private var subscription: ChangeBroadcaster.Subscription?
  private var monitorLease: ChangeBroadcaster.Subscription?
  static var logLimit: Int { 128 }

  /// Fetches the models matching `descriptor` (grouped by `sectionBy`, if given) and follows
  /// the store of `container`.
  ///
  /// - Throws: ``PersistenceError`` when the fetch fails or the predicate cannot be translated.
  public init(
    _ descriptor: FetchDescriptor<Model> = FetchDescriptor(),
    sectionBy: (KeyPath<Model, String> & Sendable)? = nil, container: ModelContainer
  ) throws {
    self.container = container
    self.descriptor = descriptor
    self.sectionKeyPath = sectionBy
    _ = try container.entity(for: Model.self)
    loader = UncheckedSendable(
      try Loader(container: container, descriptor: descriptor, sectionBy: sectionBy))
    // Subscribe first, then fetch: a commit in between is applied again, harmlessly.
    subscription = container.broadcaster.subscribe { [weak self] change in
      self?.enqueue(change)
    }
    if container.configuration.storeURL != nil {
      monitorLease = try container.broadcaster.leaseMonitor(for: container)
    }
    try queue.sync { try self.reload(publish: false) }
  }

  /// Creates an observer on the container of `modelContext`.
  public convenience init(
    _ descriptor: FetchDescriptor<Model> = FetchDescriptor(),
    sectionBy: (KeyPath<Model, String> & Sendable)? = nil, modelContext: ModelContext
  ) throws {
    try self.init(descriptor, sectionBy: sectionBy, container: modelContext.container)
  }

  deinit {
    subscription?.cancel()
    monitorLease?.cancel()
  }

  /// The models, in the descriptor's order (section key first when sectioned).
  public var results: ObservedResults<Model> {
    registrar.access(self, keyPath: \.results)
    return state.withLock { $0.results }
  }

  /// The sections, in key order, when the observer was made with `sectionBy`; else empty.
  public var sections: [ResultsSection<String, Model>] {
    registrar.access(self, keyPath: \.sections)
    return state.withLock { $0.sections }
  }

  /// Why the observer could not follow the store, or nil while it can.
  ///
  /// When an update fails (the store was damaged or made unreadable, another process's changes
  /// cannot be read), ``results`` keep their last good value and this holds the error; it is
  /// cleared by the next update that succeeds. Observable, like ``results``.
  public var lastError: PersistenceError? {
    registrar.access(self, keyPath: \.lastError)
    return state.withLock { $0.lastError }
  }

  /// Counts the updates applied since the initial fetch (0).
  public var version: Int {
    registrar.access(self, keyPath: \.version)
    return state.withLock { $0.version }
  }

  /// The updates after `version`, oldest first; nil when they are no longer kept (the last
  /// 128 are), in which case start again from ``results``.
  public func changes(after version: Int) -> [Change]? {
    state.withLock { state in
      if version == state.version { return [] }
      guard let first = state.log.first, first.version <= version + 1 else { return nil }
      return state.log.filter { $0.version > version }
    }
  }

  /// The store identifier of one of the observer's models.
  public func identifier(for model: Model) -> PersistentIdentifier? {
    keysByModel.withLock { $0[ObjectIdentifier(model)] }.map {
      PersistentIdentifier(
        storeIdentifier: container.storeIdentifier, entityName: Model.modelSchema.name,
        primaryKey: $0)
    }
  }

  /// Blocks until every commit announced so far has been applied.
  public func waitForPendingUpdates() {
    queue.sync {}
  }

  // MARK: Updating (on `queue`)

  /// Changes announced but not applied yet; drained in one batch, so that a burst of commits
  /// costs one load of the rows they touched rather than one per commit.
  private let pending = Mutex<(changes: [StoreChange], scheduled: Bool)>(([], false))

  private func enqueue(_ change: StoreChange) {
    let schedule = pending.withLock { state -> Bool in
      state.changes.append(change)
      defer { state.scheduled = true }
      return !state.scheduled
    }
    if schedule { queue.async { [weak self] in self?.drain() } }
  }

  private func drain() {
    let changes = pending.withLock { state -> [StoreChange] in
      defer {
        state.changes = []
        state.scheduled = false
      }
      return state.changes
    }
    // Failures and recoveries of the store monitor: the last one says where things stand.
    if let status = changes.last(where: { $0.failure != nil || $0.recovered }) {
      if let failure = status.failure {
        state.withLock { $0.monitorFailure = failure }
        setLastError(failure)
      } else {
        // Reading works again: other processes' commits may have been missed meanwhile, so
        // refetch.
        state.withLock { $0.monitorFailure = nil }
        do { try reload(publish: true) } catch { setLastError(error) }
      }
    }
    let commits = changes.filter { $0.failure == nil && !$0.recovered }
    guard var merged = commits.first else { return }
    for change in commits.dropFirst() {
      merged.requiresRefetch = merged.requiresRefetch || change.requiresRefetch
      merged.token = change.token
      for (name, entity) in change.entities {
        var combined = merged.entities[name] ?? StoreChange.EntityChanges()
        combined.inserted.formUnion(entity.inserted)
        combined.updated.merge(entity.updated) { $0.union($1) }
        combined.deleted.formUnion(entity.deleted)
        merged.entities[name] = combined
      }
    }
    apply(merged)
  }

  private func apply(_ change: StoreChange) {
    let followed = loader.value.followedTables
    if !followed.isEmpty, change.entities.keys.contains(where: followed.contains) {
      // A related row changed: which models match may have changed anywhere.
      do { try reload(publish: true) } catch { setLastError(error) }
      return
    }
    if change.requiresRefetch || descriptor.fetchLimit != nil || descriptor.fetchOffset != nil
      || loader.value.sortsThroughRelationships || loader.value.finishesThroughRelationships
    {
      if change.requiresRefetch || change.entities[Model.modelSchema.name] != nil {
        do { try reload(publish: true) } catch { setLastError(error) }
      }
      return
    }
    guard let changes = change.entities[Model.modelSchema.name] else { return }
    let candidates = changes.inserted.union(changes.updated.keys)
    let loaded: [Int64: Model]
    do {
      loaded = try loader.value.load(keys: candidates).filter {
        !loader.value.isNarrowed || (try? descriptor.matches($0.value)) == true
      }
    } catch {
      // The rows could not be loaded: a full refetch, and if that fails too, the error.
      do { try reload(publish: true) } catch { setLastError(error) }
      return
    }
    clearLastError()
    let keys = index.value
    guard
      candidates.union(changes.deleted).contains(where: {
        keys.byKey[$0] != nil || loaded[$0] != nil
      })
    else { return }
    var next = state.withLock { $0 }
    var removed: [Model] = []
    var inserted: [Model] = []
    let affected = candidates.union(changes.deleted).sorted()
    for key in affected {
      if let old = keys.byKey[key] {
        remove(old, from: &next)
        keys.byKey[key] = nil
        keysByModel.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(old)) }
        removed.append(old)
      }
      if let model = loaded[key] {
        keysByModel.withLock { $0[ObjectIdentifier(model)] = key }
        keys.byKey[key] = model
        insert(model, key: key, into: &next)
        inserted.append(model)
      }
    }
    publish(&next, removed: removed, inserted: inserted)
  }

  /// Publishes `error` as ``lastError`` (results keep their last good value).
  private func setLastError(_ error: any Error) {
    let failure =
      error as? PersistenceError ?? PersistenceError(code: .engine, message: "\(error)")
    let changed = state.withLock { state -> Bool in
      guard state.lastError?.description != failure.description else { return false }
      state.lastError = failure
      return true
    }
    if changed { registrar.withMutation(of: self, keyPath: \.lastError) {} }
  }

  /// Clears ``lastError`` after an update that succeeded (unless the store monitor still
  /// cannot follow other processes).
  private func clearLastError() {
    let changed = state.withLock { state -> Bool in
      guard state.lastError != nil, state.monitorFailure == nil else { return false }
      state.lastError = nil
      return true
    }
    if changed { registrar.withMutation(of: self, keyPath: \.lastError) {} }
  }

  private func reload(publish shouldPublish: Bool) throws {
    var (models, keys): ([Model], [Int64])
    if loader.value.finishesThroughRelationships {
      (models, keys) = try loadThroughContext()
    } else {
      (models, keys) = try loader.value.loadAll()
      if loader.value.finishesInSwift { (models, keys) = finishInSwift(models, keys) }
    }
    if shouldPublish { clearLastError() }
    var next = state.withLock { $0 }
    let removed = next.results.array
    next.results = ObservedResults(models)
    let index = self.index.value
    index.byKey = [:]
    var byModel: [ObjectIdentifier: Int64] = [:]
    byModel.reserveCapacity(models.count)
    for (model, key) in zip(models, keys) {
      byModel[ObjectIdentifier(model)] = key
      index.byKey[key] = model
    }
    keysByModel.withLock { $0 = byModel }
    next.sections = []
    if let sectionKeyPath {
      for model in models {
        let id = model[keyPath: sectionKeyPath]
        if let last = next.sections.indices.last, next.sections[last].id == id {
          next.sections[last].append(model)
        } else {
          next.sections.append(ResultsSection(id: id, elements: [model]))
        }
      }
    }
    if shouldPublish {
      publish(&next, removed: removed, inserted: models)
    } else {
      state.withLock { $0 = next }
    }
  }

  private func publish(_ next: inout State, removed: [Model], inserted: [Model]) {
    next.version += 1
    next.log.append(Change(version: next.version, removed: removed, inserted: inserted))
    if next.log.count > Self.logLimit { next.log.removeFirst(next.log.count - Self.logLimit) }
    let value = next
    // The new state is in place before observers hear of it, so whatever they read when told
    // (even at willSet) is the new value.
    state.withLock { $0 = value }
    registrar.withMutation(of: self, keyPath: \.version) {}
    registrar.withMutation(of: self, keyPath: \.results) {}
    registrar.withMutation(of: self, keyPath: \.sections) {}
  }

  /// The rows of a query the engine could not run whole (see `Query.finishesInSwift`): those
  /// that match the predicate, in the observer's order, offset and limit applied. O(m log m)
  /// for m candidate rows.
  private func finishInSwift(_ models: [Model], _ keys: [Int64]) -> ([Model], [Int64]) {
    var rows = zip(models, keys).filter { (try? descriptor.matches($0.0)) == true }
    rows.sort { precedes($0.0, $0.1, $1.0, $1.1) }
    let offset = max(descriptor.fetchOffset ?? 0, 0)
    let limit = descriptor.fetchLimit.flatMap { $0 >= 0 ? $0 : nil } ?? Int.max
    let page = rows.dropFirst(offset).prefix(limit)
    return (page.map(\.0), page.map(\.1))
  }

  /// The results of a descriptor that Swift finishes through relationships (see
  /// `Loader.finishesThroughRelationships`): which rows match, and their order, from a fetch
  /// in a context of the container (whose models follow their relationships), then those
  /// rows' snapshots. O(n) plus the related rows the predicate reads.
  private func loadThroughContext() throws -> ([Model], [Int64]) {
    let order = try ModelContext(container).fetchIdentifiers(descriptor).map(\.primaryKey)
    let loaded: [Int64: Model] = try loader.value.load(keys: Set(order))
    var rows = order.compactMap { key in loaded[key].map { ($0, key) } }
    if let sectionKeyPath {
      // Sections first, the fetch's order within each (the sort is stable).
      rows.sort { $0.0[keyPath: sectionKeyPath] < $1.0[keyPath: sectionKeyPath] }
    }
    return (rows.map(\.0), rows.map(\.1))
  }

  /// Whether `a` comes before `b`: section key, then the sort descriptors, then the key.
  private func precedes(_ a: Model, _ aKey: Int64, _ b: Model, _ bKey: Int64) -> Bool {
    if let sectionKeyPath {
      let x = a[keyPath: sectionKeyPath]
      let y = b[keyPath: sectionKeyPath]
      if x != y { return x < y }
    }
    return descriptor.precedes(a, aKey, b, bKey)
  }

  /// The first position in `list` whose model does not come before `model`.
  private func lowerBound(
    _ model: Model, _ key: Int64, in list: some RandomAccessCollection<Model>,
    keys: [ObjectIdentifier: Int64]
  ) -> Int {
    var low = 0
    var high = list.count
    while low < high {
      let middle = (low + high) / 2
      let element = list[list.index(list.startIndex, offsetBy: middle)]
      if precedes(element, keys[ObjectIdentifier(element)] ?? 0, model, key) {
        low = middle + 1
      } else {
        high = middle
      }
    }
    return low
  }

  /// Calls `body` with the row keys by model, under their lock (so the dictionary is read in
  /// place, never copied).
  private func withKeys(_ body: ([ObjectIdentifier: Int64]) -> Int) -> Int {
    keysByModel.withLock { body($0) }
  }

  private func insert(_ model: Model, key: Int64, into next: inout State) {
    let position = withKeys { lowerBound(model, key, in: next.results, keys: $0) }
    next.results.insert(model, at: position)
    guard let sectionKeyPath else { return }
    let id = model[keyPath: sectionKeyPath]
    let index = sectionIndex(id, in: next.sections)
    if index < next.sections.count && next.sections[index].id == id {
      let within = withKeys { lowerBound(model, key, in: next.sections[index], keys: $0) }
      next.sections[index].insert(model, at: within)
    } else {
      next.sections.insert(ResultsSection(id: id, elements: [model]), at: index)
    }
  }

  private func remove(_ model: Model, from next: inout State) {
    let key = keysByModel.withLock { $0[ObjectIdentifier(model)] } ?? 0
    let position = withKeys { lowerBound(model, key, in: next.results, keys: $0) }
    if position < next.results.count && next.results[position] === model {
      next.results.remove(at: position)
    }
    guard let sectionKeyPath else { return }
    let id = model[keyPath: sectionKeyPath]
    let index = sectionIndex(id, in: next.sections)
    guard index < next.sections.count && next.sections[index].id == id else { return }
    let within = withKeys { lowerBound(model, key, in: next.sections[index], keys: $0) }
    if within < next.sections[index].count && next.sections[index][within] === model {
      next.sections[index].remove(at: within)
      if next.sections[index].isEmpty { next.sections.remove(at: index) }
    }
  }

  /// The position of the section `id`, or where it would go (code-point order).
  private func sectionIndex(_ id: String, in sections: [ResultsSection<String, Model>]) -> Int {
    var low = 0
    var high = sections.count
    while low < high {
      let middle = (low + high) / 2
      if sections[middle].id < id { low = middle + 1 } else { high = middle }
    }
    return low
  }
}

// SAFETY: all mutable state is in `state` (a Mutex) and the loader, which only `queue` touches. The
// models it hands out are never mutated after they are published.
extension ResultsObserver: @unchecked Sendable {}

// SAFETY: only ever read and replaced whole inside `ResultsObserver.state`'s mutex; the models in
// it are immutable snapshots.
extension ResultsObserver.State: @unchecked Sendable {}

/// Loads an observer's rows on a connection of its own, as new instances (never registered in
/// a context, so never changed in place).
final class Loader {
  let database: any StoreConnection
  private let loadRow: (any StoreRow) throws -> AnyObject
  private let allQuery: Query
  private let condition: SQLFragment?
  /// Whether the rows of ``loadAll()`` need Swift to finish them (see `Query.finishesInSwift`).
  var finishesInSwift: Bool { allQuery.finishesInSwift }
  /// Whether Swift must finish the query (an engine that cannot run a function of the
  /// predicate, or a sort) and the descriptor reads relationships: Swift reading them on the
  /// observer's snapshots would load them a query per model, so matching and order come from
  /// a context's fetch, and every commit refetches.
  var finishesThroughRelationships: Bool {
    (finishesInSwift || isNarrowed) && !followedTables.isEmpty
  }
  /// Whether rows loaded by key need the predicate evaluated in Swift (the engine could not run
  /// all of it).
  var isNarrowed: Bool { condition?.isNarrowed ?? false }
  private let table: String
  private let columns: String
  /// ` AND` the rows of a subclass (``ModelInheritance``), or empty.
  private let typeFilter: String
  /// The tables the predicate reads through relationships (see
  /// `PredicateTranslator.followedTables`).
  let followedTables: Set<String>
  /// Whether a sort reads through a relationship: placing a changed row among the snapshots
  /// would load a relationship per model compared, so every change refetches.
  let sortsThroughRelationships: Bool

  init<Model: PersistentModel>(
    container: ModelContainer, descriptor: FetchDescriptor<Model>,
    sectionBy: (KeyPath<Model, String> & Sendable)?
  ) throws {
    // A small page cache: the connection reads changed rows by key, and every observer has
    // one, so a hundred of them must not each grow to the store's full cache.
    database = try container.makeConnection(cacheSizeKiB: 2048)
    // The container's entity: in a table that holds subclasses, it selects every column and
    // reads each row as its own class.
    let operations = try container.operations(for: Model.self)
    let schema = operations.schema
    var sectionColumn: String?
    if let sectionBy {
      guard let attribute = schema.attribute(for: sectionBy), !attribute.isCodable else {
        throw PersistenceError(
          code: .unsupportedPredicate,
          message:
            "sectionBy needs a stored String attribute of \(Model.self); \(schema.describe(sectionBy)) is not one."
        )
      }
      sectionColumn = attribute.name
    }
    allQuery = try Query(
      descriptor, schema: schema, sectionColumn: sectionColumn, database: database)
    condition = try descriptor.whereClause(
      schema: schema, narrowing: !database.evaluatesSwiftFunctions)
    table = schema.quotedName
    typeFilter = schema.inheritance.map { " AND \($0.condition)" } ?? ""
    columns = schema.selectList
    followedTables = try PredicateTranslator.followedTables(descriptor, schema: schema)
    sortsThroughRelationships = !PredicateTranslator.relatedSorts(
      descriptor, schema: schema
    ).isEmpty
    let cache = LoadCache()
    // The models' relationships load from the container (see `SnapshotSource`).
    let snapshots =
      operations.attachesModels
      ? ContextReference(snapshots: SnapshotSource(container: container)) : nil
    loadRow = { statement in
      do {
        // Each row as its own class, in a table that holds subclasses.
        let (model, made) = try operations.makeModelOfRowClass(from: statement, cache: cache)
        if let snapshots {
          made.attachLoaded(model, key: statement.int64(at: 0), reference: snapshots)
        }
        return model
      } catch let error as PersistenceError {
        throw error.naming(row: describeStoredRow(statement, entity: operations))
      }
    }
  }

  func loadAll<Model: PersistentModel>() throws -> ([Model], [Int64]) {
    let statement = try database.cachedStatement(allQuery.sql)
    statement.returnsTableColumns()
    statement.bindValues(allQuery.bindings)
    defer { statement.reset() }
    var models: [Model] = []
    var keys: [Int64] = []
    while try statement.step() {
      keys.append(statement.int64(at: 0))
      models.append(unsafeDowncast(try loadRow(statement), to: Model.self))
    }
    return (models, keys)
  }

  /// The rows among `keys` that match the predicate, by key. Reads in one snapshot.
  func load<Model: PersistentModel>(keys: Set<Int64>) throws -> [Int64: Model] {
    var result: [Int64: Model] = [:]
    let sorted = keys.sorted()
    try database.beginReading()
    defer { try? database.commit() }
    try KeyBatches.forEachRow(
      keys: sorted, database: database, select: "SELECT \(columns) FROM \(table) WHERE \"_pk\"",
      filter: typeFilter + (condition.map { " AND (\($0.sql))" } ?? ""),
      bindings: condition?.bindings.values ?? []
    ) { row in
      result[row.int64(at: 0)] = unsafeDowncast(try loadRow(row), to: Model.self)
    }
    return result
  }
}
