import Foundation
import Geo
import Persistence
import TripPlanner

// The documents: landing page, conformance, queryables, sortables, the collection, pages of
// items and one item, and their streams.

extension FeaturesAPI {
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
}
