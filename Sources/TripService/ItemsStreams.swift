import Dispatch
import Foundation
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
  final class Feed: LiveFeed {
    let descriptor: FetchDescriptor<Trip>
    struct State {
      var matching: Set<Int64> = []
      /// The token the feed started after, and the last one it processed.
      var start: HistoryToken
      var last: HistoryToken
      var clients: [ObjectIdentifier: HTTPStream] = [:]
      /// The events of the latest transactions, oldest first, and the newest token dropped
      /// from it (nil while nothing was).
      var log: [(token: HistoryToken, events: String)] = []
      var droppedThrough: HistoryToken?
    }
    let state: Mutex<State>
    /// Called when the follower fails: the owner forgets the feed.
    let onFailure = Mutex<(@Sendable () -> Void)?>(nil)

    init(descriptor: FetchDescriptor<Trip>, matching: Set<Int64>, last: HistoryToken) {
      self.descriptor = descriptor
      state = Mutex(State(matching: matching, start: last, last: last))
    }

    /// Classifies each change with the feed's set of matching trips, then queues the events
    /// for every client. O(changes) plus the query's evaluation on each changed trip.
    func process(
      _ transaction: HistoryTransaction, _ changes: [LiveFollower.Change], store: TripStore
    ) {
      state.withLock { state in
        guard transaction.token > state.last else { return }
        var events = ""
        for change in changes {
          let key = change.key
          if change.kind == .delete {
            if state.matching.remove(key) != nil, let id = change.deletedID {
              events += ItemsStreams.event(transaction.token, "delete", deleted(id))
            }
            continue
          }
          guard let trip = change.trip else { continue }
          let matches = (try? descriptor.matches(trip)) ?? false
          let was = state.matching.contains(key)
          if matches, let feature = try? change.feature(store) {
            state.matching.insert(key)
            events += ItemsStreams.event(
              transaction.token, was ? "update" : "insert", text: feature)
          } else if was {
            state.matching.remove(key)
            events += ItemsStreams.event(transaction.token, "delete", deleted(trip.id))
          }
        }
        state.last = transaction.token
        guard !events.isEmpty else { return }
        state.log.append((transaction.token, events))
        if state.log.count > logCapacity {
          state.droppedThrough = state.log.removeFirst().token
        }
        for client in state.clients.values { client.send(events) }
      }
    }

    func followerFailed() {
      onFailure.withLock { $0 }?()
      for client in state.withLock({ Array($0.clients.values) }) { client.close() }
    }
  }

  private let feeds = Mutex<[String: Feed]>([:])
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

  func open(key: String, query: TripQuery, lastEventID: String?) throws -> HTTPStream {
    var descriptor = query.fetchDescriptor
    descriptor.sortBy = []
    descriptor.fetchLimit = nil
    descriptor.fetchOffset = nil
    let feed = try feeds.withLock { feeds -> Feed in
      if let feed = feeds[key] { return feed }
      guard feeds.count < settings.maximumFeeds else {
        throw ServiceError.request(
          503,
          "This server follows \(settings.maximumFeeds) distinct live item queries, its maximum; join one of them (the same filters), or try again later."
        )
      }
      let feed = try follower.subscribe { store, token in
        let keys = Set(try store.context.fetchIdentifiers(descriptor).map(\.primaryKey))
        return Feed(descriptor: descriptor, matching: keys, last: token)
      }
      feed.onFailure.withLock {
        $0 = { [weak self, weak feed] in
          guard let self, let feed else { return }
          self.feeds.withLock { if $0[key] === feed { $0[key] = nil } }
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
      if let lastEventID, !lastEventID.isEmpty {
        guard let token = HistoryToken(lastEventID) else {
          throw ServiceError.request(
            400,
            "Invalid Last-Event-ID '\(HTTPServer.loggable(lastEventID))': expected a history token."
          )
        }
        // A token newer than the feed's is replayed from history, which refuses one newer
        // than the store's (a store restored from an older backup): the client gets `reset`.
        if token >= state.start, token <= state.last,
          state.droppedThrough.map({ token >= $0 }) ?? true,
          token.storeIdentifier == state.last.storeIdentifier
        {
          // Exactly what the clients that stayed got.
          for entry in state.log where entry.token > token { stream.send(entry.events) }
        } else {
          try replay(after: token, upTo: state.last, descriptor: descriptor, into: stream)
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

  static func deleted(_ id: UUID) -> JSONValue {
    .object([("id", .string(id.lowercasedString))])
  }

  /// The events after `token` up to `last`, from history; `reset` when that history is gone.
  private func replay(
    after token: HistoryToken, upTo last: HistoryToken, descriptor: FetchDescriptor<Trip>,
    into stream: HTTPStream
  ) throws {
    try pool.withStore(author: "service") { store in
      let transactions: [HistoryTransaction]
      do {
        transactions = try store.context.fetchHistory(
          HistoryDescriptor(after: token, modelTypes: LiveFollower.followedTypes))
      } catch let error as PersistenceError
        where [.historyTokenExpired, .historyTokenForeign, .historyTokenUnknown].contains(
          error.code)
      {
        let trips = try store.context.fetch(descriptor)
        try store.context.resolveFaults(trips)
        let records = try store.withPlans(trips.map(\.record))
        stream.send(
          Self.event(
            last, "reset",
            .object([
              ("type", .string("FeatureCollection")),
              ("features", .array(records.map(TripGeoJSON.feature))),
              ("reason", .string(error.message)),
            ])))
        return
      }
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
        if !events.isEmpty { stream.send(events) }
      }
    }
  }
}
