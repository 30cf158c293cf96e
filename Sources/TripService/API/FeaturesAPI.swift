import Foundation
import Geo
import Persistence
import TripPlanner

/// The OGC API – Features endpoints, bounds and sections: from a request to a response. Every
/// error is the OGC exception JSON with its status; bad input is never a 500.
struct FeaturesAPI: Sendable {
  let configuration: ServiceConfiguration
  let pool: StorePool
  let extent: CollectionExtent
  /// Answers `items?bbox=…` pages by start date from memory (``TripStore/page(_:index:)``);
  /// nil when ``ServiceConfiguration/indexesBoxesInMemory`` is off.
  let boxIndex: TripBoxIndex?
  let streams: BoundsStreams
  let itemStreams: ItemsStreams
  /// The entity tags of the answers that depend on the store (HTTP caching).
  let validators = Validators()
  /// The vector tiles made lately, by request and version.
  let tiles = TileCache()

  static let collectionID = "trips"
  static let geoJSON = "application/geo+json"
  static let json = "application/json"
  static let openAPI = "application/vnd.oai.openapi+json;version=3.0"
  static let crs84 = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
  static let schemaJSON = "application/schema+json"

  /// The routes, with the methods each allows.
  enum Route {
    case landing, conformance, api, collections, collection, items, queryables, sortables
    case item(String)
    case bounds, boundsStream, itemsStream, sections, changes
    /// `/map` (nil) or one of the files it loads, `/map/NAME`.
    case map(String?)
    /// `/collections/{stays|bucket-list-items}`, its items, and one of them.
    case planCollection(PlanCollection)
    case planItems(PlanCollection)
    case planItem(PlanCollection, String)
    /// `/collections/stays/bounds` and `/collections/stays/items/stream`.
    case staysBounds, staysStream
    /// `/tileMatrixSets`, `/tileMatrixSets/{id}`, `/collections/trips/tiles`, a tileset, its
    /// TileJSON and a tile (`{tileMatrixSetId}/{tileMatrix}/{tileRow}/{tileCol}`).
    case tileMatrixSets, tilesets
    case tileMatrixSet(String)
    case tileset(String)
    case tileJSON(String)
    case tile(String, matrix: String, row: String, column: String)

    var methods: [String] {
      switch self {
      case .items, .changes, .planItems: ["GET", "HEAD", "POST", "OPTIONS"]
      case .item: ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"]
      case .planItem: ["GET", "HEAD", "PATCH", "DELETE", "OPTIONS"]
      default: ["GET", "HEAD", "OPTIONS"]
      }
    }

    init?(path: String) {
      var path = path
      // `/map/` is not `/map`: the page's relative links would resolve under it.
      if path == "/map/" {
        self = .map("")
        return
      }
      if path.count > 1, path.hasSuffix("/") { path.removeLast() }
      switch path {
      case "/", "": self = .landing
      case "/conformance": self = .conformance
      case "/api": self = .api
      case "/collections": self = .collections
      case "/collections/trips": self = .collection
      case "/collections/trips/items": self = .items
      case "/collections/trips/queryables": self = .queryables
      case "/collections/trips/sortables": self = .sortables
      case "/collections/trips/bounds": self = .bounds
      case "/collections/trips/bounds/stream": self = .boundsStream
      case "/collections/trips/items/stream": self = .itemsStream
      case "/collections/trips/sections": self = .sections
      case "/collections/stays/bounds": self = .staysBounds
      case "/collections/stays/items/stream": self = .staysStream
      case "/changes": self = .changes
      case "/map": self = .map(nil)
      default:
        if let route = FeaturesAPI.tileRoute(path) {
          self = route
          return
        }
        if path.hasPrefix("/map/") {
          let name = String(path.dropFirst(5))
          guard !name.isEmpty, !name.contains("/") else { return nil }
          self = .map(name)
          return
        }
        for collection in PlanCollection.allCases where path.hasPrefix(collection.path) {
          let rest = path.dropFirst(collection.path.count)
          if rest.isEmpty {
            self = .planCollection(collection)
            return
          }
          if rest == "/items" {
            self = .planItems(collection)
            return
          }
          guard rest.hasPrefix("/items/") else { return nil }
          let id = String(rest.dropFirst("/items/".count))
          guard !id.isEmpty, !id.contains("/") else { return nil }
          self = .planItem(collection, id)
          return
        }
        let prefix = "/collections/trips/items/"
        guard path.hasPrefix(prefix), path.count > prefix.count else { return nil }
        let id = String(path.dropFirst(prefix.count))
        guard !id.contains("/") else { return nil }
        self = .item(id)
      }
    }
  }

  /// The methods `route` allows on this service: without the writes when it is read-only
  /// (what `Allow` and OPTIONS say).
  func methods(_ route: Route) -> [String] {
    configuration.readOnly
      ? route.methods.filter { !Self.writeMethods.contains($0) } : route.methods
  }

