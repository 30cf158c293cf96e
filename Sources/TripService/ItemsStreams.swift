import Dispatch
import Foundation
import Geo
import Persistence
import Synchronization
import TripPlanner

/// The live item streams (`GET /collections/trips/items/stream`): each committed change to
/// the trips of a query, as Server-Sent Events `insert` (a feature that now matches: new, or
/// moved into the filter), `update` (a matching trip changed) and `delete` (`{"id"}`: deleted,
/// or moved out of the filter), each with `id:` the history token of its transaction.
///
/// One feed per distinct query (at most ``StreamSettings/maximumFeeds``, counting those in
/// their grace period; a new query past it is 503 with `Retry-After`) keeps the set of
/// matching trips (about 40 bytes a trip), so that moves into and out of the filter are told
/// apart. Every feed, items and bounds, is told by the service's one ``LiveFollower`` of the
/// store's history (from any process): per transaction, one lookup per changed trip for all
/// feeds, then O(changes) per feed whatever the number of clients; each feature is rendered
/// once for all feeds and each event queued for every client of its feed.
///
/// A client that comes back with `Last-Event-ID` first gets the events it missed, then the
/// live ones, with nothing missed or repeated in between. A feed keeps the events of its last
/// ``logCapacity`` transactions and stays alive ``graceSeconds`` after its last client leaves,
/// so a client that reconnects (browsers retry after 2 s) gets exactly the events the others
/// got. Older tokens are replayed from history as well as can be known now (a trip that no
/// longer matches is sent as `delete`, one that matches as `insert` or `update` by what the
/// change was); a token whose history was pruned, of another store, or newer than the store's
/// history (a store restored from an older backup) gets one `reset` event with every matching
/// trip.
final class ItemsStreams: Sendable {
  /// What a feed follows: the trips of a query, or the stays of a filter.
  enum Subject: Sendable {
    case trips(FetchDescriptor<Trip>)
    case stays(StayFilter)
  }

  /// The stays a stays stream follows: in a box (west > east crosses the antimeridian, as
  /// ``TripStore/stays(in:ofTrip:offset:limit:)`` reads it) and of one trip, each when given.
  struct StayFilter: Sendable {
    var box: GeographicBox?
    var trip: UUID?

    func matches(latitude: Double, longitude: Double, tripID: UUID) -> Bool {
      if let trip, trip != tripID { return false }
      guard let box else { return true }
      guard latitude >= box.south, latitude <= box.north else { return false }
      return box.crossesAntimeridian
        ? longitude >= box.west || longitude <= box.east
        : longitude >= box.west && longitude <= box.east
    }
  }

  final class Feed: LiveFeed {
    let subject: Subject
    struct State {
      var matching: Set<Int64> = []
      /// For a stays feed: each matching stay by its trip's key, with its feature's text.
      var stays: [Int64: (id: UUID, text: String)] = [:]
      /// The token the feed started after, and the last one it processed.
      var start: HistoryToken
      var last: HistoryToken
      var clients: [ObjectIdentifier: HTTPStream] = [:]
      /// The events of the latest transactions, oldest first, and the newest token dropped
      /// from it (nil while nothing was).
      var log: [(token: HistoryToken, events: String)] = []
      var droppedThrough: HistoryToken?
      /// Set once a read of a changed trip failed: the feed ended its streams.
      var failed = false
    }
    let state: Mutex<State>
    /// Called when the follower fails: the owner forgets the feed.
    let onFailure = Mutex<(@Sendable () -> Void)?>(nil)

    init(
      subject: Subject, matching: Set<Int64>, stays: [Int64: (id: UUID, text: String)] = [:],
      last: HistoryToken
    ) {
      self.subject = subject
      state = Mutex(State(matching: matching, stays: stays, start: last, last: last))
    }

