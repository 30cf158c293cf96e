import Foundation
import Geo
import Persistence
import Synchronization
import TripPlanner

/// OGC API – Tiles for the trips: vector tiles (MVT 2.1) of WebMercatorQuad, their tileset
/// and tile matrix set documents and a TileJSON, from the live store.
extension FeaturesAPI {
  static let mvt = "application/vnd.mapbox-vector-tile"
  static let tileMatrixSetID = "WebMercatorQuad"
  static let tileMatrixSetURI = "http://www.opengis.net/def/tilematrixset/OGC/1.0/WebMercatorQuad"
  static let webMercator = "http://www.opengis.net/def/crs/EPSG/0/3857"
  /// The parameters a tile takes: the filters of items but `bbox` (the tile is the box).
  static let tileParameters: Set<String> = [
    "datetime", "destination", "q", "f", "filter", "filter-lang", "filter-crs",
  ]
  static let tilesConformance = [
    "http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/tileset",
    "http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/tilesets-list",
    "http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/geodata-tilesets",
    "http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/mvt",
    "http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/oas30",
    "http://www.opengis.net/spec/tms/2.0/conf/tilematrixset",
    "http://www.opengis.net/spec/tms/2.0/conf/json-tilematrixset",
    "http://www.opengis.net/spec/tms/2.0/conf/tilesetmetadata",
    "http://www.opengis.net/spec/tms/2.0/conf/json-tilesetmetadata",
  ]

  /// The routes under `/tileMatrixSets` and `/collections/trips/tiles`, or nil for another
  /// path.
  static func tileRoute(_ path: String) -> Route? {
    if path == "/tileMatrixSets" { return .tileMatrixSets }
    if path.hasPrefix("/tileMatrixSets/") {
      let id = String(path.dropFirst("/tileMatrixSets/".count))
      return id.contains("/") ? nil : .tileMatrixSet(id)
    }
    let prefix = "/collections/trips/tiles"
    guard path.hasPrefix(prefix) else { return nil }
    if path == prefix { return .tilesets }
    guard path.hasPrefix(prefix + "/") else { return nil }
    let parts = path.dropFirst(prefix.count + 1).split(
      separator: "/", omittingEmptySubsequences: false
    )
    .map(String.init)
    switch parts.count {
    case 1: return .tileset(parts[0])
    case 2 where parts[1] == "tilejson.json": return .tileJSON(parts[0])
    case 4: return .tile(parts[0], matrix: parts[1], row: parts[2], column: parts[3])
    default: return nil
    }
  }

  /// The one tile matrix set offered, or a 404 naming it.
  static func checkTileMatrixSet(_ id: String) throws {
    guard id == tileMatrixSetID else {
      throw ServiceError.request(
        404,
        "There is no tile matrix set '\(HTTPServer.loggable(id))'; this service offers \(tileMatrixSetID)."
      )
    }
  }

  // MARK: Documents

  /// `/tileMatrixSets`: the list of tile matrix sets (one).
  func tileMatrixSets(_ links: Links) -> JSONValue {
    .object([
      ("links", .array([links.link("/tileMatrixSets", rel: "self", type: Self.json)])),
      (
        "tileMatrixSets",
        .array([
          .object([
            ("id", .string(Self.tileMatrixSetID)),
            ("title", .string("Google Maps Compatible for the World")),
            ("uri", .string(Self.tileMatrixSetURI)),
            ("crs", .string(Self.webMercator)),
            (
              "links",
              .array([
                Self.tilingScheme(links)
              ])
            ),
          ])
        ])
      ),
    ])
  }

