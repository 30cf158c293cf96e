import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// HTTP/1.1 on a socket of its own, for what FoundationNetworking's `URLSession` does poorly on
/// Linux: following an event stream that is quiet for hours (it spins while a streamed answer
/// is idle) and reading a long answer no faster than its reader takes it (it buffers the whole
/// body). Plain `http://` only; `https://` goes through `URLSession`.
enum PlainHTTP {
  /// Writes all of `bytes` to `socket`.
  static func send(_ bytes: [UInt8], on socket: Int32) throws {
    var sent = 0
    while sent < bytes.count {
      // MSG_NOSIGNAL: a server gone mid-request is an error here, not SIGPIPE in a program
      // that uses the library without ignoring it (`trips` does ignore it).
      let count = bytes[sent...].withUnsafeBytes {
        Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      if count < 0, errno == EINTR { continue }
      guard count > 0 else { throw Failure(String(cString: strerror(errno))) }
      sent += count
    }
  }

  /// A request's head: `method` and `url`'s path and query, `Host`, then `headers`.
  static func head(_ method: String, _ url: URL, headers: [(String, String)]) -> [UInt8] {
    let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
    var target = components?.percentEncodedPath ?? "/"
    if target.isEmpty { target = "/" }
    if let query = components?.percentEncodedQuery { target += "?" + query }
    let host = url.host ?? ""
    let hostHeader = (host.contains(":") ? "[\(host)]" : host) + (url.port.map { ":\($0)" } ?? "")
    var text = "\(method) \(target) HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: trips\r\n"
    for (name, value) in headers { text += "\(name): \(value)\r\n" }
    return Array((text + "\r\n").utf8)
  }

  /// Sends a GET for `url` on a connection of its own and hands `body` the answer's bytes as
  /// they arrive (unchunked), after `status` got the answer's status; a reader that is slow
  /// slows the server (nothing waits in memory but one read of 64 KiB). No byte for `timeout`
  /// seconds is a failure. The connection is closed on return.
  static func get(
    _ url: URL, headers: [(String, String)], timeout: Int = 30, status: (Int) throws -> Void,
    body: (ArraySlice<UInt8>) throws -> Void
  ) throws {
    guard url.scheme?.lowercased() == "http", let host = url.host, !host.isEmpty else {
      throw Failure("not an http:// URL with a host")
    }
    let socket = try connect(host: host, port: url.port ?? 80, timeout: timeout)
    defer { close(socket) }
    do {
      try exchange(on: socket, url, headers: headers, timeout: timeout, status: status, body: body)
    } catch var failure as Failure {
      failure.connected = true
      throw failure
    }
  }

  /// ``get(_:headers:timeout:status:body:)`` on a connected socket.
  private static func exchange(
    on socket: Int32, _ url: URL, headers: [(String, String)], timeout: Int,
    status: (Int) throws -> Void, body: (ArraySlice<UInt8>) throws -> Void
  ) throws {
    var wait = timeval(tv_sec: timeout, tv_usec: 0)
    _ = setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    try send(head("GET", url, headers: headers + [("Connection", "close")]), on: socket)
    var reader = ResponseReader()
    var buffer = [UInt8](repeating: 0, count: 65_536)
    var endsAtClose = false
    while true {
      let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
      if count < 0 {
        if errno == EINTR { continue }
        if errno == EAGAIN || errno == EWOULDBLOCK { throw Failure("no byte for \(timeout) s") }
        throw Failure(String(cString: strerror(errno)))
      }
      if count == 0 {
        // A chunked answer ends with its last chunk, one of a given length with its last byte;
        // one that closes before that was cut short.
        guard endsAtClose else { throw Failure("the connection closed before the answer's end") }
        return
      }
      let answer = try reader.feed(buffer[..<count])
      if let code = answer.status {
        endsAtClose = reader.endsAtClose
        try status(code)
      }
      if !answer.body.isEmpty { try body(answer.body[...]) }
      if answer.ended { return }
    }
  }

  /// A connected TCP socket to `host`:`port`, the first address that answers.
  /// A connected TCP socket to `host`:`port`, the first address that answers within
  /// `timeout` seconds (a host that drops packets fails then, not after the kernel's minutes
  /// of retries).
  static func connect(host: String, port: Int, timeout: Int = 30) throws -> Int32 {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var list: UnsafeMutablePointer<addrinfo>?
    let resolved = getaddrinfo(host, String(port), &hints, &list)
    guard resolved == 0, let first = list else {
      throw Failure("cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
    }
    defer { freeaddrinfo(first) }
    var lastError = "no address"
    var next: UnsafeMutablePointer<addrinfo>? = first
    while let address = next {
      next = address.pointee.ai_next
      let socket = Glibc.socket(
        address.pointee.ai_family,
        address.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue)
          | Int32(SOCK_NONBLOCK.rawValue), address.pointee.ai_protocol)
      guard socket >= 0 else { continue }
      if Glibc.connect(socket, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0
        || errno == EINPROGRESS
      {
        var descriptor = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
        var ready = poll(&descriptor, 1, Int32(timeout * 1000))
        while ready < 0 && errno == EINTR { ready = poll(&descriptor, 1, Int32(timeout * 1000)) }
        var failure: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if ready == 1, getsockopt(socket, SOL_SOCKET, SO_ERROR, &failure, &length) == 0,
          failure == 0
        {
          // Blocking again: reads wait (up to their own timeout) as before.
          _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) & ~O_NONBLOCK)
          return socket
        }
        lastError =
          ready == 0 ? "no answer in \(timeout) s" : String(cString: strerror(failure))
      } else {
        lastError = String(cString: strerror(errno))
      }
      close(socket)
    }
    throw Failure(lastError)
  }

