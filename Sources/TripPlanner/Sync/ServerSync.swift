import Dispatch
import Foundation
import Persistence
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Why a request to the server failed: its status when it answered (a 4xx is for the caller
/// to fix: a bad token, an expired history token), nil when it could not be reached.
public struct ServerSyncError: Error, CustomStringConvertible, Sendable {
  /// The HTTP status, when the server answered.
  public var status: Int?
  /// What happened, in words.
  public var message: String
  /// The message.
  public var description: String { message }

  /// An error with the server's status (nil when it could not be reached) and a message.
  public init(status: Int?, message: String) {
    self.status = status
    self.message = message
  }

  /// What kind of failure it is, from the server's status: unreachable (no status), 408, 429
  /// and 5xx are transient (the sync tries again); 404 is not found; 409 a conflict; 400, 410
  /// (an expired history token), 413 and 422 the data sent; any other 4xx (401, 403: a bad
  /// token) the caller's configuration, which trying again does not mend.
  public var kind: FailureKind {
    switch status {
    case nil, 408, 429: .transient
    case let status? where status >= 500: .transient
    case 404: .notFound
    case 409: .conflict
    case 400, 410, 413, 422: .data
    default: .misuse
    }
  }
}

/// Keeps a local store and a `trips serve` server in step over HTTP, one way or both ways.
///
/// - Push (local → server): after every local transaction (a `HistoryObserver`, as
///   ``StoreSync``), the changes after the last pushed token, less those this sync applied
///   here, are sent with `POST /changes` and the writer's token, in batches of at most
///   ``pushBatchBytes`` (well under the server's body limit): each batch is applied on the
///   server in a transaction of its own and the pushed token advances after it, so a push of any
///   size goes through and one cut short resumes at its last batch (a batch that ends inside a
///   transaction resumes at that transaction's start, which applies again as a no-op). The
///   server records the changes under the token's name. A push that fails (the server not
///   reachable yet, down, or busy) is tried again with back-off (0.25 s doubling to 5 s) until
///   it succeeds; a refusal (4xx) is reported and tried again on the next change.
/// - Pull (server → local): the server's changes after the last pulled token, less those
///   recorded under this writer's name (its own pushes), are read with `GET /changes` and
///   applied here under ``localAuthor`` as they arrive, in batches, the pulled token recorded
///   after each (see ``pullOnce()``). It pulls when it connects and after
///   every event of the server's items stream (`/collections/trips/items/stream`): it follows
///   the stream, it does not poll.
///
/// Each side's last token is kept in the state file after the change is applied, so a restart
/// (after a crash, a `kill -9`, a dropped connection) sends or reads again at most the last
/// feed, and applying a feed twice changes nothing: nothing is missed, nothing is applied twice.
/// A connection that drops is made again with back-off (0.25 s doubling to 5 s); failures are
/// reported to `onEvent` meanwhile.
///
/// Cost per push: O(changes since the last one), one HTTP request per ``pushBatchBytes`` of
/// feed. Per pull: O(changes since the last one), one HTTP request.
public final class ServerSync: Sendable {
  /// Which ways changes go.
  public struct Directions: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Local changes to the server.
    public static let push = Directions(rawValue: 1)
    /// The server's changes to the local store.
    public static let pull = Directions(rawValue: 2)
  }

  /// What a running sync reports.
  public enum Event: Sendable {
    /// A push applied this many changes on the server (and skipped the others).
    case pushed(SyncResult)
    /// A pull applied this many changes here.
    case pulled(SyncResult)
    /// Something failed; it is tried again (the next change, or the stream reconnecting).
    case failed(any Error)
  }

  /// The server's base URL (`http://host:port`).
  public let server: URL
  /// The writer on the server: the name it records pushes under, and the bearer token.
  public let writer: (name: String, token: String)?
  /// The author of pulled changes here; changes by it here are not pushed.
  public let localAuthor: String
  /// The state file.
  public let stateURL: URL
  /// Which ways.
  public let directions: Directions
  /// The most bytes of feed one `POST /changes` carries (4 MiB by default; a change larger than
  /// this goes alone).
  public let pushBatchBytes: Int
  /// The changes a pull applies at once (the last batch may be smaller). The server drops a
  /// client that takes nothing for 5 s while bytes wait (`StreamSettings.stallTimeout`), and
  /// the answer is not read while a batch is applied: a batch must apply well within that
  /// (a full pull of 700,000 changes into SQLite ran at about 9,000 a second here, so 500 take
  /// about 60 ms).
  public let pullBatchChanges: Int

  /// The local store, one apply at a time (its container is shared: a push reads a feed in a
  /// context of its own, outside this).
  let store: Exclusive<TripStore>
  /// The local store's container.
  let container: ModelContainer
  private let history: HistoryObserver
  private let onEvent: @Sendable (Event) -> Void
  private let observation = Mutex<ObservationTrackingToken?>(nil)
  private let stream = Mutex<(any EventStreamFollower)?>(nil)
  /// The state file, read and written one caller at a time.
  let stateFile = Exclusive(())
  /// One push at a time, and one pull at a time (a push and a pull may overlap): held across
  /// the HTTP calls, which the store never is (a push waiting 30 s on its server held every
  /// pull, and the store, that long). The lock order is `Exclusive`'s.
  private let pushing = Exclusive(())
  private let pulling = Exclusive(())
  private let retry = Mutex(Retry())
  private let retryTimer = Mutex<RetryTimer?>(nil)

  /// When a failed push is tried again.
  private struct Retry {
    var pending = false
    var delay = 0.25
    var next = ContinuousClock.now
  }

  // SAFETY: a dispatch source may be resumed and cancelled from any thread; nothing else of it is
  // used.
  /// Dispatch sources are safe to use from any thread.
  private struct RetryTimer: @unchecked Sendable {
    let source: any DispatchSourceTimer
  }

  /// Prepares a sync of the store at `local` with `server`.
  ///
  /// - Parameters:
  ///   - local: The local store file.
  ///   - server: The server's base URL, as `trips serve` prints it.
  ///   - directions: Push, pull, or both.
  ///   - writer: Needed to push (the server takes writes with a token only); its name is also
  ///     left out of pulls, so that this sync's own pushes do not come back.
  ///   - localAuthor: The author of pulled changes here.
  ///   - state: The state file; default `<local>.sync-state.json` (for a database, a file in
  ///     the user's data folder).
  ///   - pushBatchBytes: The most bytes of feed one push request carries.
  ///   - pullBatchChanges: The changes a pull applies at once.
  ///   - onEvent: Called after each push or pull that moved something, and on failures.
  /// - Throws: ``TripPlannerError`` with ``TripPlannerError/Code/invalidInput`` for a URL
  ///   that is not `http` or `https` or has a query or fragment, or a push without a writer.
  public init(
    local: URL, server: URL, directions: Directions, writer: (name: String, token: String)?,
    localAuthor: String = "sync", state: URL? = nil, pushBatchBytes: Int = 4 << 20,
    pullBatchChanges: Int = 500,
    onEvent: @escaping @Sendable (Event) -> Void = { _ in }
  ) throws {
    guard ["http", "https"].contains(server.scheme?.lowercased() ?? ""), server.host != nil
    else {
      throw TripPlannerError(
        code: .invalidInput,
        message: "\(server.absoluteString) is not an http:// or https:// server address.")
    }
    // Requests are made by the server's path: a query or fragment would be dropped unseen.
    guard server.query == nil, server.fragment == nil else {
      throw TripPlannerError(
        code: .invalidInput,
        message:
          "\(server.absoluteString) has a query or a fragment; give the server's address without them, as 'trips serve' prints it."
      )
    }
    if directions.contains(.push), writer == nil {
      throw TripPlannerError(
        code: .invalidInput,
        message: "Pushing to a server needs a writer's token (the server takes writes with one).")
    }
    self.server = server
    self.writer = writer
    self.localAuthor = localAuthor
    self.directions = directions
    self.pushBatchBytes = max(1, pushBatchBytes)
    self.pullBatchChanges = max(1, pullBatchChanges)
    stateURL = state ?? SyncState.defaultURL(for: local)
    let store = try TripStore(url: local, author: localAuthor)
    history = try HistoryObserver(
      container: store.container, excludedAuthors: [localAuthor],
      modelTypes: TripStore.syncedModelTypes)
    self.store = Exclusive(store)
    container = store.container
    self.onEvent = onEvent
  }

  /// The state file's key of the pulled token: the server's address.
  var pullKey: String { "pull " + server.absoluteString }

  /// Sends the local changes since the last push, once, in batches of at most
  /// ``pushBatchBytes``; the pushed token is recorded after each batch the server applied.
  ///
  /// The feed is read as it is sent (`TripStore/forEachFeedChange(after:excludingAuthor:_:)`,
  /// in a context and a read transaction of its own, outside the store's turn, so pulls go on
  /// meanwhile): the push holds one batch's text, never the whole feed. Memory: O(one batch +
  /// the feed reader's, a few dozen bytes per row changed).
  ///
  /// - Throws: ``ServerSyncError`` when a batch fails; the batches before it stay pushed.
  @discardableResult
  public func pushOnce() throws -> SyncResult {
    guard let writer else { return SyncResult() }
    return try pushing.use { _ in try pushTurn(writer) }
  }

  /// Applies the server's changes since the last pull, once, as they arrive.
  ///
  /// The answer to `GET /changes` is read line by line (over a socket of its own for
  /// `http://`, no faster than the changes are applied; `https://` answers are read whole
  /// first), and every ``pullBatchChanges`` changes are applied in the store's turn, as the
  /// server applies a push's batches: the token recorded after a batch is its last
  /// transaction's when the batch ends between two, else the one before the transaction it
  /// ends in, so a pull cut short resumes there (what it applies again is skipped). A bad line
  /// stops the pull: the batches complete before it stay applied, nothing after it is.
  /// Memory: O(one batch of changes + 64 KiB).
  ///
  /// - Throws: ``ServerSyncError`` when the server cannot be reached or refuses;
  ///   ``TripPlannerError`` with `invalidInput` for a feed with a bad line or cut short (the
  ///   batches before it stay applied).
  @discardableResult
  public func pullOnce() throws -> SyncResult {
    try pulling.use { _ in try pullTurn() }
  }

  /// The state file's key of the pushed token: the local store's identity.
  var pushKey: String { "push " + container.storeIdentifier.uuidString }

  func record(_ key: String, _ token: DefaultHistoryToken) throws {
    try stateFile.use { _ in
      var state = try SyncState.read(stateURL)
      state[key] = token.description
      try SyncState.write(state, to: stateURL)
    }
  }

  /// Starts: pushes now and after every local transaction, pulls now and after every event of
  /// the server's items stream, until ``stop()``.
  public func start() {
    if directions.contains(.push) {
      let history = self.history
      let started = withContinuousObservation { [weak self] in
        _ = history.eventCounter
        self?.attemptPush()
      }
      observation.withLock { $0 = started }
      let source = DispatchSource.makeTimerSource(queue: .global())
      source.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
      source.setEventHandler { [weak self] in
        guard let self else { return }
        let due = self.retry.withLock { $0.pending && ContinuousClock.now >= $0.next }
        if due { self.attemptPush() }
      }
      source.resume()
      retryTimer.withLock { $0 = RetryTimer(source: source) }
    }
    if directions.contains(.pull) {
      let url = server.appendingPathComponent("collections/trips/items/stream")
      let handler: @Sendable (ItemsStreamClient.Event) -> Void = { [weak self] event in
        guard let self else { return }
        switch event {
        case .connected, .changed:
          do {
            let result = try self.pullOnce()
            if result.applied + result.skipped > 0 { self.onEvent(.pulled(result)) }
          } catch {
            self.onEvent(.failed(error))
          }
        case .failed(let error):
          self.onEvent(.failed(error))
        }
      }
      // Plain HTTP on a socket of its own (URLSession spins while a stream is quiet); TLS
      // through URLSession.
      let client: any EventStreamFollower =
        url.scheme?.lowercased() == "http"
        ? PlainEventStream(url: url, handler: handler)
        : ItemsStreamClient(url: url, handler: handler)
      stream.withLock { $0 = client }
      client.start()
    }
  }

  /// Pushes; after a failure, schedules the next attempt (back-off 0.25 s doubling to 5 s).
  private func attemptPush() {
    do {
      let result = try pushOnce()
      retry.withLock { $0 = Retry() }
      if result.applied + result.skipped > 0 { onEvent(.pushed(result)) }
    } catch {
      retry.withLock {
        $0.pending = true
        $0.next = .now + .milliseconds(Int($0.delay * 1000))
        $0.delay = min($0.delay * 2, 5)
      }
      onEvent(.failed(error))
    }
  }

  /// Stops following both sides.
  public func stop() {
    retryTimer.withLock {
      $0?.source.cancel()
      $0 = nil
    }
    observation.withLock {
      $0?.cancel()
      $0 = nil
    }
    stream.withLock {
      $0?.stop()
      $0 = nil
    }
  }

  deinit { stop() }

  /// Sends a request and waits for it (30 s at most): the body of a 2xx answer, or an error
  /// with the server's own description.
  static func send(_ request: URLRequest) throws -> Data {
    var request = request
    request.timeoutInterval = 30
    let box = Mutex<Result<(Data, HTTPURLResponse), any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let task = URLSession.shared.dataTask(with: request) { data, response, error in
      box.withLock {
        if let error {
          $0 = .failure(error)
        } else if let response = response as? HTTPURLResponse {
          $0 = .success((data ?? Data(), response))
        } else {
          $0 = .failure(URLError(.badServerResponse))
        }
      }
      done.signal()
    }
    task.resume()
    done.wait()
    let url = request.url?.absoluteString ?? "the server"
    switch box.withLock({ $0 })! {
    case .failure(let error):
      throw ServerSyncError(
        status: nil, message: "Cannot reach \(url): \(error.localizedDescription)")
    case .success(let (data, response)):
      guard (200..<300).contains(response.statusCode) else {
        let description =
          (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["description"]
          as? String ?? String(decoding: data.prefix(200), as: UTF8.self)
        throw ServerSyncError(
          status: response.statusCode,
          message:
            "\(request.httpMethod ?? "GET") \(url) answered \(response.statusCode): \(description)")
      }
      return data
    }
  }
}