  func respond(to request: HTTPRequest) -> HTTPResponse {
    var response: HTTPResponse
    do {
      response = try route(request)
    } catch let error as ServiceError {
      response = ServiceError.response(status: error.status, description: error.message)
      if error.status == 401 { response.headers.append(("WWW-Authenticate", "Bearer")) }
      if error.status == 503 || error.status == 429 {
        response.headers.append(("Retry-After", "30"))
      }
    } catch {
      response = Self.failure(error)
    }
    if let origin = configuration.corsOrigin {
      response.headers.append(("Access-Control-Allow-Origin", origin))
      response.headers.append(("Access-Control-Expose-Headers", "ETag, Location"))
      response.headers.append(("Vary", "Origin"))
    }
    return response
  }

  /// Whether answering `request` may take long whatever the size of its answer: a filter, a
  /// search (`q`, `destination`), a sort or a deep page (`sortby`, `offset` past 1,000),
  /// sections (an aggregate of every matching trip), a stream resumed with `Last-Event-ID`
  /// (a replay from history), and every write (it may wait for the store's write lock). Such requests run on the server's worker
  /// threads, never holding up those that accept and answer connections. Cost: O(parameters).
  @Sendable static func mayBeSlow(_ request: HTTPRequest) -> Bool {
    if !["GET", "HEAD", "OPTIONS"].contains(request.method) { return true }
    if request.path.hasSuffix("/sections") { return true }
    // A stream resumed from a token may be replayed from history, up to its budget (about
    // 1 KiB a matching trip: tens of MB on a large store).
    if request.path.hasSuffix("/stream"), request.header("Last-Event-ID") != nil { return true }
    return request.query.contains { item in
      guard slowParameters.contains(item.name) else { return false }
      // A deep page: the rows before it are read and sorted (an unindexed sort at offset
      // 199,000 of 200,000 trips took 6 s).
      return item.name != "offset" || (Int(item.value) ?? 0) > 1_000
    }
  }

  /// The query parameters that make a read slow work (``mayBeSlow(_:)``; `offset` past 1,000
  /// only), as `/api` lists the 429 of the operations that take them.
  static let slowParameters: Set<String> = ["filter", "q", "destination", "sortby", "offset"]

  /// An error from below (the store, validation) as a response: invalid data is the client's
  /// (400), a store failure is the server's (500, its cause in the log, not in the body).
  static func failure(_ error: any Error) -> HTTPResponse {
    // The status from the one table (FailureStatus), as a command's exit status is; the
    // body says what the client can do about it.
    let status = FailureStatus(of: error).http
    if let persistence = error as? PersistenceError {
      switch status {
      case 503 where persistence.code == .busy:
        // Another writer held the store past the busy timeout: not the server's fault.
        var response = ServiceError.response(
          status: 503, description: "The store is busy: \(persistence.message) Try again shortly.")
        response.headers.append(("Retry-After", "1"))
        return response
      case 503:
        return ServiceError.deadlineResponse(
          persistence.message,
          advice:
            "Ask for less (a narrower filter or box, a smaller page), or try again when the server is less busy."
        )
      case 400 where persistence.code == .outOfRange:
        return ServiceError.response(
          status: 400,
          description:
            "A number the request computes is out of range on this store's engine (PostgreSQL's double precision overflows where SQLite gives infinity); keep the filter's arithmetic within ±1.8e308."
        )
      case 507:
        return ServiceError.response(
          status: 507, description: "The store is full: \(persistence.message)")
      case 500:
        // A store's message may quote SQL, tables and columns: the log has it.
        return internalFailure(persistence.message)
      default:
        return ServiceError.response(status: status, description: persistence.message)
      }
    }
    if let error = error as? TripPlannerError {
      switch status {
      case 500: return internalFailure(error.message)
      case 404: return ServiceError.response(status: 404, description: error.message)
      default: return ServiceError.response(status: status, description: error.description)
      }
    }
    if let error = error as? GeoError {
      return ServiceError.response(status: status, description: error.message)
    }
    if let error = error as? ServerSyncError {
      // Another server failed this one (a gateway's failure): the message names it.
      return ServiceError.response(status: status, description: error.message)
    }
    return internalFailure("\(error)")
  }

  /// 500: the server's own failure. Its body says no more than that (a store's message may
  /// quote SQL, tables and columns, which are no client's business); `cause` goes to the log.
  static func internalFailure(_ cause: String) -> HTTPResponse {
    var response = ServiceError.response(
      status: 500,
      description: "The server failed to answer this request; its log has the cause.")
    response.logDetail = cause
    return response
  }