    /// Classifies each change with the feed's set of matching trips, then queues the events
    /// for every client. O(changes) plus the query's evaluation on each changed trip.
    ///
    /// A changed trip that cannot be read or evaluated ends the feed (see ``fail(_:_:)``):
    /// never an event that would say what the store does not (a `delete` for a trip whose
    /// read failed, an update without its plan).
    func process(
      _ transaction: HistoryTransaction, _ changes: [LiveFollower.Change], store: TripStore
    ) {
      let failure = state.withLock { state -> (any Error, [HTTPStream])? in
        guard !state.failed, transaction.token > state.last else { return nil }
        var events = ""
        do {
          switch subject {
          case .stays(let filter):
            for change in changes {
              events += try Self.stayEvents(
                change, filter, &state.stays, transaction.token, store)
            }
          case .trips(let descriptor):
            for change in changes {
              events += try Self.tripEvents(
                change, descriptor, &state.matching, transaction.token, store)
            }
          }
        } catch {
          state.failed = true
          defer { state.clients = [:] }
          return (error, Array(state.clients.values))
        }
        state.last = transaction.token
        guard !events.isEmpty else { return nil }
        state.log.append((transaction.token, events))
        if state.log.count > logCapacity {
          state.droppedThrough = state.log.removeFirst().token
        }
        for client in state.clients.values { client.send(events) }
        return nil
      }
      if let (error, clients) = failure { fail(error, clients) }
    }

    /// Ends the feed after a read failed: each client gets an `error` event (no `id:`, so
    /// that its `Last-Event-ID` stays the last event it got) and its stream ends; the feed is
    /// forgotten, so a client that reconnects gets a new one, and the events it missed from
    /// history. O(clients).
    private func fail(_ error: any Error, _ clients: [HTTPStream]) {
      endStreams(
        clients, after: error, could: "read",
        retry: "Reconnect with Last-Event-ID to get the missed events.",
        forget: onFailure.withLock { $0 })
    }

    /// The events of one changed trip for a trips feed: inserted or updated while it matches
    /// (moved in is an insert), deleted when it goes or moves out. O(1) besides the query's
    /// evaluation on the trip and its feature's rendering (once for all feeds). Throws what
    /// they throw.
    static func tripEvents(
      _ change: LiveFollower.Change, _ descriptor: FetchDescriptor<Trip>,
      _ matching: inout Set<Int64>, _ token: HistoryToken, _ store: TripStore
    ) throws -> String {
      let key = change.key
      if change.kind == .delete {
        guard matching.remove(key) != nil, let id = change.deletedID else { return "" }
        return ItemsStreams.event(token, "delete", deleted(id))
      }
      guard let trip = change.trip else { return "" }
      let was = matching.contains(key)
      if try descriptor.matches(trip) {
        let feature = try change.feature(store)
        matching.insert(key)
        return ItemsStreams.event(token, was ? "update" : "insert", text: feature)
      }
      guard was else { return "" }
      matching.remove(key)
      return ItemsStreams.event(token, "delete", deleted(trip.id))
    }

    /// The events of one changed trip for a stays feed: its stay inserted, updated or deleted
    /// as it enters, changes in or leaves the filter (a stay replaced by another is a delete
    /// and an insert). O(1) besides reading the trip's stay (a query unless loaded). Throws
    /// what that read throws.
    static func stayEvents(
      _ change: LiveFollower.Change, _ filter: StayFilter,
      _ stays: inout [Int64: (id: UUID, text: String)], _ token: HistoryToken, _ store: TripStore
    ) throws -> String {
      let old = stays[change.key]
      var new: (id: UUID, text: String)?
      if change.kind != .delete, let trip = change.trip {
        try store.context.prefetch([\.livingAccommodation], of: [trip])
      }
      if change.kind != .delete, let trip = change.trip, let stay = trip.livingAccommodation,
        filter.matches(latitude: stay.latitude, longitude: stay.longitude, tripID: trip.id)
      {
        try store.context.resolveFaults(CollectionOfOne(stay))
        new = (
          stay.id,
          FeaturesAPI.stayFeature(stay.record, tripID: trip.id).rendered(pretty: false)
        )
      }
      stays[change.key] = new
      switch (old, new) {
      case (nil, nil): return ""
      case (let old?, nil): return ItemsStreams.event(token, "delete", deleted(old.id))
      case (nil, let new?): return ItemsStreams.event(token, "insert", text: new.text)
      case (let old?, let new?):
        if old.id != new.id {
          return ItemsStreams.event(token, "delete", deleted(old.id))
            + ItemsStreams.event(token, "insert", text: new.text)
        }
        return old.text == new.text ? "" : ItemsStreams.event(token, "update", text: new.text)
      }
    }

