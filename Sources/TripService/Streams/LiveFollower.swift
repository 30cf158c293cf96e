import Foundation
import Persistence
import Synchronization
import TripPlanner

/// A live feed of the service (a distinct items or bounds stream query): told of each
/// committed transaction with its changed trips, read once for every feed.
protocol LiveFeed: AnyObject, Sendable {
  /// Applies a transaction; called on the follower's task, one transaction at a time, in
  /// order. `store` is the store the changed trips were read with (valid during the call).
  func process(
    _ transaction: DefaultHistoryTransaction, _ changes: [LiveFollower.Change], store: TripStore)
  /// The store can no longer be followed: end the feed's streams (their clients reconnect).
  func followerFailed()
}

/// Ends the streams of a feed that could not `could` ("read", "evaluate") a changed trip:
/// `forget` drops the feed from its owner, then each client gets one `error` event (no `id:`,
/// so that its `Last-Event-ID` stays the last event it got; data `{"message", "retry"}`) and
/// its stream ends. A client that reconnects gets a new feed. O(clients).
func endStreams(
  _ clients: [HTTPStream], after error: any Error, could: String, retry: String,
  forget: (@Sendable () -> Void)?
) {
  let message = (error as? PersistenceError)?.message ?? "\(error)"
  let event =
    "event: error\ndata: "
    + JSONValue.object([
      ("message", .string("This stream could not \(could) a changed trip: \(message)")),
      ("retry", .string(retry)),
    ]).rendered(pretty: false) + "\n\n"
  forget?()
  for client in clients {
    client.send(event)
    client.close()
  }
}

/// The one follower of the store's history behind every live stream of the service: one
/// history query per commit (from any process writing the store) and, on PostgreSQL, one
/// database session, however many feeds follow it. Each transaction's changed trips are read
/// once and handed to every feed, which evaluates its query against them in memory.
///
/// Cost per transaction: O(changes) history rows and one read by key per changed trip, then
/// O(changes) per feed (its query evaluated in Swift on each changed trip) and the feed's own
/// work (a set update; for bounds, O(log n) per changed trip in its cover).
final class LiveFollower: Sendable {
  /// A changed trip as the feeds see it.
  final class Change {
    /// The trip's row key.
    let key: Int64
    /// Insert, update or delete.
    let kind: HistoryChange.Kind
    /// The trip now, for an insert or update (nil when it was deleted since).
    let trip: Trip?
    /// For a delete, the trip's id (its tombstone's).
    let deletedID: UUID?
    private var rendered: String?

    init(key: Int64, kind: HistoryChange.Kind, trip: Trip?, deletedID: UUID?) {
      self.key = key
      self.kind = kind
      self.trip = trip
      self.deletedID = deletedID
    }

    /// The trip as a GeoJSON feature with its plan (as items pages write it), rendered once
    /// for all feeds.
    func feature(_ store: TripStore) throws -> String {
      if let rendered { return rendered }
      guard let trip else { return "null" }
      // The plan read as values (a failure is thrown; no model's read traps).
      let record = try store.withPlans([store.context.record(of: trip)])[0]
      let text = TripGeoJSON.feature(record).rendered(pretty: false)
      rendered = text
      return text
    }
  }

  private struct State {
    var feeds: [ObjectIdentifier: any LiveFeed] = [:]
    var task: Task<Void, Never>?
    /// The newest transaction whose feeds were picked by `deliver` (nil before the first):
    /// a feed made from an older token catches up to it.
    var picked: DefaultHistoryToken?
  }
  private let state = Mutex(State())
  private let pool: StorePool

  init(pool: StorePool) { self.pool = pool }

  /// How many feeds follow now.
  var feedCount: Int { state.withLock { $0.feeds.count } }

  /// Makes a feed from the store as it is at a token (`make` reads the feed's initial state in
  /// one read transaction with the token) and follows it from there: nothing committed after
  /// the token is missed, nothing before it is delivered. Starts following the store with the
  /// first feed.
  ///
  /// `make` reads outside the follower's lock (O(trips its query matches), values, not
  /// models), so deliveries to the other feeds go on meanwhile. The transactions delivered
  /// during that read are then read again from history for the new feed alone, outside the
  /// lock that `deliver` takes to pick its feeds (O(those transactions' changes), usually
  /// none), until a look under that lock finds nothing picked since; the feed joins in that
  /// same turn of the lock, so that it neither misses nor repeats one. Nothing under the lock
  /// reads the store. Lock order: this follower, then a feed's own state; a feed table's lock
  /// is never held here.
  func subscribe<Feed: LiveFeed>(_ make: (TripStore, DefaultHistoryToken) throws -> Feed) throws
    -> Feed
  {
    let (feed, token) = try pool.withStore(author: "service") { store in
      try store.context.withSnapshot {
        let token = try store.context.currentHistoryToken()
        return (try make(store, token), token)
      }
    }
    // Catch up outside the lock on what `deliver` picked meanwhile, until nothing new was
    // picked; then join the feeds, in the same turn of the lock as that last look.
    var caughtUp = token
    while let picked = state.withLock({ state -> DefaultHistoryToken? in
      if let picked = state.picked, picked > caughtUp { return picked }
      state.feeds[ObjectIdentifier(feed)] = feed
      if state.task == nil {
        state.task = start(after: caughtUp)
        state.picked = nil
      }
      return nil
    }) {
      try pool.withStore(author: "service") { store in
        let missed = try store.context.fetchHistory(
          HistoryDescriptor(after: caughtUp, modelTypes: Self.followedTypes))
        for transaction in missed where transaction.token <= picked {
          feed.process(transaction, try Self.tripChanges(transaction, store: store), store: store)
        }
      }
      caughtUp = picked
    }
    return feed
  }

