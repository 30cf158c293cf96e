import Dispatch
import Foundation
import Persistence
import Synchronization

/// Keeps another store in step with this one: the seed's `HistoryObserver` pattern.
///
/// It observes the source's `eventCounter` (leaving out changes by its own author, which came
/// from the other side), fetches the history after the last token it pushed, applies it to the
/// target in one transaction under its author, and remembers the token in a state file, so that
/// a restart resumes where it left off: nothing missed, nothing applied twice.
///
/// Cost per push: O(changes since the last push).
public final class StoreSync: Sendable {
  /// The store read from.
  public let sourceURL: URL
  /// The store written to.
  public let targetURL: URL
  /// The author recorded in the target, and left out of the source's feed.
  public let author: String
  /// Where the last pushed token is kept (JSON: source store identifier → token).
  public let stateURL: URL
  /// Both stores and the state file, one push at a time (see `Exclusive` for the lock order).
  private let stores: Exclusive<Stores>
  private let token = Mutex<ObservationTrackingToken?>(nil)
  private let timer = Mutex<TimerBox?>(nil)
  private let history: HistoryObserver
  private let onPush: @Sendable (Result<SyncResult, any Error>) -> Void

  // SAFETY: a dispatch source may be resumed and cancelled from any thread; nothing else of it is
  // used.
  /// Dispatch sources are safe to use from any thread.
  private struct TimerBox: @unchecked Sendable {
    let source: any DispatchSourceTimer
  }

  private struct Stores {
    let source: TripStore
    let target: TripStore
  }

  /// Prepares a sync from `source` to `target`.
  ///
  /// - Parameters:
  ///   - source: The store read from.
  ///   - target: The store written to.
  ///   - author: The author recorded in the target, and left out of the source's feed.
  ///   - state: The state file; default `<target>.sync-state.json` (for a database target, a
  ///     file in the user's data folder).
  ///   - onPush: Called after each push with its result.
  public init(
    from source: URL, to target: URL, author: String = "sync", state: URL? = nil,
    onPush: @escaping @Sendable (Result<SyncResult, any Error>) -> Void = { _ in }
  ) throws {
    sourceURL = source
    targetURL = target
    self.author = author
    stateURL = state ?? SyncState.defaultURL(for: target)
    let sourceStore = try TripStore(url: source, author: author)
    let targetStore = try TripStore(url: target, author: author)
    history = try HistoryObserver(
      container: sourceStore.container, excludedAuthors: [author],
      modelTypes: TripStore.syncedModelTypes)
    stores = Exclusive(Stores(source: sourceStore, target: targetStore))
    self.onPush = onPush
  }

  /// Pushes the changes since the last push, once.
  @discardableResult
  public func pushOnce() throws -> SyncResult {
    // A push reads one store, writes the other and then the state file: the whole push is
    // one turn, so that two pushes never apply the same feed.
    try stores.use { stores in
      let sourceID = stores.source.container.storeIdentifier.uuidString
      var state = try SyncState.read(stateURL)
      let after = state[sourceID].flatMap(DefaultHistoryToken.init)
      let feed = try stores.source.changeFeed(after: after, excludingAuthor: author)
      let result = feed.changes.isEmpty ? SyncResult() : try stores.target.apply(feed)
      state[sourceID] = feed.resumeToken.description
      try SyncState.write(state, to: stateURL)
      return result
    }
  }

  /// Pushes now and after every new transaction in the source, until ``stop()`` (or release).
  /// As a safety net it also checks once every `checkInterval` (a push with nothing new costs
  /// one history query).
  public func start(checkInterval: Duration = .seconds(1)) {
    let history = self.history
    let started = withContinuousObservation { [weak self] in
      _ = history.eventCounter
      guard let self else { return }
      do {
        self.onPush(.success(try self.pushOnce()))
      } catch {
        self.onPush(.failure(error))
      }
    }
    token.withLock { $0 = started }
    let source = DispatchSource.makeTimerSource(queue: .global())
    let interval = checkInterval.components
    let nanoseconds =
      Int(interval.seconds) * 1_000_000_000 + Int(interval.attoseconds / 1_000_000_000)
    source.schedule(
      deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
    source.setEventHandler { [weak self] in
      guard let self else { return }
      do {
        let result = try self.pushOnce()
        if result.applied + result.skipped > 0 { self.onPush(.success(result)) }
      } catch {
        self.onPush(.failure(error))
      }
    }
    source.resume()
    timer.withLock { $0 = TimerBox(source: source) }
  }

  /// Stops pushing.
  public func stop() {
    token.withLock { $0?.cancel() }
    timer.withLock {
      $0?.source.cancel()
      $0 = nil
    }
  }

  deinit { stop() }
}