  /// `/tileMatrixSets/WebMercatorQuad`: its definition (OGC 17-083r4, TMS 2.0 JSON), tile
  /// matrices 0 to ``WebMercatorTile/maximumZoom``.
  func tileMatrixSet(_ links: Links) -> JSONValue {
    let origin = 20_037_508.342_789_244
    let matrices: [JSONValue] = (0...WebMercatorTile.maximumZoom).map { zoom in
      let cellSize = 2 * origin / 256 / Double(1 << zoom)
      return .object([
        ("id", .string(String(zoom))),
        // The standardized rendering pixel, 0.28 mm.
        ("scaleDenominator", .number(cellSize / 0.000_28)),
        ("cellSize", .number(cellSize)),
        ("cornerOfOrigin", .string("topLeft")),
        ("pointOfOrigin", .array([.number(-origin), .number(origin)])),
        ("tileWidth", .number(256)), ("tileHeight", .number(256)),
        ("matrixWidth", .number(Double(1 << zoom))), ("matrixHeight", .number(Double(1 << zoom))),
        // TMS 1.0's members, which GDAL before 3.7 reads.
        ("identifier", .string(String(zoom))),
        ("topLeftCorner", .array([.number(-origin), .number(origin)])),
      ])
    }
    return .object([
      ("id", .string(Self.tileMatrixSetID)),
      ("title", .string("Google Maps Compatible for the World")),
      ("uri", .string(Self.tileMatrixSetURI)),
      ("crs", .string(Self.webMercator)),
      ("orderedAxes", .array([.string("X"), .string("Y")])),
      (
        "wellKnownScaleSet", .string("http://www.opengis.net/def/wkss/OGC/1.0/GoogleMapsCompatible")
      ),
      (
        "boundingBox",
        .object([
          ("lowerLeft", .array([.number(-origin), .number(-origin)])),
          ("upperRight", .array([.number(origin), .number(origin)])),
          ("lowerCorner", .array([.number(-origin), .number(-origin)])),
          ("upperCorner", .array([.number(origin), .number(origin)])),
          ("crs", .string(Self.webMercator)),
        ])
      ),
      ("tileMatrices", .array(matrices)),
      // TMS 1.0's members, which GDAL before 3.7 reads (it reads a document that has them).
      ("type", .string("TileMatrixSetType")),
      ("identifier", .string(Self.tileMatrixSetID)),
      ("supportedCRS", .string(Self.webMercator)),
      ("tileMatrix", .array(matrices)),
      (
        "links",
        .array([links.link("/tileMatrixSets/\(Self.tileMatrixSetID)", rel: "self", type: Self.json)]
        )
      ),
    ])
  }

  /// The template of a tile's URL, with the request's filters: `{tileMatrix}/{tileRow}/{tileCol}`
  /// (OGC), or `{z}/{y}/{x}` (TileJSON, QGIS).
  static func tileTemplate(_ request: HTTPRequest, xyz: Bool) -> String {
    let query = request.query.filter { $0.name != "f" }
    let tail = xyz ? "{z}/{y}/{x}" : "{tileMatrix}/{tileRow}/{tileCol}"
    return "/collections/trips/tiles/\(tileMatrixSetID)/\(tail)"
      + (query.isEmpty
        ? ""
        : "?"
          + query.map { ItemsQuery.escape($0.name) + "=" + ItemsQuery.escape($0.value) }
          .joined(separator: "&"))
  }

  /// The properties of a layer's features, as JSON Schema.
  static func layerSchema(_ layer: String) -> JSONValue {
    if layer == TripTile.pointsLayer {
      // The trip's fields but its point, as the features write them.
      return FieldSchema.object(Trip.schema.fields, leaving: TripTile.pointGeometry)
    }
    let properties: [(String, String, String?)] =
      [
        ("count", "integer", nil), ("west", "number", nil), ("south", "number", nil),
        ("east", "number", nil), ("north", "number", nil), ("destination", "string", nil),
      ]
    return .object([
      ("type", .string("object")),
      (
        "properties",
        .object(
          properties.map { name, type, format in
            var members: [(String, JSONValue)] = [("type", .string(type))]
            if let format { members.append(("format", .string(format))) }
            return (name, .object(members))
          })
      ),
    ])
  }