  /// Why an exchange failed: what the socket or the response said.
  struct Failure: Error, CustomStringConvertible {
    var description: String
    /// Whether the server was reached (the failure came after connecting).
    var connected = false
    init(_ description: String) { self.description = description }
  }

  /// Reads an HTTP/1.1 response as it arrives: the status once the head is complete, then the
  /// body's bytes, unchunked when the response is chunked.
  struct ResponseReader {
    private var pending: [UInt8] = []
    private var headRead = false
    private var chunked = false
    /// The body's bytes still to come, when the head gave a `Content-Length`.
    private var lengthLeft: Int?
    /// Whether the body is chunked (known once the head is read): its end is then its last
    /// chunk, not the connection's close.
    var isChunked: Bool { chunked }
    /// Whether the body ends only when the server closes the connection (neither chunked nor
    /// of a given length).
    var endsAtClose: Bool { !chunked && lengthLeft == nil }
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
          if pending.count > 65_536 { throw Failure("a response head over 64 KiB") }
          return answer
        }
        let head = String(decoding: pending[..<end], as: UTF8.self)
        pending.removeFirst(end + 4)
        headRead = true
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusWords = lines.first?.split(separator: " ") ?? []
        guard statusWords.count >= 2, statusWords[0].hasPrefix("HTTP/1."),
          let status = Int(statusWords[1])
        else { throw Failure("not an HTTP/1.1 response") }
        // An interim answer (100 Continue, 103 Early Hints) is passed over: the final one
        // follows it.
        if (100..<200).contains(status) {
          headRead = false
          return try feed([])
        }
        answer.status = status
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
          let parts = line.split(separator: ":", maxSplits: 1)
          guard parts.count == 2 else { continue }
          fields[parts[0].trimmingCharacters(in: .whitespaces).lowercased()] = parts[1]
            .trimmingCharacters(in: .whitespaces)
        }
        chunked = fields["transfer-encoding"]?.lowercased().contains("chunked") ?? false
        if status == 204 || status == 304 {
          lengthLeft = 0
        } else if !chunked, let text = fields["content-length"] {
          guard let length = Int(text), length >= 0 else { throw Failure("a bad Content-Length") }
          lengthLeft = length
        }
      }
      guard chunked else {
        if let left = lengthLeft {
          let take = min(left, pending.count)
          answer.body = Array(pending[..<take])
          lengthLeft = left - take
          if take == left {
            answer.ended = true
            finished = true
            pending = []
          } else {
            pending.removeAll(keepingCapacity: true)
          }
          return answer
        }
        answer.body = pending
        pending.removeAll(keepingCapacity: true)
        return answer
      }
      while true {
        if chunkTrailer {
          guard pending.count >= 2 else { break }
          guard pending[0] == 13, pending[1] == 10 else { throw Failure("a bad chunk") }
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
          if pending.count > 1024 { throw Failure("a chunk size line over 1 KiB") }
          break
        }
        let line = String(decoding: pending[..<end], as: UTF8.self)
        pending.removeFirst(end + 2)
        let digits = line.split(separator: ";").first.map(String.init) ?? ""
        guard let size = Int(digits.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0
        else { throw Failure("a bad chunk size") }
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
