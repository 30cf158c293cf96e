import CMicroHTTPD
import Foundation
import Persistence
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

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

/// An HTTP/1.1 server on libmicrohttpd: a pool of threads polling with epoll, keep-alive,
/// limits on bodies, connections and idle time. Each request is answered by `handler` on one
/// of the pool's threads.
///
/// The daemon is owned by this object alone and stopped exactly once (``stop(drainSeconds:)``
/// or deinit); per-request state is retained while libmicrohttpd holds it and released in its
/// completion callback.
final class HTTPServer: Sendable {
  typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
  /// Decides from the request line and headers alone (the request's body is empty) whether a
  /// request is refused before any byte of its body is read (and before `100 Continue`):
  /// the refusal, or nil to read the body (``Admission/readBody``) or ignore it.
  typealias Admit = @Sendable (HTTPRequest) -> Admission

  /// What ``Admit`` decided.
  enum Admission {
    /// Refused with this response; the body is never read.
    case refuse(HTTPResponse)
    /// Read the body: the handler acts on it.
    case readBody
    /// The handler does not look at a body: any that comes is discarded unread.
    case ignoreBody
  }

  let handler: Handler
  let admit: Admit
  /// Whether a request (its body read) may be slow: it then runs on ``workers``.
  let isSlow: @Sendable (HTTPRequest) -> Bool
  /// The threads slow requests run on; nil when they run on the daemon's.
  let workers: WorkerPool?
  /// Set when ``stop(drainSeconds:)`` begins: work in flight is told to stop (its deadline's
  /// probe says abandoned).
  let stopping = Atomic<Bool>(false)
  /// Slow requests running or waiting on ``workers``, by client address.
  let slowByClient = Mutex<[String: Int]>([:])
  let limits: HTTPLimits
  let log: @Sendable (String) -> Void
  /// The running daemon; nil once stopped.
  private let daemon = Mutex<DaemonHandle?>(nil)
  private let boundPort = Atomic<UInt16>(0)
  /// Requests whose headers have arrived and whose response is not finished yet (an idle
  /// keep-alive connection is not one).
  let requestsInFlight = Atomic<Int>(0)
  /// Bytes of request bodies reserved by the requests being read now.
  let bodyBytesInFlight = Atomic<Int>(0)
  /// The port the server listens on.
  var port: UInt16 { boundPort.load(ordering: .relaxed) }

  /// libmicrohttpd's daemon, touched only under the mutex (and by libmicrohttpd itself).
  struct DaemonHandle: @unchecked Sendable {
    let pointer: OpaquePointer
  }

  /// A connection, for resuming it from another thread (which libmicrohttpd allows).
  struct ConnectionHandle: @unchecked Sendable {
    let pointer: OpaquePointer
  }

  /// What may hold a connection suspended, which libmicrohttpd must not be stopped with (it
  /// aborts the process): the streams open now (closed by ``stop(drainSeconds:)``) and the
  /// requests running on ``workers`` (their connections resumed by it), with whether the stop
  /// has begun, under one lock. A stream attached or a request offloaded after the stop took
  /// its list sees `stopping` under the same lock: the stream is closed as it is attached, the
  /// request answered at once. (A stream attached just after the list was taken, by a request
  /// in flight at the signal or one on a kept-alive connection, was left suspended, and the
  /// stop aborted 10 s later.)
  let suspendable = Mutex(Suspendable())

  struct Suspendable {
    var streams: [ObjectIdentifier: HTTPStream] = [:]
    var offloaded: [ObjectIdentifier: RequestState] = [:]
    var stopping = false
  }