  /// `/collections/trips/tiles/WebMercatorQuad`: the tileset's metadata (TMS 2.0), with the
  /// template of its tiles and its two layers.
  func tileset(_ request: HTTPRequest, _ links: Links) throws -> JSONValue {
    let layers: [JSONValue] = [TripTile.pointsLayer, TripTile.clustersLayer].map { layer in
      .object([
        ("id", .string(layer)),
        (
          "description",
          .string(
            layer == TripTile.pointsLayer
              ? "A point per trip, where a tile holds at most \(TripTile.featureBudget) of them and \(TripTile.byteBudget) bytes; its feature id is the trip's key in the store, its id property the trip's id."
              : "Where a tile would hold more, a point per occupied cell of a \(TripTile.clusterGrid) × \(TripTile.clusterGrid) grid over it: how many trips, their bounds and their most common destination."
          )
        ),
        ("dataType", .string("vector")),
        ("geometryDimension", .number(0)),
        ("minTileMatrix", .string("0")),
        ("maxTileMatrix", .string(String(WebMercatorTile.maximumZoom))),
        ("propertiesSchema", Self.layerSchema(layer)),
      ])
    }
    return .object([
      ("title", .string("Trips")),
      ("dataType", .string("vector")),
      ("crs", .string(Self.webMercator)),
      ("tileMatrixSetURI", .string(Self.tileMatrixSetURI)),
      ("layers", .array(layers)),
      (
        "links",
        .array([
          links.link(
            "/collections/trips/tiles/\(Self.tileMatrixSetID)", rel: "self", type: Self.json),
          Self.tilingScheme(links),
          links.link("/collections/trips", rel: "collection", type: Self.json),
          Self.tileItem(request, links),
          links.link(
            "/collections/trips/tiles/\(Self.tileMatrixSetID)/tilejson.json",
            rel: "alternate", type: Self.json, title: "TileJSON"),
        ])
      ),
    ])
  }

  /// The link to the tile matrix set's definition.
  static func tilingScheme(_ links: Links) -> JSONValue {
    links.link(
      "/tileMatrixSets/\(tileMatrixSetID)",
      rel: "http://www.opengis.net/def/rel/ogc/1.0/tiling-scheme", type: json)
  }

  /// The templated link to the tiles, with the request's filters.
  static func tileItem(_ request: HTTPRequest, _ links: Links) -> JSONValue {
    let link = links.link(tileTemplate(request, xyz: false), rel: "item", type: mvt)
    guard case .object(var members) = link else { return link }
    members.append(("templated", .bool(true)))
    return .object(members)
  }

  /// `/collections/trips/tiles`: the tilesets of the trips (one, WebMercatorQuad).
  func tilesets(_ request: HTTPRequest, _ links: Links) -> JSONValue {
    .object([
      ("links", .array([links.link("/collections/trips/tiles", rel: "self", type: Self.json)])),
      (
        "tilesets",
        .array([
          .object([
            ("title", .string("Trips")),
            ("dataType", .string("vector")),
            ("crs", .string(Self.webMercator)),
            ("tileMatrixSetURI", .string(Self.tileMatrixSetURI)),
            (
              "links",
              .array([
                links.link(
                  "/collections/trips/tiles/\(Self.tileMatrixSetID)", rel: "self", type: Self.json),
                Self.tilingScheme(links),
                Self.tileItem(request, links),
              ])
            ),
          ])
        ])
      ),
    ])
  }

  /// `/collections/trips/tiles/WebMercatorQuad/tilejson.json`: TileJSON 3.0.0 for MapLibre
  /// and others, with the request's filters in the tiles' template.
  func tileJSON(_ request: HTTPRequest, _ links: Links) throws -> JSONValue {
    let (box, _) = try extent.current(pool)
    let bounds = box.map { $0.crossesAntimeridian ? [-180, $0.south, 180, $0.north] : $0.bbox }
    let fields = { (layer: String) -> JSONValue in
      guard case .object(let schema) = Self.layerSchema(layer),
        case .object(let properties) = schema.first(where: { $0.0 == "properties" })?.1
      else { return .object([]) }
      return .object(
        properties.map { name, schema in
          guard case .object(let members) = schema,
            case .string(let type) = members.first(where: { $0.0 == "type" })?.1
          else { return (name, .string("String")) }
          return (name, .string(type == "string" ? "String" : "Number"))
        })
    }
    return .object([
      ("tilejson", .string("3.0.0")),
      ("name", .string("Trips")),
      ("scheme", .string("xyz")),
      ("tiles", .array([.string(links.base + Self.tileTemplate(request, xyz: true))])),
      ("minzoom", .number(0)),
      ("maxzoom", .number(Double(WebMercatorTile.maximumZoom))),
      (
        "bounds",
        .array((bounds ?? [-180, -85.051_128_78, 180, 85.051_128_78]).map(JSONValue.number))
      ),
      (
        "vector_layers",
        .array(
          [TripTile.pointsLayer, TripTile.clustersLayer].map { layer in
            .object([
              ("id", .string(layer)), ("fields", fields(layer)), ("minzoom", .number(0)),
              ("maxzoom", .number(Double(WebMercatorTile.maximumZoom))),
            ])
          })
      ),
    ])
  }