  func route(_ request: HTTPRequest) throws -> HTTPResponse {
    guard let route = Route(path: request.path) else {
      throw ServiceError.request(
        404, "There is nothing at \(HTTPServer.loggable(request.path)). Start at / for the links.")
    }
    let allowed = methods(route)
    guard allowed.contains(request.method) else {
      let readOnly =
        configuration.readOnly && route.methods.contains(request.method)
        ? "This service is read-only (--read-only): it takes no writes. " : ""
      var response = ServiceError.response(
        status: 405,
        description:
          "\(readOnly)\(HTTPServer.loggable(request.method)) is not allowed here; allowed: \(allowed.joined(separator: ", "))."
      )
      response.headers.append(("Allow", allowed.joined(separator: ", ")))
      return response
    }
    if request.method == "OPTIONS" { return preflight(route) }
    if case .changes = route, request.method == "POST" { return try changes(request) }
    if ["POST", "PUT", "PATCH", "DELETE"].contains(request.method) {
      return try write(request, route: route)
    }
    // The map page is HTML and what it loads, whatever the client accepts.
    if case .map(let asset) = route { return try MapPage.respond(asset: asset) }
    if case .tile(let set, let matrix, let row, let column) = route {
      try Self.checkTileMatrixSet(set)
      return try tile(request, matrix: matrix, row: row, column: column)
    }
    try negotiate(request, route: route)
    let links = Links(base: baseURL(request))
    switch route {
    case .landing:
      return Self.document(landing(links), type: Self.json)
    case .conformance:
      return Self.document(conformance(), type: Self.json)
    case .api:
      return Self.document(
        OpenAPIDocument.make(base: links.base, limits: configuration.limits), type: Self.openAPI)
    case .collections:
      try ItemsQuery.refuseUnknown(request, allowed: ["f"])
      return Self.document(
        .object([
          ("links", .array([links.link("/collections", rel: "self", type: Self.json)])),
          (
            "collections",
            .array(
              [try collection(links)]
                + (try PlanCollection.allCases.map { try planCollection($0, links) }))
          ),
        ]), type: Self.json)
    case .collection:
      try ItemsQuery.refuseUnknown(request, allowed: ["f"])
      return try conditional(request) { Self.document(try collection(links), type: Self.json) }
    case .items:
      return try conditional(request) { try items(request, links: links) }
    case .queryables:
      try ItemsQuery.refuseUnknown(request, allowed: ["f"])
      return Self.document(queryables(links), type: Self.schemaJSON)
    case .sortables:
      try ItemsQuery.refuseUnknown(request, allowed: ["f"])
      return Self.document(sortables(links), type: Self.schemaJSON)
    case .item(let id):
      try ItemsQuery.refuseUnknown(request, allowed: ["f", "crs"])
      return try item(
        id, links: links, ifNoneMatch: request.header("If-None-Match"),
        crs: try Self.outputCRS(request))
    case .bounds:
      return try conditional(request) { try bounds(request) }
    case .sections:
      return try conditional(request) { try sections(request) }
    case .changes:
      return try changes(request)
    case .boundsStream:
      return try boundsStream(request)
    case .itemsStream:
      return try itemsStream(request)
    case .map(let asset):
      return try MapPage.respond(asset: asset)
    case .planCollection(let collection):
      try ItemsQuery.refuseUnknown(request, allowed: ["f"])
      return Self.document(try planCollection(collection, links), type: Self.json)
    case .planItems(let collection):
      return try conditional(request) { try planItems(collection, request, links: links) }
    case .staysBounds:
      return try staysBounds(request)
    case .staysStream:
      return try staysStream(request)
    case .tileMatrixSets:
      try ItemsQuery.refuseUnknown(request, allowed: ["f"])
      return Self.document(tileMatrixSets(links), type: Self.json)
    case .tileMatrixSet(let id):
      try ItemsQuery.refuseUnknown(request, allowed: ["f"])
      try Self.checkTileMatrixSet(id)
      return Self.document(tileMatrixSet(links), type: Self.json)
    case .tilesets:
      _ = try ItemsQuery(request, allowed: Self.tileParameters)
      return Self.document(tilesets(request, links), type: Self.json)
    case .tileset(let id):
      try Self.checkTileMatrixSet(id)
      _ = try ItemsQuery(request, allowed: Self.tileParameters)
      return Self.document(try tileset(request, links), type: Self.json)
    case .tileJSON(let id):
      try Self.checkTileMatrixSet(id)
      _ = try ItemsQuery(request, allowed: Self.tileParameters)
      return try conditional(request) {
        Self.document(try tileJSON(request, links), type: Self.json)
      }
    case .tile:
      throw ServiceError.request(500, "A tile is answered before negotiation.")
    case .planItem(let collection, let id):
      try ItemsQuery.refuseUnknown(request, allowed: ["f"])
      return try planItem(
        collection, id, links: links, ifNoneMatch: request.header("If-None-Match"))
    }
  }

}
