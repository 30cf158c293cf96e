import Foundation
import Geo
import Persistence
import TripPlanner

extension FeaturesAPI {
  /// `GET /collections/trips/bounds`: the bounds report of the matching trips (as
  /// `trips bounds --format json`) with the box in three dialects. Parameters: the items
  /// filters, `viewport=WxH`, `padding=N` pixels, `crs=`, and `stays=true` to cover the
  /// trips' stays too (as `--with-stays`). Cost: two columns of the matching trips,
  /// O(matching), no models (with `stays`, the matching trips as models and their stays in
  /// a query per 10,000); one PROJ transformation outside Web Mercator per point.
  /// The parameters of `bounds` and `bounds/stream`, checked.
  struct BoundsParameters {
    var parsed: ItemsQuery
    var viewport: Viewport?
    var padding: Int
    var crs: String
    var projection: Projection
    /// Whether the stays of the matching trips are covered too (`stays=true`; `bounds` only).
    var stays = false
    /// The viewport less the padding on every side, which the camera fits the box into.
    var fitted: Viewport? {
      viewport.map {
        Viewport(width: $0.width - Double(2 * padding), height: $0.height - Double(2 * padding))
      }
    }
  }

  func boundsParameters(
    _ request: HTTPRequest, filters: Set<String> = ItemsQuery.filterNames,
    stays allowsStays: Bool = false
  ) throws -> BoundsParameters {
    let parsed = try ItemsQuery(
      request,
      allowed: filters.union(["viewport", "padding", "crs"]).union(allowsStays ? ["stays"] : []))
    var stays = false
    if let text = request.queryValues("stays").last {
      guard request.queryValues("stays").count == 1, text == "true" || text == "false" else {
        throw ServiceError.request(
          400,
          "Invalid value '\(HTTPServer.loggable(text))' for 'stays': expected true or false, once.")
      }
      stays = text == "true"
    }
    var viewport: Viewport?
    if let text = request.queryValues("viewport").last {
      guard let value = Viewport(text) else {
        throw ServiceError.request(
          400,
          "Invalid value '\(HTTPServer.loggable(text))' for 'viewport': expected WIDTHxHEIGHT in whole pixels from 1 to \(Viewport.maximumSide)."
        )
      }
      viewport = value
    }
    var padding = 0
    if let text = request.queryValues("padding").last {
      guard let value = Int(text), value >= 0, value <= 10_000 else {
        throw ServiceError.request(
          400,
          "Invalid value '\(HTTPServer.loggable(text))' for 'padding': expected pixels from 0 to 10000."
        )
      }
      padding = value
    }
    if let viewport, padding > 0 {
      guard viewport.width > Double(2 * padding), viewport.height > Double(2 * padding) else {
        throw ServiceError.request(
          400,
          "Invalid value for 'padding': \(padding) px on each side leaves nothing of \(viewport).")
      }
    }
    let crs = request.queryValues("crs").last ?? "EPSG:3857"
    let projection: Projection
    do {
      // A client's CRS never makes PROJ open a file (a FIFO there would hold the thread).
      projection = try Projection(reference: crs)
    } catch let error as GeoError {
      throw ServiceError.request(400, "Invalid value for 'crs': \(error.message)")
    }
    return BoundsParameters(
      parsed: parsed, viewport: viewport, padding: padding, crs: crs, projection: projection,
      stays: stays)
  }

  /// The bounds document: the report (camera fitted inside the padding), the box in three
  /// dialects, and the padding.
  static func boundsDocument(_ report: BoundsReport, _ parameters: BoundsParameters) -> JSONValue {
    var report = report
    report.viewport = parameters.viewport
    // The camera for this client's viewport (a shared stream's report is made without one).
    if let fitted = parameters.fitted, let box = report.geographic {
      report.camera = try? CameraFit(box: box, width: fitted.width, height: fitted.height)
    } else {
      report.camera = nil
    }
    guard case .object(var members) = report.json else { return report.json }
    members.append(("boxes", dialects(report.geographic)))
    if parameters.viewport != nil {
      members.append(("padding", .number(Double(parameters.padding))))
    }
    return .object(members)
  }

  /// `GET /collections/trips/bounds/stream`: the bounds document now and after every change
  /// that alters it, as Server-Sent Events (see ``BoundsStreams``). Same parameters as
  /// `bounds`.
  func boundsStream(_ request: HTTPRequest) throws -> HTTPResponse {
    let parameters = try boundsParameters(request)
    if request.method == "HEAD" { return Self.streamResponse(nil) }
    let stream = try streams.open(request: request, parameters: parameters)
    return Self.streamResponse(stream)
  }