    func followerFailed() {
      onFailure.withLock { $0 }?()
      for client in state.withLock({ Array($0.clients.values) }) { client.close() }
    }
  }

  private let feeds = Mutex<[String: Feed]>([:])
  /// Who started each query followed (``admitFeed(key:plain:client:followed:creators:settings:kind:)``),
  /// touched under `feeds`' lock.
  private let creators = Mutex<[String: String]>([:])
  private let pool: StorePool
  private let follower: LiveFollower
  /// Transactions whose events a feed keeps for clients that reconnect.
  static let logCapacity = 1_024
  /// Seconds a feed outlives its last client.
  static let graceSeconds = 30

  private let keepAlive = Mutex<StreamKeepAlive?>(nil)

  private let settings: StreamSettings

  init(pool: StorePool, follower: LiveFollower, settings: StreamSettings) {
    self.pool = pool
    self.follower = follower
    self.settings = settings
    keepAlive.withLock {
      $0 = StreamKeepAlive(every: settings.keepAlive) { [weak self] in
        guard let self else { return [] }
        return self.feeds.withLock { Array($0.values) }.flatMap { feed in
          feed.state.withLock { Array($0.clients.values) }
        }
      }
    }
  }

  /// How many distinct item queries are followed now.
  var feedCount: Int { feeds.withLock { $0.count } }

  /// The history token a client's `Last-Event-ID` names: nil for none (or empty), 400 for
  /// anything that is not a token, as GET and HEAD both answer. O(length).
  static func resumeToken(_ lastEventID: String?) throws -> HistoryToken? {
    // A field's value is read without the white space around it (RFC 9110, 5.5).
    guard let lastEventID = lastEventID?.trimmingCharacters(in: CharacterSet(charactersIn: " \t")),
      !lastEventID.isEmpty
    else { return nil }
    guard let token = HistoryToken(lastEventID) else {
      throw ServiceError.request(
        400,
        "Invalid Last-Event-ID '\(HTTPServer.loggable(lastEventID))': expected a history token."
      )
    }
    return token
  }

  func open(key: String, query: TripQuery, lastEventID: String?, client: String = "") throws
    -> HTTPStream
  {
    var descriptor = query.fetchDescriptor
    descriptor.sortBy = []
    descriptor.fetchLimit = nil
    descriptor.fetchOffset = nil
    return try open(
      key: key, subject: .trips(descriptor), lastEventID: lastEventID, client: client)
  }

  /// The stays stream (`GET /collections/stays/items/stream`): `insert`, `update` and
  /// `delete` (`{"id"}`) of the stays that match `filter`, told by the same follower as the
  /// trips' (every change to a stay is an update of its trip there). A `Last-Event-ID` within
  /// the feed's log gets exactly the missed events; any other gets one `reset` with every
  /// matching stay. Cost per transaction: O(changed trips), each one's stay read.
  func openStays(key: String, filter: StayFilter, lastEventID: String?, client: String = "")
    throws -> HTTPStream
  {
    try open(
      key: "stays " + key, subject: .stays(filter), lastEventID: lastEventID, client: client)
  }