  // MARK: Tiles

  /// The tile `matrix/row/column` of WebMercatorQuad, or a 400 (not whole numbers) or 404
  /// (outside the tile matrix set).
  static func tileKey(matrix: String, row: String, column: String) throws -> WebMercatorTile {
    func number(_ text: String, _ name: String) throws -> Int {
      guard text.count <= 10, !text.isEmpty, text.allSatisfy(\.isASCII),
        text.allSatisfy(\.isNumber),
        let value = Int(text)
      else {
        throw ServiceError.request(
          400, "Invalid \(name) '\(HTTPServer.loggable(text))': expected a whole number.")
      }
      return value
    }
    let zoom = try number(matrix, "tile matrix")
    let y = try number(row, "tile row")
    let x = try number(column, "tile column")
    guard zoom <= WebMercatorTile.maximumZoom else {
      throw ServiceError.request(
        404,
        "There is no tile matrix \(zoom) in \(tileMatrixSetID): it has 0 to \(WebMercatorTile.maximumZoom)."
      )
    }
    guard let tile = WebMercatorTile(zoom: zoom, column: x, row: y) else {
      throw ServiceError.request(
        404,
        "There is no tile at row \(y), column \(x) of tile matrix \(zoom): rows and columns run from 0 to \((1 << zoom) - 1)."
      )
    }
    return tile
  }

  /// `GET /collections/trips/tiles/WebMercatorQuad/{z}/{y}/{x}`: the tile as MVT, with its
  /// `ETag` (the history position of the last change in it, and the request), a 304 for
  /// `If-None-Match` naming it, and `OGC-NumberMatched` (the trips inside the tile).
  ///
  /// Cost: with the box index, finding the tile's version is O(t + changes) to follow the
  /// store's history since the last request plus O(1); a 304 stops there. A tile made at the
  /// same version is answered from ``TileCache``; else it is made, O(c + m) in memory
  /// (``TripStore/tile(_:query:index:)``), or from the store when the request filters.
  func tile(_ request: HTTPRequest, matrix: String, row: String, column: String) throws
    -> HTTPResponse
  {
    let key = try Self.tileKey(matrix: matrix, row: row, column: column)
    try Self.negotiateTile(request)
    let parsed = try ItemsQuery(request, allowed: Self.tileParameters)
    let canonical =
      "\(key)?"
      + request.query.filter { $0.name != "f" }.map { "\($0.name)=\($0.value)" }.joined(
        separator: "&")
    let ifNoneMatch = request.header("If-None-Match")
    let answer = try pool.withStore(author: "service") { store -> TileCache.Entry in
      try store.context.withSnapshot {
        let version =
          try boxIndex.map { try store.tileVersion(key, index: $0) }
          ?? store.context.currentHistoryToken()
        let tag = TileCache.tag(canonical, version: version)
        if let ifNoneMatch, Self.isCurrent(tag, ifNoneMatch: ifNoneMatch) {
          return TileCache.Entry(version: version, tag: tag, body: nil, matched: nil)
        }
        if let cached = tiles.entry(canonical, version: version) { return cached }
        let tile = try store.tile(key, query: parsed.query, index: boxIndex)
        let entry = TileCache.Entry(
          version: tile.version, tag: TileCache.tag(canonical, version: tile.version),
          body: Data(tile.encoded()), matched: tile.matched)
        tiles.keep(entry, for: canonical)
        return entry
      }
    }
    guard let body = answer.body else { return Self.notModified(answer.tag) }
    if let ifNoneMatch, Self.isCurrent(answer.tag, ifNoneMatch: ifNoneMatch) {
      return Self.notModified(answer.tag)
    }
    var headers: [(name: String, value: String)] = [
      ("Content-Type", Self.mvt), ("ETag", answer.tag), ("Cache-Control", Self.cacheControl),
    ]
    if let matched = answer.matched { headers.append(("OGC-NumberMatched", String(matched))) }
    return HTTPResponse(status: 200, headers: headers, body: body)
  }