  func bounds(_ request: HTTPRequest) throws -> HTTPResponse {
    let parameters = try boundsParameters(request, stays: true)
    let parsed = parameters.parsed
    let projection = parameters.projection
    let (trips, stays) = try pool.withStore(author: "service") { store in
      (
        try store.coordinates(parsed.unpaged),
        parameters.stays ? try store.stayCoordinates(parsed.unpaged) : []
      )
    }
    let coordinates = trips + stays
    let box = GeographicBox.enclosing(coordinates)
    var report = try BoundsReport(
      count: coordinates.count, box: box, projection: projection, viewport: parameters.fitted,
      points: projection.isWebMercator ? nil : projection.pointCover(coordinates))
    if parameters.stays { report.stayCount = stays.count }
    return Self.document(Self.boundsDocument(report, parameters), type: Self.json)
  }

  /// `GET /collections/stays/bounds`: the bounds report of the stays (`count` is theirs) in
  /// `bbox` and of the trip `trip` when given, with the box in three dialects; `viewport`,
  /// `padding` and `crs` as for the trips' bounds. Cost: as
  /// ``TripStore/stays(in:ofTrip:offset:limit:)`` without a page, O(matching stays) models.
  func staysBounds(_ request: HTTPRequest) throws -> HTTPResponse {
    let parameters = try boundsParameters(
      request, filters: ["bbox", "bbox-crs", "trip", "f"])
    let tripID = try Self.tripParameter(request)
    let coordinates = try pool.withStore(author: "service") { store in
      try store.stays(in: parameters.parsed.query.bbox, ofTrip: tripID).stays.compactMap {
        $0.record.coordinate
      }
    }
    let projection = parameters.projection
    let report = try BoundsReport(
      count: coordinates.count, box: GeographicBox.enclosing(coordinates), projection: projection,
      viewport: parameters.fitted,
      points: projection.isWebMercator ? nil : projection.pointCover(coordinates))
    return Self.document(Self.boundsDocument(report, parameters), type: Self.json)
  }

  /// The box in the three dialects map tools expect:
  /// - `rfc7946`: west > east when it crosses the antimeridian (RFC 7946 §5.2);
  /// - `unwrapped`: east ≥ west, east may exceed 180 (MapLibre Native, Mapbox SDKs);
  /// - `nonWrapping`: inside −180…180 and covering every trip, for TileJSON `bounds`, which
  ///   must not wrap (the whole width when the box crosses the antimeridian).
  static func dialects(_ box: GeographicBox?) -> JSONValue {
    guard let box else {
      return .object([("rfc7946", .null), ("unwrapped", .null), ("nonWrapping", .null)])
    }
    let crosses = box.crossesAntimeridian
    let unwrapped = [box.west, box.south, crosses ? box.east + 360 : box.east, box.north]
    let nonWrapping =
      crosses ? [-180, box.south, 180, box.north] : [box.west, box.south, box.east, box.north]
    return .object([
      ("rfc7946", .array(box.bbox.map(JSONValue.number))),
      ("unwrapped", .array(unwrapped.map(JSONValue.number))),
      ("nonWrapping", .array(nonWrapping.map(JSONValue.number))),
    ])
  }

  /// `GET /collections/trips/sections`: each destination of the matching trips with its count
  /// (one SQL aggregate) and its bounds (from two columns, no models), in code-point order.
  /// Cost: O(matching).
  func sections(_ request: HTTPRequest) throws -> HTTPResponse {
    let parsed = try ItemsQuery(request, allowed: ItemsQuery.filterNames)
    var descriptor = parsed.unpaged.fetchDescriptor
    descriptor.sortBy = [SortDescriptor(\.destination)]
    let (counts, latitudes, longitudes) = try pool.withStore(author: "service") { store in
      (
        try store.destinations(parsed.unpaged),
        try store.context.fetchValues(descriptor, \.destination, \.latitude),
        try store.context.fetchValues(descriptor, \.destination, \.longitude)
      )
    }
    var coordinates: [String: [Coordinate]] = [:]
    for ((destination, latitude), (_, longitude)) in zip(latitudes, longitudes) {
      coordinates[destination, default: []].append(
        Coordinate(latitude: latitude, longitude: longitude))
    }
    let sections = counts.map { entry -> JSONValue in
      let box = GeographicBox.enclosing(coordinates[entry.destination] ?? [])
      return .object([
        ("id", .string(entry.destination)),
        ("count", .number(Double(entry.count))),
        ("bbox", box.map { .array($0.bbox.map(JSONValue.number)) } ?? .null),
      ])
    }
    return Self.document(
      .object([("sections", .array(sections)), ("numberMatched", .number(Double(counts.count)))]),
      type: Self.json)
  }
}
