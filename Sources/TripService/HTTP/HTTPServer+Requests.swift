internal import CMicroHTTPD
import Foundation
import Persistence
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// Requests, on libmicrohttpd's threads: admission, the handler's work under its deadline,
// and the response.

extension HTTPServer {
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