  /// A tile is MVT whatever `f` says but `mvt`; `Accept` must allow it.
  static func negotiateTile(_ request: HTTPRequest) throws {
    if let format = request.queryValues("f").last {
      guard format == "mvt" else {
        throw ServiceError.request(
          400, "Invalid value '\(HTTPServer.loggable(format))' for 'f': a tile is mvt.")
      }
      return
    }
    if let accept = request.header("Accept"), !accept.isEmpty,
      !accepts(accept, anyOf: [mvt, "application/x-protobuf", "application/octet-stream"])
    {
      throw ServiceError.request(
        406,
        "A tile is a Mapbox Vector Tile (\(mvt)); the request accepts only \(HTTPServer.loggable(accept))."
      )
    }
  }
}

/// The tiles made lately, by request, with the version each was made at: a tile asked for
/// again before anything in it changed is answered without being made again.
///
/// Two generations, each up to half of ``capacity``: tiles are kept in the newer one; when it
/// is full the older is dropped and the newer becomes the older; a tile found in the older is
/// moved to the newer. The tiles asked for most stay (an approximation of least recently
/// used, in O(1)).
///
/// Cost: O(1) to look up and keep, under a lock. Memory: at most ``capacity`` bytes of tiles
/// and their keys (128 MiB).
final class TileCache: Sendable {
  struct Entry: Sendable {
    var version: DefaultHistoryToken
    var tag: String
    /// Nil for a 304.
    var body: Data?
    var matched: Int?

    func size(_ key: String) -> Int { (body?.count ?? 0) + key.utf8.count + 96 }
  }

  struct Generations {
    var newer: [String: Entry] = [:]
    var older: [String: Entry] = [:]
    var newerBytes = 0
  }

  static let capacity = 128 << 20
  private let state = Mutex(Generations())

  /// The tile kept for `key`, if it was made at `version`.
  func entry(_ key: String, version: DefaultHistoryToken) -> Entry? {
    state.withLock { state in
      if let entry = state.newer[key] { return entry.version == version ? entry : nil }
      guard let entry = state.older.removeValue(forKey: key), entry.version == version else {
        return nil
      }
      Self.insert(entry, for: key, into: &state)
      return entry
    }
  }

  /// Keeps `entry` for `key`.
  func keep(_ entry: Entry, for key: String) {
    guard entry.size(key) < Self.capacity / 16 else { return }
    state.withLock { state in
      state.older.removeValue(forKey: key)
      Self.insert(entry, for: key, into: &state)
    }
  }

  private static func insert(_ entry: Entry, for key: String, into state: inout Generations) {
    let size = entry.size(key)
    if state.newerBytes + size > capacity / 2 {
      state.older = state.newer
      state.newer = [:]
      state.newerBytes = 0
    }
    if let old = state.newer.updateValue(entry, forKey: key) {
      state.newerBytes -= old.size(key)
    }
    state.newerBytes += size
  }

  /// A strong tag: the store, the version and the request (the bytes of a tile are the same
  /// for the same three).
  static func tag(_ key: String, version: DefaultHistoryToken) -> String {
    var hash = Validators.fnvOffset
    for byte in (version.storeIdentifier.uuidString + "|" + key).utf8 {
      Validators.fnv(&hash, byte)
    }
    return "\"t\(version.value)-" + Validators.hex(hash) + "\""
  }
}
