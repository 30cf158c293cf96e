import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// SAFETY: its mutable state is in `state`, a mutex; `url` and `handler` are immutable and
// `Sendable`.
/// Follows a Server-Sent Events stream over plain HTTP/1.1 on a socket of its own, one thread
/// blocked in `recv` while the stream is quiet.
///
/// FoundationNetworking's `URLSession` on Linux spins while a streamed response is idle (about
/// 95% of a core for a stream that sends nothing, measured here against `curl -N` at 0%), and a
/// sync watcher waits on its stream all day; `https://` streams still go through
/// ``ItemsStreamClient``. The response may be chunked (as `trips serve` sends it) or not; each
/// block that ends with a blank line and holds an `event:` line is one change. Reconnects with
/// back-off (0.25 s doubling to 5 s); 40 s without a byte (the server sends a comment every
/// 15 s) is a dead connection. Cost while quiet: none; per event: O(bytes).
final class PlainEventStream: EventStreamFollower, Sendable {
  typealias Event = ItemsStreamClient.Event

  private let url: URL
  private let handler: @Sendable (Event) -> Void
  private struct State {
    var stopped = false
    /// The connected socket, owned by the following thread (it closes it, under this lock);
    /// `stop()` only shuts it down, to wake a blocked `recv`.
    var socket: Int32 = -1
  }
  private let state = Mutex(State())

  init(url: URL, handler: @escaping @Sendable (Event) -> Void) {
    self.url = url
    self.handler = handler
  }

  private var isStopped: Bool { state.withLock { $0.stopped } }

  func start() {
    let thread = Thread { [self] in run() }
    thread.name = "trips.sync.stream"
    thread.start()
  }

  func stop() {
    state.withLock { state in
      state.stopped = true
      if state.socket >= 0 { _ = shutdown(state.socket, Int32(SHUT_RDWR)) }
    }
  }

  private func run() {
    var delay = 0.25
    while !isStopped {
      var reason = "closed by the server"
      do {
        try follow { delay = 0.25 }
      } catch let error as ServerSyncError where error.status != nil {
        if !isStopped { handler(.failed(error)) }
      } catch {
        reason = "\(error)"
      }
      guard !isStopped else { return }
      handler(
        .failed(
          ServerSyncError(
            status: nil,
            message: "The stream \(url.absoluteString) ended (\(reason)); reconnecting.")))
      var waited = 0.0
      while waited < delay, !isStopped {
        Thread.sleep(forTimeInterval: 0.05)
        waited += 0.05
      }
      delay = min(delay * 2, 5)
    }
  }

  /// Connects, sends the request and reads the stream until it ends; `connected` is called
  /// once the server answered 200.
  private func follow(connected: () -> Void) throws {
    guard let host = url.host, !host.isEmpty else { throw PlainHTTP.Failure("no host in the URL") }
    let port = url.port ?? 80
    let socket = try PlainHTTP.connect(host: host, port: port)
    let registered = state.withLock { state -> Bool in
      guard !state.stopped else { return false }
      state.socket = socket
      return true
    }
    defer {
      state.withLock { state in
        if state.socket == socket { state.socket = -1 }
        close(socket)
      }
    }
    guard registered else { return }
    var timeout = timeval(tv_sec: 40, tv_usec: 0)
    _ = setsockopt(
      socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let request = PlainHTTP.head("GET", url, headers: [("Accept", "text/event-stream")])
    try PlainHTTP.send(request, on: socket)
    var reader = PlainHTTP.ResponseReader()
    var events = EventBlocks()
    var chunk = [UInt8](repeating: 0, count: 16_384)
    while true {
      let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
      if count < 0 {
        if errno == EINTR { continue }
        if errno == EAGAIN || errno == EWOULDBLOCK {
          throw PlainHTTP.Failure("no byte for 40 s")
        }
        throw PlainHTTP.Failure(String(cString: strerror(errno)))
      }
      if count == 0 { return }
      let answer = try reader.feed(chunk[..<count])
      if let status = answer.status {
        guard status == 200 else {
          throw ServerSyncError(
            status: status, message: "\(url.absoluteString) answered \(status).")
        }
        connected()
        if !isStopped { handler(.connected) }
      }
      if !answer.body.isEmpty, events.feed(answer.body) > 0, !isStopped { handler(.changed) }
      if answer.ended { return }
    }
  }
}

/// Splits an event stream's text into blocks ended by a blank line and counts the blocks
/// that hold an `event:` line (comments and `retry:` are not changes): what both stream
/// followers count as changes.
///
/// A block over 1 MiB is not one `trips serve` sends: its bytes are dropped (all but the last,
/// which may start the blank line), so a server that never ends a block cannot grow the
/// follower's memory. An event lost that way only delays the pull to the next one.
struct EventBlocks {
  static let maximumBlock = 1 << 20
  private(set) var pending: [UInt8] = []

  mutating func feed(_ bytes: [UInt8]) -> Int {
    pending.append(contentsOf: bytes)
    var count = 0
    while let end = PlainHTTP.ResponseReader.find([10, 10], in: pending) {
      let block = String(decoding: pending[..<end], as: UTF8.self)
      pending.removeFirst(end + 2)
      if block.split(separator: "\n").contains(where: { $0.hasPrefix("event:") }) { count += 1 }
    }
    if pending.count > Self.maximumBlock { pending.removeFirst(pending.count - 1) }
    return count
  }
}
