import Foundation
import TestSupport
import Testing

/// A filter's budget (`TripFilter.Budget`): no shape or length of filter a client sends reaches
/// a recursion it controls, a statement SQLite refuses, or an error of the server's; what
/// passes a limit is a 400 naming it, before any work, on every endpoint that takes `filter`.
@Suite("Filters with a budget: long chains, lists and nests", .serialized)
struct FilterBudgetTests {
  /// The endpoints that take `filter` and answer at once (streams are checked apart).
  static let endpoints = [
    "/collections/trips/items", "/collections/trips/bounds", "/collections/trips/sections",
    "/collections/trips/tiles/WebMercatorQuad/0/0/0",
  ]

  /// A store of the engine's kind holding the sample trips and three whose names differ from
  /// others' only by case folding.
  static func store(_ engine: String, in scratch: Scratch) throws -> URL {
    let store =
      engine == "sqlite"
      ? scratch.store : URL(string: try PostgreSQLCluster.shared.get().makeDatabase("budget"))!
    let location = store.isFileURL ? store.path : store.absoluteString
    #expect(try trips(["import", "--store", location, sampleTrips.path]).status == 0)
    for name in ["Straße", "Σίσυφος", "ﬁsh"] {
      let added = try trips([
        "add", "--name", name, "--destination", "Suva", "--start", "2027-05-01", "--end",
        "2027-05-09", "--latitude", "-18.1", "--longitude", "178.4", "--store", location,
      ])
      #expect(added.status == 0, "\(added.stderr)")
    }
    return store
  }

