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
      var start: DefaultHistoryToken
      var last: DefaultHistoryToken
      var clients: [ObjectIdentifier: HTTPStream] = [:]
      /// Clients being replayed to, outside this lock, with the live events that came
      /// meanwhile (sent after the replay, in order).
      var pending: [ObjectIdentifier: (stream: HTTPStream, events: [String])] = [:]
      /// The events of the latest transactions, oldest first, and the newest token dropped
      /// from it (nil while nothing was).
      var log: [(token: DefaultHistoryToken, events: String)] = []
      var droppedThrough: DefaultHistoryToken?
      /// Set once a read of a changed trip failed: the feed ended its streams.
      var failed = false

      /// Every client, live or being replayed to.
      var streams: [HTTPStream] { Array(clients.values) + pending.values.map(\.stream) }
    }
    let state: Mutex<State>
    /// Called when the follower fails: the owner forgets the feed.
    let onFailure = Mutex<(@Sendable () -> Void)?>(nil)

    init(
      subject: Subject, matching: Set<Int64>, stays: [Int64: (id: UUID, text: String)] = [:],
      last: DefaultHistoryToken
    ) {
      self.subject = subject
      state = Mutex(State(matching: matching, stays: stays, start: last, last: last))
    }

    /// What one changed trip is for this feed, read and rendered outside the feed's lock.
    enum Outcome {
      /// A trips feed: the trip matches now, with its feature.
      case matches(key: Int64, feature: String)
      /// A trips feed: the trip is gone (its id, when known) or does not match.
      case out(key: Int64, id: UUID?)
      /// A stays feed: the trip's stay now when it matches, with its feature.
      case stay(key: Int64, (id: UUID, text: String)?)
      /// Nothing to tell (a trip deleted since the change).
      case none
    }

    /// Reads and evaluates each change (outside the feed's lock: the store's reads and the
    /// rendering hold up neither the feed's clients nor a client being attached), then
    /// classifies them with the feed's set of matching trips and queues the events for every
    /// client under the lock. O(changes) plus the query's evaluation on each changed trip;
    /// the lock is held O(changes + clients).
    ///
    /// A changed trip that cannot be read or evaluated ends the feed (see ``fail(_:_:)``):
    /// never an event that would say what the store does not (a `delete` for a trip whose
    /// read failed, an update without its plan).
    func process(
      _ transaction: DefaultHistoryTransaction, _ changes: [LiveFollower.Change], store: TripStore
    ) {
      // Called in order by the one follower: only a failure can intervene between the two.
      guard state.withLock({ !$0.failed && transaction.token > $0.last }) else { return }
      let outcomes: [Outcome]
      do {
        outcomes = try changes.map { try Self.outcome($0, subject, store) }
      } catch {
        let clients = state.withLock { state -> [HTTPStream] in
          state.failed = true
          defer {
            state.clients = [:]
            state.pending = [:]
          }
          return state.streams
        }
        fail(error, clients)
        return
      }
      state.withLock { state in
        guard !state.failed, transaction.token > state.last else { return }
        var events = ""
        for outcome in outcomes {
          events += Self.events(outcome, &state, transaction.token)
        }
        state.last = transaction.token
        guard !events.isEmpty else { return }
        state.log.append((transaction.token, events))
        if state.log.count > logCapacity {
          state.droppedThrough = state.log.removeFirst().token
        }
        for client in state.clients.values { client.send(events) }
        for id in state.pending.keys { state.pending[id]?.events.append(events) }
      }
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

    /// What `change` is for a feed of `subject`: for trips, whether the trip matches now and
    /// its feature (rendered once for all feeds); for stays, its stay when that matches, with
    /// its feature. O(1) besides the query's evaluation on the trip and, for stays, reading
    /// its plan as values (`TripStore.withPlans(_:)`: a lookup of the trip's key and a query
    /// each for its items and stay, through their indexes). Throws what they throw.
    static func outcome(_ change: LiveFollower.Change, _ subject: Subject, _ store: TripStore)
      throws -> Outcome
    {
      let key = change.key
      switch subject {
      case .trips(let descriptor):
        if change.kind == .delete { return .out(key: key, id: change.deletedID) }
        guard let trip = change.trip else { return .none }
        guard try descriptor.matches(trip) else { return .out(key: key, id: trip.id) }
        return .matches(key: key, feature: try change.feature(store))
      case .stays(let filter):
        guard change.kind != .delete, let trip = change.trip else {
          return .stay(key: key, nil)
        }
        // The stay read as values (a failure is thrown; no model's read traps).
        let plan = try store.withPlans([store.context.record(of: trip)])[0].plan
        guard let stay = plan?.livingAccommodation, let id = stay.id,
          let latitude = stay.latitude, let longitude = stay.longitude,
          filter.matches(latitude: latitude, longitude: longitude, tripID: trip.id)
        else { return .stay(key: key, nil) }
        return .stay(
          key: key, (id, FeaturesAPI.stayFeature(stay, tripID: trip.id).rendered(pretty: false)))
      }
    }

    /// The events of one outcome, told apart with the feed's state: for trips, inserted or
    /// updated while it matches (moved in is an insert), deleted when it goes or moves out;
    /// for stays, inserted, updated or deleted as it enters, changes in or leaves the filter
    /// (a stay replaced by another is a delete and an insert). O(1).
    static func events(_ outcome: Outcome, _ state: inout State, _ token: DefaultHistoryToken)
      -> String
    {
      switch outcome {
      case .none: return ""
      case .matches(let key, let feature):
        let was = !state.matching.insert(key).inserted
        return ItemsStreams.event(token, was ? "update" : "insert", text: feature)
      case .out(let key, let id):
        guard state.matching.remove(key) != nil, let id else { return "" }
        return ItemsStreams.event(token, "delete", deleted(id))
      case .stay(let key, let new):
        let old = state.stays[key]
        state.stays[key] = new
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
    }

    func followerFailed() {
      onFailure.withLock { $0 }?()
      for client in state.withLock({ $0.streams }) { client.close() }
    }
  }

  private let feeds: FeedTable<Feed>
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
    // The plain queries: the trips' own ("") and the stays' ("stays ").
    feeds = FeedTable(
      follower: follower, settings: settings, kind: "item",
      isPlain: { $0.isEmpty || $0 == "stays " },
      clients: { feed in feed.state.withLock { $0.streams } })
    keepAlive.withLock {
      $0 = StreamKeepAlive(every: settings.keepAlive) { [weak self] in
        guard let self else { return [] }
        return self.feeds.all.flatMap { feed in feed.state.withLock { $0.streams } }
      }
    }
  }

  /// How many distinct item queries are followed now.
  var feedCount: Int { feeds.count }

  /// The history token a client's `Last-Event-ID` names: nil for none (or empty), 400 for
  /// anything that is not a token, as GET and HEAD both answer. O(length).
  static func resumeToken(_ lastEventID: String?) throws -> DefaultHistoryToken? {
    // A field's value is read without the white space around it (RFC 9110, 5.5).
    guard let lastEventID = lastEventID?.trimmingCharacters(in: CharacterSet(charactersIn: " \t")),
      !lastEventID.isEmpty
    else { return nil }
    guard let token = DefaultHistoryToken(lastEventID) else {
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
    // Refused before any feed is started for it.
    let resume = try Self.resumeToken(lastEventID)
    let feed = try feeds.feed(key: key, client: client) {
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
          self.feeds.forget(key, feed)
        }
      }
      return feed
    }
    let stream = HTTPStream(settings: settings)
    stream.send("retry: 2000\n\n")
    let id = ObjectIdentifier(stream)
    // A client within the log is sent it and attached under the feed's lock; one that needs
    // a replay from history (or a reset) is attached as pending first, replayed outside the
    // lock up to the feed's last token, then sent the live events that came meanwhile.
    enum Catchup {
      case none
      case history(after: DefaultHistoryToken, upTo: DefaultHistoryToken, matching: Int)
      case stays(upTo: DefaultHistoryToken, features: [String])
    }
    let catchup = feed.state.withLock { state -> Catchup in
      guard let token = resume else {
        state.clients[id] = stream
        return .none
      }
      // A token newer than the feed's is replayed from history, which refuses one newer than
      // the store's (a store restored from an older backup): the client gets `reset`.
      if token >= state.start, token <= state.last,
        state.droppedThrough.map({ token >= $0 }) ?? true,
        token.storeIdentifier == state.last.storeIdentifier
      {
        // Exactly what the clients that stayed got.
        for entry in state.log where entry.token > token { stream.send(entry.events) }
        state.clients[id] = stream
        return .none
      }
      state.pending[id] = (stream, [])
      switch subject {
      case .trips:
        return .history(after: token, upTo: state.last, matching: state.matching.count)
      case .stays:
        return .stays(upTo: state.last, features: state.stays.values.map(\.text))
      }
    }
    feeds.joined(feed)
    do {
      switch catchup {
      case .none: break
      case .history(let token, let last, let matching):
        guard case .trips(let descriptor) = subject else { break }
        try replay(
          after: token, upTo: last, descriptor: descriptor, matching: matching, into: stream)
      case .stays(let last, let features):
        // The features' texts as they were rendered, joined: no parse of the server's own
        // JSON (whose failure would have left a stay out of the reset unseen).
        let reason = JSONValue.string(
          "The token is not among this feed's latest events: here is every matching stay."
        ).rendered(pretty: false)
        stream.send(
          Self.event(
            last, "reset",
            text: #"{"type":"FeatureCollection","features":["#
              + features.sorted().joined(separator: ",") + #"],"reason":"# + reason + "}"))
      }
    } catch {
      feed.state.withLock { _ = $0.pending.removeValue(forKey: id) }
      release(key, feed)
      throw error
    }
    if case .none = catchup {
    } else {
      feed.state.withLock { state in
        // Gone when the feed failed meanwhile: the stream got its error and was closed.
        guard let (stream, events) = state.pending.removeValue(forKey: id) else { return }
        for events in events { stream.send(events) }
        state.clients[id] = stream
      }
    }
    stream.onFinish.withLock {
      $0 = { [weak self, weak feed] in
        guard let feed else { return }
        let empty = feed.state.withLock { state -> Bool in
          state.clients[id] = nil
          return state.clients.isEmpty && state.pending.isEmpty
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
    feeds.release(key, feed)
  }

  func closeAll() {
    for feed in feeds.closeAll() {
      for client in feed.state.withLock({ $0.streams }) { client.close() }
    }
  }

  /// One event.
  static func event(_ token: DefaultHistoryToken, _ kind: String, _ data: JSONValue) -> String {
    event(token, kind, text: data.rendered(pretty: false))
  }

  /// One event whose data is rendered already.
  static func event(_ token: DefaultHistoryToken, _ kind: String, text: String) -> String {
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
        stay.id, FeaturesAPI.stayFeature(FieldValues(stay), tripID: trip.id).rendered(pretty: false)
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

  /// The most changes a replay from history reads (one read by key each) before it is a
  /// `reset` instead (one query for the matching trips): 1,000, or a sixteenth of the matching
  /// trips when that is more. A token from a store's first import on 60,000 trips took over
  /// 30 s to replay on PostgreSQL, past the request's deadline, so a client could never catch
  /// up.
  static func replayChangeLimit(matching: Int) -> Int { max(1_000, matching / 16) }

  /// The events after `token` up to `last`, from history; `reset` when that history is gone,
  /// when it holds more than ``replayChangeLimit(matching:)`` changes, and when the replay
  /// would pass ``replayBudget(matching:)`` (a token of long ago on a
  /// query few trips match: a `delete` for every trip changed since, which the client mostly
  /// never had, is an amplification; the reset is the matching trips). Cost: O(changes since
  /// `token`) reads, at most the budget in bytes sent.
  private func replay(
    after token: DefaultHistoryToken, upTo last: DefaultHistoryToken,
    descriptor: FetchDescriptor<Trip>,
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
      let transactions: [DefaultHistoryTransaction]
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
      // Each change is read by key (a round trip on PostgreSQL), the reset is one query: past
      // a sixteenth of the matching trips (and a thousand), the reset is the cheaper answer.
      let changes = transactions.lazy.filter { $0.token <= last }.reduce(0) {
        $0 + $1.changes.count
      }
      if changes > Self.replayChangeLimit(matching: matching) {
        try reset(
          "The \(changes) changes since this token outnumber what a replay reads at once: here is every matching trip."
        )
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