  /// Starts listening on `host:port` (port 0 picks a free one).
  init(
    host: String, port: UInt16, limits: HTTPLimits, tls: (key: String, certificate: String)?,
    log: @escaping @Sendable (String) -> Void, admit: @escaping Admit = { _ in .readBody },
    isSlow: @escaping @Sendable (HTTPRequest) -> Bool = { _ in false },
    handler: @escaping Handler
  ) throws(ServiceError) {
    self.handler = handler
    self.admit = admit
    self.isSlow = isSlow
    workers =
      limits.slowRequestThreads > 0
      ? WorkerPool(threads: limits.slowRequestThreads, queue: limits.slowRequestQueue) : nil
    self.limits = limits
    self.log = log
    Self.raiseDescriptorLimit()
    let address = try SocketAddress(host: host, port: port)
    var flags =
      UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue) | UInt32(MHD_USE_ITC.rawValue)
      | UInt32(MHD_ALLOW_SUSPEND_RESUME.rawValue)
    #if os(Linux)
      flags |= UInt32(MHD_USE_EPOLL.rawValue)
    #endif
    if address.isIPv6 { flags |= UInt32(MHD_USE_IPv6.rawValue) }
    if tls != nil { flags |= UInt32(MHD_USE_TLS.rawValue) }
    let context = Unmanaged.passUnretained(self).toOpaque()
    let started: OpaquePointer? = address.withSockaddr { sockaddr in
      (tls?.key ?? "").withCString { key in
        (tls?.certificate ?? "").withCString { certificate in
          var settings = trips_mhd_settings()
          settings.flags = flags
          settings.port = port
          settings.address = sockaddr
          settings.connection_limit = limits.maximumConnections
          settings.per_ip_connection_limit = limits.maximumConnectionsPerAddress
          settings.connection_timeout_seconds = limits.idleTimeoutSeconds
          settings.thread_pool_size = limits.threads
          settings.connection_memory_limit = limits.connectionMemoryBytes
          settings.tls_key_pem = tls == nil ? nil : key
          settings.tls_cert_pem = tls == nil ? nil : certificate
          settings.completed = requestCompleted
          settings.completed_context = context
          return trips_mhd_start(&settings, accessHandler, context)
        }
      }
    }
    guard let started else {
      let failure = errno
      workers?.stop()
      // A daemon that starts without TLS on the same address says the TLS material was at
      // fault (libmicrohttpd reports a refused certificate or key only as a failed start).
      if tls != nil {
        let plain: OpaquePointer? = address.withSockaddr { sockaddr in
          var settings = trips_mhd_settings()
          settings.flags = flags & ~UInt32(MHD_USE_TLS.rawValue)
          settings.port = port
          settings.address = sockaddr
          return trips_mhd_start(&settings, accessHandler, context)
        }
        if let plain {
          MHD_stop_daemon(plain)
          throw ServiceError(
            code: .badTLS,
            message:
              "The TLS certificate or key was refused: give a PEM certificate (--tls-cert) and the PEM private key that belongs to it (--tls-key)."
          )
        }
      }
      let reason =
        failure == EADDRINUSE ? "the address is in use" : String(cString: strerror(failure))
      throw ServiceError(
        code: .cannotListen,
        message:
          "Cannot listen on \(address.description): \(reason). Choose another --port, or --port 0 for a free one."
      )
    }
    boundPort.store(trips_mhd_port(started), ordering: .relaxed)
    let handle = DaemonHandle(pointer: started)
    daemon.withLock { $0 = handle }
  }

  deinit {
    stop(drainSeconds: 0)
    workers?.stop()
  }

  /// Stops accepting connections, waits up to `drainSeconds` for the open ones to finish
  /// their requests, then closes everything. Safe to call more than once.
  func stop(drainSeconds: Double) {
    guard
      let running = daemon.withLock({ current -> DaemonHandle? in
        defer { current = nil }
        return current
      })?.pointer
    else { return }
    stopping.store(true, ordering: .relaxed)
    let listener = MHD_quiesce_daemon(running)
    if listener >= 0 { close(listener) }
    // Streams end (a suspended connection is resumed to finish), then requests drain; idle
    // keep-alive connections hold nothing up (stopping the daemon closes them).
    let (open, offloaded) = suspendable.withLock { suspendable in
      suspendable.stopping = true
      return (Array(suspendable.streams.values), Array(suspendable.offloaded.values))
    }
    for stream in open { stream.close() }
    // A stream's connection is resumed to end, and the daemon ends it on its own thread: it is
    // waited for too, since libmicrohttpd aborts the process when stopped with a connection
    // still suspended.
    let deadline = Date().addingTimeInterval(drainSeconds)
    while requestsInFlight.load(ordering: .acquiring) > 0
      || !suspendable.withLock({ $0.streams.isEmpty }), Date() < deadline
    {
      Thread.sleep(forTimeInterval: 0.01)
    }
    // Work still running on the pool gives its connection back now (it was told to stop: its
    // answer, when it comes, goes nowhere); libmicrohttpd then closes it.
    for state in offloaded {
      state.phase.withLock { phase in
        if case .running(let connection) = phase {
          phase = .stopped
          MHD_resume_connection(connection.pointer)
        }
      }
    }
    MHD_stop_daemon(running)
    workers?.stop()
  }

  /// Connections open now.
  var openConnections: UInt32 {
    daemon.withLock { $0.map { trips_mhd_connections($0.pointer) } ?? 0 }
  }

  /// Lets this process keep as many sockets open as the hard limit allows (a thousand idle
  /// clients must not exhaust the default 1,024 descriptors).
  private static func raiseDescriptorLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    if limit.rlim_cur < limit.rlim_max {
      limit.rlim_cur = limit.rlim_max
      _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
  }

  // MARK: Requests (on libmicrohttpd's threads)

  /// One request in progress: what arrived so far. Retained by libmicrohttpd's per-request
  /// pointer from the first call of the access handler until the completion callback.
  final class RequestState {
    let started = DispatchTime.now().uptimeNanoseconds
    /// The request line, headers and query (the body is added when it has all arrived).
    var request: HTTPRequest
    var body = Data()
    var tooLarge = false
    /// Over the server's memory for bodies in flight.
    var overBudget = false
    /// Whether the body is kept (else discarded as it arrives).
    var keepsBody = true
    /// Bytes of ``HTTPServer/bodyBytesInFlight`` this request holds, given back at completion.
    var reserved = 0
    /// Where a request that runs on the worker pool is (``Phase``); ``Phase/inline`` for the
    /// others.
    let phase = Mutex<Phase>(.inline)

    enum Phase: Sendable {
      /// Answered on the daemon's thread.
      case inline
      /// Its handler runs on the pool; its connection is suspended.
      case running(ConnectionHandle)
      /// The handler's answer, to send now that the connection is resumed.
      case done(HTTPResponse)
      /// The server stopped before the answer came.
      case stopped
      /// The answer was given to libmicrohttpd.
      case answered
    }

    init(request: HTTPRequest) { self.request = request }
  }

  func handle(
    _ connection: OpaquePointer, url: String, method: String, version: String,
    upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
    requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>
  ) -> MHD_Result {
    // A target with `%00` (marked before it was decoded) is treated as a first call that is
    // refused: its path or values would be cut at the NUL.
    let nulTarget = trips_mhd_is_nul_target(requestContext.pointee) != 0
    if nulTarget { requestContext.pointee = nil }
    guard let pointer = requestContext.pointee else {
      // The headers have arrived; the body (if any) follows in later calls. Whatever refuses
      // the request from its headers does so now, before a byte of the body is read.
      let path = Self.originForm(url)
      var request = HTTPRequest(method: method, path: path)
      request.clientAddress = Self.clientAddress(connection)
      let headers = Self.values(connection, .HEADER_KIND)
      request.headers = headers.reduce(into: [:]) { $0[$1.name.lowercased()] = $1.value }
      request.query = Self.values(connection, .GET_ARGUMENT_KIND)
      let state = RequestState(request: request)
      requestsInFlight.add(1, ordering: .relaxed)
      requestContext.pointee = Unmanaged.passRetained(state).toOpaque()
      if let problem =
        nulTarget
        ? "The request path holds a NUL character (%00); remove it."
        : Self.framingProblem(version: version, headers: headers, query: request.query)
      {
        // The connection is closed after it: what follows it cannot be trusted to be framed.
        var response = ServiceError.response(status: 400, description: problem)
        response.headers.append(("Connection", "close"))
        return respond(connection, method: method, path: path, state: state, response: response)
      }
      switch admit(request) {
      case .refuse(let response):
        return respond(connection, method: method, path: url, state: state, response: response)
      case .ignoreBody:
        state.keepsBody = false
        return .YES
      case .readBody:
        break
      }
      if let length = Self.value(connection, .HEADER_KIND, "Content-Length"),
        let bytes = Int(length)
      {
        if bytes > limits.maximumBodyBytes {
          // Refused before it is read.
          return respond(
            connection, method: method, path: url, state: state,
            response: ServiceError.response(
              status: 413,
              description:
                "The request body is \(bytes) bytes; at most \(limits.maximumBodyBytes) are accepted."
            ))
        }
        if !reserve(bytes, for: state) {
          return respond(connection, method: method, path: url, state: state, response: busy())
        }
      }
      return .YES
    }
    let state = Unmanaged<RequestState>.fromOpaque(pointer).takeUnretainedValue()
    // A request whose work ran on the pool, called again once its connection is resumed.
    switch state.phase.withLock({ $0 }) {
    case .inline: break
    case .running, .answered: return .YES
    case .done(let response):
      state.phase.withLock { $0 = .answered }
      return respond(connection, method: method, path: url, state: state, response: response)
    case .stopped:
      return respond(
        connection, method: method, path: url, state: state, response: Self.stoppingResponse)
    }
    if uploadSize.pointee > 0 {
      let size = uploadSize.pointee
      if state.keepsBody, !state.tooLarge, !state.overBudget, let upload {
        if state.body.count + size > limits.maximumBodyBytes {
          state.tooLarge = true
          state.body = Data()
        } else if state.body.count + size > state.reserved
          && !reserve(state.body.count + size - state.reserved, for: state)
        {
          state.overBudget = true
          state.body = Data()
        } else {
          upload.withMemoryRebound(to: UInt8.self, capacity: size) {
            state.body.append($0, count: size)
          }
        }
      }
      uploadSize.pointee = 0
      return .YES
    }
    if state.tooLarge {
      return respond(
        connection, method: method, path: url, state: state,
        response: ServiceError.response(
          status: 413,
          description: "The request body is larger than \(limits.maximumBodyBytes) bytes."))
    }
    if state.overBudget {
      return respond(connection, method: method, path: url, state: state, response: busy())
    }
    var request = state.request
    request.body = state.body
    state.body = Data()
    let socket = trips_mhd_connection_fd(connection)
    // The deadline counts from now: time waiting for a worker is the request's time too.
    let deadline = deadline(socket: socket)
    guard let workers, isSlow(request) else {
      return respond(
        connection, method: method, path: url, state: state,
        response: work(request, deadline: deadline))
    }
    let client = request.client
    let share = limits.slowRequestShare
    let withinShare = slowByClient.withLock { counts -> Bool in
      guard counts[client, default: 0] < share else { return false }
      counts[client, default: 0] += 1
      return true
    }
    guard withinShare else {
      var response = ServiceError.response(
        status: 429,
        description:
          "This client has \(share) slow requests (filters, searches, sorts, sections, writes) running or waiting, its share of the server's; retry when one is answered."
      )
      response.headers.append(("Retry-After", "1"))
      return respond(connection, method: method, path: url, state: state, response: response)
    }
    let release: @Sendable () -> Void = { [self] in
      slowByClient.withLock { counts in
        counts[client, default: 1] -= 1
        if counts[client] == 0 { counts[client] = nil }
      }
    }
    let key = ObjectIdentifier(state)
    let admitted = suspendable.withLock { suspendable in
      guard !suspendable.stopping else { return false }
      suspendable.offloaded[key] = state
      return true
    }
    guard admitted else {
      release()
      return respond(
        connection, method: method, path: url, state: state, response: Self.stoppingResponse)
    }
    guard workers.reserve() else {
      release()
      _ = suspendable.withLock { $0.offloaded.removeValue(forKey: key) }
      var response = ServiceError.response(
        status: 503,
        description:
          "The server is answering as many slow requests (filters, searches, sections, writes) as it has room for; retry in a moment."
      )
      response.headers.append(("Retry-After", "1"))
      return respond(connection, method: method, path: url, state: state, response: response)
    }
    // Off the daemon's threads: the connection waits suspended, and is resumed with the answer
    // (or by stop, which then answers 503).
    state.phase.withLock { $0 = .running(ConnectionHandle(pointer: connection)) }
    MHD_suspend_connection(connection)
    let whole = request
    workers.submit { [self] in
      let response = work(whole, deadline: deadline)
      release()
      _ = suspendable.withLock { $0.offloaded.removeValue(forKey: key) }
      let delivered = state.phase.withLock { phase -> Bool in
        guard case .running(let connection) = phase else { return false }
        phase = .done(response)
        MHD_resume_connection(connection.pointer)
        return true
      }
      // The server stopped first: a stream made for the answer ends unattached.
      if !delivered { response.stream?.finished() }
    }
    return .YES
  }

  /// 503 for a request the stop caught (it began while the request waited for a worker, or
  /// before it was offloaded); the connection is closed after it.
  static var stoppingResponse: HTTPResponse {
    var response = ServiceError.response(
      status: 503, description: "The server is stopping; try again shortly.")
    response.headers.append(("Retry-After", "1"))
    response.headers.append(("Connection", "close"))
    return response
  }

  /// A `WorkDeadline` of ``HTTPLimits/requestSeconds`` from now that also stops when the
  /// client has closed `socket` or the server is stopping; nil without a limit.
  private func deadline(socket: Int32) -> WorkDeadline? {
    guard limits.requestSeconds > 0 else { return nil }
    return WorkDeadline(
      limit: .milliseconds(Int64((limits.requestSeconds * 1_000).rounded(.up)))
    ) { [weak self] in
      (self?.stopping.load(ordering: .relaxed) ?? true) || trips_socket_closed(socket) != 0
    }
  }

  /// The handler's answer to `request` under `deadline`: one already past (a request that
  /// waited its whole time for a worker, or whose client went) is answered without work.
  private func work(_ request: HTTPRequest, deadline: WorkDeadline?) -> HTTPResponse {
    guard let deadline else { return handler(request) }
    if deadline.shouldStop {
      return ServiceError.deadlineResponse(
        deadline.error.message,
        advice: "It waited that long for a worker; try again when the server is less busy.")
    }
    return deadline.run { handler(request) }
  }

  /// Reserves `bytes` of the memory for bodies in flight for `state`; false when that would
  /// pass ``HTTPLimits/maximumBodyBytesInFlight``. O(1), lock-free.
  private func reserve(_ bytes: Int, for state: RequestState) -> Bool {
    guard bytes > 0 else { return true }
    let total = bodyBytesInFlight.add(bytes, ordering: .relaxed).newValue
    guard total <= limits.maximumBodyBytesInFlight else {
      bodyBytesInFlight.subtract(bytes, ordering: .relaxed)
      return false
    }
    state.reserved += bytes
    return true
  }

  /// 503: the memory for bodies in flight is taken.
  private func busy() -> HTTPResponse {
    var response = ServiceError.response(
      status: 503,
      description:
        "The server is reading as many request bodies as it has memory for; retry in a moment.")
    response.headers.append(("Retry-After", "1"))
    return response
  }

  private func respond(
    _ connection: OpaquePointer, method: String, path: String, state: RequestState,
    response: HTTPResponse
  ) -> MHD_Result {
    // HEAD: the GET's body goes to libmicrohttpd, which sends its length and not its bytes.
    let body = response.body
    var made: OpaquePointer?
    if let stream = response.stream, method != "HEAD" {
      if !body.isEmpty { stream.send(String(decoding: body, as: UTF8.self)) }
      stream.attach(
        ConnectionHandle(pointer: connection), socket: trips_mhd_connection_fd(connection))
      let key = ObjectIdentifier(stream)
      let stopping = suspendable.withLock { suspendable in
        suspendable.streams[key] = stream
        return suspendable.stopping
      }
      // Attached after the stop closed the streams it knew: it ends after what is queued, and
      // is never left suspended.
      if stopping { stream.close() }
      let previous = stream.onFinish.withLock { $0 }
      stream.onFinish.withLock {
        $0 = { [weak self] in
          _ = self?.suspendable.withLock { $0.streams.removeValue(forKey: key) }
          previous?()
        }
      }
      made = trips_mhd_response_stream(
        streamReader, Unmanaged.passRetained(stream).toOpaque(), streamReleased)
    } else {
      made = body.withUnsafeBytes { bytes in
        trips_mhd_response_copy(bytes.count, bytes.baseAddress)
      }
    }
    guard let made else { return .NO }
    defer { MHD_destroy_response(made) }
    for (name, value) in response.headers { MHD_add_response_header(made, name, value) }
    let result = MHD_queue_response(connection, UInt32(response.status), made)
    let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - state.started) / 1e6
    let detail = response.logDetail.map { " (\(Self.loggable($0, limit: 2_000)))" } ?? ""
    log(
      "\(method) \(Self.loggable(path)) \(response.status) \(response.body.count) \(String(format: "%.1f", milliseconds))ms\(detail)"
    )
    return result
  }

  /// A path as it may go into a log line: no control characters, at most `limit` characters.
  static func loggable(_ path: String, limit: Int = 200) -> String {
    let safe = String(
      String.UnicodeScalarView(
        path.unicodeScalars.map { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? "?" : $0 }))
    return safe.count > limit ? String(safe.prefix(limit)) + "…" : safe
  }

  /// The client that `address` counts as for fair shares (slow requests, live queries): an
  /// IPv4 address itself (an IPv4-mapped IPv6 address as its IPv4 address), an IPv6 address
  /// its /64 network (`2001:db8:0:1::/64`: a host is given a whole /64 and may use any
  /// address in it, so a share per IPv6 address would be no share at all). Text that is not
  /// an address is itself. O(1).
  static func shareKey(_ address: String) -> String {
    guard address.contains(":") else { return address }
    var raw = in6_addr()
    guard inet_pton(AF_INET6, address, &raw) == 1 else { return address }
    let bytes = withUnsafeBytes(of: raw) { Array($0) }
    if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
      return bytes[12...].map(String.init).joined(separator: ".")
    }
    let groups = stride(from: 0, to: 8, by: 2).map {
      String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
    }
    return groups.joined(separator: ":") + "::/64"
  }

  /// The address of `connection`'s client, as text.
  static func clientAddress(_ connection: OpaquePointer) -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    guard trips_mhd_client_address(connection, &buffer, buffer.count) == 0 else { return "" }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  static func value(_ connection: OpaquePointer, _ kind: MHD_ValueKind, _ name: String) -> String? {
    MHD_lookup_connection_value(connection, kind, name).map { String(cString: $0) }
  }

  /// Every (name, value) of one kind, in order, each whole: a NUL inside one (`%00` in a
  /// query value) is kept, for ``framingProblem(version:headers:query:)`` to refuse, not cut.
  static func values(_ connection: OpaquePointer, _ kind: MHD_ValueKind) -> [(
    name: String, value: String
  )] {
    final class Collected { var pairs: [(name: String, value: String)] = [] }
    let collected = Collected()
    withExtendedLifetime(collected) {
      _ = MHD_get_connection_values_n(
        connection, kind,
        { context, _, key, keySize, value, valueSize in
          guard let context, let key else { return .YES }
          let box = Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue()
          func text(_ pointer: UnsafePointer<CChar>, _ count: Int) -> String {
            pointer.withMemoryRebound(to: UInt8.self, capacity: count) {
              String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
            }
          }
          box.pairs.append((text(key, keySize), value.map { text($0, valueSize) } ?? ""))
          return .YES
        }, Unmanaged.passUnretained(collected).toOpaque())
    }
    return collected.pairs
  }

  /// Why a request's framing or fields cannot be trusted (RFC 9110 and 9112), or nil: an
  /// HTTP/1.1 request without `Host` or with two; two different `Content-Length` values, or
  /// one beside `Transfer-Encoding`; a transfer coding that does not end in `chunked`; a NUL
  /// in a field or a query value. Each is a request-smuggling risk behind a proxy, or a value
  /// that would be read cut short. Cost: O(fields).
  static func framingProblem(
    version: String, headers: [(name: String, value: String)],
    query: [(name: String, value: String)]
  ) -> String? {
    if let field = headers.first(where: { $0.name.contains("\0") || $0.value.contains("\0") }) {
      return "The header \(loggable(field.name)) holds a NUL character."
    }
    if let item = query.first(where: { $0.name.contains("\0") || $0.value.contains("\0") }) {
      return
        "The query parameter '\(loggable(item.name))' holds a NUL character (%00); remove it."
    }
    let hosts = headers.filter { $0.name.lowercased() == "host" }
    if version == "HTTP/1.1", hosts.isEmpty {
      return "An HTTP/1.1 request needs a Host header."
    }
    if hosts.count > 1 { return "The request has \(hosts.count) Host headers; send one." }
    let lengths = Set(
      headers.filter { $0.name.lowercased() == "content-length" }.flatMap {
        $0.value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
      })
    if lengths.count > 1 {
      return
        "The request has different Content-Length values (\(lengths.sorted().joined(separator: ", ")))."
    }
    let codings = headers.filter { $0.name.lowercased() == "transfer-encoding" }.flatMap {
      $0.value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }
    if !codings.isEmpty {
      if codings.last != "chunked" {
        return
          "Transfer-Encoding \(loggable(codings.joined(separator: ", "))) does not end in chunked: the body's length cannot be known."
      }
      if !lengths.isEmpty {
        return "The request has both Content-Length and Transfer-Encoding; send one."
      }
    }
    return nil
  }

  /// The origin form (`/path`) of a request target, which may come in absolute form
  /// (`http://host/path`, RFC 9112 §3.2.2: servers must accept it).
  static func originForm(_ target: String) -> String {
    let lowered = target.prefix(8).lowercased()
    guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else { return target }
    let afterScheme = target[
      target.index(target.startIndex, offsetBy: lowered.hasPrefix("http://") ? 7 : 8)...]
    guard let slash = afterScheme.firstIndex(of: "/") else { return "/" }
    return String(afterScheme[slash...])
  }
}

