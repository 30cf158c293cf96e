internal import CMicroHTTPD
import Dispatch
import Foundation
import Synchronization

/// A response that stays open and sends bytes as they come: Server-Sent Events.
///
/// Events wait in a queue of shared texts: one transaction's events are rendered once and the
/// same storage is queued for every client (not copied), so a burst costs its size once, not
/// once per client. A client is dropped (its connection cut at once) when an event or a
/// keep-alive finds it stalled: more than ``StreamSettings/stalledLimit`` bytes (256 KiB)
/// waiting for it beyond what the kernel's socket buffers took and nothing read for
/// ``StreamSettings/stallTimeout`` (5 s); or, reading or not, more than
/// ``StreamSettings/hardLimit`` bytes (32 MiB) waiting. A client that reads keeps
/// up with any burst at its own pace; one that stops is gone within the keep-alive interval
/// plus 5 s; none holds the others back (each has its own queue), and none grows the server's
/// memory past the hard limit (in storage shared with the others). While the queue is empty
/// the connection is suspended in libmicrohttpd (no thread waits, nothing polls) and resumed
/// by the next ``send(_:)``.
///
/// Cost: O(1) per send (plus the copy into libmicrohttpd's buffer as the client reads);
/// O(1) memory per idle client beyond its connection.
public final class HTTPStream: Sendable {
  /// When a client is dropped.
  public let settings: StreamSettings

  struct State {
    /// The texts to send, oldest first, from `head`; `offset` bytes of the first are sent.
    var chunks: [String] = []
    var head = 0
    var offset = 0
    /// Bytes queued and not yet handed to libmicrohttpd.
    var waiting = 0
    var closed = false
    /// Closed for reading too slowly: the connection is cut, not ended in order.
    var dropped = false
    var suspended = false
    var connection: HTTPServer.ConnectionHandle?
    /// The connection's socket (-1 before it is attached), peeked by ``isGone``.
    var socket: Int32 = -1
    /// When the client last took bytes, or last had nothing to read.
    var lastProgress = ContinuousClock.now
  }
  private let state = Mutex(State())
  /// Called once when the client is gone (closed, dropped, or disconnected).
  let onFinish = Mutex<(@Sendable () -> Void)?>(nil)

  /// A stream that drops its client as `settings` say.
  public init(settings: StreamSettings = StreamSettings()) { self.settings = settings }

  /// Queues `text` for the client (sharing its storage); false when the client is gone or was
  /// dropped as stalled or too far behind (see ``StreamSettings``; the stream is then closed).
  @discardableResult
  public func send(_ text: String) -> Bool {
    var text = text
    text.makeContiguousUTF8()
    let count = text.utf8.count
    return state.withLock { state -> Bool in
      guard !state.closed else { return false }
      let stalled =
        state.waiting > settings.stalledLimit
        && ContinuousClock.now - state.lastProgress > settings.stallTimeout
      if stalled || state.waiting + count > settings.hardLimit {
        Self.drop(&state)
        return false
      }
      guard count > 0 else { return true }
      if state.waiting == 0 { state.lastProgress = .now }  // it was not behind
      state.chunks.append(text)
      state.waiting += count
      Self.resume(&state)
      return true
    }
  }

  /// Queues `text` once fewer than `room` bytes wait for the client, waiting while more do
  /// (a check a millisecond): for a producer that must not run ahead of its reader, such as a
  /// sync feed, whose memory is then bound by `room`. False when the client is gone, or has
  /// taken nothing for ``StreamSettings/stallTimeout`` while bytes waited (it is then
  /// dropped).
  ///
  /// Cost: O(1) a check; blocks the calling thread while the client reads.
  public func sendPaced(_ text: String, room: Int = 1 << 20) -> Bool {
    while true {
      let ready = state.withLock { state -> Bool? in
        guard !state.closed else { return nil }
        if state.waiting < room { return true }
        if ContinuousClock.now - state.lastProgress > settings.stallTimeout {
          Self.drop(&state)
          return nil
        }
        return false
      }
      switch ready {
      case nil: return false
      case true?: return send(text)
      case false?: Thread.sleep(forTimeInterval: 0.001)
      }
    }
  }

