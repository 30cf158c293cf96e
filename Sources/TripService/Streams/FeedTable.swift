import Dispatch
import Synchronization

/// The distinct live queries one kind of stream follows (items and stays, or bounds), by the
/// query's key: which are followed, which are being started, and who started each.
///
/// A feed is started outside the table's lock: its first read (every trip its query matches,
/// up to the request's deadline) holds up neither the other streams' opens nor the
/// keep-alives that walk the table. Two clients starting the same query at once both read;
/// the first installed is kept and the other dropped, so a query is followed once.
///
/// A query followed with no client (an items feed in its grace period, or one whose clients
/// all closed their connections, which the server would learn only at its next keep-alive)
/// holds its slot only until it is wanted: a new query past the maximum ends one such query,
/// and one past its client's share ends one of that client's, rather than being refused (a
/// client that pans a map from box to box is not refused for the boxes it left).
///
/// Lock order: this table, then a feed's own state; the table's lock is never held across a
/// store read or a call to the follower. Cost: O(feeds) an admission, O(1) a lookup.
final class FeedTable<Feed: LiveFeed>: Sendable {
  private struct State {
    var feeds: [String: Feed] = [:]
    /// Queries being started, with how many starts of each are under way.
    var starting: [String: Int] = [:]
    /// Who started each query followed or being started (``admitFeed(key:plain:client:followed:creators:settings:kind:)``).
    var creators: [String: String] = [:]
    /// Feeds handed out by ``feed(key:client:start:)`` whose client is not attached yet: never
    /// idle meanwhile.
    var joining: [ObjectIdentifier: Int] = [:]
    var closed = false
  }
  private let state = Mutex(State())
  private let follower: LiveFollower
  private let settings: StreamSettings
  /// "item" or "bounds", as the refusals name the queries.
  private let kind: String
  /// Whether a key is a query without filters (the service's own pages'): always admitted.
  private let isPlain: @Sendable (String) -> Bool
  /// A feed's clients, attached or being attached (called under the table's lock, takes the
  /// feed's).
  private let clients: @Sendable (Feed) -> [HTTPStream]

  init(
    follower: LiveFollower, settings: StreamSettings, kind: String,
    isPlain: @escaping @Sendable (String) -> Bool,
    clients: @escaping @Sendable (Feed) -> [HTTPStream]
  ) {
    self.follower = follower
    self.settings = settings
    self.kind = kind
    self.isPlain = isPlain
    self.clients = clients
  }

  /// How many distinct queries are followed now.
  var count: Int { state.withLock { $0.feeds.count } }

  /// Every feed followed now.
  var all: [Feed] { state.withLock { Array($0.feeds.values) } }

  /// The feed of `key`: the one followed, or a new one from `start` (which subscribes it to
  /// the follower) once admitted for `client`, past idle queries ended to make room. Throws
  /// the admission's 503 or 429, what `start` throws, and 503 when the service stopped
  /// meanwhile. The caller attaches its client to the feed, then calls ``joined(_:)``: until
  /// then the feed is not idle.
  func feed(key: String, client: String, start: () throws -> Feed) throws -> Feed {
    let (existing, ended, refusal) = state.withLock { state -> (Feed?, [Feed], (any Error)?) in
      guard !state.closed else { return (nil, [], Self.stopping) }
      if let feed = state.feeds[key] {
        state.joining[ObjectIdentifier(feed), default: 0] += 1
        return (feed, [], nil)
      }
      var ended: [Feed] = []
      if state.starting[key] == nil {
        do {
          try admit(key, client, &state, ending: &ended)
        } catch {
          return (nil, ended, error)
        }
      }
      state.starting[key, default: 0] += 1
      return (nil, ended, nil)
    }
    for feed in ended {
      follower.unsubscribe(feed)
      // Clients whose connections closed: libmicrohttpd ends them now.
      for client in clients(feed) { client.close() }
    }
    if let refusal { throw refusal }
    if let existing { return existing }
    let made: Feed
    do {
      made = try start()
    } catch {
      state.withLock { Self.finishStart(key, &$0) }
      throw error
    }
    let (kept, dropped) = state.withLock { state -> (Feed?, Feed?) in
      Self.finishStart(key, &state)
      guard !state.closed else { return (nil, made) }
      let kept = state.feeds[key] ?? made
      state.feeds[key] = kept
      state.joining[ObjectIdentifier(kept), default: 0] += 1
      return (kept, kept === made ? nil : made)
    }
    if let dropped { follower.unsubscribe(dropped) }
    guard let kept else { throw Self.stopping }
    return kept
  }

  /// The client given `feed` by ``feed(key:client:start:)`` is attached (or gave up).
  func joined(_ feed: Feed) {
    state.withLock { state in
      let id = ObjectIdentifier(feed)
      let left = (state.joining[id] ?? 1) - 1
      state.joining[id] = left > 0 ? left : nil
    }
  }

  /// Admits `key` for `client` (``admitFeed(key:plain:client:followed:creators:settings:kind:)``);
  /// past the maximum it first ends an idle query of anyone's, past the client's share one of
  /// the client's own, into `ending`: one whose clients are all gone (``HTTPStream/isGone``).
  /// O(feeds + their clients) a try, a peek at each client's socket.
  private func admit(
    _ key: String, _ client: String, _ state: inout State, ending: inout [Feed]
  ) throws {
    while true {
      do {
        try admitFeed(
          key: key, plain: isPlain(key), client: client,
          followed: Array(state.feeds.keys) + state.starting.keys, creators: &state.creators,
          settings: settings, kind: kind)
        return
      } catch let refusal as ServiceError {
        let mineOnly = refusal.status == 429
        guard
          let idle = state.feeds.first(where: { key, feed in
            !isPlain(key) && (!mineOnly || state.creators[key] == client)
              && state.joining[ObjectIdentifier(feed)] == nil
              && clients(feed).allSatisfy(\.isGone)
          })
        else { throw refusal }
        state.feeds[idle.key] = nil
        ending.append(idle.value)
      }
    }
  }

  /// Forgets `feed` (its follower failed, or it failed a read) and unsubscribes it, off the
  /// calling thread (which may be the follower's own).
  func forget(_ key: String, _ feed: Feed) {
    state.withLock { if $0.feeds[key] === feed { $0.feeds[key] = nil } }
    let follower = self.follower
    DispatchQueue.global().async { follower.unsubscribe(feed) }
  }

  /// Stops following `feed` when it is still `key`'s and has no client, none joining
  /// (checked under the table's lock, so that no client joins it meanwhile).
  func release(_ key: String, _ feed: Feed) {
    let removed = state.withLock { state -> Bool in
      guard state.feeds[key] === feed, state.joining[ObjectIdentifier(feed)] == nil,
        clients(feed).isEmpty
      else { return false }
      state.feeds[key] = nil
      return true
    }
    if removed { follower.unsubscribe(feed) }
  }

  /// Unsubscribes and returns every feed (the service is stopping); later starts are 503.
  func closeAll() -> [Feed] {
    let all = state.withLock { state -> [Feed] in
      state.closed = true
      defer { state.feeds = [:] }
      return Array(state.feeds.values)
    }
    for feed in all { follower.unsubscribe(feed) }
    return all
  }

  private static func finishStart(_ key: String, _ state: inout State) {
    let left = (state.starting[key] ?? 1) - 1
    state.starting[key] = left > 0 ? left : nil
  }

  private static var stopping: ServiceError {
    ServiceError.request(503, "The service is stopping; try again later.")
  }
}
