import Foundation
import Geo
import Persistence
import Synchronization
import TripPlanner

/// How a ``TripService`` listens and what it allows.
public struct ServiceConfiguration: Sendable {
  /// The address to listen on: loopback unless told otherwise.
  public var host = "127.0.0.1"
  /// The port; 0 picks a free one (``TripService/port`` tells which).
  public var port: UInt16 = 8080
  /// Who may write; nil accepts no writes (401).
  public var tokens: TokenFile?
  /// The one origin browsers may call the service from (CORS); nil sends no CORS headers.
  public var corsOrigin: String?
  /// Refuse every write with 405, whatever the token.
  public var readOnly = false
  /// PEM text of the TLS certificate and key: the service speaks HTTPS.
  public var tls: (certificate: String, key: String)?
  /// Allow tokens over plain HTTP on an address other than loopback.
  public var allowsInsecureHTTP = false
  /// Limits on bodies, connections and idle time.
  public var limits = HTTPLimits()
  /// Seconds ``TripService/stop()`` waits for requests in flight.
  public var drainSeconds = 10.0
  /// How the live streams treat their clients.
  public var streams = StreamSettings()
  /// Answer `items?bbox=…` pages by start date from a `TripBoxIndex` in memory (a copy of the
  /// trips built before the service listens, about 140 bytes a trip, followed through the
  /// store's history), rather
  /// than from the store's index on longitude, which visits every trip in the box's band of
  /// longitude for each page. Off for a server with less memory than trips to spare.
  public var indexesBoxesInMemory = true

  /// The defaults: 127.0.0.1:8080, read-only without tokens.
  public init() {}

  /// Whether `host` is a loopback address.
  var isLoopback: Bool {
    host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
  }
}

/// The trip planner as a network service: OGC API – Features (Part 1 core, GeoJSON, OpenAPI
/// 3.0; Part 4 style writes) over HTTP/1.1 on libmicrohttpd, plus bounds and sections for map
/// tools. `trips serve` is a thin wrapper around it; another Swift program can start one on its
/// own store:
///
/// ```swift
/// let service = try TripService(container: store.container, configuration: configuration)
/// print("Listening on \(service.url)")
/// ```
///
/// Requests run on the server's thread pool, each with a store (context and connection) of its
/// own from a pool. Costs: `items/{id}` is one indexed lookup; `items` with `bbox` an index
/// search on an index of longitude and latitude (two ranges when the box crosses 180°) plus a
/// count from the index alone; `bounds` and `sections` read two columns of the matching trips
/// (O(matching), no models); `/collections/trips` computes the collection's extent from two
/// columns and its time span (O(n), no models) once per store change, cached by history
/// token (O(1) while nothing changes). Nothing is held per trip while idle.
public final class TripService: Sendable {
  /// What the service was started with.
  public let configuration: ServiceConfiguration
  /// The port it listens on.
  public var port: UInt16 { server.withLock { $0?.port ?? configuration.port } }
  /// `http://host:port` (or `https://`).
  public var url: String {
    let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
    return "\(configuration.tls == nil ? "http" : "https")://\(host):\(port)"
  }

  let pool: StorePool
  let extent: CollectionExtent
  let streams: BoundsStreams
  let itemStreams: ItemsStreams
  let follower: LiveFollower
  let api: FeaturesAPI
  private let server = Mutex<HTTPServer?>(nil)

  /// Starts serving the trips of `container`.
  ///
  /// - Parameters:
  ///   - container: The store to serve.
  ///   - configuration: How to listen and what to allow.
  ///   - log: Receives one line per request (method, path, status, bytes, milliseconds);
  ///     standard error by default.
  /// - Throws: ``ServiceError`` when the address cannot be listened on or the configuration is
  ///   unsafe; `PersistenceError` when the store cannot be read.
  public init(
    container: ModelContainer, configuration: ServiceConfiguration,
    log: @escaping @Sendable (String) -> Void = TripService.standardErrorLog
  ) throws {
    if configuration.tokens != nil, configuration.tls == nil, !configuration.isLoopback,
      !configuration.allowsInsecureHTTP
    {
      throw ServiceError(
        code: .unsafeConfiguration,
        message:
          "Tokens must not cross a network in clear: with --token-file on \(configuration.host), give --tls-cert and --tls-key, or --insecure-http if a proxy in front of it speaks HTTPS."
      )
    }
    self.configuration = configuration
    pool = StorePool(container: container)
    extent = CollectionExtent()
    let boxIndex = configuration.indexesBoxesInMemory ? TripBoxIndex() : nil
    // Built before listening; if the trips cannot be read, pages are answered by the store
    // (and the log says why).
    do {
      if let boxIndex { try pool.withStore(author: "service") { try boxIndex.prepare($0) } }
    } catch {
      let reason =
        boxIndex?.lastError.map { error in
          // A row's error names its column already (`PersistenceError.naming(row:)`).
          error.message + (error.row == nil ? error.attribute.map { ", column \($0)" } ?? "" : "")
        }
        ?? "\(error)"
      log(
        "bbox pages are answered by the store: the trips could not be indexed in memory: \(reason)")
    }
    follower = LiveFollower(pool: pool)
    streams = BoundsStreams(follower: follower, settings: configuration.streams)
    itemStreams = ItemsStreams(pool: pool, follower: follower, settings: configuration.streams)
    api = FeaturesAPI(
      configuration: configuration, pool: pool, extent: extent, boxIndex: boxIndex,
      streams: streams,
      itemStreams: itemStreams)
    let api = self.api
    let started = try HTTPServer(
      host: configuration.host, port: configuration.port, limits: configuration.limits,
      tls: configuration.tls.map { (key: $0.key, certificate: $0.certificate) }, log: log,
      admit: { request in api.admit(request) }, isSlow: FeaturesAPI.mayBeSlow,
      handler: { request in api.respond(to: request) })
    server.withLock { $0 = started }
  }

  deinit { stop() }

  /// Stops accepting connections, lets requests in flight finish (up to
  /// ``ServiceConfiguration/drainSeconds``), and closes. Safe to call more than once.
  public func stop() {
    let running = server.withLock { current -> HTTPServer? in
      defer { current = nil }
      return current
    }
    streams.closeAll()
    itemStreams.closeAll()
    follower.stop()
    running?.stop(drainSeconds: configuration.drainSeconds)
  }

  /// How many distinct bounds-stream queries are followed now (one shared feed each).
  public var streamFeedCount: Int { streams.feedCount }

  /// Answers one request without a socket (what the server does for each request).
  public func respond(to request: HTTPRequest) -> HTTPResponse { api.respond(to: request) }

  /// Writes a log line to standard error.
  public static let standardErrorLog: @Sendable (String) -> Void = { line in
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
  }
}
