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
/// The table's lock is a leaf: never held across a store read, a call to the follower or a
/// feed's own lock. Cost: O(feeds) an admission, O(1) a lookup.
final class FeedTable<Feed: LiveFeed>: Sendable {
  private struct State {
    var feeds: [String: Feed] = [:]
    /// Queries being started, with how many starts of each are under way.
    var starting: [String: Int] = [:]
    /// Who started each query followed or being started (``admitFeed(key:plain:client:followed:creators:settings:kind:)``).
    var creators: [String: String] = [:]
    var closed = false
  }
  private let state = Mutex(State())
  private let follower: LiveFollower
  private let settings: StreamSettings
  /// "item" or "bounds", as the refusals name the queries.
  private let kind: String
  /// Whether a key is a query without filters (the service's own pages'): always admitted.
  private let isPlain: @Sendable (String) -> Bool

  init(
    follower: LiveFollower, settings: StreamSettings, kind: String,
    isPlain: @escaping @Sendable (String) -> Bool
  ) {
    self.follower = follower
    self.settings = settings
    self.kind = kind
    self.isPlain = isPlain
  }

  /// How many distinct queries are followed now.
  var count: Int { state.withLock { $0.feeds.count } }

  /// Every feed followed now.
  var all: [Feed] { state.withLock { Array($0.feeds.values) } }

  /// The feed of `key`: the one followed, or a new one from `start` (which subscribes it to
  /// the follower) once admitted for `client`. Throws the admission's 503 or 429, what
  /// `start` throws, and 503 when the service stopped meanwhile. `onFailure` of a new feed is
  /// set to forget it here.
  func feed(key: String, client: String, start: () throws -> Feed) throws -> Feed {
    let existing = try state.withLock { state -> Feed? in
      guard !state.closed else { throw Self.stopping }
      if let feed = state.feeds[key] { return feed }
      if state.starting[key] == nil {
        try admitFeed(
          key: key, plain: isPlain(key), client: client,
          followed: Array(state.feeds.keys) + state.starting.keys, creators: &state.creators,
          settings: settings, kind: kind)
      }
      state.starting[key, default: 0] += 1
      return nil
    }
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
      if let feed = state.feeds[key] { return (feed, made) }
      state.feeds[key] = made
      return (made, nil)
    }
    if let dropped { follower.unsubscribe(dropped) }
    guard let kept else { throw Self.stopping }
    return kept
  }

  /// Forgets `feed` (its follower failed, or it failed a read) and unsubscribes it, off the
  /// calling thread (which may be the follower's own).
  func forget(_ key: String, _ feed: Feed) {
    state.withLock { if $0.feeds[key] === feed { $0.feeds[key] = nil } }
    let follower = self.follower
    DispatchQueue.global().async { follower.unsubscribe(feed) }
  }

  /// Stops following `feed` when it is still `key`'s and `isIdle` (checked under the table's
  /// lock, so that no client joins it meanwhile).
  func release(_ key: String, _ feed: Feed, isIdle: (Feed) -> Bool) {
    let removed = state.withLock { state -> Bool in
      guard state.feeds[key] === feed, isIdle(feed) else { return false }
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
