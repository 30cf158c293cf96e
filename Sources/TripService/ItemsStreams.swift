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
/// One feed per distinct query follows the store's history (from any process) and keeps the
/// set of matching trips, so that moves into and out of the filter are told apart: O(changes)
/// per transaction plus one lookup per changed trip, whatever the number of clients; each
/// event is rendered once and queued for every client.
///
/// A client that comes back with `Last-Event-ID` first gets the events it missed, then the
/// live ones, with nothing missed or repeated in between. A feed keeps the events of its last
/// ``logCapacity`` transactions and stays alive ``graceSeconds`` after its last client leaves,
/// so a client that reconnects (browsers retry after 2 s) gets exactly the events the others
/// got. Older tokens are replayed from history as well as can be known now (a trip that no
/// longer matches is sent as `delete`, one that matches as `insert` or `update` by what the
/// change was); a token whose history was pruned gets one `reset` event with every matching
/// trip.
final class ItemsStreams: Sendable {
  final class Feed: Sendable {
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
    let follower = Mutex<Task<Void, Never>?>(nil)

    init(descriptor: FetchDescriptor<Trip>, matching: Set<Int64>, last: HistoryToken) {
      self.descriptor = descriptor
      state = Mutex(State(matching: matching, start: last, last: last))
    }
  }

  private let feeds = Mutex<[String: Feed]>([:])
  private let pool: StorePool
  /// Transactions whose events a feed keeps for clients that reconnect.
  static let logCapacity = 1_024
  /// Seconds a feed outlives its last client.
  static let graceSeconds = 30

  private let keepAlive = Mutex<StreamKeepAlive?>(nil)

  private let settings: StreamSettings

  init(pool: StorePool, settings: StreamSettings) {
    self.pool = pool
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
      let (keys, token) = try pool.withStore(author: "service") { store in
        let token = try store.context.currentHistoryToken()
        return (Set(try store.context.fetchIdentifiers(descriptor).map(\.primaryKey)), token)
      }
      let feed = Feed(descriptor: descriptor, matching: keys, last: token)
      feeds[key] = feed
      let updates = pool.container.historyUpdates(
        HistoryDescriptor(after: token, modelTypes: [Trip.self]))
      let pool = self.pool
      let task = Task { [weak feed] in
        do {
          for try await transaction in updates {
            guard let feed else { return }
            try Self.process(transaction, feed: feed, pool: pool)
          }
        } catch {
          // The store can no longer be followed: end the streams, clients reconnect.
          guard let feed else { return }
          for client in feed.state.withLock({ Array($0.clients.values) }) { client.close() }
        }
      }
      feed.follower.withLock { $0 = task }
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
        if token >= state.start, state.droppedThrough.map({ token >= $0 }) ?? true,
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
    if removed { feed.follower.withLock { $0?.cancel() } }
  }

  func closeAll() {
    let all = feeds.withLock { feeds -> [Feed] in
      defer { feeds = [:] }
      return Array(feeds.values)
    }
    for feed in all {
      feed.follower.withLock { $0?.cancel() }
      for client in feed.state.withLock({ Array($0.clients.values) }) { client.close() }
    }
  }

  /// One event.
  static func event(_ token: HistoryToken, _ kind: String, _ data: JSONValue) -> String {
    "id: \(token.description)\nevent: \(kind)\ndata: \(data.rendered(pretty: false))\n\n"
  }

  /// The live path: classifies each change with the feed's set of matching trips, then queues
  /// the events for every client.
  static func process(_ transaction: HistoryTransaction, feed: Feed, pool: StorePool) throws {
    try feed.state.withLock { state in
      var events = ""
      try pool.withStore(author: "service") { store in
        for change in transaction.changes {
          let key = change.changedIdentifier.primaryKey
          if change.kind == .delete {
            if state.matching.remove(key) != nil, let id = change.tombstone?[\Trip.id] {
              events += event(transaction.token, "delete", deleted(id))
            }
            continue
          }
          guard
            let trip = try store.context.model(for: change.changedIdentifier, as: Trip.self)
          else { continue }
          let matches = try feed.descriptor.matches(trip)
          let was = state.matching.contains(key)
          if matches {
            state.matching.insert(key)
            events += event(
              transaction.token, was ? "update" : "insert",
              TripGeoJSON.feature(try store.context.record(of: trip)))
          } else if was {
            state.matching.remove(key)
            events += event(transaction.token, "delete", deleted(trip.id))
          }
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
          HistoryDescriptor(after: token, modelTypes: [Trip.self]))
      } catch let error as PersistenceError
        where [.historyTokenExpired, .historyTokenForeign, .historyTokenUnknown].contains(
          error.code)
      {
        let trips = try store.context.fetch(descriptor)
        try store.context.resolveFaults(trips)
        let records = trips.map(\.record)
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
        for change in transaction.changes {
          if change.kind == .delete {
            if let id = change.tombstone?[\Trip.id] {
              events += Self.event(transaction.token, "delete", Self.deleted(id))
            }
            continue
          }
          guard let trip = try store.context.model(for: change.changedIdentifier, as: Trip.self)
          else { continue }
          if try descriptor.matches(trip) {
            events += Self.event(
              transaction.token, change.kind == .insert ? "insert" : "update",
              TripGeoJSON.feature(try store.context.record(of: trip)))
          } else {
            events += Self.event(transaction.token, "delete", Self.deleted(trip.id))
          }
        }
        if !events.isEmpty { stream.send(events) }
      }
    }
  }
}
