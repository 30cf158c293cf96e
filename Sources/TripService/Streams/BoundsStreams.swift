import Dispatch
import Foundation
import Geo
import Persistence
import Synchronization
import TripPlanner

/// The live bounds streams (`GET /collections/trips/bounds/stream`): one feed per distinct
/// query (its filters and CRS; the viewport and padding only frame the camera and are not part
/// of it), shared by every client of that query, so the cost of a change grows with the number
/// of distinct queries, not of clients. At most ``StreamSettings/maximumFeeds`` queries are
/// followed at once; a new one past that is 503 with `Retry-After`.
///
/// A feed keeps what a `BoundsController` keeps, without its models: each matching trip's
/// coordinate by row key (about 60 bytes a trip) in a `CoordinateCover` (and, outside Web
/// Mercator, a `ProjectedPointCover`). It is told of each transaction by the service's one
/// ``LiveFollower`` (one observation of the store for every feed): a changed trip costs
/// O(log n) plus the query's evaluation in Swift, with no rescan. The report is made and sent
/// on the feed's own queue, for the latest state when transactions come faster than that (as
/// a results observer coalesces them). Within a feed, clients that ask for the same viewport
/// and padding share one rendering of each report: one rendering (and one camera fit) per
/// distinct viewport per publication, queued for each of its clients.
///
/// Each event is `id: <history token>`, `event: bounds`, `data: <the bounds document>`; a
/// comment every 15 s keeps idle connections (and proxies) alive and finds clients that left.
/// A feed is released with its last client.
final class BoundsStreams: Sendable {
  /// One distinct query and its clients, by the viewport they frame it in.
  final class Feed: LiveFeed {
    let descriptor: FetchDescriptor<Trip>
    let projection: Projection
    /// The clients of one viewport and padding, with the parameters they render with and
    /// their last event.
    struct View {
      var parameters: FeaturesAPI.BoundsParameters
      var clients: [ObjectIdentifier: HTTPStream] = [:]
      var lastEvent: String?
    }
    struct State {
      var coordinates: [Int64: Coordinate]
      var cover: CoordinateCover
      var points: ProjectedPointCover?
      var last: DefaultHistoryToken
      var report: BoundsReport
      var views: [String: View] = [:]
      /// Whether a publication of the report is queued (changes before it runs share it).
      var publishing = false
      /// Set once a changed trip could not be evaluated: the feed ended its streams.
      var failed = false
    }
    let state: Mutex<State>
    /// Where the report is made and sent, off the follower's thread: the follower only moves
    /// trips in the cover, so one feed's clients never hold up the other feeds' events, and a
    /// burst of transactions is published as its latest report, as a results observer's
    /// changes coalesce.
    private let publisher = DispatchQueue(label: "trips.bounds-feed")
    /// Called when the follower fails: the owner forgets the feed.
    let onFailure = Mutex<(@Sendable () -> Void)?>(nil)

    /// The feed of `descriptor`'s trips as they are in `store` at `token`: O(n) to read their
    /// keys and coordinates as values, no models (models only for a query SQL cannot finish).
    init(
      descriptor: FetchDescriptor<Trip>, projection: Projection, store: TripStore,
      token: DefaultHistoryToken
    ) throws {
      self.descriptor = descriptor
      self.projection = projection
      var coordinates: [Int64: Coordinate] = [:]
      do {
        try store.context.enumerateValues(descriptor, [\Trip.latitude, \Trip.longitude]) { row in
          coordinates[row.identifier.primaryKey] = Coordinate(
            latitude: try row.value(Double.self, at: 0),
            longitude: try row.value(Double.self, at: 1))
        }
      } catch let error as PersistenceError where error.code == .unsupportedPredicate {
        coordinates = [:]
        for trip in try store.context.fetch(descriptor) {
          guard let key = store.context.persistentIdentifier(for: trip)?.primaryKey else {
            continue
          }
          coordinates[key] = Coordinate(latitude: trip.latitude, longitude: trip.longitude)
        }
      }
      var cover = CoordinateCover(coordinates.values)
      let points = projection.isWebMercator ? nil : projection.pointCover(coordinates.values)
      let report = try BoundsReport(
        count: cover.count, box: cover.box, projection: projection, points: points)
      state = Mutex(
        State(
          coordinates: coordinates, cover: cover, points: points, last: token, report: report))
    }

    var clients: [HTTPStream] {
      state.withLock { $0.views.values.flatMap { $0.clients.values } }
    }

    /// Moves each changed trip in or out of the cover (O(log n) each), and queues a publication
    /// of the report unless one is queued already.
    ///
    /// A changed trip whose evaluation fails ends the feed, as an items feed's failed read
    /// does: an `error` event, then the streams end (a trip left out of the cover would be a
    /// wrong report).
    func process(
      _ transaction: DefaultHistoryTransaction, _ changes: [LiveFollower.Change], store: TripStore
    ) {
      let failure = state.withLock { state -> (any Error, [HTTPStream])? in
        guard !state.failed, transaction.token > state.last else { return nil }
        state.last = transaction.token
        for change in changes {
          if let old = state.coordinates.removeValue(forKey: change.key) {
            state.cover.remove(old)
            state.points?.remove(projection.projectIfPossible(old))
          }
          guard let trip = change.trip else { continue }
          do {
            guard try descriptor.matches(trip) else { continue }
          } catch {
            state.failed = true
            defer { state.views = [:] }
            return (error, state.views.values.flatMap { $0.clients.values })
          }
          let coordinate = Coordinate(latitude: trip.latitude, longitude: trip.longitude)
          state.coordinates[change.key] = coordinate
          state.cover.insert(coordinate)
          state.points?.insert(projection.projectIfPossible(coordinate))
        }
        guard !state.publishing else { return nil }
        state.publishing = true
        publisher.async { [weak self] in self?.publish() }
        return nil
      }
      guard let (error, clients) = failure else { return }
      endStreams(
        clients, after: error, could: "evaluate", retry: "Reconnect to get the current bounds.",
        forget: onFailure.withLock { $0 })
    }

