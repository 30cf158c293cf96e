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
    // A store that is busy (another writer held it past the busy timeout) or full is not a
    // fault of the server's: 503 with Retry-After, and 507.
    let persistence =
      error as? PersistenceError ?? (error as? TripPlannerError)?.cause as? PersistenceError
    if let persistence, persistence.code == .busy {
      var response = ServiceError.response(
        status: 503, description: "The store is busy: \(persistence.message) Try again shortly.")
      response.headers.append(("Retry-After", "1"))
      return response
    }
    if let persistence, persistence.code == .timedOut || persistence.code == .abandoned {
      return ServiceError.deadlineResponse(
        persistence.message,
        advice:
          "Ask for less (a narrower filter or box, a smaller page), or try again when the server is less busy."
      )
    }
    if let persistence, persistence.code == .outOfRange {
      return ServiceError.response(
        status: 400,
        description:
          "A number the request computes is out of range on this store's engine (PostgreSQL's double precision overflows where SQLite gives infinity); keep the filter's arithmetic within ±1.8e308."
      )
    }
    if let persistence, persistence.code == .storeFull {
      return ServiceError.response(
        status: 507, description: "The store is full: \(persistence.message)")
    }
    if let error = error as? TripPlannerError {
      switch error.code {
      case .invalidTrip, .invalidInput:
        return ServiceError.response(status: 400, description: error.description)
      case .notFound:
        return ServiceError.response(status: 404, description: error.message)
      default:
        let cause = (error.cause as? PersistenceError)?.message ?? error.message
        return internalFailure(cause)
      }
    }
    if let error = error as? PersistenceError {
      return internalFailure(error.message)
    }
    if let error = error as? GeoError {
      return ServiceError.response(status: 400, description: error.message)
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

  // MARK: Documents

  /// Links made absolute on the base URL the client used.
  struct Links {
    var base: String

    func link(_ path: String, rel: String, type: String, title: String? = nil) -> JSONValue {
      var members: [(String, JSONValue)] = [
        ("href", .string(base + path)), ("rel", .string(rel)), ("type", .string(type)),
      ]
      if let title { members.append(("title", .string(title))) }
      return .object(members)
    }
  }

  func landing(_ links: Links) -> JSONValue {
    .object([
      ("title", .string("Trip planner")),
      (
        "description",
        .string(
          "Trips as OGC API – Features: each trip a Point with its name, destination, dates and plan (its bucket list and stay); the stays and the bucket-list items as collections of their own; bounds and sections for map cameras."
        )
      ),
      (
        "links",
        .array([
          links.link("/", rel: "self", type: Self.json, title: "This document"),
          links.link("/api", rel: "service-desc", type: Self.openAPI, title: "The API definition"),
          links.link(
            "/conformance", rel: "conformance", type: Self.json, title: "Conformance classes"),
          links.link("/collections", rel: "data", type: Self.json, title: "The collections"),
          links.link("/map", rel: "alternate", type: "text/html", title: "A live map of the trips"),
          links.link(
            "/tileMatrixSets", rel: "http://www.opengis.net/def/rel/ogc/1.0/tiling-schemes",
            type: Self.json, title: "The tile matrix sets of the tiles"),
        ])
      ),
    ])
  }

  func conformance() -> JSONValue {
    var classes =
      [
        "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core",
        "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson",
        "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/oas30",
        "http://www.opengis.net/spec/ogcapi-features-2/1.0/conf/crs",
      ] + Self.filterConformance + Self.tilesConformance
    if configuration.tokens != nil && !configuration.readOnly {
      classes.append("http://www.opengis.net/spec/ogcapi-features-4/1.0/conf/create-replace-delete")
    }
    return .object([("conformsTo", .array(classes.map(JSONValue.string)))])
  }

  /// The classes of Part 3 (Filtering) and of CQL2 the trips' `filter` implements, each
  /// whole (see ``TripFilter``), and tested.
  static let filterConformance = [
    "http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/filter",
    "http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/features-filter",
    "http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/queryables",
    "http://www.opengis.net/spec/cql2/1.0/conf/cql2-text",
    "http://www.opengis.net/spec/cql2/1.0/conf/cql2-json",
    "http://www.opengis.net/spec/cql2/1.0/conf/basic-cql2",
    "http://www.opengis.net/spec/cql2/1.0/conf/advanced-comparison-operators",
    "http://www.opengis.net/spec/cql2/1.0/conf/case-insensitive-comparison",
    "http://www.opengis.net/spec/cql2/1.0/conf/accent-insensitive-comparison",
    "http://www.opengis.net/spec/cql2/1.0/conf/basic-spatial-functions",
    "http://www.opengis.net/spec/cql2/1.0/conf/basic-spatial-functions-plus",
    "http://www.opengis.net/spec/cql2/1.0/conf/temporal-functions",
    "http://www.opengis.net/spec/cql2/1.0/conf/arithmetic",
  ]

  /// The trips' queryables as a JSON Schema (Part 3): each property a filter can name, with
  /// its type and format.
  func queryables(_ links: Links) -> JSONValue {
    let properties: [(String, JSONValue)] = TripFilter.queryables.map { queryable in
      var members: [(String, JSONValue)] = [("title", .string(queryable.title))]
      if queryable.name == "geometry" {
        members.append(("format", .string("geometry-point")))
      } else {
        members.append(("type", .string(queryable.type)))
        if let format = queryable.format { members.append(("format", .string(format))) }
      }
      return (queryable.name, .object(members))
    }
    return .object([
      ("$schema", .string("https://json-schema.org/draft/2020-12/schema")),
      ("$id", .string(links.base + "/collections/trips/queryables")),
      ("type", .string("object")),
      ("title", .string("Trips")),
      ("properties", .object(properties)),
      ("additionalProperties", .bool(false)),
    ])
  }

  /// The trips' sortables (the `sortby` parameter's keys) as a JSON Schema.
  func sortables(_ links: Links) -> JSONValue {
    // Each order's field as the features write it, titled by its documentation.
    let properties: [(String, JSONValue)] = TripQuery.Sort.allCases.map { sort in
      let field = sort.field
      var members: [(String, JSONValue)] = [
        ("title", .string(field.documentation + (sort == .start ? " The default order." : "")))
      ]
      if case .object(let schema)? = FieldSchema.property(field) {
        members += schema.filter { $0.0 != "description" }
      }
      return (field.name, .object(members))
    }
    return .object([
      ("$schema", .string("https://json-schema.org/draft/2020-12/schema")),
      ("$id", .string(links.base + "/collections/trips/sortables")),
      ("type", .string("object")),
      ("title", .string("Trips")),
      ("properties", .object(properties)),
      ("additionalProperties", .bool(false)),
    ])
  }

  /// The collection, with its extent: the smallest box over all trips (west > east when it
  /// crosses the antimeridian, as the standard allows) and the span of their dates.
  func collection(_ links: Links) throws -> JSONValue {
    let (box, span) = try extent.current(pool)
    let spatial: JSONValue = box.map { .array([.array($0.bbox.map(JSONValue.number))]) } ?? .null
    let temporal: JSONValue =
      span.map {
        .array([.array([.string(TripDates.format($0.0)), .string(TripDates.format($0.1))])])
      }
      ?? .array([.array([.null, .null])])
    return .object([
      ("id", .string(Self.collectionID)),
      ("title", .string("Trips")),
      ("description", .string("Planned trips: a Point per trip, at its destination.")),
      ("itemType", .string("feature")),
      ("crs", .array(FeatureCRS.offered.map(JSONValue.string))),
      ("storageCrs", .string(Self.crs84)),
      (
        "extent",
        .object([
          ("spatial", .object([("bbox", spatial), ("crs", .string(Self.crs84))])),
          (
            "temporal",
            .object([
              ("interval", temporal),
              ("trs", .string("http://www.opengis.net/def/uom/ISO-8601/0/Gregorian")),
            ])
          ),
        ])
      ),
      (
        "links",
        .array([
          links.link("/collections/trips", rel: "self", type: Self.json),
          links.link("/collections/trips/items", rel: "items", type: Self.geoJSON, title: "Trips"),
          links.link(
            "/collections/trips/queryables",
            rel: "http://www.opengis.net/def/rel/ogc/1.0/queryables",
            type: Self.schemaJSON, title: "What a filter can name"),
          links.link(
            "/collections/trips/sortables", rel: "http://www.opengis.net/def/rel/ogc/1.0/sortables",
            type: Self.schemaJSON, title: "What sortby can name"),
          links.link(
            "/collections/trips/tiles",
            rel: "http://www.opengis.net/def/rel/ogc/1.0/tilesets-vector",
            type: Self.json, title: "Vector tiles of the trips"),
        ])
      ),
    ])
  }

  /// `GET /collections/trips/items`: one page of matching trips, with `numberMatched` and
  /// `next`/`prev` links. Cost: ``TripStore/pageRecords(_:index:)``: a `bbox` page by start date with
  /// no other filter is chosen and counted in memory, O(c + m log k) for the c cells and m
  /// trips near the box, then its rows' columns read by key; with other filters or sorts, one pass
  /// over the box's index entries in the store; without `bbox`, the page's query and a count;
  /// then the page's plans, in the same snapshot of the store.
  func items(_ request: HTTPRequest, links: Links) throws -> HTTPResponse {
    let parsed = try ItemsQuery(request)
    let crs = try Self.outputCRS(request)
    let selection = try FeatureSelection(request)
    let (records, matched) = try pool.withStore(author: "service") { store in
      try store.pageRecordsWithPlans(parsed.query, index: boxIndex)
    }
    var pageLinks: [JSONValue] = [
      links.link(parsed.path(offset: parsed.offset), rel: "self", type: Self.geoJSON),
      links.link("/collections/trips", rel: "collection", type: Self.json),
    ]
    if parsed.offset + records.count < matched {
      pageLinks.append(
        links.link(
          parsed.path(offset: parsed.offset + parsed.limit), rel: "next", type: Self.geoJSON))
    }
    if parsed.offset > 0 {
      pageLinks.append(
        links.link(
          parsed.path(offset: max(0, parsed.offset - parsed.limit)), rel: "prev",
          type: Self.geoJSON))
    }
    // The features are written straight to bytes (TripGeoJSON.writeFeature), the rest of
    // the document as a tree: the same text as one tree, in a fraction of the time.
    var body = Array(#"{"type":"FeatureCollection","features":["#.utf8)
    body.reserveCapacity(400 * records.count + 1024)
    for (index, record) in records.enumerated() {
      if index > 0 { body.append(UInt8(ascii: ",")) }
      if let selection {
        body.append(contentsOf: selection.feature(try crs.placed(record)).utf8())
      } else {
        TripGeoJSON.writeFeature(try crs.placed(record), into: &body)
      }
    }
    body.append(contentsOf: "],".utf8)
    let rest = JSONValue.object([
      ("numberMatched", .number(Double(matched))),
      ("numberReturned", .number(Double(records.count))),
      ("timeStamp", .string(TripDates.format(Date()))),
      ("links", .array(pageLinks)),
    ])
    body.append(contentsOf: rest.utf8().dropFirst())  // its members, after the features
    body.append(0x0A)
    return HTTPResponse(
      status: 200, headers: [("Content-Type", Self.geoJSON), ("Content-Crs", "<\(crs.uri)>")],
      body: Data(body))
  }

  /// The CRS of the features' coordinates: `crs` (Part 2), CRS84 by default.
  static func outputCRS(_ request: HTTPRequest) throws -> FeatureCRS {
    let given = request.queryValues("crs")
    guard given.count <= 1 else {
      throw ServiceError.request(400, "The parameter 'crs' is given more than once.")
    }
    return try given.first.map { try FeatureCRS.named($0, parameter: "crs") } ?? .crs84
  }

  /// `GET /collections/trips/items/{id}`. Cost: one lookup in the unique index on id, and on a
  /// store with plan rows two through the plan tables' key columns (``TripStore/recordWithPlan(id:)``).
  func item(
    _ id: String, links: Links, ifNoneMatch: String? = nil, crs: FeatureCRS = .crs84
  ) throws -> HTTPResponse {
    guard let uuid = UUID(uuidString: id) else {
      throw ServiceError.request(404, "There is no trip with the id '\(HTTPServer.loggable(id))'.")
    }
    // The trip and its plan in one snapshot, as values.
    let record = try pool.withStore(author: "service") { store in
      try store.recordWithPlan(id: uuid)
    }
    guard let record else {
      throw ServiceError.request(404, "There is no trip with the id \(id.lowercased()).")
    }
    // If-None-Match (RFC 9110 §13.1.2, weak comparison): 304 when the client's copy is current.
    // The tag is the representation's: a trip in another CRS has another.
    let placed = try crs.placed(record)
    let tag = Self.etag(placed)
    if Self.isCurrent(tag, ifNoneMatch: ifNoneMatch) {
      return HTTPResponse(status: 304, headers: [("ETag", tag), ("Content-Crs", "<\(crs.uri)>")])
    }
    var response = Self.feature(placed, links: links)
    response.headers.append(("Content-Crs", "<\(crs.uri)>"))
    return response
  }

  /// Whether an `If-None-Match` header names `tag` or `*` (RFC 9110 §13.1.2, weak
  /// comparison): the client's copy is current, a 304.
  static func isCurrent(_ tag: String, ifNoneMatch: String?) -> Bool {
    guard let given = ifNoneMatch else { return false }
    return given.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.contains {
      $0 == "*" || $0 == tag || $0 == "W/" + tag
    }
  }

  static func feature(_ record: TripRecord, links: Links, status: Int = 200) -> HTTPResponse {
    var feature = TripGeoJSON.feature(record)
    if case .object(var members) = feature, let id = record.id?.lowercasedString {
      members.append(
        (
          "links",
          .array([
            links.link("/collections/trips/items/\(id)", rel: "self", type: geoJSON),
            links.link("/collections/trips", rel: "collection", type: json),
          ])
        ))
      feature = .object(members)
    }
    var response = document(feature, type: geoJSON, status: status)
    response.headers.append(("ETag", etag(record)))
    return response
  }

  static func document(_ value: JSONValue, type: String, status: Int = 200) -> HTTPResponse {
    HTTPResponse(
      status: status, headers: [("Content-Type", type)],
      body: {
        var bytes = value.utf8()
        bytes.append(0x0A)
        return Data(bytes)
      }())
  }

  /// `GET /collections/trips/items/stream`: each committed change to the matching trips as
  /// Server-Sent Events, resumable with `Last-Event-ID` (see ``ItemsStreams``). Takes the items
  /// filters (`bbox`, `datetime`, `destination`, `q`).
  func itemsStream(_ request: HTTPRequest) throws -> HTTPResponse {
    let parsed = try ItemsQuery(request, allowed: ItemsQuery.filterNames)
    _ = try ItemsStreams.resumeToken(request.header("Last-Event-ID"))
    if request.method == "HEAD" { return Self.streamResponse(nil) }
    let stream = try itemStreams.open(
      key: Self.streamKey(request), query: parsed.unpaged,
      lastEventID: request.header("Last-Event-ID"), client: request.client)
    return Self.streamResponse(stream)
  }

  /// A Server-Sent Events response on `stream`; its headers alone for HEAD (nil: no stream is
  /// opened).
  static func streamResponse(_ stream: HTTPStream?) -> HTTPResponse {
    HTTPResponse(
      status: 200,
      headers: [
        ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
        ("X-Accel-Buffering", "no"),
      ],
      stream: stream)
  }

  /// The key of a stream's query: its parameters, sorted (clients of one key share one feed).
  static func streamKey(_ request: HTTPRequest) -> String {
    request.query.map { "\($0.name)=\($0.value)" }.sorted().joined(separator: "&")
  }

  // MARK: Negotiation

  /// Checks the format asked for with `f` or `Accept`: JSON in its flavours; anything else is
  /// 400 (`f`) or 406 (`Accept`).
  func negotiate(_ request: HTTPRequest, route: Route) throws {
    if let format = request.queryValues("f").last {
      guard ["json", "geojson", "application/json", "application/geo+json"].contains(format)
      else {
        throw ServiceError.request(
          400, "Invalid value '\(HTTPServer.loggable(format))' for 'f': this service speaks json.")
      }
      return
    }
    if let accept = request.header("Accept"), !accept.isEmpty {
      var isStream = false
      switch route {
      case .boundsStream, .itemsStream, .staysStream: isStream = true
      default: break
      }
      // Streams are Server-Sent Events: a browser's EventSource asks for text/event-stream.
      let offered =
        isStream
        ? ["text/event-stream"]
        : [
          "application/json", "application/geo+json", "application/vnd.oai.openapi+json",
          "application/problem+json", "application/schema+json",
        ]
      guard Self.accepts(accept, anyOf: offered) else {
        throw ServiceError.request(
          406,
          isStream
            ? "This stream answers with Server-Sent Events (text/event-stream); the request accepts only \(HTTPServer.loggable(accept))."
            : "This service answers with JSON (application/json, application/geo+json); the request accepts only \(HTTPServer.loggable(accept))."
        )
      }
    }
  }

  /// Whether an `Accept` header gives one of `offered` a weight above 0 (RFC 9110 §12.5.1):
  /// each type takes the `q` of the most specific range that matches it (`type/subtype`, then
  /// `type/*`, then `*/*`; default 1), so `application/json;q=0` refuses JSON even beside
  /// `*/*`. A weight that is not a number from 0 to 1 counts as 1. Cost: O(ranges × offered).
  static func accepts(_ accept: String, anyOf offered: [String]) -> Bool {
    let ranges = accept.split(separator: ",").map { item -> (type: String, q: Double) in
      let parts = item.split(separator: ";").map {
        $0.trimmingCharacters(in: .whitespaces).lowercased()
      }
      var q = 1.0
      for parameter in parts.dropFirst() where parameter.hasPrefix("q=") {
        if let value = Double(parameter.dropFirst(2)), (0...1).contains(value) { q = value }
      }
      return (parts.first ?? "", q)
    }
    return offered.contains { type in
      let group = String(type.prefix { $0 != "/" }) + "/*"
      for candidate in [type, group, "*/*"] {
        let weights = ranges.filter { $0.type == candidate }.map(\.q)
        if !weights.isEmpty { return weights.max()! > 0 }
      }
      return false
    }
  }

  /// `scheme://host` as the client addressed the service (links are absolute).
  func baseURL(_ request: HTTPRequest) -> String {
    let scheme = configuration.tls == nil ? "http" : "https"
    if let host = request.header("Host"), !host.isEmpty, host.count <= 255,
      host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-:[]".contains($0)) })
    {
      return "\(scheme)://\(host)"
    }
    let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
    return "\(scheme)://\(host):\(configuration.port)"
  }

  func preflight(_ route: Route) -> HTTPResponse {
    var headers: [(name: String, value: String)] = [
      ("Allow", methods(route).joined(separator: ", "))
    ]
    if configuration.corsOrigin != nil {
      headers += [
        ("Access-Control-Allow-Methods", methods(route).joined(separator: ", ")),
        (
          "Access-Control-Allow-Headers",
          "Authorization, Content-Type, Last-Event-ID, If-Match, If-None-Match"
        ),
        ("Access-Control-Max-Age", "600"),
      ]
    }
    return HTTPResponse(status: 204, headers: headers)
  }
}
