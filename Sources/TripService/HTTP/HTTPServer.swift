internal import CMicroHTTPD
import Foundation
import Persistence
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

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

  // SAFETY: the daemon pointer is only passed to libmicrohttpd under the server's mutex (start and
  // stop), and libmicrohttpd guards its own state.
  /// libmicrohttpd's daemon, touched only under the mutex (and by libmicrohttpd itself).
  struct DaemonHandle: @unchecked Sendable {
    let pointer: OpaquePointer
  }

  // SAFETY: the pointer is only passed to `MHD_resume_connection`, which libmicrohttpd allows from
  // any thread, and only while the connection is suspended.
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
    // The daemon is not quiesced: with epoll, `MHD_quiesce_daemon` and the daemon's own thread
    // both take the listening socket out of its epoll set when they see the daemon quiesced,
    // and libmicrohttpd 0.9.75 aborts the process when its thread comes second ("Failed to
    // remove listen FD from epoll set"). During the drain a request that arrives is answered
    // (a slow one with 503, the server stopping); `MHD_stop_daemon` closes the socket.
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

let streamReader: MHD_ContentReaderCallback = { context, _, buffer, max in
  guard let context, let buffer else { return -2 }
  let stream = Unmanaged<HTTPStream>.fromOpaque(context).takeUnretainedValue()
  return stream.read(into: buffer, max: max)
}

let streamReleased: MHD_ContentReaderFreeCallback = { context in
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

// SAFETY: a request's state is reached only from libmicrohttpd's calls for its connection (the
// access handler's calls and the completion callback), which libmicrohttpd makes on one thread at a
// time for a connection; nothing else keeps a reference to it.
extension HTTPServer.RequestState: @unchecked Sendable {}