// libmicrohttpd calls these from its threads; the server is reached through the context
// pointer, which stays valid while the daemon runs (the server stops the daemon before it goes).
private let accessHandler: MHD_AccessHandlerCallback = {
  context, connection, url, method, version, upload, uploadSize, requestContext in
  guard let context, let connection, let url, let method, let uploadSize, let requestContext
  else { return .NO }
  let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
  return server.handle(
    connection, url: String(cString: url), method: String(cString: method),
    version: version.map { String(cString: $0) } ?? "", upload: upload,
    uploadSize: uploadSize, requestContext: requestContext)
}

private let streamReader: MHD_ContentReaderCallback = { context, _, buffer, max in
  guard let context, let buffer else { return -2 }
  let stream = Unmanaged<HTTPStream>.fromOpaque(context).takeUnretainedValue()
  return stream.read(into: buffer, max: max)
}

private let streamReleased: MHD_ContentReaderFreeCallback = { context in
  guard let context else { return }
  let stream = Unmanaged<HTTPStream>.fromOpaque(context).takeRetainedValue()
  stream.finished()
}

private let requestCompleted: MHD_RequestCompletedCallback = { context, _, requestContext, _ in
  guard let requestContext, let pointer = requestContext.pointee,
    trips_mhd_is_nul_target(pointer) == 0
  else { return }
  let state = Unmanaged<HTTPServer.RequestState>.fromOpaque(pointer).takeRetainedValue()
  requestContext.pointee = nil
  // An answer made on the pool that never reached the connection (its client went before the
  // connection was resumed): a stream in it ends, so that its feed lets the client go.
  if case .done(let response) = state.phase.withLock({ $0 }) { response.stream?.finished() }
  if let context {
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    if state.reserved > 0 { server.bodyBytesInFlight.subtract(state.reserved, ordering: .relaxed) }
    server.requestsInFlight.subtract(1, ordering: .releasing)
  }
}