  /// Cuts the stream: what is queued is thrown away and the connection is closed without its
  /// end, so that the client sees the answer is incomplete (a producer that failed midway).
  public func abort() {
    state.withLock { state in
      guard !state.closed else { return }
      Self.drop(&state)
    }
  }

  /// Drops the client: the queue is emptied and the connection cut (under the lock).
  private static func drop(_ state: inout State) {
    state.closed = true
    state.dropped = true
    state.chunks = []
    state.head = 0
    state.offset = 0
    state.waiting = 0
    // Its socket is full, so libmicrohttpd would not ask for bytes again: cut it. The
    // connection stays valid while this lock is held (its end waits for the lock).
    if let connection = state.connection, !state.suspended {
      trips_mhd_connection_abort(connection.pointer)
    }
    resume(&state)
  }

  /// Ends the stream: what is queued is sent, then the connection closes.
  public func close() {
    state.withLock { state in
      state.closed = true
      Self.resume(&state)
    }
  }

  /// Whether the stream is still open.
  public var isOpen: Bool { state.withLock { !$0.closed } }

  /// Whether the client is gone: the stream closed, or its socket closed by the client
  /// (peeked at once; libmicrohttpd, which does not watch a suspended connection, would learn
  /// it at the next send). O(1), one system call.
  var isGone: Bool {
    state.withLock { state in
      state.closed || (state.connection != nil && trips_socket_closed(state.socket) != 0)
    }
  }

  /// Resumes a suspended connection (under the lock, so that it can never come before the
  /// suspension it undoes).
  private static func resume(_ state: inout State) {
    if state.suspended, let connection = state.connection {
      state.suspended = false
      MHD_resume_connection(connection.pointer)
    }
  }

  func attach(_ connection: HTTPServer.ConnectionHandle, socket: Int32) {
    state.withLock { state in
      state.connection = connection
      state.socket = socket
    }
  }

  /// libmicrohttpd asks for bytes: some, or none for now (the connection is suspended until
  /// the next send), or the end.
  func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
    state.withLock { state -> Int in
      var copied = 0
      while copied < max, state.head < state.chunks.count {
        var chunk = state.chunks[state.head]
        // `send` made every chunk contiguous UTF-8, so `withUTF8` copies none of them.
        let offset = state.offset
        let count = chunk.withUTF8 { bytes -> Int in
          let count = min(bytes.count - offset, max - copied)
          UnsafeMutableRawPointer(buffer + copied).copyMemory(
            from: bytes.baseAddress! + offset, byteCount: count)
          return count
        }
        copied += count
        state.offset += count
        if state.offset >= chunk.utf8.count {
          state.head += 1
          state.offset = 0
        }
      }
      state.waiting -= copied
      if copied > 0 { state.lastProgress = .now }
      if state.head == state.chunks.count {
        // All sent: the queue's storage is given back.
        state.chunks = []
        state.head = 0
      } else if state.head > 64, state.head * 2 > state.chunks.count {
        state.chunks.removeFirst(state.head)
        state.head = 0
      }
      if copied > 0 { return copied }
      // A dropped client's connection is cut at once (END_WITH_ERROR): it would not read the
      // end of the stream anyway, and its socket buffers are given back now.
      if state.dropped { return -2 }  // MHD_CONTENT_READER_END_WITH_ERROR
      if state.closed { return -1 }  // MHD_CONTENT_READER_END_OF_STREAM
      guard let connection = state.connection else { return -1 }
      state.suspended = true
      MHD_suspend_connection(connection.pointer)
      return 0
    }
  }

  /// libmicrohttpd is done with the response: the client is gone.
  func finished() {
    state.withLock {
      $0.closed = true
      $0.connection = nil
      $0.socket = -1
      $0.suspended = false
    }
    let action = onFinish.withLock { action -> (@Sendable () -> Void)? in
      defer { action = nil }
      return action
    }
    action?()
  }
}