  static func get(_ server: ServerProcess, _ path: String, filter: String) throws -> HTTPReply {
    try curl(
      "GET",
      server.url + path + "?filter="
        + (filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
  }

  /// The status of a stream's response to `filter`: its headers read as they come (a stream
  /// that was admitted stays open; curl is stopped once they are in).
  static func streamStatus(
    _ server: ServerProcess, _ path: String, filter: String, from address: String = "127.0.0.1"
  ) throws -> Int {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = [
      "-s", "-N", "-i", "-m", "20", "--interface", address,
      server.url + path + "?filter="
        + (filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""),
    ]
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    var data = Data()
    while !String(decoding: data, as: UTF8.self).contains("\r\n\r\n") {
      let chunk = out.fileHandleForReading.availableData
      if chunk.isEmpty { break }
      data.append(chunk)
    }
    endClient(process)
    let status = String(decoding: data, as: UTF8.self).split(separator: " ").dropFirst().first
    return status.flatMap { Int($0) } ?? 0
  }

  @Test(
    "each shape of filter well past its limit (lists, AND and OR chains, arithmetic, nests, row-by-row clauses, polygon vertices) is a 400 naming the limit on every endpoint, streams included; at the limit the answer is right; the server stays up",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func pastTheLimit(engine: String) throws {
    let scratch = Scratch()
    let store = try Self.store(engine, in: scratch)
    let server = try ServerProcess(store: store)
    defer { #expect(server.stop() == 0) }
    func repeated(_ term: String, _ count: Int, _ separator: String) -> String {
      Array(repeating: term, count: count).joined(separator: separator)
    }
    // Ten times each limit where the 16,000 characters of a filter allow, else as many as fit:
    // each was a SIGSEGV or a 500 before.
    let refused: [(filter: String, reason: String)] = [
      ("latitude IN (" + repeated("1", 7_900, ",") + ")", "at most 1000"),
      ("name NOT IN (" + repeated("'x'", 3_900, ",") + ")", "at most 1000"),
      (repeated("latitude=1", 1_100, " OR "), "more than 2000 terms"),
      (repeated("latitude<>1", 990, " AND "), "more than 2000 terms"),
      (repeated("latitude*longitude", 300, " + ") + " > 0", "more than 30 levels"),
      (repeated("latitude", 300, " - ") + " > 0", "more than 30 levels"),
      (repeated("NOT ", 90, "") + "latitude > 0", "more than 30 levels"),
      (repeated("ACCENTI(name) LIKE ACCENTI('%q%')", 80, " OR "), "more than 8 functions"),
      ("name LIKE '" + repeated("%a", 1_300, "") + "%'", "at most 256"),
      ("CASEI(name) LIKE CASEI('" + repeated("%a", 1_300, "") + "')", "at most 256"),
      (
        "S_INTERSECTS(geometry, POLYGON((0 0, "
          + (1...1_200).map { "\($0 % 90) \($0 % 7)" }.joined(separator: ", ") + ", 0 0)))",
        "more than 1000 positions"
      ),
    ]
    for (filter, reason) in refused {
      #expect(filter.unicodeScalars.count <= 16_000, "\(reason): \(filter.count) characters")
      for endpoint in Self.endpoints {
        let reply = try Self.get(server, endpoint, filter: filter)
        #expect(reply.status == 400, "\(endpoint) \(reason): \(reply.text.prefix(300))")
        #expect(reply.text.contains(reason), "\(endpoint) \(reason): \(reply.text.prefix(300))")
      }
      for stream in ["/collections/trips/items/stream", "/collections/trips/bounds/stream"] {
        #expect(try Self.streamStatus(server, stream, filter: filter) == 400, "\(stream) \(reason)")
      }
    }
    #expect(try server.request("/conformance").status == 200)

    // At the limits, answers that count right (against the trips' own coordinates).
    let all = try server.request("/collections/trips/items?limit=10000").json()
    let features = try #require(all["features"] as? [[String: Any]])
    let latitudes = features.compactMap {
      (($0["geometry"] as? [String: Any])?["coordinates"] as? [Double])?.last
    }
    #expect(latitudes.count == 243, "\(String(describing: all).prefix(300))")
    let chosen = Array(Set(latitudes).sorted().prefix(40))
    let expected = latitudes.filter { chosen.contains($0) }.count
    let list = chosen.map { "\($0)" } + Array(repeating: "1000", count: 1_000 - chosen.count)
    let atLimit: [(String, Int)] = [
      ("latitude IN (" + list.joined(separator: ",") + ")", expected),
      ("latitude NOT IN (" + list.joined(separator: ",") + ")", 243 - expected),
      (chosen.map { "latitude = \($0)" }.joined(separator: " OR "), expected),
      (
        repeated("latitude <> 1000", 600, " AND ") + " AND NOT ("
          + chosen.map { "latitude = \($0)" }.joined(separator: " OR ") + ")", 243 - expected
      ),
      (repeated("latitude", 28, " + ") + " > -10000", 243),
      (repeated("NOT ", 28, "") + "latitude > -1000", 243),
    ]
    for (filter, count) in atLimit {
      let reply = try Self.get(server, "/collections/trips/items", filter: filter)
      #expect(reply.status == 200, "\(filter.prefix(80)): \(reply.text.prefix(300))")
      #expect(
        (try? reply.json()["numberMatched"] as? Int) == count,
        "\(filter.prefix(80)): \(reply.text.prefix(200))")
      let bounds = try Self.get(server, "/collections/trips/bounds", filter: filter)
      #expect((try? bounds.json()["count"] as? Int) == count, "\(bounds.text.prefix(300))")
    }
    #expect(try server.request("/conformance").status == 200)
  }

  @Test(
    "a NaN inside arithmetic is unknown (the row does not match), never a 500, on every endpoint and both encodings; no error body quotes SQL",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func notANumber(engine: String) throws {
    let scratch = Scratch()
    let store = try Self.store(engine, in: scratch)
    let server = try ServerProcess(store: store)
    defer { #expect(server.stop() == 0) }
    for (index, filter) in [
      "(latitude % 0) % 2 = 0", "latitude ^ longitude ^ latitude > 0",
      "latitude ^ longitude ^ latitude ^ longitude > 0", "(latitude ^ 0.5) ^ 2 > 0",
      "((latitude % 0) div 2) / 3 < 1",
    ].enumerated() {
      for endpoint in Self.endpoints {
        let reply = try Self.get(server, endpoint, filter: filter)
        #expect(reply.status == 200, "\(endpoint) \(filter): \(reply.text.prefix(300))")
        #expect(!reply.text.contains("SELECT") && !reply.text.contains("swift_call"))
      }
      for stream in ["/collections/trips/items/stream", "/collections/trips/bounds/stream"] {
        // Each filter's streams from an address of their own: one address starts at most 4
        // live queries of each kind.
        let status = try Self.streamStatus(
          server, stream, filter: filter, from: "127.0.0.\(10 + index)")
        #expect(status == 200, "\(stream) \(filter)")
      }
    }
    // `(x ^ 0.5) ^ 2 > 0`: the square root of a negative latitude is not a number: such trips
    // do not match; the rest do (|latitude| > 0).
    let all = try server.request("/collections/trips/items?limit=10000").json()
    let latitudes = try #require(all["features"] as? [[String: Any]]).compactMap {
      (($0["geometry"] as? [String: Any])?["coordinates"] as? [Double])?.last
    }
    let root = try Self.get(server, "/collections/trips/items", filter: "(latitude ^ 0.5) ^ 2 > 0")
    #expect(
      (try root.json()["numberMatched"] as? Int) == latitudes.filter { $0 > 0 }.count,
      "\(root.text.prefix(200))")
    // Past double's range: infinity on SQLite (every positive latitude matches), a 400 naming
    // the range on PostgreSQL, whose double precision overflows; never a 500.
    let overflow = try Self.get(
      server, "/collections/trips/items", filter: "latitude * 1e307 * 100 > 0")
    if engine == "sqlite" {
      #expect(
        (try overflow.json()["numberMatched"] as? Int) == latitudes.filter { $0 > 0 }.count,
        "\(overflow.text.prefix(200))")
    } else {
      #expect(overflow.status == 400 && overflow.text.contains("out of range"), "\(overflow.text)")
    }
    let json =
      #"{"op":">","args":[{"op":"^","args":[{"op":"^","args":[{"property":"latitude"},0.5]},2]},0]}"#
    let reply = try curl(
      "GET",
      server.url + "/collections/trips/items?filter-lang=cql2-json&filter="
        + json.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
    #expect(reply.status == 200, "\(reply.text.prefix(300))")
  }

  @Test(
    "CASEI is Unicode case folding (ß and SS, final sigma, ligatures); the nesting limit counts what it says",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func caseFoldingAndNesting(engine: String) throws {
    let scratch = Scratch()
    let store = try Self.store(engine, in: scratch)
    let server = try ServerProcess(store: store)
    defer { #expect(server.stop() == 0) }
    for (literal, name) in [("STRASSE", "Straße"), ("ΣΊΣΥΦΟΣ", "Σίσυφος"), ("FISH", "ﬁsh")] {
      let reply = try Self.get(
        server, "/collections/trips/items", filter: "CASEI(name) = CASEI('\(literal)')")
      let features = try #require(try reply.json()["features"] as? [[String: Any]])
      let names = features.compactMap { ($0["properties"] as? [String: Any])?["name"] as? String }
      #expect(names == [name], "\(literal): \(reply.text.prefix(300))")
    }
    let hundred =
      String(repeating: "(", count: 100) + "latitude > 0" + String(repeating: ")", count: 100)
    #expect(try Self.get(server, "/collections/trips/items", filter: hundred).status == 200)
    let more = "(" + hundred + ")"
    let refused = try Self.get(server, "/collections/trips/items", filter: more)
    #expect(refused.status == 400)
    #expect(refused.text.contains("deeper than 100 levels"), "\(refused.text)")
  }
}