/// An IPv4 or IPv6 address to listen on.
struct SocketAddress: CustomStringConvertible {
  private var storage = sockaddr_storage()
  let isIPv6: Bool
  let description: String

  init(host: String, port: UInt16) throws(ServiceError) {
    let name = host == "localhost" ? "127.0.0.1" : host
    var v4 = sockaddr_in()
    var v6 = sockaddr_in6()
    if inet_pton(AF_INET, name, &v4.sin_addr) == 1 {
      v4.sin_family = sa_family_t(AF_INET)
      v4.sin_port = port.bigEndian
      withUnsafeMutableBytes(of: &storage) { target in
        withUnsafeBytes(of: v4) { target.copyMemory(from: $0) }
      }
      isIPv6 = false
      description = "\(name):\(port)"
    } else if inet_pton(
      AF_INET6, name.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), &v6.sin6_addr) == 1
    {
      v6.sin6_family = sa_family_t(AF_INET6)
      v6.sin6_port = port.bigEndian
      withUnsafeMutableBytes(of: &storage) { target in
        withUnsafeBytes(of: v6) { target.copyMemory(from: $0) }
      }
      isIPv6 = true
      description = "[\(name)]:\(port)"
    } else {
      throw ServiceError(
        code: .cannotListen,
        message:
          "'\(host)' is not an address to listen on: give an IPv4 or IPv6 address, such as 127.0.0.1, 0.0.0.0 or ::1."
      )
    }
  }

  func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
    withUnsafeBytes(of: storage) { bytes in
      body(bytes.baseAddress!.assumingMemoryBound(to: sockaddr.self))
    }
  }
}

// SAFETY: a request's state is reached only from libmicrohttpd's calls for its connection
// (the access handler's calls and the completion callback), which libmicrohttpd makes on one
// thread at a time for a connection; nothing else keeps a reference to it.
extension HTTPServer.RequestState: @unchecked Sendable {}
