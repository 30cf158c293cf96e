import Foundation
import TestSupport
import Testing

/// `bbox-crs=EPSG:3857`: a box means the trips some copy of the world puts inside it, as a web
/// map zoomed out asks (wider than the world, past ±20,037,508.34 m, across 180°), checked
/// against an independent reading (Tests/Tools/bbox3857_oracle.py: pyproj's forward projection
/// of each trip, its own PROJ).
@Suite("bbox-crs EPSG:3857: boxes wider than the world, across 180° and toward the poles")
struct WebMercatorBoxTests {
  static let crs = "http://www.opengis.net/def/crs/EPSG/0/3857"
  static let half = 20_037_508.342_789_244

  /// The trips each box holds, by the oracle.
  static func oracle(features: Any, boxes: [[Double]]) throws -> [[String]] {
    let python = repositoryRoot.appendingPathComponent(".build/python-tools/bin/python")
    guard FileManager.default.isExecutableFile(atPath: python.path) else {
      throw ServerProcess.ServerFailure(
        message:
          "no \(python.path): run Tools/install-dependencies.sh --tests (or Tools/python-tools.sh)")
    }
    let process = Process()
    process.executableURL = python
    process.arguments = [
      repositoryRoot.appendingPathComponent("Tests/Tools/bbox3857_oracle.py").path
    ]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(
      try JSONSerialization.data(withJSONObject: ["features": features, "boxes": boxes]))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    return try #require(try JSONSerialization.jsonObject(with: data) as? [[String]])
  }

  static func query(_ box: [Double]) -> String {
    let text = box.map { String($0) }.joined(separator: ",")
    return "bbox-crs=" + crs.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
      + "&bbox="
      + text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
  }

  @Test(
    "the report's boxes and 60 random ones (wider than the world, past its edge, across 180°, toward the poles) select on items, bounds, sections and streams the trips pyproj puts in them; a box that cannot be meant is a 400",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func boxes(engine: String) throws {
    let scratch = Scratch()
    let store =
      engine == "sqlite"
      ? scratch.store : URL(string: try PostgreSQLCluster.shared.get().makeDatabase("mercator"))!
    let location = store.isFileURL ? store.path : store.absoluteString
    #expect(try trips(["import", "--store", location, sampleTrips.path]).status == 0)
    // Trips at the antimeridian, near the poles and past Web Mercator's latitudes.
    for (latitude, longitude) in [
      (10.0, 179.99), (10.0, -179.99), (-20.0, 175.0), (-20.0, -175.0), (85.1, 0.0), (-85.1, 10.0),
      (89.0, 50.0), (-89.0, -50.0), (60.0, 170.0), (-60.0, -170.0), (45.0, 135.4), (45.0, -134.0),
    ] {
      let added = try trips([
        "add", "--name", "edge", "--destination", "Edge", "--start", "2027-05-01", "--end",
        "2027-05-09", "--latitude", "\(latitude)", "--longitude", "\(longitude)", "--store",
        location,
      ])
      #expect(added.status == 0, "\(added.stderr)")
    }
    let server = try ServerProcess(store: store)
    defer { #expect(server.stop() == 0) }
    let all = try server.request("/collections/trips/items?limit=10000").json()
    let features = try #require(all["features"] as? [[String: Any]])
    #expect(features.count == 252)

    var boxes: [[Double]] = [
      [-Self.half, -Self.half, Self.half, Self.half],
      [-20_037_600, -20_037_508.34, 20_037_600, 20_037_508.34],
      [-20_037_509, -20_048_966.1, 20_037_509, 20_048_966.1],
      [-1e30, -1e30, 1e30, 1e30],
      [-30_000_000, -15_000_000, 30_000_000, 15_000_000],
      [-25_000_000, -10_000_000, -15_000_000, 10_000_000],
      [15_000_000, -10_000_000, 25_000_000, 10_000_000],
      [19_000_000, -3_000_000, -19_000_000, 3_000_000],
      [-60_000_000, 0, -50_000_000, 9_000_000],
    ]
    var generator = SeededGenerator(seed: 3857)
    for _ in 0..<60 {
      let west = Double.random(in: -3 * Self.half...3 * Self.half, using: &generator)
      let width = Double.random(in: 1_000...2.5 * Self.half, using: &generator)
      let south = Double.random(in: -30_000_000...25_000_000, using: &generator)
      let height = Double.random(in: 1_000...30_000_000, using: &generator)
      boxes.append([west, south, west + width, south + height])
    }
    let expected = try Self.oracle(features: features, boxes: boxes)
    // The oracle tells boxes apart: every trip in the widest, few in the narrow ones.
    #expect(expected[3].count == 252 && expected[1].count > 240)
    #expect(expected.filter { !$0.isEmpty && $0.count < 200 }.count > 30)
    for (box, ids) in zip(boxes, expected) {
      let query = Self.query(box)
      let items = try server.request("/collections/trips/items?limit=10000&" + query)
      #expect(items.status == 200, "\(box): \(items.text.prefix(300))")
      let found = try #require(try items.json()["features"] as? [[String: Any]]).compactMap {
        $0["id"] as? String
      }
      #expect(found.sorted() == ids, "\(box): \(found.count) trips, the oracle \(ids.count)")
      let bounds = try server.request("/collections/trips/bounds?" + query)
      #expect(
        (try bounds.json()["count"] as? Int) == ids.count, "\(box): \(bounds.text.prefix(200))")
      let sections = try server.request("/collections/trips/sections?" + query)
      let counted = try #require(try sections.json()["sections"] as? [[String: Any]]).reduce(0) {
        $0 + ($1["count"] as? Int ?? 0)
      }
      #expect(counted == ids.count, "\(box)")
    }
    // A live stream of bounds says the same count in its first event.
    for (box, ids) in zip(boxes.prefix(6), expected) {
      let stream = try curlStream(
        server.url + "/collections/trips/bounds/stream?" + Self.query(box))
      let first = try #require(serverSentEvents(stream).first { $0.kind == "bounds" }, "\(box)")
      #expect(first.data["count"] as? Int == ids.count, "\(box)")
    }
    // Past the world on both sides with the greater x first: no box can be meant.
    for box in [[30_000_000.0, 0, -30_000_000, 10], [20_037_600, 0, -20_037_600, 10]] {
      let reply = try server.request("/collections/trips/items?" + Self.query(box))
      #expect(reply.status == 400 && reply.text.contains("antimeridian"), "\(reply.text)")
    }
  }

  /// What a stream sends up to its first `bounds` event (at most 20 s).
  func curlStream(_ url: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = ["-s", "-N", "-m", "20", url]
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    var data = Data()
    while true {
      let chunk = out.fileHandleForReading.availableData
      if chunk.isEmpty { break }
      data.append(chunk)
      let text = String(decoding: data, as: UTF8.self)
      if let event = text.range(of: "event: bounds"), text[event.upperBound...].contains("\n\n") {
        break
      }
    }
    endClient(process)
    return String(decoding: data, as: UTF8.self)
  }
}
