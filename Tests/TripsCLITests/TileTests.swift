import Foundation
import TestSupport
import Testing
import TripPlanner

@Suite("trips serve: vector tiles (OGC API – Tiles, MVT)", .serialized)
struct TileTests {
  let scratch = Scratch()
  static let tiles = "/collections/trips/tiles/WebMercatorQuad"

  /// Trips crowded where clusters form at low zooms (around Fiji, across the antimeridian, and
  /// in Europe) and spread over the globe, with destinations that tie and names that repeat.
  static func crowdedTrips(_ count: Int, seed: UInt64) -> [TripRecord] {
    var generator = SeededGenerator(seed: seed)
    let destinations = ["Suva", "Nadi", "Lisbon", "Paris", "Zürich", "Apia", "Tokyo"]
    return (0..<count).map { index in
      let kind = Double.random(in: 0..<1, using: &generator)
      let latitude: Double
      let longitude: Double
      if kind < 0.4 {
        latitude = Double.random(in: -20 ... -15, using: &generator)
        longitude =
          Bool.random(using: &generator)
          ? Double.random(in: 177...180, using: &generator)
          : Double.random(in: -180 ... -178, using: &generator)
      } else if kind < 0.8 {
        latitude = Double.random(in: 40...50, using: &generator)
        longitude = Double.random(in: -5...15, using: &generator)
      } else {
        latitude = Double.random(in: -90...90, using: &generator)
        longitude = Double.random(in: -180...180, using: &generator)
      }
      let start = Date(
        timeIntervalSince1970: 1_800_000_000 + Double(Int.random(in: 0..<60, using: &generator))
          * 86_400)
      return TripRecord(
        id: UUID(), name: "Trip \(index % 500)",
        destination: destinations[Int.random(in: 0..<destinations.count, using: &generator)],
        startDate: start, endDate: start.addingTimeInterval(5 * 86_400),
        latitude: latitude.rounded(toPlaces: 5), longitude: longitude.rounded(toPlaces: 5),
        placeIdentifier: index % 3 == 0 ? "geonames:\(index)" : nil)
    }
  }

  /// A store of the sample trips and `count` crowded ones (the same each time for a count).
  func crowdedStore(_ store: URL, count: Int = 4_000) throws {
    func trips(_ arguments: [String], store: URL) throws -> Run {
      store.isFileURL
        ? try TripsCLITests.trips(arguments, store: store)
        : try TripsCLITests.trips(arguments, environment: ["TRIPS_STORE": store.absoluteString])
    }
    let sample = try trips(["import", sampleTrips.path], store: store)
    #expect(sample.status == 0, "\(sample.stderr)")
    let file = scratch.file("crowded-\(count).json")
    if !FileManager.default.fileExists(atPath: file.path) {
      try TripFileFormat.json.encode(Self.crowdedTrips(count, seed: 39)).write(to: file)
    }
    let crowded = try trips(["import", file.path], store: store)
    #expect(crowded.status == 0, "\(crowded.stderr)")
  }

  /// What Tests/Tools/tile_oracle.py finds on every tile of zooms 0 to `maxZoom`: an
  /// independent computation of each tile's content, compared with the tile as
  /// mapbox-vector-tile decodes it.
  static func oracle(_ server: ServerProcess, maxZoom: Int) throws -> [String: Any] {
    let python = repositoryRoot.appendingPathComponent(".build/python-tools/bin/python")
    guard FileManager.default.isExecutableFile(atPath: python.path) else {
      throw ServerProcess.ServerFailure(
        message:
          "no \(python.path): run Tools/install-dependencies.sh --tests (or Tools/python-tools.sh)")
    }
    let process = Process()
    process.executableURL = python
    process.arguments = [
      repositoryRoot.appendingPathComponent("Tests/Tools/tile_oracle.py").path, server.url,
      String(maxZoom),
    ]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
  }

  static func checkOracle(_ summary: [String: Any], trips count: Int, maxZoom: Int) {
    #expect(summary["errors"] as? [String] == [], "\(summary["errors"] ?? "")")
    #expect(summary["trips"] as? Int == count)
    #expect(summary["tiles"] as? Int == (0...maxZoom).reduce(0) { $0 + (1 << (2 * $1)) })
    #expect((summary["points"] as? Int ?? 0) > 1_000)
    #expect((summary["clusters"] as? Int ?? 0) > 100)
    let matched = summary["matched"] as? [String: Int] ?? [:]
    #expect(matched.count == maxZoom + 1 && matched.values.allSatisfy { $0 == count })
  }