  /// Stops telling `feed`; the last feed stops the following.
  func unsubscribe(_ feed: any LiveFeed) {
    let task = state.withLock { state -> Task<Void, Never>? in
      state.feeds[ObjectIdentifier(feed)] = nil
      guard state.feeds.isEmpty else { return nil }
      defer { state.task = nil }
      return state.task
    }
    task?.cancel()
  }

  /// Stops following and forgets every feed.
  func stop() {
    let task = state.withLock { state -> Task<Void, Never>? in
      state.feeds = [:]
      defer { state.task = nil }
      return state.task
    }
    task?.cancel()
  }

  private func start(after token: DefaultHistoryToken) -> Task<Void, Never> {
    // Started by a request, it outlives it: it must not inherit the request's deadline (a
    // task-local value a new task copies), which would stop every read of the follower once
    // the request's client went or its time passed.
    WorkDeadline.$current.withValue(nil) { follow(after: token) }
  }

  private func follow(after token: DefaultHistoryToken) -> Task<Void, Never> {
    let updates = pool.container.historyUpdates(
      HistoryDescriptor(after: token, modelTypes: Self.followedTypes))
    return Task { [weak self] in
      do {
        for try await transaction in updates {
          guard let self, !Task.isCancelled else { return }
          try self.deliver(transaction)
        }
      } catch {
        self?.fail()
      }
    }
  }

  private func deliver(_ transaction: DefaultHistoryTransaction) throws {
    let feeds = state.withLock { state -> [any LiveFeed] in
      state.picked = transaction.token
      return Array(state.feeds.values)
    }
    guard !feeds.isEmpty else { return }
    try pool.withStore(author: "service") { store in
      let changes = try Self.tripChanges(transaction, store: store)
      for feed in feeds { feed.process(transaction, changes, store: store) }
    }
  }

  /// What the streams follow: trips, and their plans (a change to a trip's bucket list or
  /// stay is an update of the trip, whose feature carries its plan).
  static let followedTypes = Trip.modelTypes

  /// A transaction's changes as the trips it changed: each trip's own change, then, once
  /// each, every trip whose plan changed and whose own row did not, as an update (none for a
  /// trip gone since). Cost: O(changes) reads by key, and for each plan row its trip (by its
  /// link, or by the key its tombstone kept).
  static func tripChanges(_ transaction: DefaultHistoryTransaction, store: TripStore) throws
    -> [Change]
  {
    let tripEntity = Trip.schema.name
    let direct = Set(
      transaction.changes.lazy.filter { $0.changedPersistentIdentifier.entityName == tripEntity }
        .map(\.changedPersistentIdentifier.primaryKey))
    var changes: [Change] = []
    changes.reserveCapacity(transaction.changes.count)
    var planTrips: [Int64] = []
    var listed: Set<Int64> = []
    /// Notes a trip whose plan changed, once, unless its own row changed too.
    func noteTrip(_ key: Int64?) {
      if let key, !direct.contains(key), listed.insert(key).inserted { planTrips.append(key) }
    }
    for change in transaction.changes {
      let identifier = change.changedPersistentIdentifier
      let key = identifier.primaryKey
      switch identifier.entityName {
      case tripEntity:
        if change.kind == .delete {
          changes.append(
            Change(
              key: key, kind: .delete, trip: nil,
              deletedID: change.tombstone(as: Trip.self)?[\.id] as? UUID))
        } else {
          let trip = try store.context.model(for: identifier, as: Trip.self)
          changes.append(Change(key: key, kind: change.kind, trip: trip, deletedID: nil))
        }
        continue
      case BucketListItem.schema.name:
        noteTrip(try tripKey(of: change, \BucketListItem.trip, store: store))
      case LivingAccommodation.schema.name:
        noteTrip(try tripKey(of: change, \LivingAccommodation.trip, store: store))
      default:
        continue
      }
    }
    for key in planTrips {
      let identifier = PersistentIdentifier(
        storeIdentifier: store.container.storeIdentifier, entityName: tripEntity, primaryKey: key)
      guard let trip = try store.context.model(for: identifier, as: Trip.self) else { continue }
      changes.append(Change(key: key, kind: .update, trip: trip, deletedID: nil))
    }
    return changes
  }

  /// The key of the trip a plan row's `change` belongs to: by its link for an insert or
  /// update (nil when the row is gone since), by its tombstone for a delete.
  private static func tripKey<Row: PersistentModel>(
    of change: HistoryChange, _ link: KeyPath<Row, Trip?>, store: TripStore
  ) throws -> Int64? {
    if change.kind == .delete { return change.tombstone(as: Row.self)?.key(of: link) }
    guard let row = try store.context.model(for: change.changedPersistentIdentifier, as: Row.self),
      let trip = row[keyPath: link]
    else { return nil }
    return store.context.persistentIdentifier(for: trip)?.primaryKey
  }

  /// The store cannot be followed: every feed ends its streams and is forgotten; the next
  /// stream starts a new follower.
  private func fail() {
    let feeds = state.withLock { state -> [any LiveFeed] in
      defer {
        state.feeds = [:]
        state.task = nil
      }
      return Array(state.feeds.values)
    }
    for feed in feeds { feed.followerFailed() }
  }
}
