import Foundation
import TestSupport
import Testing

/// Filters as CQL2 Text and as CQL2 JSON, after the standard's examples, on the sample trips.
let cql2Cases: [(text: String, json: String)] = [
  ("destination = 'Lisbon'", #"{"op":"=","args":[{"property":"destination"},"Lisbon"]}"#),
  (
    "destination <> 'Lisbon' AND latitude > 50",
    #"{"op":"and","args":[{"op":"<>","args":[{"property":"destination"},"Lisbon"]},{"op":">","args":[{"property":"latitude"},50]}]}"#
  ),
  (
    "NOT (latitude < 0 OR longitude < 0)",
    #"{"op":"not","args":[{"op":"or","args":[{"op":"<","args":[{"property":"latitude"},0]},{"op":"<","args":[{"property":"longitude"},0]}]}]}"#
  ),
  ("name LIKE '%visit%'", #"{"op":"like","args":[{"property":"name"},"%visit%"]}"#),
  (
    "name NOT LIKE 'Family_visit%'",
    #"{"op":"not","args":[{"op":"like","args":[{"property":"name"},"Family_visit%"]}]}"#
  ),
  (
    "latitude BETWEEN 40 AND 50",
    #"{"op":"between","args":[{"property":"latitude"},40,50]}"#
  ),
  (
    "destination IN ('Lisbon', 'Paris', 'Zürich')",
    #"{"op":"in","args":[{"property":"destination"},["Lisbon","Paris","Zürich"]]}"#
  ),
  (
    "CASEI(destination) = CASEI('PARIS')",
    #"{"op":"=","args":[{"op":"casei","args":[{"property":"destination"}]},{"op":"casei","args":["PARIS"]}]}"#
  ),
  (
    "ACCENTI(destination) = ACCENTI('Zurich')",
    #"{"op":"=","args":[{"op":"accenti","args":[{"property":"destination"}]},{"op":"accenti","args":["Zurich"]}]}"#
  ),
  (
    "S_INTERSECTS(geometry, BBOX(-10, 35, 30, 60))",
    #"{"op":"s_intersects","args":[{"property":"geometry"},{"bbox":[-10,35,30,60]}]}"#
  ),
  (
    "S_INTERSECTS(geometry, BBOX(170, -50, -170, 10))",
    #"{"op":"s_intersects","args":[{"property":"geometry"},{"bbox":[170,-50,-170,10]}]}"#
  ),
  (
    "S_INTERSECTS(geometry, POLYGON((0 40, 20 40, 20 55, 0 55, 0 40)))",
    #"{"op":"s_intersects","args":[{"property":"geometry"},{"type":"Polygon","coordinates":[[[0,40],[20,40],[20,55],[0,55],[0,40]]]}]}"#
  ),
  (
    "S_INTERSECTS(geometry, MULTIPOLYGON(((0 40, 20 40, 20 55, 0 55, 0 40), (5 45, 10 45, 10 50, 5 50, 5 45)), ((130 30, 145 30, 145 45, 130 45, 130 30))))",
    #"{"op":"s_intersects","args":[{"property":"geometry"},{"type":"MultiPolygon","coordinates":[[[[0,40],[20,40],[20,55],[0,55],[0,40]],[[5,45],[10,45],[10,50],[5,50],[5,45]]],[[[130,30],[145,30],[145,45],[130,45],[130,30]]]]}]}"#
  ),
  (
    "S_INTERSECTS(geometry, POINT(-9.1498 38.72509))",
    #"{"op":"s_intersects","args":[{"property":"geometry"},{"type":"Point","coordinates":[-9.1498,38.72509]}]}"#
  ),
  (
    "S_INTERSECTS(geometry, LINESTRING(-9.1498 38.72509, 0 0))",
    #"{"op":"s_intersects","args":[{"property":"geometry"},{"type":"LineString","coordinates":[[-9.1498,38.72509],[0,0]]}]}"#
  ),
  (
    "T_INTERSECTS(INTERVAL(startDate, endDate), INTERVAL('2027-05-01', '2027-05-31'))",
    #"{"op":"t_intersects","args":[{"interval":[{"property":"startDate"},{"property":"endDate"}]},{"interval":["2027-05-01","2027-05-31"]}]}"#
  ),
  (
    "T_BEFORE(endDate, DATE('2027-02-01'))",
    #"{"op":"t_before","args":[{"property":"endDate"},{"date":"2027-02-01"}]}"#
  ),
  (
    "T_AFTER(startDate, TIMESTAMP('2027-06-01T00:00:00Z'))",
    #"{"op":"t_after","args":[{"property":"startDate"},{"timestamp":"2027-06-01T00:00:00Z"}]}"#
  ),
  (
    "T_DURING(INTERVAL(startDate, endDate), INTERVAL('2027-01-01', '2027-03-31'))",
    #"{"op":"t_during","args":[{"interval":[{"property":"startDate"},{"property":"endDate"}]},{"interval":["2027-01-01","2027-03-31"]}]}"#
  ),
  (
    "T_CONTAINS(INTERVAL(startDate, endDate), DATE('2027-05-03'))",
    #"{"op":"t_contains","args":[{"interval":[{"property":"startDate"},{"property":"endDate"}]},{"date":"2027-05-03"}]}"#
  ),
  (
    "T_DISJOINT(INTERVAL(startDate, endDate), INTERVAL('..', '2027-06-01'))",
    #"{"op":"t_disjoint","args":[{"interval":[{"property":"startDate"},{"property":"endDate"}]},{"interval":["..","2027-06-01"]}]}"#
  ),
  (
    "T_OVERLAPS(INTERVAL(startDate, endDate), INTERVAL('2027-05-05', '..'))",
    #"{"op":"t_overlaps","args":[{"interval":[{"property":"startDate"},{"property":"endDate"}]},{"interval":["2027-05-05",".."]}]}"#
  ),
  (
    "startDate >= DATE('2027-06-01') AND endDate <= TIMESTAMP('2027-12-31T00:00:00Z')",
    #"{"op":"and","args":[{"op":">=","args":[{"property":"startDate"},{"date":"2027-06-01"}]},{"op":"<=","args":[{"property":"endDate"},{"timestamp":"2027-12-31T00:00:00Z"}]}]}"#
  ),
  (
    "latitude * 2 - 10 > longitude / 3",
    #"{"op":">","args":[{"op":"-","args":[{"op":"*","args":[{"property":"latitude"},2]},10]},{"op":"/","args":[{"property":"longitude"},3]}]}"#
  ),
  ("TRUE", "true"),
]

@Suite("trips serve: CQL2 filters (OGC API – Features Part 3)", .serialized)
struct FilterTests {
  let scratch = Scratch()

  /// The trips an independent evaluator selects for each filter of `cases` (CQL2 JSON):
  /// Tests/Tools/cql2_oracle.py, pygeofilter's parser and shapely's geometry.
  static func oracle(features: Any, filters: [String]) throws -> [[String]] {
    let python = repositoryRoot.appendingPathComponent(".build/python-tools/bin/python")
    guard FileManager.default.isExecutableFile(atPath: python.path) else {
      throw ServerProcess.ServerFailure(
        message:
          "no \(python.path): run Tools/install-dependencies.sh --tests (or Tools/python-tools.sh)")
    }
    let request: [String: Any] = [
      "features": features,
      "filters": try filters.map {
        try JSONSerialization.jsonObject(with: Data($0.utf8), options: .fragmentsAllowed)
      },
    ]
    let process = Process()
    process.executableURL = python
    process.arguments = [repositoryRoot.appendingPathComponent("Tests/Tools/cql2_oracle.py").path]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: request))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let answers = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
    return try answers.enumerated().map { offset, answer in
      guard let ids = answer["ids"] as? [String] else {
        throw ServerProcess.ServerFailure(
          message: "the oracle failed on \(filters[offset]): \(answer)")
      }
      return ids
    }
  }

  /// The ids of the trips `filter` selects, and numberMatched.
  static func selected(_ server: ServerProcess, _ filter: String, language: String) throws -> (
    ids: [String], matched: Int
  ) {
    let reply = try curl(
      "GET",
      server.url + "/collections/trips/items?limit=10000&filter-lang=\(language)&filter="
        + (filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
    guard reply.status == 200 else {
      throw ServerProcess.ServerFailure(message: "\(filter): \(reply.status) \(reply.text)")
    }
    let json = try reply.json()
    let features = try #require(json["features"] as? [[String: Any]])
    return (
      features.compactMap { $0["id"] as? String }.sorted(), json["numberMatched"] as? Int ?? -1
    )
  }

  func check(store: URL) throws {
    let imported =
      store.isFileURL
      ? try trips(["import", sampleTrips.path], store: store)
      : try trips(["import", sampleTrips.path], environment: ["TRIPS_STORE": store.absoluteString])
    #expect(imported.status == 0)
    let server = try ServerProcess(store: store)
    defer { #expect(server.stop() == 0) }
    let all = try server.request("/collections/trips/items?limit=10000").json()
    let features = try #require(all["features"] as? [[String: Any]])
    #expect(features.count == 240)
    let expected = try Self.oracle(features: features, filters: cql2Cases.map(\.json))
    for (index, (text, json)) in cql2Cases.enumerated() {
      let byText = try Self.selected(server, text, language: "cql2-text")
      let byJSON = try Self.selected(server, json, language: "cql2-json")
      #expect(
        byText.ids == expected[index],
        "\(text): \(byText.ids.count) against \(expected[index].count)")
      #expect(byJSON.ids == expected[index], "\(json)")
      #expect(byText.matched == expected[index].count, "\(text)")
    }
    // The cases are not all trivially empty or full: they tell trips apart.
    #expect(expected.filter { !$0.isEmpty && $0.count < 240 }.count >= cql2Cases.count - 3)
  }

  @Test(
    "each filter, as CQL2 Text and as CQL2 JSON, selects on a SQLite store the trips an independent evaluator selects (pygeofilter's parser, shapely's geometry), with numberMatched"
  )
  func sqlite() throws {
    try check(store: scratch.store)
  }

  @Test("the same filters on a PostgreSQL store")
  func postgreSQL() throws {
    let database = try PostgreSQLCluster.shared.get().makeDatabase("filters")
    try check(store: try #require(URL(string: database)))
  }

  @Test(
    "a filter narrows the bounds and the sections; the queryables and the conformance classes say what holds",
    .timeLimit(.minutes(1))
  )
  func otherEndpoints() throws {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    let filter = "filter=destination%20IN%20(%27Lisbon%27,%27Paris%27)"
    let bounds = try server.request("/collections/trips/bounds?\(filter)")
    #expect(bounds.status == 200)
    #expect((try bounds.json()["count"] as? Int) == 6, "\(bounds.text)")
    let sections = try server.request("/collections/trips/sections?\(filter)")
    #expect(sections.status == 200)
    #expect(sections.text.contains("Lisbon") && !sections.text.contains("Zürich"))
    let queryables = try server.request("/collections/trips/queryables")
    #expect(queryables.status == 200)
    #expect(queryables.headers["content-type"]?.hasPrefix("application/schema+json") == true)
    let properties = try #require(try queryables.json()["properties"] as? [String: Any])
    #expect(
      Set(properties.keys) == [
        "id", "name", "destination", "startDate", "endDate", "latitude", "longitude", "geometry",
      ])
    let conformance = try server.request("/conformance").text
    for part in [
      "conf/filter", "conf/features-filter", "conf/basic-cql2", "conf/cql2-text", "conf/cql2-json",
      "conf/basic-spatial-functions",
    ] {
      #expect(conformance.contains(part), "\(part)")
    }
    // Not declared: what this server does not implement whole.
    #expect(!conformance.contains("conf/spatial-functions\""))
    #expect(!conformance.contains("queryables-query-parameters"))
  }

  @Test(
    "a filter that does not parse or compile is a 400 naming the place and the reason; a store is untouched and the server stays up",
    arguments: [
      ("name = ", "character 8"),
      ("foo = 1", "Unknown property 'foo'"),
      ("name = 1", "Cannot compare a character string with a number"),
      ("S_WITHIN(geometry, POINT(1 2))", "S_WITHIN is not supported"),
      ("name LIKE 5", "character 11: A LIKE pattern is a character string"),
      ("S_INTERSECTS(geometry, BBOX(200, 0, 10, 10))", "longitudes within -180"),
      ("startDate > '2027-01-01'", "Cannot compare an instant with a character string"),
      ("name = 'unclosed", "not closed"),
      ("T_BEFORE(name, DATE('2027-01-01'))", "temporal function takes instants"),
      ("DATE('2027-02-30') = startDate", "not a date"),
      ("latitude + 'a' > 1", "Arithmetic applies to numbers"),
      ("name", "not a condition"),
      ("nosuch(1)", "The function 'nosuch' is not defined"),
      (String(repeating: "(", count: 300) + "TRUE" + String(repeating: ")", count: 300), "deeper"),
      ("name = 'a' $", "Unexpected character"),
    ])
  func badFilters(filter: String, reason: String) throws {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    let reply = try curl(
      "GET",
      server.url + "/collections/trips/items?filter="
        + (filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
    #expect(reply.status == 400, "\(filter): \(reply.text)")
    #expect(reply.text.contains(reason), "\(filter): \(reply.text)")
  }

  @Test(
    "bad filter-lang, filter-crs, CQL2 JSON and random text: 400s, never a failure of the server")
  func garbage() throws {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    func status(_ query: String) throws -> (Int, String) {
      let reply = try curl("GET", server.url + "/collections/trips/items?" + query)
      return (reply.status, reply.text)
    }
    #expect(try status("filter=TRUE&filter-lang=xml").1.contains("filter-lang"))
    #expect(try status("filter=TRUE&filter-crs=EPSG:3857").1.contains("filter-crs"))
    #expect(try status("filter-lang=cql2-text").0 == 200)
    #expect(try status("filter=%7B%22op%22:1%7D&filter-lang=cql2-json").1.contains("$.op"))
    #expect(try status("filter=%5B%5D&filter-lang=cql2-json").0 == 400)
    #expect(try status("filter=nope&filter-lang=cql2-json").1.contains("not JSON"))
    #expect(try status("filter=" + String(repeating: "a", count: 17_000)).1.contains("longer than"))
    // Random text from CQL2's own tokens: every answer is 200 or 400.
    var generator = SeededGenerator(seed: 38)
    let tokens = [
      "name", "latitude", "geometry", "startDate", "=", "<>", "<", ">=", "(", ")", ",", "AND", "OR",
      "NOT", "LIKE", "BETWEEN", "IN", "IS", "NULL", "'a%'", "1", "-2.5", "DATE('2027-01-01')",
      "INTERVAL(", "'..'", "BBOX(", "POINT(1 2)", "S_INTERSECTS(", "T_AFTER(", "CASEI(", "+", "*",
      "/", "^", "div", "%", "TRUE", "\"name\"", "POLYGON((0 0, 1 0, 1 1, 0 0))",
    ]
    for _ in 0..<200 {
      let count = Int.random(in: 1...8, using: &generator)
      let text = (0..<count).map { _ in tokens.randomElement(using: &generator)! }.joined(
        separator: " ")
      let (code, body) = try status(
        "filter=" + (text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
      #expect(code == 200 || code == 400, "\(text): \(code) \(body)")
    }
    #expect(try status("limit=1").0 == 200)
  }
}