  @Test(
    "every tile of zooms 0 to 6 holds what an independent computation says (mapbox-vector-tile decodes it): positions, ids, properties, order, clusters with their counts, bounds and destinations, the buffer across the antimeridian; the counts of each zoom add up to the store's",
    .timeLimit(.minutes(6))
  )
  func oracleSQLite() throws {
    try crowdedStore(scratch.store)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    Self.checkOracle(try Self.oracle(server, maxZoom: 6), trips: 4_240, maxZoom: 6)
  }

  @Test("the same on a PostgreSQL store (zooms 0 to 4), and without the index in memory")
  func oraclePostgreSQL() throws {
    let database = try #require(
      URL(string: try PostgreSQLCluster.shared.get().makeDatabase("tiles")))
    try crowdedStore(database)
    for options in [[], ["--no-box-index"]] {
      let server = try ServerProcess(store: database, options)
      defer { #expect(server.stop() == 0) }
      Self.checkOracle(try Self.oracle(server, maxZoom: 4), trips: 4_240, maxZoom: 4)
    }
  }

  @Test(
    "GDAL's MVT driver reads a tile: its features, ids and properties, in EPSG:3857 as PROJ's cs2cs projects the trips"
  )
  func gdalReadsATile() throws {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    // Zoom 3, row 4, column 7: 135° E to 180°, the equator to 41° S (Fiji, New Zealand).
    let tile = try server.request("\(Self.tiles)/3/4/7")
    #expect(tile.status == 200)
    #expect(tile.headers["content-type"] == "application/vnd.mapbox-vector-tile")
    let file = scratch.file("tile.mvt")
    try tile.body.write(to: file)
    let run = try shell("ogrinfo -ro -al -oo Z=3 -oo X=7 -oo Y=4 \"$1\"", arguments: [file.path])
    #expect(run.status == 0, "\(run.stderr)")
    let info = (output: run.stdout, status: run.status)
    let items = try server.request(
      "/collections/trips/items?bbox=135,-41,180,0&limit=1000"
    ).json()
    let features = try #require(items["features"] as? [[String: Any]])
    let header = try #require(tile.headers["ogc-numbermatched"])
    let matched = try #require(Int(header))
    #expect(matched > 10)
    #expect(info.output.components(separatedBy: "OGRFeature(trips)").count - 1 >= matched)
    for feature in features.prefix(5) {
      let id = try #require(feature["id"] as? String)
      #expect(info.output.contains("id (String) = \(id)"), "\(id)")
      let name = try #require((feature["properties"] as? [String: Any])?["name"] as? String)
      #expect(info.output.contains("name (String) = \(name)"))
    }
    #expect(info.output.contains("mvt_id (Integer64) = "))
    // A point in the tile, where cs2cs puts the trip, within a tile unit (38 m at zoom 3).
    let first = try #require(features.first)
    let position = try #require((first["geometry"] as? [String: Any])?["coordinates"] as? [Double])
    let projected = try #require(try cs2cs("EPSG:3857", [(position[1], position[0])]).first)
    let id = try #require(first["id"] as? String)
    let block = try #require(
      info.output.components(separatedBy: "OGRFeature(trips)").first { $0.contains(id) })
    let point = try #require(block.range(of: "POINT (")).upperBound
    let numbers = block[point...].prefix { $0 != ")" }.split(separator: " ").compactMap {
      Double($0)
    }
    let unit = 40_075_016.686 / 8 / 4096
    #expect(
      abs(numbers[0] - projected.0) < 1.5 * unit && abs(numbers[1] - projected.1) < 1.5 * unit)
  }

  @Test(
    "a tile's ETag follows the changes inside it: a 304 while nothing in it changes (a change elsewhere included), a new tag and body once a trip is added inside it by another process"
  )
  func etagsFollowChanges() throws {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    let path = "\(Self.tiles)/3/4/7"
    let first = try server.request(path)
    let tag = try #require(first.headers["etag"])
    #expect(first.headers["cache-control"] == "no-cache")
    #expect(try server.request(path, headers: ["If-None-Match: \(tag)"]).status == 304)
    // A trip in Lima: another tile.
    #expect(
      try trips(
        [
          "add", "--name", "Far", "--destination", "Lima", "--start", "2027-01-01", "--end",
          "2027-01-02", "--latitude", "-12", "--longitude", "-77",
        ], store: scratch.store
      ).status == 0)
    #expect(try server.request(path, headers: ["If-None-Match: \(tag)"]).status == 304)
    #expect(
      try server.request("\(Self.tiles)/0/0/0", headers: ["If-None-Match: \(tag)"]).status == 200)
    // A trip near Suva: this tile.
    #expect(
      try trips(
        [
          "add", "--name", "Near", "--destination", "Suva", "--start", "2027-01-01", "--end",
          "2027-01-02", "--latitude", "-18", "--longitude", "178.5",
        ], store: scratch.store
      ).status == 0)
    let changed = try server.request(path, headers: ["If-None-Match: \(tag)"])
    #expect(changed.status == 200)
    #expect(changed.headers["etag"] != tag)
    #expect(
      Int(changed.headers["ogc-numbermatched"] ?? "")
        == Int(first.headers["ogc-numbermatched"] ?? "")
        .map { $0 + 1 })
    #expect(changed.text.contains("Near") && !first.text.contains("Near"))
    // The same request again: the same bytes (from the cache or made again).
    let again = try server.request(path)
    #expect(again.body == changed.body && again.headers["etag"] == changed.headers["etag"])
  }

  @Test(
    "the same trips give the same bytes in another store; tiles take the filters of items (destination, q, datetime, a CQL2 filter), and the TileJSON's template carries them"
  )
  func deterministicAndFiltered() throws {
    try crowdedStore(scratch.store, count: 3_000)
    let other = scratch.file("other.sqlite")
    try crowdedStore(other, count: 3_000)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    let second = try ServerProcess(store: other, ["--no-box-index"])
    defer { #expect(second.stop() == 0) }
    for tile in ["0/0/0", "1/1/1", "2/2/3", "5/17/31", "6/35/63", "6/35/0"] {
      let one = try server.request("\(Self.tiles)/\(tile)")
      let two = try second.request("\(Self.tiles)/\(tile)")
      #expect(one.status == 200 && two.status == 200)
      #expect(one.body == two.body, "\(tile)")
    }
    // Filters: a destination's tile holds only its trips, and the CQL2 filter that means the
    // same gives the same bytes.
    let suva = try server.request("\(Self.tiles)/0/0/0?destination=Suva")
    let cql = try server.request(
      "\(Self.tiles)/0/0/0?filter=destination%20%3D%20%27Suva%27")
    #expect(suva.status == 200 && cql.status == 200)
    #expect(suva.body == cql.body)
    let count =
      try server.request("/collections/trips/items?destination=Suva&limit=1").json()[
        "numberMatched"] as? Int
    #expect(Int(suva.headers["ogc-numbermatched"] ?? "") == count)
    #expect(suva.headers["etag"] != (try server.request("\(Self.tiles)/0/0/0")).headers["etag"])
    let dated = try server.request("\(Self.tiles)/2/2/3?datetime=2027-01-15/2027-01-20&q=trip")
    #expect(dated.status == 200)
    let tileJSON = try server.request("\(Self.tiles)/tilejson.json?destination=Suva").json()
    let template = try #require((tileJSON["tiles"] as? [String])?.first)
    #expect(
      template.hasSuffix("/collections/trips/tiles/WebMercatorQuad/{z}/{y}/{x}?destination=Suva"))
    #expect(tileJSON["tilejson"] as? String == "3.0.0")
    #expect(
      (tileJSON["vector_layers"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [
        "trips", "clusters",
      ])
  }

  @Test(
    "the tileset, the tilesets list, the tile matrix set and the links to them: what GDAL and QGIS read"
  )
  func documents() throws {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    let collection = try server.request("/collections/trips").json()
    let links = try #require(collection["links"] as? [[String: Any]])
    #expect(
      links.contains {
        $0["rel"] as? String == "http://www.opengis.net/def/rel/ogc/1.0/tilesets-vector"
          && ($0["href"] as? String)?.hasSuffix("/collections/trips/tiles") == true
      })
    let list = try server.request("/collections/trips/tiles").json()
    let tileset = try #require((list["tilesets"] as? [[String: Any]])?.first)
    #expect(tileset["dataType"] as? String == "vector")
    #expect(
      tileset["tileMatrixSetURI"] as? String
        == "http://www.opengis.net/def/tilematrixset/OGC/1.0/WebMercatorQuad")
    let metadata = try server.request(Self.tiles).json()
    let item = try #require(
      (metadata["links"] as? [[String: Any]])?.first { $0["rel"] as? String == "item" })
    #expect(item["type"] as? String == "application/vnd.mapbox-vector-tile")
    #expect(item["templated"] as? Bool == true)
    #expect((item["href"] as? String)?.hasSuffix("/{tileMatrix}/{tileRow}/{tileCol}") == true)
    #expect(
      (metadata["layers"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [
        "trips", "clusters",
      ])
    let set = try server.request("/tileMatrixSets/WebMercatorQuad").json()
    let matrices = try #require(set["tileMatrices"] as? [[String: Any]])
    #expect(matrices.count == 25)
    #expect(
      matrices[0]["matrixWidth"] as? Int == 1 && matrices[24]["matrixWidth"] as? Int == 1 << 24)
    #expect(abs((matrices[0]["scaleDenominator"] as? Double ?? 0) - 559_082_264.028_717_8) < 1e-3)
    let conformance = try server.request("/conformance").text
    for part in ["ogcapi-tiles-1/1.0/conf/core", "conf/mvt", "conf/geodata-tilesets"] {
      #expect(conformance.contains(part), "\(part)")
    }
  }

  @Test(
    "bad tile requests: a matrix, row or column outside the set, not a number, another tile matrix set, garbage filters and formats, a wrong Accept: 400, 404 or 406 with the OGC error body, never a 5xx"
  )
  func badInput() throws {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    let cases: [(String, [String], Int)] = [
      ("\(Self.tiles)/25/0/0", [], 404),
      ("\(Self.tiles)/-1/0/0", [], 400),
      ("\(Self.tiles)/2/4/0", [], 404),
      ("\(Self.tiles)/2/0/4", [], 404),
      ("\(Self.tiles)/2/0/-1", [], 400),
      ("\(Self.tiles)/99999999999999999999/0/0", [], 400),
      ("\(Self.tiles)/1.5/0/0", [], 400),
      ("\(Self.tiles)/z/y/x", [], 400),
      ("\(Self.tiles)/1/0", [], 404),
      ("\(Self.tiles)/1/0/0/0", [], 404),
      ("/collections/trips/tiles/WorldCRS84Quad/0/0/0", [], 404),
      ("/collections/trips/tiles/WorldCRS84Quad", [], 404),
      ("/tileMatrixSets/Nope", [], 404),
      ("\(Self.tiles)/0/0/0?bbox=0,0,1,1", [], 400),
      ("\(Self.tiles)/0/0/0?filter=destination%20%3D", [], 400),
      ("\(Self.tiles)/0/0/0?filter=%00", [], 400),
      ("\(Self.tiles)/0/0/0?datetime=yesterday", [], 400),
      ("\(Self.tiles)/0/0/0?f=json", [], 400),
      ("\(Self.tiles)/0/0/0?limit=5", [], 400),
      ("\(Self.tiles)/0/0/0", ["Accept: application/json"], 406),
      ("\(Self.tiles)?f=mvt", [], 400),
      ("\(Self.tiles)/tilejson.json?filter=(", [], 400),
    ]
    for (path, headers, status) in cases {
      let reply = try server.request(path, headers: headers)
      #expect(reply.status == status, "\(path): \(reply.status) \(reply.text)")
      #expect(reply.headers["content-type"] == "application/json", "\(path)")
      let document = try reply.json()
      #expect(document["code"] is String && document["description"] is String, "\(path)")
    }
    // Random bytes as the tile's path and its query: never a 5xx.
    var generator = SeededGenerator(seed: 9)
    let alphabet = Array("0123456789/-.%zZ?=&'(),x ")
    for _ in 0..<150 {
      let tail = String(
        (0..<Int.random(in: 1...14, using: &generator)).map { _ in
          alphabet[Int.random(in: 0..<alphabet.count, using: &generator)]
        }
      ).replacingOccurrences(of: " ", with: "%20")
      let reply = try server.request("\(Self.tiles)/\(tail)")
      #expect(reply.status < 500, "\(tail): \(reply.status)")
    }
    #expect(try server.request("\(Self.tiles)/0/0/0?f=mvt").status == 200)
    #expect(
      try server.request("\(Self.tiles)/0/0/0", headers: ["Accept: application/x-protobuf"]).status
        == 200)
  }
}
