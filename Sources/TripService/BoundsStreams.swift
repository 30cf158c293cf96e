import Dispatch
import Foundation
import Geo
import Persistence
import Synchronization
import TripPlanner

/// The live bounds streams (`GET /collections/trips/bounds/stream`): one ``BoundsController``
/// per distinct query, shared by every client of that query, so the cost of a change grows with
/// the number of distinct queries, not of clients (the report is rendered once per change and
/// its bytes queued for each client: O(clients) copies of one event).
///
/// Each event is `id: <history token>`, `event: bounds`, `data: <the bounds document>`; a
/// comment every 15 s keeps idle connections (and proxies) alive and finds clients that left.
/// A feed is released with its last client.
final class BoundsStreams: Sendable {
  /// One distinct query and its clients.
  final class Feed: Sendable {
    let controller: BoundsController
    let parameters: FeaturesAPI.BoundsParametersBox
    let clients = Mutex<[ObjectIdentifier: HTTPStream]>([:])
    let lastEvent = Mutex<String?>(nil)
    let token = Mutex<ObservationTrackingToken?>(nil)

    init(controller: BoundsController, parameters: FeaturesAPI.BoundsParametersBox) {
      self.controller = controller
      self.parameters = parameters
    }
  }

  private let feeds = Mutex<[String: Feed]>([:])
  private let pool: StorePool
  private let keepAlive = Mutex<StreamKeepAlive?>(nil)

  private let settings: StreamSettings

  init(pool: StorePool, settings: StreamSettings) {
    self.pool = pool
    self.settings = settings
    keepAlive.withLock {
      $0 = StreamKeepAlive(every: settings.keepAlive) { [weak self] in
        guard let self else { return [] }
        return self.feeds.withLock { Array($0.values) }.flatMap { feed in
          feed.clients.withLock { Array($0.values) }
        }
      }
    }
  }

  /// How many distinct queries are followed now.
  var feedCount: Int { feeds.withLock { $0.count } }

  /// A stream for `key`'s query: the current report now, then one event per change of it.
  func open(key: String, parameters: FeaturesAPI.BoundsParametersBox) throws -> HTTPStream {
    let feed = try feeds.withLock { feeds -> Feed in
      if let feed = feeds[key] { return feed }
      let value = parameters.value
      let controller = try BoundsController(
        container: pool.container, query: value.parsed.unpaged, crs: value.crs,
        viewport: value.fitted)
      let feed = Feed(controller: controller, parameters: parameters)
      feeds[key] = feed
      let started = withContinuousObservation { [weak self, weak feed] in
        guard let feed else { return }
        let report = feed.controller.report
        self?.publish(report, to: feed)
      }
      feed.token.withLock { $0 = started }
      return feed
    }
    let stream = HTTPStream(settings: settings)
    let id = ObjectIdentifier(stream)
    // The retry line, the last report and the registration under the clients' lock, which
    // `publish` holds while it sets the last report and picks its clients: a report published
    // while this client joins reaches it once, after the retry line (sent outside the lock, a
    // first report published meanwhile came before the retry line and again after it).
    feed.clients.withLock { clients in
      stream.send("retry: 2000\n\n")
      if let event = feed.lastEvent.withLock({ $0 }) { stream.send(event) }
      clients[id] = stream
    }
    stream.onFinish.withLock {
      $0 = { [weak self, weak feed] in
        guard let feed else { return }
        let empty = feed.clients.withLock { clients -> Bool in
          clients[id] = nil
          return clients.isEmpty
        }
        if empty { self?.release(key, feed) }
      }
    }
    return stream
  }

  private func release(_ key: String, _ feed: Feed) {
    let removed = feeds.withLock { feeds -> Bool in
      guard feeds[key] === feed, feed.clients.withLock({ $0.isEmpty }) else { return false }
      feeds[key] = nil
      return true
    }
    if removed { feed.token.withLock { $0?.cancel() } }
  }

  /// Renders the report once, with the store's current history token as its id, and queues it
  /// for every client of the feed.
  private func publish(_ report: BoundsReport, to feed: Feed) {
    let token = (try? pool.withStore(author: "service") { try $0.context.currentHistoryToken() })
    let document = FeaturesAPI.boundsDocument(report, feed.parameters.value)
    let event =
      "id: \(token?.description ?? "")\nevent: bounds\ndata: \(document.rendered(pretty: false))\n\n"
    // Set and its clients picked under the clients' lock (see `open(key:parameters:)`): a client joining
    // now gets this report either from there or from here, never both.
    let clients = feed.clients.withLock { clients -> [HTTPStream]? in
      let changed = feed.lastEvent.withLock { last -> Bool in
        guard last != event else { return false }
        last = event
        return true
      }
      return changed ? Array(clients.values) : nil
    }
    for client in clients ?? [] { client.send(event) }
  }

  /// Ends every stream (the service is stopping).
  func closeAll() {
    let all = feeds.withLock { feeds -> [Feed] in
      defer { feeds = [:] }
      return Array(feeds.values)
    }
    for feed in all {
      feed.token.withLock { $0?.cancel() }
      for client in feed.clients.withLock({ Array($0.values) }) { client.close() }
    }
  }
}