  private func open(key: String, subject: Subject, lastEventID: String?, client: String) throws
    -> HTTPStream
  {
    let feed = try feeds.withLock { feeds -> Feed in
      if let feed = feeds[key] { return feed }
      try creators.withLock { creators in
        try admitFeed(
          key: key, plain: key.isEmpty || key == "stays ", client: client, followed: feeds.keys,
          creators: &creators, settings: settings, kind: "item")
      }
      let feed = try follower.subscribe { store, token in
        switch subject {
        case .trips(let descriptor):
          let keys = Set(try store.context.fetchIdentifiers(descriptor).map(\.primaryKey))
          return Feed(subject: subject, matching: keys, last: token)
        case .stays(let filter):
          return Feed(
            subject: subject, matching: [], stays: try Self.stays(filter, store), last: token)
        }
      }
      feed.onFailure.withLock {
        $0 = { [weak self, weak feed] in
          guard let self, let feed else { return }
          self.feeds.withLock { if $0[key] === feed { $0[key] = nil } }
          // Off the follower's thread, which may be the caller (a feed that failed a read).
          let follower = self.follower
          DispatchQueue.global().async { follower.unsubscribe(feed) }
        }
      }
      feeds[key] = feed
      return feed
    }
    let stream = HTTPStream(settings: settings)
    stream.send("retry: 2000\n\n")
    let id = ObjectIdentifier(stream)
    // Replay and registration under the feed's lock: no live event can slip between them.
    try feed.state.withLock { state in
      if let token = try Self.resumeToken(lastEventID) {
        // A token newer than the feed's is replayed from history, which refuses one newer
        // than the store's (a store restored from an older backup): the client gets `reset`.
        if token >= state.start, token <= state.last,
          state.droppedThrough.map({ token >= $0 }) ?? true,
          token.storeIdentifier == state.last.storeIdentifier
        {
          // Exactly what the clients that stayed got.
          for entry in state.log where entry.token > token { stream.send(entry.events) }
        } else {
          switch subject {
          case .trips(let descriptor):
            try replay(
              after: token, upTo: state.last, descriptor: descriptor,
              matching: state.matching.count, into: stream)
          case .stays:
            stream.send(
              Self.event(
                state.last, "reset",
                .object([
                  ("type", .string("FeatureCollection")),
                  (
                    "features",
                    .array(
                      state.stays.values.sorted { $0.text < $1.text }.compactMap {
                        try? JSONValue.parse(Data($0.text.utf8))
                      })
                  ),
                  (
                    "reason",
                    .string(
                      "The token is not among this feed's latest events: here is every matching stay."
                    )
                  ),
                ])))
          }
        }
      }
      state.clients[id] = stream
    }
    stream.onFinish.withLock {
      $0 = { [weak self, weak feed] in
        guard let feed else { return }
        let empty = feed.state.withLock { state -> Bool in
          state.clients[id] = nil
          return state.clients.isEmpty
        }
        guard empty else { return }
        // Kept a while, so that a client reconnecting soon is replayed from the log.
        let streams = self
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Self.graceSeconds)) {
          streams?.release(key, feed)
        }
      }
    }
    return stream
  }

  private func release(_ key: String, _ feed: Feed) {
    let removed = feeds.withLock { feeds -> Bool in
      guard feeds[key] === feed, feed.state.withLock({ $0.clients.isEmpty }) else { return false }
      feeds[key] = nil
      return true
    }
    if removed { follower.unsubscribe(feed) }
  }

  func closeAll() {
    let all = feeds.withLock { feeds -> [Feed] in
      defer { feeds = [:] }
      return Array(feeds.values)
    }
    for feed in all {
      follower.unsubscribe(feed)
      for client in feed.state.withLock({ Array($0.clients.values) }) { client.close() }
    }
  }

  /// One event.
  static func event(_ token: HistoryToken, _ kind: String, _ data: JSONValue) -> String {
    event(token, kind, text: data.rendered(pretty: false))
  }

  /// One event whose data is rendered already.
  static func event(_ token: HistoryToken, _ kind: String, text: String) -> String {
    "id: \(token.description)\nevent: \(kind)\ndata: \(text)\n\n"
  }

  /// The stays matching `filter` now, by their trips' keys, with their features' text.
  /// Cost: every stay and its trip, O(stays).
  static func stays(_ filter: StayFilter, _ store: TripStore) throws -> [Int64: (
    id: UUID, text: String
  )] {
    var descriptor = FetchDescriptor<LivingAccommodation>()
    descriptor.relationshipKeyPathsForPrefetching = [\.trip]
    let all = try store.context.fetch(descriptor)
    try store.context.resolveFaults(all)
    var found: [Int64: (id: UUID, text: String)] = [:]
    for stay in all {
      guard let trip = stay.trip,
        filter.matches(latitude: stay.latitude, longitude: stay.longitude, tripID: trip.id),
        let key = store.context.persistentIdentifier(for: trip)?.primaryKey
      else { continue }
      found[key] = (
        stay.id, FeaturesAPI.stayFeature(stay.record, tripID: trip.id).rendered(pretty: false)
      )
    }
    return found
  }

  static func deleted(_ id: UUID) -> JSONValue {
    .object([("id", .string(id.lowercasedString))])
  }

  /// The most bytes a replay from history sends before it is cut short for a `reset`:
  /// 256 KiB, or 1 KiB a matching trip when that is more (a reset costs about that).
  static func replayBudget(matching: Int) -> Int { max(256 * 1_024, matching * 1_024) }

  /// The events after `token` up to `last`, from history; `reset` when that history is gone,
  /// and when the replay would pass ``replayBudget(matching:)`` (a token of long ago on a
  /// query few trips match: a `delete` for every trip changed since, which the client mostly
  /// never had, is an amplification; the reset is the matching trips). Cost: O(changes since
  /// `token`) reads, at most the budget in bytes sent.
  private func replay(
    after token: HistoryToken, upTo last: HistoryToken, descriptor: FetchDescriptor<Trip>,
    matching: Int, into stream: HTTPStream
  ) throws {
    try pool.withStore(author: "service") { store in
      func reset(_ reason: String) throws {
        // The trips and their plans in one snapshot.
        let records = try store.context.withSnapshot {
          try store.withPlans(store.context.fetch(descriptor, as: TripRecord.self))
        }
        stream.send(
          Self.event(
            last, "reset",
            .object([
              ("type", .string("FeatureCollection")),
              ("features", .array(records.map(TripGeoJSON.feature))),
              ("reason", .string(reason)),
            ])))
      }
      let transactions: [HistoryTransaction]
      do {
        transactions = try store.context.fetchHistory(
          HistoryDescriptor(after: token, modelTypes: LiveFollower.followedTypes))
      } catch let error as PersistenceError
        where [.historyTokenExpired, .historyTokenForeign, .historyTokenUnknown].contains(
          error.code)
      {
        try reset(error.message)
        return
      }
      let budget = Self.replayBudget(matching: matching)
      var replayed: [String] = []
      var bytes = 0
      for transaction in transactions where transaction.token <= last {
        var events = ""
        for change in try LiveFollower.tripChanges(transaction, store: store) {
          if change.kind == .delete {
            if let id = change.deletedID {
              events += Self.event(transaction.token, "delete", Self.deleted(id))
            }
            continue
          }
          guard let trip = change.trip else { continue }
          if try descriptor.matches(trip) {
            events += Self.event(
              transaction.token, change.kind == .insert ? "insert" : "update",
              text: try change.feature(store))
          } else {
            events += Self.event(transaction.token, "delete", Self.deleted(trip.id))
          }
        }
        guard !events.isEmpty else { continue }
        bytes += events.utf8.count
        if bytes > budget {
          try reset(
            "The events since this token would take more than \(budget / 1_024) KiB: here is every matching trip."
          )
          return
        }
        replayed.append(events)
      }
      for events in replayed { stream.send(events) }
    }
  }
}
