import Foundation
import Persistence

/// An HTTP request as the service's handlers see it: method, decoded path and query, headers
/// (names in lower case) and the whole body.
public struct HTTPRequest: Sendable {
  /// `GET`, `POST`, …
  public var method: String
  /// The path, percent-decoded (`/collections/trips/items`).
  public var path: String
  /// The query parameters in order, percent-decoded; a key without `=` has an empty value.
  public var query: [(name: String, value: String)]
  /// The headers, names in lower case.
  public var headers: [String: String]
  /// The body (empty for most requests).
  public var body: Data
  /// The client's address (IPv4 or IPv6, without its port); empty when not known (a request
  /// made without a socket).
  public var clientAddress = ""

  /// The client as fair shares count it (`HTTPServer.shareKey(_:)`): its IPv4 address, or
  /// its IPv6 address's /64 network.
  public var client: String { HTTPServer.shareKey(clientAddress) }

  /// Creates a request (for tests and for embedding without a socket).
  public init(
    method: String, path: String, query: [(name: String, value: String)] = [],
    headers: [String: String] = [:], body: Data = Data()
  ) {
    self.method = method
    self.path = path
    self.query = query
    self.headers = headers
    self.body = body
  }

  /// The header's value (`name` in any case).
  public func header(_ name: String) -> String? { headers[name.lowercased()] }

  /// Every value given for the query parameter `name`.
  public func queryValues(_ name: String) -> [String] {
    query.filter { $0.name == name }.map(\.value)
  }
}

/// An HTTP response: status, headers and body.
public struct HTTPResponse: Sendable {
  /// The status code.
  public var status: Int
  /// Header lines, in order.
  public var headers: [(name: String, value: String)]
  /// The body.
  public var body: Data
  /// For a response that stays open (Server-Sent Events): its bytes come from this stream,
  /// after ``body``'s.
  public var stream: HTTPStream?
  /// What the server's log says of this response beside its status line (a server error's
  /// cause); never sent to the client.
  var logDetail: String?

  /// Creates a response.
  public init(
    status: Int, headers: [(name: String, value: String)] = [], body: Data = Data(),
    stream: HTTPStream? = nil
  ) {
    self.status = status
    self.headers = headers
    self.body = body
    self.stream = stream
  }
}

/// The limits that keep a server responsive under hostile or careless clients.
public struct HTTPLimits: Sendable {
  /// The largest request body read; a larger one is answered 413 without being read (when its
  /// `Content-Length` says so) or as soon as it passes the limit.
  public var maximumBodyBytes = 16 * 1024 * 1024
  /// The most memory all request bodies being read at once may take: a request whose body
  /// would pass it is answered 503 with `Retry-After` (before it is read when its
  /// `Content-Length` says so). Bodies are read only for requests that were authorized from
  /// their headers, so only writers with a token spend it.
  public var maximumBodyBytesInFlight = 128 * 1024 * 1024
  /// Connections open at once; more are refused by the kernel's backlog, not served slowly.
  public var maximumConnections: UInt32 = 4096
  /// Connections open at once from one address (0: no limit of its own).
  public var maximumConnectionsPerAddress: UInt32 = 0
  /// Seconds a connection may stay idle (or dribble a request) before it is closed.
  public var idleTimeoutSeconds: UInt32 = 30
  /// Memory for one connection's request line and headers (a longer request line or header
  /// block is answered 414 or 431 by libmicrohttpd).
  public var connectionMemoryBytes = 64 * 1024
  /// Threads that serve requests: one per processor (at least 2). More threads than cores
  /// only add waiting for requests that compute (a bbox page at 1M trips on 2 cores: p99 52 ms
  /// with 4 threads, 29 ms with 2, at a slightly higher rate); a request that waits on a
  /// remote database holds its thread, so a server on PostgreSQL may want more.
  public var threads: UInt32 = UInt32(max(2, ProcessInfo.processInfo.activeProcessorCount))
  /// Seconds one request may work (its handler and the store's queries: `WorkDeadline`)
  /// before it is stopped and answered 503; a request whose client hung up is stopped within
  /// about 100 ms of the next check. 0: no limit.
  public var requestSeconds: Double = 30
  /// Threads of their own for requests that may be slow (a filter, a search, sections, a
  /// write), at a lower priority than the threads serving connections; 0 runs them on those.
  public var slowRequestThreads = max(2, ProcessInfo.processInfo.activeProcessorCount)
  /// Slow requests that may wait for one of those threads (a map tool asks for a filtered
  /// layer's tiles many at once); past them a slow request is answered 503 with `Retry-After`
  /// at once. A waiting request holds its connection and its parsed request, nothing else.
  public var slowRequestQueue = 64
  /// Slow requests one client (by its address) may have running or waiting at once; past it
  /// its next slow request is answered 429 with `Retry-After` at once, so that no one client
  /// fills the pool for others. 0: an eighth of the pool's threads and queue, at least 2.
  public var slowRequestsPerClient = 0

  /// ``slowRequestsPerClient`` as it applies.
  var slowRequestShare: Int {
    slowRequestsPerClient > 0
      ? slowRequestsPerClient : max(2, (slowRequestThreads + slowRequestQueue) / 8)
  }

  /// The defaults.
  public init() {}
}