    /// Makes the report of the cover as it is now and, if it changed, renders it once per
    /// viewport and queues it for that viewport's clients, with the last token as its id.
    private func publish() {
      state.withLock { state in
        state.publishing = false
        // A box PROJ cannot project keeps the last report (as a BoundsController does).
        guard
          let report = try? BoundsReport(
            count: state.cover.count, box: state.cover.box, projection: projection,
            points: state.points),
          report != state.report
        else { return }
        state.report = report
        for (viewID, var view) in state.views {
          let event = Self.render(report, view.parameters, token: state.last)
          guard event != view.lastEvent else { continue }
          view.lastEvent = event
          state.views[viewID] = view
          for client in view.clients.values { client.send(event) }
        }
      }
    }

    func followerFailed() {
      onFailure.withLock { $0 }?()
      for client in clients { client.close() }
    }

    /// One event of `report` for clients of `parameters`, with `token` as its id.
    static func render(
      _ report: BoundsReport, _ parameters: FeaturesAPI.BoundsParameters, token: DefaultHistoryToken
    ) -> String {
      let document = FeaturesAPI.boundsDocument(report, parameters)
      return
        "id: \(token.description)\nevent: bounds\ndata: \(document.rendered(pretty: false))\n\n"
    }
  }

  private let feeds: FeedTable<Feed>
  private let follower: LiveFollower
  private let keepAlive = Mutex<StreamKeepAlive?>(nil)

  private let settings: StreamSettings

  init(follower: LiveFollower, settings: StreamSettings) {
    self.follower = follower
    self.settings = settings
    feeds = FeedTable(
      follower: follower, settings: settings, kind: "bounds", isPlain: { $0.isEmpty },
      clients: { $0.clients })
    keepAlive.withLock {
      $0 = StreamKeepAlive(every: settings.keepAlive) { [weak self] in
        guard let self else { return [] }
        return self.feeds.all.flatMap(\.clients)
      }
    }
  }

  /// How many distinct queries are followed now.
  var feedCount: Int { feeds.count }

  /// The parameters that frame the camera, not the query: left out of a feed's identity.
  static let viewNames: Set<String> = ["viewport", "padding"]

  /// A stream for the request's query: the current report now, then one event per change of
  /// it. Throws 503 when the query is new and may not be followed (``StreamSettings/maximumFeeds``,
  /// ``StreamSettings/maximumFeedsPerClient``; a query without filters always may).
  func open(request: HTTPRequest, parameters: FeaturesAPI.BoundsParameters) throws
    -> HTTPStream
  {
    let items = request.query.map { "\($0.name)=\($0.value)" }
    let key = items.filter { !Self.viewNames.contains(String($0.prefix { $0 != "=" })) }
      .sorted().joined(separator: "&")
    let viewID =
      parameters.viewport.map { "\($0.width)x\($0.height)+\(parameters.padding)" }
      ?? ""
    var descriptor = parameters.parsed.unpaged.fetchDescriptor
    descriptor.sortBy = []
    let projection = parameters.projection
    let feed = try feeds.feed(key: key, client: request.client) {
      let feed = try follower.subscribe { store, token in
        try Feed(descriptor: descriptor, projection: projection, store: store, token: token)
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
    let id = ObjectIdentifier(stream)
    // The retry line, the current report and the registration under the feed's lock, which
    // `process` holds while it renders and picks its clients: each report reaches the client
    // once, after the retry line.
    feed.state.withLock { state in
      stream.send("retry: 2000\n\n")
      var view = state.views[viewID] ?? Feed.View(parameters: parameters)
      if view.lastEvent == nil {
        view.lastEvent = Feed.render(state.report, view.parameters, token: state.last)
      }
      if let event = view.lastEvent { stream.send(event) }
      view.clients[id] = stream
      state.views[viewID] = view
    }
    feeds.joined(feed)
    stream.onFinish.withLock {
      $0 = { [weak self, weak feed] in
        guard let feed else { return }
        let empty = feed.state.withLock { state -> Bool in
          state.views[viewID]?.clients[id] = nil
          if state.views[viewID]?.clients.isEmpty == true { state.views[viewID] = nil }
          return state.views.isEmpty
        }
        if empty { self?.release(key, feed) }
      }
    }
    return stream
  }

  private func release(_ key: String, _ feed: Feed) {
    feeds.release(key, feed)
  }

  /// Ends every stream (the service is stopping).
  func closeAll() {
    for feed in feeds.closeAll() {
      for client in feed.clients { client.close() }
    }
  }
}
