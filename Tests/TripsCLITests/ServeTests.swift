import Foundation
import Synchronization
import TestSupport
import Testing
import TripPlanner
import TripService

/// A `trips serve` process on a free port, and requests to it through curl.
final class ServerProcess: @unchecked Sendable {
  let process = Process()
  let url: String
  private let errors = Pipe()
  /// What the server wrote to standard error, read as it comes (a pipe left unread fills up
  /// after 64 KiB of access log, and the server would block writing to it).
  private let logged = LogBuffer()

  final class LogBuffer: Sendable {
    let data = Mutex(Data())
    /// Set when the server closed its standard error (it exited).
    let ended = Mutex(false)
  }

  init(store: URL, _ extra: [String] = []) throws {
    process.executableURL = tripsExecutable
    process.arguments =
      ["serve", "--port", "0", "--store", store.isFileURL ? store.path : store.absoluteString]
      + extra
    process.environment = childEnvironment([
      "PATH": "/usr/bin:/bin", "HOME": FileManager.default.temporaryDirectory.path,
    ])
    let out = Pipe()
    process.standardOutput = out
    process.standardError = errors
    try process.run()
    var line = Data()
    let deadline = Date().addingTimeInterval(20)
    while !line.contains(0x0A) && Date() < deadline {
      let chunk = out.fileHandleForReading.availableData
      if chunk.isEmpty { break }
      line.append(chunk)
    }
    let text = String(decoding: line, as: UTF8.self)
    guard text.hasPrefix("Listening on ") else {
      process.terminate()
      throw ServerFailure(message: "no 'Listening on' line: \(text)")
    }
    url = text.dropFirst("Listening on ".count).trimmingCharacters(in: .whitespacesAndNewlines)
    // A thread of its own reads the log to its end (the server's exit), holding the pipe so
    // that its descriptor stays open meanwhile; a dispatch source (readabilityHandler) would
    // outlive a descriptor closed under it.
    let logged = self.logged
    let errors = self.errors
    Thread.detachNewThread {
      let descriptor = errors.fileHandleForReading.fileDescriptor
      var chunk = [UInt8](repeating: 0, count: 65_536)
      while true {
        let count = read(descriptor, &chunk, chunk.count)
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
        logged.data.withLock { $0.append(contentsOf: chunk[0..<count]) }
      }
      logged.ended.withLock { $0 = true }
      withExtendedLifetime(errors) {}
    }
  }

  struct ServerFailure: Error { var message: String }

  /// Sends SIGTERM and waits; returns the exit status.
  func stop() -> Int32 {
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
    if process.terminationStatus != 0 {
      // What the server said last, for a failure that the test's own message cannot explain.
      // A crash report's head (the reason and the crashed thread) first: a report's tail is
      // its list of images.
      let log = self.log
      let crash =
        log.range(of: "Fatal error").map { log[$0.lowerBound...].prefix(2000) }
        ?? log.range(of: "*** Program crashed").map { log[$0.lowerBound...].prefix(4000) }
      print(
        "trips serve ended with \(process.terminationReason == .uncaughtSignal ? "signal" : "status") \(process.terminationStatus); \(crash.map { "it crashed: \($0)\nits log ends: " } ?? "its log ends: ")\(log.suffix(3000))"
      )
    }
    return process.terminationStatus
  }

  /// What the server logged so far (after ``stop()``).
  var log: String {
    if !process.isRunning {
      // The reader sees the end of the log just after the exit.
      let deadline = Date().addingTimeInterval(5)
      while !logged.ended.withLock({ $0 }) && Date() < deadline {
        Thread.sleep(forTimeInterval: 0.01)
      }
    }
    return logged.data.withLock { String(decoding: $0, as: UTF8.self) }
  }

  deinit { if process.isRunning { process.terminate() } }

  /// One request through curl.
  func request(
    _ method: String, _ path: String, headers: [String] = [], body: Data? = nil
  ) throws -> HTTPReply {
    try curl(method, url + path, headers: headers, body: body)
  }

  /// A GET through curl.
  func request(_ path: String, headers: [String] = []) throws -> HTTPReply {
    try curl("GET", url + path, headers: headers)
  }
}

/// A reply: status, headers (lower-case names) and body.
struct HTTPReply {
  var status: Int
  var headers: [String: String]
  var body: Data
  var text: String { String(decoding: body, as: UTF8.self) }
  func json() throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
  }
}

/// Runs curl for one request.
func curl(_ method: String, _ url: String, headers: [String] = [], body: Data? = nil) throws
  -> HTTPReply
{
  let scratch = FileManager.default.temporaryDirectory
  let headerFile = scratch.appendingPathComponent("curl-headers-\(UUID().uuidString)")
  let bodyFile = scratch.appendingPathComponent("curl-body-\(UUID().uuidString)")
  defer {
    try? FileManager.default.removeItem(at: headerFile)
    try? FileManager.default.removeItem(at: bodyFile)
  }
  var arguments = [
    "-s", "-g", "-X", method, "-D", headerFile.path, "-o", "-", "--max-time", "60", url,
  ]
  if method == "HEAD" { arguments = ["-s", "-g", "-I", "-D", headerFile.path, "-o", "-", url] }
  for header in headers { arguments += ["-H", header] }
  if let body {
    try body.write(to: bodyFile)
    arguments += ["--data-binary", "@" + bodyFile.path]
  }
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
  process.arguments = arguments
  let out = Pipe()
  process.standardOutput = out
  try process.run()
  let data = out.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let head = (try? String(contentsOf: headerFile, encoding: .utf8)) ?? ""
  // The last response's headers (after any 100 Continue).
  let blocks = head.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
  let lines = (blocks.last ?? "").components(separatedBy: "\r\n")
  let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
  var headerValues: [String: String] = [:]
  for line in lines.dropFirst() {
    guard let colon = line.firstIndex(of: ":") else { continue }
    headerValues[line[..<colon].lowercased()] = line[line.index(after: colon)...]
      .trimmingCharacters(in: .whitespaces)
  }
  return HTTPReply(status: status, headers: headerValues, body: data)
}

/// (id, event, data) of each event in a stream's output (Server-Sent Events, data as a JSON
/// object; empty when it is not one).
func serverSentEvents(_ text: String) -> [(id: String, kind: String, data: [String: Any])] {
  text.components(separatedBy: "\n\n").compactMap { block in
    var id = ""
    var kind = ""
    var data: [String: Any] = [:]
    for line in block.split(separator: "\n") {
      if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
      if line.hasPrefix("event: ") { kind = String(line.dropFirst(7)) }
      if line.hasPrefix("data: ") {
        data =
          (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)))
          as? [String: Any] ?? [:]
      }
    }
    return kind.isEmpty ? nil : (id, kind, data)
  }
}

/// A token file of one `name:token` line, readable by its owner only (as `serve` requires).
func tokenFile(in scratch: Scratch, _ line: String) throws -> URL {
  let file = try scratch.write("tokens", line + "\n")
  try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
  return file
}

/// A feature body for writes.
func featureBody(
  name: String = "Served", destination: String = "Suva", latitude: Double = -18.1,
  longitude: Double = 178.4, id: String? = nil
) -> Data {
  let idMember = id.map { "\"id\":\"\($0)\"," } ?? ""
  return Data(
    "{\"type\":\"Feature\",\(idMember)\"geometry\":{\"type\":\"Point\",\"coordinates\":[\(longitude),\(latitude)]},\"properties\":{\"name\":\"\(name)\",\"destination\":\"\(destination)\",\"startDate\":\"2027-05-01\",\"endDate\":\"2027-05-09\"}}"
      .utf8)
}

