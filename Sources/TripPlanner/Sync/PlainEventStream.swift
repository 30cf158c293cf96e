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
    guard let host = url.host, !host.isEmpty else { throw StreamFailure("no host in the URL") }
    let port = url.port ?? 80
    let socket = try Self.connect(host: host, port: port)
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
    let path = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? "/"
    let hostHeader = (host.contains(":") ? "[\(host)]" : host) + (url.port.map { ":\($0)" } ?? "")
    let request = Array(
      ("GET \(path.isEmpty ? "/" : path) HTTP/1.1\r\nHost: \(hostHeader)\r\n"
        + "Accept: text/event-stream\r\nUser-Agent: trips\r\n\r\n").utf8)
    var sent = 0
    while sent < request.count {
      // MSG_NOSIGNAL: a server gone mid-request is an error here, not SIGPIPE in a program
      // that uses the library without ignoring it (`trips` does ignore it).
      let count = request[sent...].withUnsafeBytes {
        send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      if count < 0, errno == EINTR { continue }
      guard count > 0 else { throw StreamFailure(String(cString: strerror(errno))) }
      sent += count
    }
    var reader = ResponseReader()
    var events = EventBlocks()
    var chunk = [UInt8](repeating: 0, count: 16_384)
    while true {
      let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
      if count < 0 {
        if errno == EINTR { continue }
        if errno == EAGAIN || errno == EWOULDBLOCK {
          throw StreamFailure("no byte for 40 s")
        }
        throw StreamFailure(String(cString: strerror(errno)))
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

  /// A connected TCP socket to `host`:`port`, the first address that answers.
  private static func connect(host: String, port: Int) throws -> Int32 {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var list: UnsafeMutablePointer<addrinfo>?
    let resolved = getaddrinfo(host, String(port), &hints, &list)
    guard resolved == 0, let first = list else {
      throw StreamFailure("cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
    }
    defer { freeaddrinfo(first) }
    var lastError = "no address"
    var next: UnsafeMutablePointer<addrinfo>? = first
    while let address = next {
      next = address.pointee.ai_next
      let socket = Glibc.socket(
        address.pointee.ai_family, address.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue),
        address.pointee.ai_protocol)
      guard socket >= 0 else { continue }
      if Glibc.connect(socket, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 {
        return socket
      }
      lastError = String(cString: strerror(errno))
      close(socket)
    }
    throw StreamFailure(lastError)
  }

  struct StreamFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
  }

  /// Reads an HTTP/1.1 response as it arrives: the status once the head is complete, then the
  /// body's bytes, unchunked when the response is chunked.
  struct ResponseReader {
    private var pending: [UInt8] = []
    private var headRead = false
    private var chunked = false
    /// Bytes left of the current chunk, or nil when a chunk's size line is next.
    private var chunkLeft: Int?
    private var chunkTrailer = false
    /// The last chunk has come: what follows (trailers) is not read.
    private var finished = false

    struct Answer {
      var status: Int?
      var body: [UInt8] = []
      var ended = false
    }

    /// The head has at most 64 KiB; a chunk's size line at most 1 KiB.
    mutating func feed(_ bytes: ArraySlice<UInt8>) throws -> Answer {
      var answer = Answer()
      guard !finished else { return answer }
      pending.append(contentsOf: bytes)
      if !headRead {
        guard let end = Self.find([13, 10, 13, 10], in: pending) else {
          if pending.count > 65_536 { throw StreamFailure("a response head over 64 KiB") }
          return answer
        }
        let head = String(decoding: pending[..<end], as: UTF8.self)
        pending.removeFirst(end + 4)
        headRead = true
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusWords = lines.first?.split(separator: " ") ?? []
        guard statusWords.count >= 2, statusWords[0].hasPrefix("HTTP/1."),
          let status = Int(statusWords[1])
        else { throw StreamFailure("not an HTTP/1.1 response") }
        answer.status = status
        chunked = lines.dropFirst().contains { line in
          let parts = line.split(separator: ":", maxSplits: 1)
          return parts.count == 2
            && parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "transfer-encoding"
            && parts[1].lowercased().contains("chunked")
        }
      }
      guard chunked else {
        answer.body = pending
        pending.removeAll(keepingCapacity: true)
        return answer
      }
      while true {
        if chunkTrailer {
          guard pending.count >= 2 else { break }
          guard pending[0] == 13, pending[1] == 10 else { throw StreamFailure("a bad chunk") }
          pending.removeFirst(2)
          chunkTrailer = false
        }
        if let left = chunkLeft {
          let take = min(left, pending.count)
          answer.body.append(contentsOf: pending[..<take])
          pending.removeFirst(take)
          if take == left {
            chunkLeft = nil
            chunkTrailer = true
          } else {
            chunkLeft = left - take
            break
          }
          continue
        }
        guard let end = Self.find([13, 10], in: pending) else {
          if pending.count > 1024 { throw StreamFailure("a chunk size line over 1 KiB") }
          break
        }
        let line = String(decoding: pending[..<end], as: UTF8.self)
        pending.removeFirst(end + 2)
        let digits = line.split(separator: ";").first.map(String.init) ?? ""
        guard let size = Int(digits.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0
        else { throw StreamFailure("a bad chunk size") }
        if size == 0 {
          answer.ended = true
          finished = true
          pending = []
          break
        }
        chunkLeft = size
      }
      return answer
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8]) -> Int? {
      guard bytes.count >= needle.count else { return nil }
      var index = 0
      while index + needle.count <= bytes.count {
        if bytes[index] == needle[0], bytes[index..<index + needle.count].elementsEqual(needle) {
          return index
        }
        index += 1
      }
      return nil
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
    while let end = PlainEventStream.ResponseReader.find([10, 10], in: pending) {
      let block = String(decoding: pending[..<end], as: UTF8.self)
      pending.removeFirst(end + 2)
      if block.split(separator: "\n").contains(where: { $0.hasPrefix("event:") }) { count += 1 }
    }
    if pending.count > Self.maximumBlock { pending.removeFirst(pending.count - 1) }
    return count
  }
}