/// When the live streams drop a client, and how often they send a keep-alive comment.
public struct StreamSettings: Sendable {
  /// Bytes that may wait for a client that has stopped reading.
  public var stalledLimit = 256 * 1024
  /// How long a client with more than ``stalledLimit`` bytes waiting may read nothing.
  public var stallTimeout: Duration = .seconds(5)
  /// Bytes that may wait for any client, reading or not.
  public var hardLimit = 32 * 1024 * 1024
  /// Time between keep-alive comments (which also check stalled clients).
  public var keepAlive: Duration = .seconds(15)
  /// Distinct live queries followed at once, of each kind (bounds streams, items streams):
  /// each holds what its query matches (a bounds feed each matching trip's coordinate, about
  /// 60 bytes a trip; an items feed the set of matching keys, about 40 bytes a trip, and the
  /// events of its last 1,024 transactions). All feeds share one follower of the store (on
  /// PostgreSQL one database session). A stream of another query past it is answered 503
  /// with `Retry-After`; clients of a query already followed always join it (a client costs
  /// its connection and its queue, about 40 KiB idle).
  public var maximumFeeds = 16
  /// Distinct live queries of each kind one client (by its address) may have started and
  /// that are still followed: a client past it gets 429 for a new query (it may still join a
  /// followed one), so that no one client holds the slots others need. The service's own
  /// pages' queries (a stream without filters, as `/map` opens) are always admitted and
  /// count toward neither limit: one feed of each kind at most.
  public var maximumFeedsPerClient = 4

  /// The defaults: 256 KiB and 5 s, 32 MiB, a comment every 15 s, 16 feeds of each kind.
  public init() {}
}

/// Sends a comment line to every open stream at an interval: it keeps proxies from closing
/// idle connections, lets a client see the connection is alive, and makes a stalled client's
/// queue be checked (see ``HTTPStream``) even when no event comes.
final class StreamKeepAlive: Sendable {
  // SAFETY: a dispatch source may be resumed and cancelled from any thread; nothing else of it is
  // used.
  private struct Timer: @unchecked Sendable { let source: any DispatchSourceTimer }
  private let timer: Timer

  /// Starts; `streams` lists the open streams each time.
  init(every interval: Duration, _ streams: @escaping @Sendable () -> [HTTPStream]) {
    let source = DispatchSource.makeTimerSource(queue: .global())
    let parts = interval.components
    let nanoseconds = max(
      Int(parts.seconds) * 1_000_000_000 + Int(parts.attoseconds / 1_000_000_000), 1_000_000)
    source.schedule(
      deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
    source.setEventHandler {
      for stream in streams() { stream.send(": keep-alive\n\n") }
    }
    source.resume()
    timer = Timer(source: source)
  }

  deinit { timer.source.cancel() }
}

/// Whether a live query new to the server may be followed (``StreamSettings/maximumFeeds``,
/// ``StreamSettings/maximumFeedsPerClient``): a plain query (no filters: the service's own
/// pages') always; another while the server follows fewer than its maximum and the client
/// has started fewer than its share. Called under a ``FeedTable``'s lock; `creators` (query key →
/// the client that started it) is pruned of queries no longer followed. Cost: O(feeds).
func admitFeed(
  key: String, plain: Bool, client: String, followed: some Collection<String>,
  creators: inout [String: String], settings: StreamSettings, kind: String
) throws {
  if plain { return }
  let live = Set(followed)
  creators = creators.filter { live.contains($0.key) }
  // The plain queries (the trips' and the stays' own, in one items dictionary) count not.
  let counted = live.count { $0 != "" && $0 != "stays " }
  guard counted < settings.maximumFeeds else {
    throw ServiceError.request(
      503,
      "This server follows \(settings.maximumFeeds) distinct live \(kind) queries, its maximum; join one of them (the same filters), or try again later."
    )
  }
  let mine = creators.values.filter { $0 == client }.count
  guard mine < settings.maximumFeedsPerClient else {
    throw ServiceError.request(
      429,
      "This client has started \(mine) distinct live \(kind) queries that are still followed, its share of the server's \(settings.maximumFeeds); close one, or join a query already followed (the same filters)."
    )
  }
  creators[key] = client
}