@Suite("trips serve: OGC API – Features", .serialized)
struct ServeTests {
  /// The sample trips, shared by the read-only tests.
  static let sample: URL = {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
      "trips-serve-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let store = folder.appendingPathComponent("sample.sqlite")
    _ = try? trips(["import", sampleTrips.path], store: store)
    _ = try? trips(["import", samplePlans.path], store: store)
    return store
  }()

  @Test("every endpoint answers with its document and content type")
  func endpoints() throws {
    let server = try ServerProcess(store: Self.sample)
    defer { #expect(server.stop() == 0) }
    let landing = try server.request("/")
    #expect(landing.status == 200)
    #expect(landing.headers["content-type"] == "application/json")
    let links = try #require(try landing.json()["links"] as? [[String: Any]])
    #expect(
      Set(links.compactMap { $0["rel"] as? String }) == [
        "self", "service-desc", "conformance", "data", "alternate",
        "http://www.opengis.net/def/rel/ogc/1.0/tiling-schemes",
      ])
    let map = try server.request("/map")
    #expect(map.status == 200 && map.headers["content-type"] == "text/html; charset=utf-8")
    #expect(map.text.contains("map/leaflet.js") && map.text.contains("map/map.js"))
    for (asset, type) in [
      ("leaflet.js", "text/javascript; charset=utf-8"), ("leaflet.css", "text/css; charset=utf-8"),
      ("map.js", "text/javascript; charset=utf-8"), ("world.geojson", "application/geo+json"),
    ] {
      let reply = try server.request("/map/" + asset)
      #expect(reply.status == 200 && reply.headers["content-type"] == type, "\(asset)")
    }
    #expect(
      try server.request("/map/leaflet.js").text
        == String(
          contentsOfFile: "/usr/share/javascript/leaflet/leaflet.js", encoding: .utf8),
      "served from the installed libjs-leaflet")
    #expect(
      links.allSatisfy {
        ($0["href"] as? String)?.hasPrefix(server.url) == true && $0["type"] != nil
      })
    let conformance = try server.request("/conformance").json()
    #expect(
      (conformance["conformsTo"] as? [String])?.contains(
        "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson") == true)
    let api = try server.request("/api")
    #expect(api.headers["content-type"] == "application/vnd.oai.openapi+json;version=3.0")
    let collections = try server.request("/collections").json()
    #expect((collections["collections"] as? [[String: Any]])?.first?["id"] as? String == "trips")
    let collection = try server.request("/collections/trips").json()
    let extent = try #require(collection["extent"] as? [String: Any])
    let bbox = try #require(((extent["spatial"] as? [String: Any])?["bbox"] as? [[Double]])?.first)
    #expect(
      bbox == [-123.11934, -54.81084, -147.71639, 69.6489],
      "west > east: the smaller box across 180°")
    let interval = ((extent["temporal"] as? [String: Any])?["interval"] as? [[String]])?.first
    #expect(interval == ["2027-01-01T00:00:00Z", "2028-12-15T00:00:00Z"])
    let items = try server.request("/collections/trips/items")
    #expect(items.status == 200 && items.headers["content-type"] == "application/geo+json")
    let page = try items.json()
    #expect(page["numberMatched"] as? Int == 240 && page["numberReturned"] as? Int == 10)
    #expect(page["timeStamp"] is String)
    let one = try #require((page["features"] as? [[String: Any]])?.first)
    let id = try #require(one["id"] as? String)
    let item = try server.request("/collections/trips/items/\(id)")
    #expect(item.status == 200 && item.headers["content-type"] == "application/geo+json")
    #expect(try item.json()["id"] as? String == id)
    #expect(try server.request("/collections/trips/items?f=json").status == 200)
    #expect(try server.request("HEAD", "/collections/trips/items").status == 200)
    let bounds = try server.request("/collections/trips/bounds?viewport=1280x720&padding=20").json()
    let boxes = try #require(bounds["boxes"] as? [String: [Double]])
    #expect(boxes["rfc7946"] == [-123.11934, -54.81084, -147.71639, 69.6489])
    #expect(boxes["unwrapped"] == [-123.11934, -54.81084, -147.71639 + 360, 69.6489])
    #expect(boxes["nonWrapping"] == [-180, -54.81084, 180, 69.6489])
    #expect(bounds["camera"] is [String: Any] && bounds["padding"] as? Double == 20)
    let sections = try server.request("/collections/trips/sections").json()
    let list = try #require(sections["sections"] as? [[String: Any]])
    #expect(list.count == 72)
    #expect(list.reduce(0) { $0 + ($1["count"] as? Int ?? 0) } == 240)
    #expect(list.allSatisfy { ($0["bbox"] as? [Double])?.count == 4 })
    let cli = try jsonArray(try trips(["destinations", "--json"], store: Self.sample).stdout)
    #expect(list.map { $0["id"] as? String } == cli.map { $0["destination"] as? String })
  }

  @Test("every error is JSON with the right status, never 500 for bad input")
  func errors() throws {
    let server = try ServerProcess(store: Self.sample)
    defer { _ = server.stop() }
    let cases: [(String, String, [String], Int, String)] = [
      ("GET", "/nothing", [], 404, "NotFound"),
      ("GET", "/collections/trips/items/00000000-0000-0000-0000-000000000000", [], 404, "NotFound"),
      ("GET", "/collections/trips/items/not-a-uuid", [], 404, "NotFound"),
      ("DELETE", "/collections", [], 405, "MethodNotAllowed"),
      ("GET", "/collections/trips/items", ["Accept: text/html"], 406, "NotAcceptable"),
      ("GET", "/collections/trips/items?limit=0", [], 400, "'limit'"),
      ("GET", "/collections/trips/items?limit=ten", [], 400, "'limit'"),
      ("GET", "/collections/trips/items?offset=-1", [], 400, "'offset'"),
      ("GET", "/collections/trips/items?bbox=1,2,3,4,5,6", [], 400, "6 numbers"),
      ("GET", "/collections/trips/items?bbox=1,2,x,4", [], 400, "'bbox'"),
      ("GET", "/collections/trips/items?bbox=0,50,10,40", [], 400, "'bbox'"),
      ("GET", "/collections/trips/items?bbox=1,2,3%CC%81,4", [], 400, "'bbox'"),
      ("GET", "/collections/trips/items?bbox=1,2,,3,4", [], 400, "'bbox'"),
      ("GET", "/collections/trips/items?bbox=1%EF%BC%8C2,3,4", [], 400, "'bbox'"),
      ("GET", "/collections/trips/items?datetime=yesterday", [], 400, "'datetime'"),
      ("GET", "/collections/trips/items?datetime=2028-01-01/2027-01-01", [], 400, "'datetime'"),
      ("GET", "/collections/trips/items?sortby=price", [], 400, "'sortby'"),
      ("GET", "/collections/trips/items?colour=red", [], 400, "Unknown parameter 'colour'"),
      ("GET", "/collections/trips/items?limit=1&limit=2", [], 400, "more than once"),
      ("GET", "/collections/trips/items?f=xml", [], 400, "'f'"),
      ("GET", "/collections/trips/items?q=%01x", [], 400, "control characters"),
      ("GET", "/collections/trips/items?q=%00x", [], 400, "'q'"),
      ("GET", "/collections/trips/items?q=%ff%fe", [], 400, "UTF-8"),
      (
        "GET", "/collections/trips/items?q=" + String(repeating: "a", count: 2000), [], 400,
        "longer"
      ),
      ("GET", "/collections/trips/bounds?viewport=0x0", [], 400, "'viewport'"),
      ("GET", "/collections/trips/bounds?crs=EPSG:99999", [], 400, "'crs'"),
      ("GET", "/collections/trips/bounds?viewport=100x100&padding=60", [], 400, "'padding'"),
      ("POST", "/collections/trips/items", [], 401, "token"),
      ("GET", "/%2e%2e/%2e%2e/etc/passwd", [], 404, "NotFound"),
      ("GET", "/map/..%2f..%2fetc%2fpasswd", [], 404, "NotFound"),
      ("GET", "/map/leaflet.js/x", [], 404, "NotFound"),
      ("GET", "/map/%2fusr%2fshare%2fjavascript%2fleaflet%2fleaflet.js", [], 404, "NotFound"),
      ("GET", "/map/nothing.js", [], 404, "the map page is at /map"),
      ("POST", "/map", [], 405, "MethodNotAllowed"),
      (
        "GET", "/collections/trips/bounds/stream", ["Accept: application/json"], 406,
        "Server-Sent Events"
      ),
    ]
    for (method, path, headers, status, says) in cases {
      let reply = try server.request(method, path, headers: headers)
      #expect(reply.status == status, "\(method) \(path.prefix(80)): \(reply.text)")
      #expect(reply.headers["content-type"] == "application/json", "\(path.prefix(80))")
      let document = try reply.json()
      #expect(document["code"] is String && document["description"] is String)
      #expect(reply.text.contains(says), "\(path.prefix(80)): \(reply.text)")
    }
    let wrongMethod = try server.request("PUT", "/collections/trips/items")
    #expect(wrongMethod.headers["allow"] == "GET, HEAD, POST, OPTIONS")
    #expect(
      try server.request("/collections/trips/items?limit=20000").json()["numberReturned"] as? Int
        == 240, "clamped, not refused")
  }

  @Test(
    "/api's feature schemas are written from the models' declarations (every field, its type, its documentation), and every feature the service writes is valid against its collection's schema (jsonschema_rs, formats checked)"
  )
  func featureSchemas() throws {
    let server = try ServerProcess(store: Self.sample)
    defer { _ = server.stop() }
    let schemas = try #require(
      (try server.request("/api").json()["components"] as? [String: Any])?["schemas"]
        as? [String: [String: Any]])
    func properties(_ name: String) -> [String: [String: Any]] {
      schemas[name]?["properties"] as? [String: [String: Any]] ?? [:]
    }
    // Every persisted field, by its property name, typed and documented as declared.
    for (name, fields, leaving) in [
      ("TripProperties", Trip.schema.fields.map(\.name), ["id", "latitude", "longitude"]),
      ("BucketListItem", BucketListItem.schema.fields.map(\.name), []),
      ("LivingAccommodation", LivingAccommodation.schema.fields.map(\.name), []),
    ] {
      let described = properties(name)
      for field in fields where !leaving.contains(field) {
        #expect(described[field] != nil, "\(name) lacks \(field)")
      }
    }
    let trip = properties("TripProperties")
    #expect(trip["startDate"]?["format"] as? String == "date-time")
    #expect(trip["startDate"]?["description"] as? String == "When it starts.")
    #expect(trip["endDate"]?["description"] as? String == "When it ends; not before `startDate`.")
    #expect(trip["placeIdentifier"]?["nullable"] as? Bool == true)
    #expect(properties("BucketListItem")["position"]?["type"] as? String == "integer")
    // The service's features against them, by an independent validator.
    let python = repositoryRoot.appendingPathComponent(".build/python-tools/bin/python")
    let run = try shell(
      "\"$1\" \"$2\" \"$3\"",
      arguments: [
        python.path,
        repositoryRoot.appendingPathComponent("Tests/Tools/feature_schema_check.py").path,
        server.url,
      ])
    let report = try #require(
      try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any],
      "\(run.stderr)")
    #expect((report["checked"] as? Int ?? 0) > 200, "\(report)")
    #expect((report["errors"] as? [String]) == [], "\(report)")
    #expect((report["tamperedPassed"] as? [String]) == [], "\(report)")
  }

  @Test("the OpenAPI document describes only paths that answer")
  func openAPIPathsAnswer() throws {
    let server = try ServerProcess(store: Self.sample)
    defer { _ = server.stop() }
    let api = try server.request("/api").json()
    #expect(api["openapi"] as? String == "3.0.3")
    let paths = try #require(api["paths"] as? [String: [String: Any]])
    #expect(paths.count == 29)
    // Every operation may be stopped at its deadline (503); one that may be slow (a filter,
    // sections, a write) may also be refused past its client's share of the workers (429).
    func responses(_ path: String, _ method: String = "get") -> [String: Any] {
      (paths[path]?[method] as? [String: Any])?["responses"] as? [String: Any] ?? [:]
    }
    for (path, operations) in paths {
      for (method, operation) in operations {
        let listed = (operation as? [String: Any])?["responses"] as? [String: Any] ?? [:]
        #expect(listed["503"] != nil, "\(method) \(path) lists no 503")
      }
    }
    #expect(responses("/collections/trips/items")["429"] != nil)
    #expect(responses("/collections/trips/sections")["429"] != nil)
    #expect(responses("/collections/trips/items", "post")["429"] != nil)
    #expect(responses("/conformance")["429"] == nil)
    let resume = try #require(
      try server.request("/changes").text.split(separator: "\n").last.flatMap {
        try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
      }?["resumeToken"] as? String)
    func firstID(_ collection: String) throws -> String {
      try #require(
        ((try server.request("/collections/\(collection)/items?limit=1").json()["features"]
          as? [[String: Any]])?
          .first?["id"]) as? String)
    }
    let id = try firstID("trips")
    let ids = [
      "/collections/trips/": id, "/collections/stays/": try firstID("stays"),
      "/collections/bucket-list-items/": try firstID("bucket-list-items"),
    ]
    for (path, operations) in paths {
      let concrete = path.replacingOccurrences(
        of: "{featureId}", with: ids.first { path.hasPrefix($0.key) }?.value ?? id
      )
      .replacingOccurrences(of: "{tileMatrixSetId}", with: "WebMercatorQuad")
      .replacingOccurrences(of: "{tileMatrix}/{tileRow}/{tileCol}", with: "2/1/3")
      #expect(operations["get"] != nil, "\(path) documents GET")
      // A stream never ends: its headers answer for it (HEAD).
      let isStream = path.hasSuffix("/stream")
      let reply = try server.request(isStream ? "HEAD" : "GET", concrete)
      #expect(reply.status == 200, "\(path): \(reply.status)")
      // Every documented parameter is accepted (not refused as unknown).
      let parameters =
        (operations["get"] as? [String: Any])?["parameters"] as? [[String: Any]] ?? []
      for parameter in parameters where parameter["in"] as? String == "query" {
        let name = try #require(parameter["name"] as? String)
        let sample: [String: String] = [
          "bbox": "-10,-10,10,10", "bbox-crs": "http://www.opengis.net/def/crs/OGC/1.3/CRS84",
          "datetime": "2027-01-01/..", "destination": "Suva", "q": "a", "f": "json", "limit": "5",
          "offset": "1", "sortby": "-name", "viewport": "800x600", "padding": "10",
          "crs": "http://www.opengis.net/def/crs/EPSG/0/3857", "after": resume,
          "exclude-author": "sync", "trip": id,
          "stays": "true", "filter": "TRUE", "filter-lang": "cql2-text",
          "filter-crs": "http://www.opengis.net/def/crs/OGC/1.3/CRS84",
          "properties": "name,startDate", "skipGeometry": "true",
        ]
        let isTile = path.hasSuffix("{tileCol}")
        let value = try #require(
          name == "f" && isTile ? "mvt" : sample[name], "a sample value for \(name)")
        let answered = try server.request(
          isStream ? "HEAD" : "GET", concrete + "?\(name)=\(value)")
        #expect(answered.status == 200, "\(path)?\(name): \(answered.text)")
      }
    }
  }

  @Test(
    "bbox pages written from the index in memory are byte for byte the store's, after every kind of change by another process"
  )
  func indexedPagesEqualTheStores() throws {
    let scratch = Scratch()
    var records = Self.randomTrips(1_500, seed: 77)
    for index in records.indices where index % 3 != 0 {
      records[index].placeIdentifier = PlaceIdentifier(rawValue: "geonames:\(index)/\"x\"")
    }
    let file = scratch.file("random.json")
    try TripFileFormat.json.encode(records).write(to: file)
    #expect(try trips(["import", file.path], store: scratch.store).status == 0)
    let indexed = try ServerProcess(store: scratch.store)
    defer { _ = indexed.stop() }
    let plain = try ServerProcess(store: scratch.store, ["--no-box-index"])
    defer { _ = plain.stop() }
    /// The page without what differs between two servers: its time stamp and their ports.
    func page(_ server: ServerProcess, _ query: String) throws -> String {
      let reply = try server.request("/collections/trips/items?\(query)")
      #expect(reply.status == 200, "\(query): \(reply.text)")
      return reply.text.replacing(/"timeStamp":"[^"]*"/, with: "")
        .replacing(/127\.0\.0\.1:[0-9]+/, with: "HOST")
    }
    let queries = [
      "bbox=-180,-90,180,90&limit=10000", "bbox=170,-60,-170,60&limit=50&offset=7",
      "bbox=-20,-45,60,45&limit=100&sortby=-startDate", "bbox=-180,0,0,90&limit=3&f=json",
    ]
    func compare(_ step: String) throws {
      for query in queries {
        let expected = try page(plain, query)
        #expect(try page(indexed, query) == expected, "\(step): \(query)")
        #expect(expected.contains("\"features\":[{"), "\(step): \(query) is not empty")
      }
    }
    try compare("imported")
    let writer = try TripStore(url: scratch.store, author: "other")
    for (number, record) in records.prefix(120).enumerated() {
      _ = try writer.update(record.id!) { trip in
        switch number % 6 {
        case 0: trip.name = "Renamed \(number) \u{e9}"
        case 1: trip.destination = "Elsewhere \(number)"
        case 2: trip.endDate = trip.endDate.addingTimeInterval(86_400 * 9)
        case 3:
          trip.placeIdentifier =
            trip.placeIdentifier == nil ? PlaceIdentifier(rawValue: "wikidata:Q\(number)") : nil
        case 4: (trip.latitude, trip.longitude) = (-16.5, 179.99)
        default: trip.startDate = trip.startDate.addingTimeInterval(-86_400 * 40)
        }
      }
    }
    _ = try writer.delete(records.suffix(50).map { $0.id! })
    #expect(try writer.importRecords(Self.randomTrips(80, seed: 78)) == 80)
    try compare("changed")
  }

  /// Random trips on both sides of the antimeridian and near the poles.
  static func randomTrips(_ count: Int, seed: UInt64) -> [TripRecord] {
    var generator = SeededGenerator(seed: seed)
    return (0..<count).map { index in
      let start = Date(
        timeIntervalSince1970: 1_800_000_000 + Double(Int.random(in: 0..<400, using: &generator))
          * 86_400)
      return TripRecord(
        id: UUID(), name: "Trip \(index)", destination: "Place \(index % 37)", startDate: start,
        endDate: start.addingTimeInterval(
          Double(Int.random(in: 0..<20, using: &generator)) * 86_400),
        latitude: Double.random(in: -89...89, using: &generator).rounded(toPlaces: 3),
        longitude: Double.random(in: -180...180, using: &generator).rounded(toPlaces: 3))
    }
  }

  @Test(
    "bbox across the antimeridian and datetime forms select exactly what a brute-force filter does, with the index in memory and without",
    arguments: [[], ["--no-box-index"]])
  func filtersMatchBruteForce(options: [String]) throws {
    let scratch = Scratch()
    let records = Self.randomTrips(2_000, seed: 180)
    let file = scratch.file("random.json")
    try TripFileFormat.json.encode(records).write(to: file)
    #expect(try trips(["import", file.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store, options)
    defer { _ = server.stop() }
    func ids(_ query: String) throws -> Set<String> {
      let page = try server.request("/collections/trips/items?limit=10000&\(query)").json()
      let features = try #require(page["features"] as? [[String: Any]])
      #expect(page["numberMatched"] as? Int == features.count)
      return Set(features.compactMap { $0["id"] as? String })
    }
    var generator = SeededGenerator(seed: 7)
    func checkBoxes(_ records: [TripRecord], _ step: String) throws {
      for round in 0..<24 {
        var west = Double.random(in: -180...180, using: &generator).rounded(toPlaces: 2)
        var east = Double.random(in: -180...180, using: &generator).rounded(toPlaces: 2)
        if round % 2 == 0 && west < east { swap(&west, &east) }  // half of them cross 180°
        let south = Double.random(in: -90...30, using: &generator).rounded(toPlaces: 2)
        let north = Double.random(in: south...90, using: &generator).rounded(toPlaces: 2)
        let expected = Set(
          records.filter { record in
            let inLongitude =
              west <= east
              ? record.longitude >= west && record.longitude <= east
              : record.longitude >= west || record.longitude <= east
            return inLongitude && record.latitude >= south && record.latitude <= north
          }.map { $0.id!.uuidString.lowercased() })
        #expect(
          try ids("bbox=\(west),\(south),\(east),\(north)") == expected, "\(step) round \(round)")
      }
    }
    try checkBoxes(records, "first")
    // Another process deletes, moves across the antimeridian and adds trips: the server's next
    // pages (chosen in its memory, which follows the store's history) see all of it.
    let writer = try TripStore(url: scratch.store, author: "other")
    var current = records
    _ = try writer.delete(current.prefix(100).map { $0.id! })
    current.removeFirst(100)
    for index in 0..<100 {
      _ = try writer.update(current[index].id!) {
        $0.longitude = index % 2 == 0 ? 179.95 : -179.95
        $0.latitude = 10
      }
      current[index].longitude = index % 2 == 0 ? 179.95 : -179.95
      current[index].latitude = 10
    }
    let added = Self.randomTrips(300, seed: 181)
    #expect(try writer.importRecords(added) == 300)
    current += added
    try checkBoxes(current, "after changes")
    #expect(try ids("bbox=179.9,9,-179.9,11").count >= 100)
    let day = 86_400.0
    let base = Date(timeIntervalSince1970: 1_800_000_000 + 100 * day)
    let text = TripDates.format(base)
    let later = TripDates.format(base.addingTimeInterval(30 * day))
    func overlapping(_ from: Date?, _ to: Date?) -> Set<String> {
      Set(
        current.filter { record in
          (from.map { record.endDate >= $0 } ?? true) && (to.map { record.startDate <= $0 } ?? true)
        }.map { $0.id!.uuidString.lowercased() })
    }
    #expect(try ids("datetime=\(text)") == overlapping(base, base))
    #expect(
      try ids("datetime=\(text)/\(later)") == overlapping(base, base.addingTimeInterval(30 * day)))
    #expect(try ids("datetime=../\(text)") == overlapping(nil, base))
    #expect(try ids("datetime=\(text)/..") == overlapping(base, nil))
    #expect(try ids("datetime=\(text)/") == overlapping(base, nil))
    let dayText = TripDates.formatDay(base)
    #expect(
      try ids("datetime=\(dayText)") == overlapping(base, base.addingTimeInterval(day - 0.001)))
  }

  @Test("paging through 25,000 trips with next links returns each exactly once")
  func paging() throws {
    let scratch = Scratch()
    try generate(["--count", "25000", "--store", scratch.store.path])
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    var seen: [String] = []
    var next: String? = server.url + "/collections/trips/items?limit=1000&bbox=-180,-90,180,90"
    var pages = 0
    while let url = next, pages < 100 {
      let page = try curl("GET", url).json()
      #expect(page["numberMatched"] as? Int == 25_000)
      seen += (page["features"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
      let links = page["links"] as? [[String: Any]] ?? []
      next = links.first { $0["rel"] as? String == "next" }?["href"] as? String
      if pages > 0 { #expect(links.contains { $0["rel"] as? String == "prev" }) }
      pages += 1
    }
    #expect(pages == 25)
    #expect(seen.count == 25_000 && Set(seen).count == 25_000)
  }

  @Test("writes: refused without a token, with a wrong one, and read-only; done with the right one")
  func writes() throws {
    let scratch = Scratch()
    let tokens = try tokenFile(in: scratch, "alice:\(String(repeating: "s3cret-", count: 3))")
    let token = String(repeating: "s3cret-", count: 3)
    let server = try ServerProcess(store: scratch.store, ["--token-file", tokens.path])
    defer { #expect(server.stop() == 0) }
    let auth = ["Authorization: Bearer \(token)", "Content-Type: application/geo+json"]
    #expect(
      try server.request("POST", "/collections/trips/items", body: featureBody()).status == 401)
    #expect(
      try server.request(
        "POST", "/collections/trips/items", headers: ["Authorization: Bearer wrong-token-xxxxxxxx"],
        body: featureBody()
      ).status == 401)
    let created = try server.request(
      "POST", "/collections/trips/items", headers: auth, body: featureBody())
    #expect(created.status == 201, "\(created.text)")
    let location = try #require(created.headers["location"])
    #expect(location.hasPrefix(server.url + "/collections/trips/items/"))
    let id = String(location.split(separator: "/").last!)
    #expect(try curl("GET", location).json()["id"] as? String == id)
    // Validated as the CLI validates: every problem, nothing written.
    let bad = try server.request(
      "POST", "/collections/trips/items", headers: auth,
      body: featureBody(name: " ", latitude: 95))
    #expect(bad.status == 400)
    #expect(bad.text.contains("name must not be empty") && bad.text.contains("latitude 95.0"))
    let replaced = try server.request(
      "PUT", "/collections/trips/items/\(id)", headers: auth, body: featureBody(name: "Replaced"))
    #expect(replaced.status == 200, "\(replaced.text)")
    let patched = try server.request(
      "PATCH", "/collections/trips/items/\(id)", headers: auth,
      body: Data("{\"properties\":{\"name\":\"Patched\"}}".utf8))
    #expect(patched.status == 200, "\(patched.text)")
    #expect((try patched.json()["properties"] as? [String: Any])?["name"] as? String == "Patched")
    #expect(
      try server.request("DELETE", "/collections/trips/items/\(id)", headers: auth).status == 204)
    #expect(try server.request("/collections/trips/items/\(id)").status == 404)
    // History names the token's writer.
    let history = try jsonArray(try trips(["history", "--json"], store: scratch.store).stdout)
    #expect(history.count == 4 && history.allSatisfy { $0["author"] as? String == "alice" })
    // Read-only: 405 whatever the token.
    let readOnly = try ServerProcess(
      store: scratch.store, ["--token-file", tokens.path, "--read-only"])
    defer { _ = readOnly.stop() }
    #expect(
      try readOnly.request("POST", "/collections/trips/items", headers: auth, body: featureBody())
        .status == 405)
  }

  @Test("a 17 MiB body is refused with 413 before it is read")
  func bodyTooLarge() throws {
    let scratch = Scratch()
    let tokens = try tokenFile(in: scratch, "bob:\(String(repeating: "t", count: 20))")
    let server = try ServerProcess(store: scratch.store, ["--token-file", tokens.path])
    defer { _ = server.stop() }
    let reply = try server.request(
      "POST", "/collections/trips/items",
      headers: [
        "Authorization: Bearer \(String(repeating: "t", count: 20))",
        "Content-Type: application/geo+json",
      ],
      body: Data(count: 17 * 1024 * 1024))
    #expect(reply.status == 413, "\(reply.text)")
    #expect(try server.request("/").status == 200, "still serving")
  }

  @Test(
    "a thousand idle connections do not stop a new client from being served, even by one thread")
  func idleConnections() throws {
    let server = try ServerProcess(store: Self.sample, ["--threads", "1"])
    defer { _ = server.stop() }
    let port = UInt16(server.url.split(separator: ":").last!)!
    var sockets: [Int32] = []
    defer { for socket in sockets { close(socket) } }
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < 2048 {
      limit.rlim_cur = min(limit.rlim_max, 4096)
      setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    for _ in 0..<1000 {
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      var address = sockaddr_in()
      address.sin_family = sa_family_t(AF_INET)
      address.sin_port = port.bigEndian
      address.sin_addr.s_addr = inet_addr("127.0.0.1")
      let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
      #expect(connected == 0)
      // Half of them start a request and never finish it (slowloris).
      if sockets.count % 2 == 0 {
        let partial = "GET / HTTP/1.1\r\nHost: x\r\n"
        _ = partial.withCString { send(fd, $0, strlen($0), 0) }
      }
      sockets.append(fd)
    }
    let start = Date()
    let reply = try server.request("/collections/trips/items?limit=1")
    #expect(reply.status == 200)
    #expect(Date().timeIntervalSince(start) < 2, "served at once")
  }

  @Test("SIGTERM during a POST leaves the store whole, and the server exits 0")
  func sigtermDuringWrite() throws {
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let token = String(repeating: "k", count: 24)
    let tokens = try tokenFile(in: scratch, "carol:\(token)")
    let server = try ServerProcess(store: scratch.store, ["--token-file", tokens.path])
    let writer = Process()
    writer.executableURL = URL(fileURLWithPath: "/bin/sh")
    writer.arguments = [
      "-c",
      "for i in $(seq 1 40); do curl -s -o /dev/null -X POST -H 'Authorization: Bearer \(token)' -H 'Content-Type: application/geo+json' --data-binary @\"$1\" \"$2/collections/trips/items\" || true; done",
      "sh", try scratch.write("feature.json", String(decoding: featureBody(), as: UTF8.self)).path,
      server.url,
    ]
    try writer.run()
    Thread.sleep(forTimeInterval: 0.3)
    #expect(server.stop() == 0)
    writer.waitUntilExit()
    let check = try trips(["check"], store: scratch.store)
    #expect(check.status == 0, "\(check.stderr)")
    let count = try jsonArray(try trips(["list", "--json"], store: scratch.store).stdout).count
    let inserts = try jsonArray(try trips(["history", "--json"], store: scratch.store).stdout).count
    #expect(count == 240 + inserts - 1, "every committed POST is there, nothing half-written")
  }

  @Test("start-up refusals: a token file others can read, tokens in clear off loopback")
  func startupRefusals() throws {
    let scratch = Scratch()
    let tokens = try scratch.write("tokens", "dave:\(String(repeating: "d", count: 20))\n")
    try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: tokens.path)
    let open = try trips(
      ["serve", "--port", "0", "--token-file", tokens.path], store: scratch.store)
    #expect(open.status == 64)
    #expect(open.stderr.contains("chmod 600"), "\(open.stderr)")
    try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: tokens.path)
    let clear = try trips(
      ["serve", "--port", "0", "--host", "0.0.0.0", "--token-file", tokens.path],
      store: scratch.store)
    #expect(clear.status == 64)
    #expect(clear.stderr.contains("--insecure-http"), "\(clear.stderr)")
    let badPort = try trips(["serve", "--port", "70000"], store: scratch.store)
    #expect(badPort.status == 64)
    let numbers: [(option: String, values: [String], expected: String)] = [
      ("--keep-alive", ["0", "3601", "1.5", "x"], "whole seconds from 1 to 3600"),
      (
        "--live-queries", ["0", "10001", "-3", "1e3", "lots", ""], "a whole number from 1 to 10000"
      ),
      ("--threads", ["0", "257", "-1", "2.5", "many", ""], "a whole number from 1 to 256"),
      ("--workers", ["257", "-1", "2.5", "many", ""], "a whole number from 0 to 256"),
      ("--worker-queue", ["100001", "-1", "x", ""], "a whole number from 0 to 100000"),
      ("--request-timeout", ["86401", "-1", "0.5", "x"], "whole seconds from 0 to 86400"),
    ]
    for (option, values, expected) in numbers {
      for value in values {
        let run = try trips(["serve", option, value], store: scratch.store)
        #expect(run.status == 64)
        #expect(
          run.stderr.hasPrefix(
            "Error: Invalid value '\(value)' for '\(option)': expected \(expected)."),
          "\(run.stderr)")
      }
    }
  }

  @Test("--threads sets the pool that answers requests: two more threads for 3 than for 1")
  func threadCount() throws {
    func threads(_ count: String) throws -> Int {
      let server = try ServerProcess(store: Self.sample, ["--threads", count])
      defer { _ = server.stop() }
      #expect(try server.request("/").status == 200)
      return try FileManager.default.contentsOfDirectory(
        atPath: "/proc/\(server.process.processIdentifier)/task"
      ).count
    }
    #expect(try threads("3") - threads("1") == 2)
  }

  @Test("CORS headers only for the origin given")
  func cors() throws {
    let plain = try ServerProcess(store: Self.sample)
    defer { _ = plain.stop() }
    #expect(try plain.request("/").headers["access-control-allow-origin"] == nil)
    let open = try ServerProcess(store: Self.sample, ["--cors", "https://maps.example"])
    defer { _ = open.stop() }
    #expect(try open.request("/").headers["access-control-allow-origin"] == "https://maps.example")
    let preflight = try open.request("OPTIONS", "/collections/trips/items")
    #expect(preflight.status == 204)
    #expect(preflight.headers["access-control-allow-methods"]?.contains("POST") == true)
  }

  @Test("one log line per request: method, path, status, bytes, milliseconds")
  func logLines() throws {
    let server = try ServerProcess(store: Self.sample)
    _ = try server.request("/collections/trips/items?limit=1")
    _ = try server.request("/missing")
    #expect(server.stop() == 0)
    let lines = server.log.split(separator: "\n")
    #expect(lines.count == 2)
    #expect(lines.first?.hasPrefix("GET /collections/trips/items 200 ") == true)
    #expect(
      lines.last?.hasPrefix("GET /missing 404 ") == true && lines.last?.hasSuffix("ms") == true)
  }

  @Test("HTTPS with --tls-cert and --tls-key; tokens then allowed off loopback")
  func tls() throws {
    let scratch = Scratch()
    let key = scratch.file("key.pem")
    let certificate = scratch.file("cert.pem")
    let made = try shell(
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout \"$1\" -out \"$2\" -days 1 -subj /CN=localhost 2>/dev/null",
      arguments: [key.path, certificate.path])
    #expect(made.status == 0)
    let server = try ServerProcess(
      store: Self.sample, ["--tls-cert", certificate.path, "--tls-key", key.path])
    defer { _ = server.stop() }
    #expect(server.url.hasPrefix("https://"))
    let reply = try shell(
      "curl -s --cacert \"$1\" -o /dev/null -w '%{http_code}' \"$2/collections/trips/items?limit=1\"",
      arguments: [
        certificate.path, server.url.replacingOccurrences(of: "127.0.0.1", with: "localhost"),
      ])
    #expect(reply.stdout == "200", "\(reply.stderr)")
    let plain = try shell(
      "curl -s -o /dev/null -w '%{http_code}' \"$1/\"",
      arguments: [server.url.replacingOccurrences(of: "https://", with: "http://")])
    #expect(plain.stdout != "200", "plain HTTP is not answered on the TLS port")
    let half = try trips(
      ["serve", "--port", "0", "--tls-cert", certificate.path], store: Self.sample)
    #expect(half.status == 64 && half.stderr.contains("go together"))
  }

  @Test("an overlong request line or header block is refused, and the server keeps serving")
  func overlongRequests() throws {
    let server = try ServerProcess(store: Self.sample)
    defer { _ = server.stop() }
    let longPath = try server.request(
      "/collections/trips/items?q=" + String(repeating: "a", count: 100_000))
    #expect([414, 431, 400].contains(longPath.status), "\(longPath.status)")
    let longHeader = try server.request(
      "/collections/trips/items", headers: ["X-Padding: " + String(repeating: "b", count: 100_000)])
    #expect([431, 400, 413].contains(longHeader.status), "\(longHeader.status)")
    #expect(try server.request("/").status == 200)
  }

  @Test("sync over HTTP: GET /changes serves the feed, POST /changes applies one, echo-free")
  func changesFeed() throws {
    let scratch = Scratch()
    let laptop = scratch.file("laptop.sqlite")
    #expect(try trips(["import", sampleTrips.path], store: laptop).status == 0)
    let token = String(repeating: "z", count: 20)
    let tokens = try tokenFile(in: scratch, "laptop:\(token)")
    let server = try ServerProcess(store: scratch.store, ["--token-file", tokens.path])
    defer { #expect(server.stop() == 0) }
    let feed = try trips(["sync", "export"], store: laptop).stdout
    #expect(
      try server.request("POST", "/changes", body: Data(feed.utf8)).status == 401,
      "a token is needed")
    let headers = ["Authorization: Bearer \(token)", "Content-Type: application/x-ndjson"]
    let applied = try server.request("POST", "/changes", headers: headers, body: Data(feed.utf8))
    #expect(applied.status == 200, "\(applied.text)")
    #expect(try applied.json()["applied"] as? Int == 240)
    let again = try server.request("POST", "/changes", headers: headers, body: Data(feed.utf8))
    #expect(try again.json()["applied"] as? Int == 0, "idempotent")
    #expect(try jsonArray(try trips(["list", "--json"], store: scratch.store).stdout).count == 240)
    // The server's feed: what the laptop sent, recorded under the token's name; nothing when
    // that author is excluded (no echo).
    let served = try server.request("/changes")
    #expect(served.headers["content-type"] == "application/x-ndjson")
    // A client may ask for what it is given: JSON lines.
    let asked = try server.request("/changes", headers: ["Accept: application/x-ndjson"])
    #expect(asked.status == 200 && asked.text == served.text)
    // Written as it is read (chunked), byte for byte the CLI's feed of the same store.
    #expect(served.text == (try trips(["sync", "export"], store: scratch.store).stdout))
    let lines = served.text.split(separator: "\n")
    #expect(lines.count == 241)
    #expect(lines.dropLast().allSatisfy { $0.contains("\"author\":\"laptop\"") })
    let echo = try server.request("/changes?exclude-author=laptop").text.split(separator: "\n")
    #expect(echo.count == 1, "only the resume token")
    // A token from the store resumes after it; a bad one is refused, an expired one is 410.
    let resume = try #require(
      (try JSONSerialization.jsonObject(with: Data(lines.last!.utf8)) as? [String: Any])?[
        "resumeToken"] as? String)
    #expect(try server.request("/changes?after=\(resume)").text.split(separator: "\n").count == 1)
    #expect(try server.request("/changes?after=nonsense").status == 400)
    let bad = try server.request(
      "POST", "/changes", headers: headers, body: Data("{\"kind\": 1}\nnot json\n".utf8))
    #expect(bad.status == 400 && bad.text.contains("body:"), "\(bad.text)")
  }

  @Test("bounds stream: the report now, then one after a change from another process, per client")
  func boundsStream() throws {
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0, "exits 0 with streams open") }
    func listen(_ file: URL, headers: [String] = []) throws -> Process {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      process.arguments =
        ["-s", "-N", "--max-time", "60", "-o", file.path] + headers.flatMap { ["-H", $0] } + [
          server.url + "/collections/trips/bounds/stream?viewport=800x600&padding=10"
        ]
      try process.run()
      return process
    }
    let first = scratch.file("first.txt")
    let second = scratch.file("second.txt")
    // The second client asks as a browser's EventSource does.
    let clients = [
      try listen(first), try listen(second, headers: ["Accept: text/event-stream"]),
    ]
    func events(_ file: URL) -> [[String: Any]] {
      let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
      return text.components(separatedBy: "\n\n").compactMap { block in
        guard let data = block.split(separator: "\n").first(where: { $0.hasPrefix("data: ") })
        else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(data.dropFirst(6).utf8))
          as? [String: Any]
      }
    }
    func raw(_ file: URL) -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "(none)" }
    #expect(
      eventually(30) { events(first).count == 1 && events(second).count == 1 },
      "first client got \(raw(first).debugDescription), second \(raw(second).debugDescription); curl running: \(clients.map(\.isRunning))"
    )
    #expect(events(first).first?["count"] as? Int == 240)
    #expect(
      try trips(
        [
          "add", "--name", "McMurdo", "--destination", "McMurdo", "--start", "2027-12-01", "--end",
          "2027-12-20", "--latitude", "-77.85", "--longitude", "166.67",
        ], store: scratch.store
      ).status == 0)
    #expect(eventually(30) { events(first).count == 2 && events(second).count == 2 })
    let update = try #require(events(first).last)
    #expect(update["count"] as? Int == 241)
    #expect(((update["geographic"] as? [String: Any])?["south"]) as? Double == -77.85)
    #expect(update["padding"] as? Double == 10)
    // Every event carries the history token it holds after, as `trips history --json` prints it.
    let text = try String(contentsOf: first, encoding: .utf8)
    let ids = text.split(separator: "\n").filter { $0.hasPrefix("id: ") }.map { $0.dropFirst(4) }
    let tokens = try jsonArray(try trips(["history", "--json"], store: scratch.store).stdout)
      .compactMap {
        $0["token"] as? String
      }
    #expect(ids.map(String.init) == tokens)
    #expect(text.hasPrefix("retry: 2000\n\n"))
    // A rename does not alter the bounds: no event for it.
    let id = try #require(
      try jsonArray(try trips(["list", "--json", "--limit", "1"], store: scratch.store).stdout)
        .first?["id"] as? String)
    #expect(try trips(["update", id, "--name", "Renamed"], store: scratch.store).status == 0)
    #expect(
      try trips(
        [
          "add", "--name", "North", "--destination", "North", "--start", "2027-12-01", "--end",
          "2027-12-20", "--latitude", "80", "--longitude", "10",
        ], store: scratch.store
      ).status == 0)
    #expect(eventually(30) { events(first).count >= 3 })
    #expect(events(first).count == 3 && events(first).last?["count"] as? Int == 242)
    for client in clients { kill(client.processIdentifier, SIGKILL) }
  }

  @Test(
    "items stream: live changes; Last-Event-ID gets exactly the missed ones; an expired token a reset"
  )
  func itemsStream() throws {
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    let path = "/collections/trips/items/stream?bbox=160,-60,-160,0"
    let events = serverSentEvents
    func listen(lastEventID: String? = nil, seconds: Int) throws -> (Process, URL) {
      let file = scratch.file("stream-\(UUID().uuidString).txt")
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      process.arguments =
        ["-s", "-N", "--max-time", "\(seconds)", "-o", file.path]
        + (lastEventID.map { ["-H", "Last-Event-ID: \($0)"] } ?? []) + [server.url + path]
      try process.run()
      return (process, file)
    }
    func text(_ file: URL) -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }
    let (first, firstFile) = try listen(seconds: 30)
    #expect(eventually { text(firstFile).hasPrefix("retry: 2000") })
    let a = try trips(
      [
        "add", "--name", "A", "--destination", "Suva", "--start", "2027-01-01", "--end",
        "2027-01-02",
        "--latitude", "-18", "--longitude", "178",
      ], store: scratch.store
    ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(eventually { events(text(firstFile)).count == 1 })
    let inserted = try #require(events(text(firstFile)).first)
    #expect(inserted.kind == "insert" && inserted.data["id"] as? String == a)
    // Outside the box: no event.
    #expect(try trips(addSuva.map { $0 == "178.4" ? "10" : $0 }, store: scratch.store).status == 0)
    kill(first.processIdentifier, SIGKILL)  // the runner's children may ignore SIGTERM
    first.waitUntilExit()
    let seen = events(text(firstFile))
    #expect(seen.count == 1, "\(seen.map(\.kind))")
    // Three changes while away: B added in the box, B moved out, A deleted.
    let b = try trips(
      [
        "add", "--name", "B", "--destination", "Apia", "--start", "2027-01-01", "--end",
        "2027-01-02",
        "--latitude", "-13.8", "--longitude", "-171.8",
      ], store: scratch.store
    ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(try trips(["update", b, "--latitude", "10"], store: scratch.store).status == 0)
    #expect(try trips(["delete", a], store: scratch.store).status == 0)
    let (again, againFile) = try listen(lastEventID: inserted.id, seconds: 30)
    #expect(eventually { events(text(againFile)).count >= 3 })
    Thread.sleep(forTimeInterval: 0.2)
    let missed = events(text(againFile))
    #expect(missed.map(\.kind) == ["insert", "delete", "delete"], "\(missed.map(\.kind))")
    #expect(missed.map { $0.data["id"] as? String } == [b, b, a])
    let tokens = try jsonArray(try trips(["history", "--json"], store: scratch.store).stdout)
      .compactMap {
        $0["token"] as? String
      }
    #expect(
      missed.map(\.id) == Array(tokens.suffix(3)), "each event's id is its transaction's token")
    kill(again.processIdentifier, SIGKILL)
    // A token whose history was pruned: one reset with every matching trip.
    let pruned = try trips(
      ["history", "prune", "--before", try #require(tokens.last)], store: scratch.store)
    #expect(pruned.status == 0)
    let storeID = try #require(tokens.first?.split(separator: ":").first)
    let (reset, resetFile) = try listen(lastEventID: "\(storeID):0", seconds: 30)
    #expect(eventually { events(text(resetFile)).count == 1 })
    let document = try #require(events(text(resetFile)).first)
    #expect(document.kind == "reset")
    let expected = try server.request("/collections/trips/items?bbox=160,-60,-160,0&limit=1000")
      .json()
    #expect((document.data["features"] as? [Any])?.count == expected["numberMatched"] as? Int)
    kill(reset.processIdentifier, SIGKILL)
    #expect(try server.request("HEAD", path).headers["content-type"] == "text/event-stream")
    #expect(
      try server.request("GET", path, headers: ["Last-Event-ID: garbage"]).status == 400,
      "a bad Last-Event-ID is refused")
  }

  @Test("clients of one query share one controller; a slow client's queue is bounded")
  func sharedFeedsAndBoundedQueues() throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    var configuration = ServiceConfiguration()
    configuration.port = 0
    let service = try TripService(
      container: store.container, configuration: configuration, log: { _ in })
    defer { service.stop() }
    var clients: [Process] = []
    for query in ["", "", "", "?destination=Oslo"] {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      process.arguments = [
        "-s", "-N", "--max-time", "5", "-o", "/dev/null",
        service.url + "/collections/trips/bounds/stream" + query,
      ]
      try process.run()
      clients.append(process)
    }
    #expect(
      eventually { service.streamFeedCount == 2 }, "three clients of one query, one of another")
    for client in clients { kill(client.processIdentifier, SIGKILL) }
    for client in clients { client.waitUntilExit() }
    // Changes wake the suspended connections: writing to a gone client fails (the second write
    // after the peer closed, at the latest), the client is dropped, and its feed released.
    // (Written until then: events that reach a gone client in one write show nothing.) The
    // service's follower is a task on Swift's cooperative pool, which this test process's
    // other tests (synchronous, on that pool: two threads on two cores) may hold for tens
    // of seconds: hence the long wait.
    var index = 0
    #expect(
      try eventually(90) {
        index += 1
        _ = try store.add(
          TripRecord(
            name: "Wake \(index)", destination: "Oslo", startDate: TripDates.parse("2027-01-01")!,
            endDate: TripDates.parse("2027-01-02")!, latitude: 59 + Double(index) / 10,
            longitude: 10.7))
        Thread.sleep(forTimeInterval: 0.2)
        return service.streamFeedCount == 0
      })
    // The bounds on a client's queue: past the hard limit, any client is dropped, not
    // buffered; past the stalled limit, one that has read nothing for the stall timeout.
    var settings = StreamSettings()
    settings.hardLimit = 100
    let stream = HTTPStream(settings: settings)
    #expect(stream.send(String(repeating: "a", count: 60)))
    #expect(!stream.send(String(repeating: "b", count: 60)), "over the hard limit: dropped")
    #expect(!stream.isOpen)
    #expect(!stream.send("c"), "a dropped client gets nothing more")
    settings = StreamSettings()
    settings.stalledLimit = 50
    settings.stallTimeout = .milliseconds(100)
    let stalled = HTTPStream(settings: settings)
    #expect(stalled.send(String(repeating: "a", count: 60)))
    #expect(stalled.send("b"), "behind, but not for long yet")
    Thread.sleep(forTimeInterval: 0.2)
    #expect(!stalled.send(": keep-alive\n\n"), "behind and silent past the timeout: dropped")
    let quiet = HTTPStream(settings: settings)
    #expect(quiet.send(String(repeating: "a", count: 40)))
    Thread.sleep(forTimeInterval: 0.2)
    #expect(quiet.send("b"), "below the stalled limit a silent client stays")
  }

  @Test("libmicrohttpd's paths under valgrind: no invalid read, write or free")
  func memcheck() throws {
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let token = String(repeating: "m", count: 20)
    let tokens = try tokenFile(in: scratch, "mia:\(token)")
    let log = scratch.file("valgrind.log")
    let run = try shell(
      """
      valgrind --quiet --leak-check=no --log-file="$3" "$TRIPS" serve --port 0 --store "$1" \
        --token-file "$2" > "$3.out" 2>/dev/null &
      server=$!
      for i in $(seq 1 120); do grep -q Listening "$3.out" 2>/dev/null && break; sleep 0.5; done
      url=$(sed 's/Listening on //' "$3.out")
      for path in / "/collections/trips/items?bbox=170,-30,-170,0&limit=5" \
        "/collections/trips/items?limit=x" /nothing "/collections/trips/bounds?crs=EPSG:3035"; do
        curl -s -o /dev/null -w '%{http_code} ' "$url$path"
      done
      curl -s -o /dev/null -w '%{http_code} ' -X POST -H "Authorization: Bearer $4" \
        -H 'Content-Type: application/geo+json' --data-binary @"$5" "$url/collections/trips/items"
      head -c 17000000 /dev/zero | curl -s -o /dev/null -w '%{http_code} ' -X POST \
        --data-binary @- "$url/collections/trips/items"
      head -c 17000000 /dev/zero | curl -s -o /dev/null -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $4" -H 'Content-Type: application/geo+json' \
        --data-binary @- "$url/collections/trips/items"
      curl -s -N --max-time 3 -o /dev/null "$url/collections/trips/bounds/stream"
      curl -s -N --max-time 20 -o /dev/null "$url/collections/trips/bounds/stream" &
      sleep 2
      kill -TERM $server
      wait $server
      echo " exit=$?"
      """,
      arguments: [
        scratch.store.path, tokens.path, log.path, token,
        try scratch.write("feature.json", String(decoding: featureBody(), as: UTF8.self)).path,
      ])
    #expect(run.stdout == "200 200 400 404 200 201 401 413 exit=0\n", "\(run.stdout) \(run.stderr)")
    let report = try String(contentsOf: log, encoding: .utf8)
    for error in ["Invalid read", "Invalid write", "Invalid free", "freed", "Mismatched free"] {
      #expect(!report.contains(error), "\(report.prefix(3000))")
    }
  }

  @Test("GDAL's OAPIF driver reads every trip and a bbox subset")
  func gdal() throws {
    let server = try ServerProcess(store: Self.sample)
    defer { _ = server.stop() }
    let scratch = Scratch()
    let all = scratch.file("all.json")
    let run = try shell(
      "ogr2ogr -f GeoJSON \"$1\" \"OAPIF:$2/collections/trips\"", arguments: [all.path, server.url])
    #expect(run.status == 0, "\(run.stderr)")
    let features = try #require(
      (try JSONSerialization.jsonObject(with: Data(contentsOf: all)) as? [String: Any])?["features"]
        as? [[String: Any]])
    #expect(features.count == 240)
    #expect(
      Set(features.compactMap { ($0["properties"] as? [String: Any])?["name"] as? String }).count
        > 100)
    let subset = scratch.file("subset.json")
    let spatial = try shell(
      "ogr2ogr -f GeoJSON -spat 170 -30 180 0 \"$1\" \"OAPIF:$2/collections/trips\"",
      arguments: [subset.path, server.url])
    #expect(spatial.status == 0, "\(spatial.stderr)")
    let inBox = try #require(
      (try JSONSerialization.jsonObject(with: Data(contentsOf: subset)) as? [String: Any])?[
        "features"]
        as? [[String: Any]])
    let expected = try server.request("/collections/trips/items?bbox=170,-30,180,0&limit=1000")
      .json()
    #expect(inBox.count == expected["numberMatched"] as? Int && !inBox.isEmpty)
    let info = try shell("ogrinfo -ro -so \"OAPIF:$1\" trips", arguments: [server.url])
    #expect(info.stdout.contains("Feature Count: 240"), "\(info.stdout)")
  }
}

extension Double {
  func rounded(toPlaces places: Int) -> Double {
    let scale = pow(10.0, Double(places))
    return (self * scale).rounded() / scale
  }
}
