import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The classes of defects a hostile client found in `trips serve`, each tested as a class:
/// client input that reaches the file system, writes that lose each other, and the rest.
@Suite("Hardening: the service against hostile clients", .serialized)
struct ServiceHardeningTests {
  static let token = String(repeating: "h0stile-", count: 3)

  /// The engines a write test runs on: a SQLite file and a PostgreSQL database.
  static let engines = ["sqlite", "postgresql"]

  /// A store of the engine's kind, with one trip; its URL for `--store` and the trip's id.
  static func storeWithTrip(_ engine: String, in scratch: Scratch) throws -> (URL, String) {
    let store =
      engine == "sqlite"
      ? scratch.store : URL(string: try PostgreSQLCluster.shared.get().makeDatabase("hard"))!
    let location = store.isFileURL ? store.path : store.absoluteString
    let added = try trips(
      [
        "add", "--name", "n0", "--destination", "Suva", "--start", "2027-05-01", "--end",
        "2027-05-09", "--latitude", "-18.1", "--longitude", "178.4", "--store", location,
      ])
    #expect(added.status == 0, "\(added.stderr)")
    return (store, added.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
  }

  // MARK: Client input never reaches the file system

  @Test(
    "a crs naming a file, a FIFO or a device is refused with 400 at once; codes, URIs and plain PROJ strings still work"
  )
  func crsNeverOpensFiles() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let fifo = scratch.file("fifo")
    #expect(mkfifo(fifo.path, 0o600) == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { #expect(server.stop() == 0) }
    func bounds(_ crs: String) throws -> HTTPReply {
      let encoded = crs.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
      return try server.request("/collections/trips/bounds?crs=\(encoded)")
    }
    let refused = [
      "+init=\(fifo.path):x", "+init=/dev/stdin:x", "+init=/proc/self/fd/0:x",
      "+proj=longlat +ellps=WGS84 +nadgrids=\(fifo.path)", "+proj=longlat +nadgrids=fifo",
      "+proj=longlat +geoidgrids=\(fifo.path)", "+init=epsg:3857",
      "+proj=merc +type=crs +grids=x", "+proj=tinshift +file=\(fifo.path)",
      "+proj=merc +lon_0=\(fifo.path)",
      #"PROJCRS["x",BASEGEOGCRS["WGS 84",DATUM["World Geodetic System 1984",ELLIPSOID["WGS 84",6378137,298.257223563]]],CONVERSION["m",METHOD["Popular Visualisation Pseudo Mercator"]],CS[Cartesian,2],AXIS["x",east],AXIS["y",north],LENGTHUNIT["metre",1]]"#,
      #"{"type":"GeographicCRS","name":"x"}"#, "/dev/stdin", fifo.path, "EPSG:3857\t",
    ]
    // Three at a time, more than the server's threads: a request that blocked would hang
    // the rest.
    for crs in refused {
      let started = Date()
      let reply = try bounds(crs)
      #expect(reply.status == 400, "\(crs): \(reply.text)")
      #expect(Date().timeIntervalSince(started) < 5, "\(crs) took too long")
    }
    for crs in [
      "EPSG:3857", "EPSG:32633", "ESRI:54030", "urn:ogc:def:crs:EPSG::3857",
      "http://www.opengis.net/def/crs/EPSG/0/3857", "+proj=merc +lon_0=150",
      "+proj=utm +zone=33 +datum=WGS84",
    ] {
      let reply = try bounds(crs)
      #expect(reply.status == 200, "\(crs): \(reply.text)")
    }
    #expect(try server.request("/conformance").status == 200)
  }

  // MARK: Concurrent writes lose nothing

  @Test(
    "concurrent PATCHes of different members of one trip all land, on both engines",
    arguments: engines)
  func concurrentPatchesOfDifferentMembers(engine: String) throws {
    let scratch = Scratch()
    let (store, id) = try Self.storeWithTrip(engine, in: scratch)
    let tokens = try tokenFile(in: scratch, "alice:\(Self.token)")
    let server = try ServerProcess(store: store, ["--token-file", tokens.path])
    defer { #expect(server.stop() == 0) }
    let rounds = 15
    let result = try shell(
      """
      url=$1; id=$2; token=$3; rounds=$4
      patch() { curl -s -o /dev/null -w '%{http_code}\\n' -X PATCH -H "Authorization: Bearer $token" \\
        -H 'Content-Type: application/merge-patch+json' --data "$1" "$url/collections/trips/items/$id"; }
      for k in $(seq 1 "$rounds"); do
        patch "{\\"properties\\":{\\"name\\":\\"n$k\\"}}" &
        patch "{\\"properties\\":{\\"placeIdentifier\\":\\"p$k\\"}}" &
        patch "{\\"properties\\":{\\"destination\\":\\"d$k\\"}}" &
        patch "{\\"geometry\\":{\\"type\\":\\"Point\\",\\"coordinates\\":[$k,$k]}}" &
        wait
        curl -s "$url/collections/trips/items/$id" | jq -c '[.properties.name, .properties.placeIdentifier, .properties.destination, .geometry.coordinates[0]]'
      done
      """, arguments: [server.url, id, Self.token, "\(rounds)"])
    let lines = result.stdout.split(separator: "\n").map(String.init)
    let statuses = lines.filter { !$0.hasPrefix("[") }
    #expect(statuses.count == 4 * rounds && statuses.allSatisfy { $0 == "200" }, "\(statuses)")
    let states = lines.filter { $0.hasPrefix("[") }
    #expect(states.count == rounds)
    for (index, state) in states.enumerated() {
      let k = index + 1
      #expect(state == "[\"n\(k)\",\"p\(k)\",\"d\(k)\",\(k)]", "round \(k) lost a change: \(state)")
    }
  }

  @Test(
    "writers incrementing one counter with If-Match never lose an increment, on both engines; a stale or weak tag is 412",
    arguments: engines)
  func optimisticLocking(engine: String) throws {
    let scratch = Scratch()
    let (store, id) = try Self.storeWithTrip(engine, in: scratch)
    let tokens = try tokenFile(in: scratch, "alice:\(Self.token)")
    let server = try ServerProcess(store: store, ["--token-file", tokens.path])
    defer { #expect(server.stop() == 0) }
    let auth = [
      "Authorization: Bearer \(Self.token)", "Content-Type: application/merge-patch+json",
    ]
    let path = "/collections/trips/items/\(id)"
    let first = try server.request(path)
    let tag = try #require(first.headers["etag"])
    #expect(tag.hasPrefix("\"") && tag.hasSuffix("\"") && tag.count == 18, "\(tag)")
    #expect(try server.request(path, headers: ["If-None-Match: \(tag)"]).status == 304)
    let rename = Data(#"{"properties":{"name":"renamed"}}"#.utf8)
    for bad in ["W/\(tag)", "\"0000000000000000\"", "\"\(tag)", ",", "a, b"] {
      let reply = try server.request(
        "PATCH", path, headers: auth + ["If-Match: \(bad)"], body: rename)
      #expect([400, 412].contains(reply.status), "If-Match \(bad): \(reply.status)")
    }
    #expect(
      try server.request(
        "POST", "/collections/trips/items",
        headers: [auth[0], "Content-Type: application/geo+json", "If-Match: *"]
      ).status == 412)
    // A merge patch is a PATCH's body only.
    #expect(
      try server.request("POST", "/collections/trips/items", headers: auth).status == 415)
    #expect(
      (try server.request(path).json()["properties"] as? [String: Any])?["name"] as? String == "n0")
    let renamed = try server.request(
      "PATCH", path, headers: auth + ["If-Match: \(tag)"], body: rename)
    #expect(renamed.status == 200, "\(renamed.text)")
    let newTag = try #require(renamed.headers["etag"])
    #expect(newTag != tag)
    #expect(try server.request(path).headers["etag"] == newTag)
    #expect(
      try server.request("PATCH", path, headers: auth + ["If-Match: \(tag)"], body: rename).status
        == 412)
    #expect(
      try server.request("DELETE", path, headers: auth + ["If-Match: \(tag)"]).status == 412)
    // Four writers, each adding 1 to the number in the name eight times: read, then PATCH with
    // If-Match, again on 412. Every increment must be there at the end.
    let counter = Data(#"{"properties":{"name":"0"}}"#.utf8)
    #expect(try server.request("PATCH", path, headers: auth, body: counter).status == 200)
    let writers = 4
    let increments = 8
    let result = try shell(
      """
      url=$1; id=$2; token=$3; writers=$4; increments=$5
      writer() {
        local done=0 tries=0
        while [ "$done" -lt "$increments" ] && [ "$tries" -lt 400 ]; do
          tries=$((tries + 1))
          local body; body=$(mktemp)
          local tag; tag=$(curl -s -D - -o "$body" "$url/collections/trips/items/$id" | tr -d '\\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
          local n; n=$(jq -r .properties.name "$body"); rm -f "$body"
          local code; code=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H "If-Match: $tag" \\
            -H "Authorization: Bearer $token" -H 'Content-Type: application/merge-patch+json' \\
            --data "{\\"properties\\":{\\"name\\":\\"$((n + 1))\\"}}" "$url/collections/trips/items/$id")
          case $code in 200) done=$((done + 1));; 412) ;; *) echo "status $code"; return 1;; esac
        done
        echo "writer $done"
      }
      for w in $(seq 1 "$writers"); do writer & done
      wait
      """, arguments: [server.url, id, Self.token, "\(writers)", "\(increments)"])
    #expect(
      result.stdout.split(separator: "\n").sorted()
        == Array(repeating: "writer \(increments)", count: writers), "\(result.stdout)")
    let final = try server.request(path).json()
    #expect(
      (final["properties"] as? [String: Any])?["name"] as? String == "\(writers * increments)")
  }

  @Test(
    "of concurrent DELETEs of one trip, exactly one answers 204 and the rest 404, on both engines",
    arguments: engines)
  func concurrentDeletes(engine: String) throws {
    let scratch = Scratch()
    let (store, _) = try Self.storeWithTrip(engine, in: scratch)
    let tokens = try tokenFile(in: scratch, "alice:\(Self.token)")
    let server = try ServerProcess(store: store, ["--token-file", tokens.path])
    defer { #expect(server.stop() == 0) }
    let auth = ["Authorization: Bearer \(Self.token)", "Content-Type: application/geo+json"]
    for round in 1...8 {
      let created = try server.request(
        "POST", "/collections/trips/items", headers: auth, body: featureBody(name: "r\(round)"))
      let location = try #require(created.headers["location"])
      let result = try shell(
        """
        for i in 1 2 3 4; do
          curl -s -o /dev/null -w '%{http_code}\\n' -X DELETE -H "Authorization: Bearer $2" "$1" &
        done
        wait
        """, arguments: [location, Self.token])
      let codes = result.stdout.split(separator: "\n").sorted()
      #expect(codes == ["204", "404", "404", "404"], "round \(round): \(codes)")
    }
  }
}

/// A raw TCP client of a server on loopback: what curl will not send (a body announced and
/// never sent, a body a server refused).
final class RawClient {
  let socket: Int32

  init(url: String) throws {
    let port = UInt16(url.split(separator: ":").last!)!
    socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else { throw CocoaError(.fileReadUnknown) }
    var timeout = timeval(tv_sec: 2, tv_usec: 0)
    setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
  }

  /// Sends `text`; false once the server no longer takes bytes.
  @discardableResult
  func send(_ text: String) -> Bool {
    Array(text.utf8).withUnsafeBytes {
      Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
    } > 0
  }

  /// Sends up to `count` bytes of body, 64 KiB at a time, until the server stops taking them.
  /// Returns how many were sent.
  @discardableResult
  func sendBody(_ count: Int) -> Int {
    let chunk = [UInt8](repeating: 0x7B, count: 65_536)
    var sent = 0
    while sent < count {
      let result = chunk.withUnsafeBytes {
        Glibc.send(socket, $0.baseAddress, min($0.count, count - sent), Int32(MSG_NOSIGNAL))
      }
      if result <= 0 { break }
      sent += result
    }
    return sent
  }

  /// What the server sent within `seconds` (until it closed or went quiet that long).
  func receive(seconds: Double) -> String {
    var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
    setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var received = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 65_536)
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
      let count = recv(socket, &buffer, buffer.count, 0)
      if count > 0 {
        received += buffer[..<count]
        if String(decoding: received, as: UTF8.self).contains("\r\n\r\n") { break }
      } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
        break
      }
    }
    return String(decoding: received, as: UTF8.self)
  }

  deinit { close(socket) }
}

/// The resident memory of a process, in MiB (from `/proc`).
func residentMiB(_ pid: Int32) -> Int {
  let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
  let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
  return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
}

@Suite("Hardening: writes are authorized before their bodies are read", .serialized)
struct AuthorizeBeforeReadingTests {
  static let token = String(repeating: "b0dy-", count: 5)

  @Test(
    "a write refused by its headers (read-only, no token file, no token, a wrong type) is answered at once, without 100 Continue or reading the announced body"
  )
  func refusedFromHeaders() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let tokens = try tokenFile(in: scratch, "alice:\(Self.token)")
    let cases: [(arguments: [String], headers: String, status: String)] = [
      (["--read-only"], "", "405"),
      ([], "Authorization: Bearer \(Self.token)\r\n", "401"),
      (["--token-file", tokens.path], "", "401"),
      (["--token-file", tokens.path], "Authorization: Bearer wrong-\(Self.token)\r\n", "401"),
      (
        ["--token-file", tokens.path],
        "Authorization: Bearer \(Self.token)\r\nContent-Type: text/plain\r\n", "415"
      ),
    ]
    for (arguments, headers, status) in cases {
      let server = try ServerProcess(store: scratch.store, arguments)
      for path in ["/collections/trips/items", "/changes"]
      where !(status == "415" && path == "/changes") {
        let client = try RawClient(url: server.url)
        client.send(
          "POST \(path) HTTP/1.1\r\nHost: x\r\n\(headers)Content-Length: 16000000\r\nExpect: 100-continue\r\n\r\n"
        )
        let reply = client.receive(seconds: 3)
        #expect(
          reply.hasPrefix("HTTP/1.1 \(status) "),
          "\(arguments) \(path): \(reply.prefix(200).debugDescription)")
        if status == "405" { #expect(reply.lowercased().contains("\r\nallow: ")) }
      }
      #expect(server.stop() == 0)
    }
  }

  @Test("forty clients uploading to a read-only server leave its memory where it was")
  func refusedBodiesTakeNoMemory() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let server = try ServerProcess(store: scratch.store, ["--read-only"])
    defer { #expect(server.stop() == 0) }
    let before = residentMiB(server.process.processIdentifier)
    let clients = try (0..<40).map { _ in try RawClient(url: server.url) }
    for client in clients {
      client.send(
        "POST /collections/trips/items HTTP/1.1\r\nHost: x\r\nContent-Length: 16776000\r\n\r\n")
      client.sendBody(8 * 1024 * 1024)
    }
    let during = residentMiB(server.process.processIdentifier)
    #expect(during - before < 64, "resident memory \(before) MiB -> \(during) MiB")
    #expect(try server.request("/conformance").status == 200)
  }

  @Test(
    "authorized bodies in flight are bounded: past the server's memory for them a write is 503 with Retry-After, and the memory comes back"
  )
  func bodiesInFlightAreBounded() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let tokens = try tokenFile(in: scratch, "alice:\(Self.token)")
    let server = try ServerProcess(store: scratch.store, ["--token-file", tokens.path])
    defer { #expect(server.stop() == 0) }
    // 16,000,000 bytes each: eight fit in the 128 MiB for bodies in flight, the ninth does not.
    var clients: [RawClient] = []
    var replies: [String] = []
    for _ in 0..<10 {
      let client = try RawClient(url: server.url)
      client.send(
        "POST /collections/trips/items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Self.token)\r\nContent-Type: application/geo+json\r\nContent-Length: 16000000\r\n\r\n"
      )
      replies.append(client.receive(seconds: 0.5))
      clients.append(client)
    }
    let waiting = replies.prefix(8).allSatisfy { $0.isEmpty }
    #expect(waiting, "\(replies.map { $0.prefix(40) })")
    #expect(
      replies.suffix(2).allSatisfy {
        $0.hasPrefix("HTTP/1.1 503 ") && $0.contains("Retry-After: 1")
      },
      "\(replies.map { $0.prefix(60) })")
    clients.removeAll()
    let auth = ["Authorization: Bearer \(Self.token)", "Content-Type: application/geo+json"]
    var status = 0
    for _ in 0..<50 where status != 201 {
      status = try server.request(
        "POST", "/collections/trips/items", headers: auth, body: featureBody()
      )
      .status
      if status != 201 { Thread.sleep(forTimeInterval: 0.1) }
    }
    #expect(status == 201)
  }
}

@Suite("Hardening: impossible dates and times are refused on every path, never rolled over")
struct ImpossibleTimesTests {
  static let impossible = [
    "2027-02-29T10:00:00Z", "2027-02-30T00:00:00Z", "2027-03-01T99:00:00Z",
    "2027-01-01T00:60:00Z", "2027-01-01T00:00:60Z", "2027-13-01T00:00:00Z",
    "2027-04-31T12:00Z", "2027-01-01T24:00:00Z", "2027-01-01T00:00:00+24:00",
    "2027-01-01T00:00:00+05:60", "2027-01-01T00:00:00.Z", "2027-00-10T00:00:00Z",
  ]

  @Test(
    "an items stream resumed with a Last-Event-ID newer than the store's history (a store restored from an older backup) gets a reset with every trip, as /changes refuses the token"
  )
  func futureLastEventID() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let history = try jsonArray(try trips(["history", "--json"], store: scratch.store).stdout)
    let newest = try #require(history.last?["token"] as? String)
    let parts = newest.split(separator: ":")
    let future = "\(parts[0]):\(Int(parts[1])! + 1000)"
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    let changes = try server.request("GET", "/changes?after=" + future)
    #expect(changes.status == 400, "\(changes.text)")
    let capture = scratch.file("future.txt")
    let listener = Process()
    listener.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    listener.arguments = [
      "-s", "-N", "--max-time", "3", "-H", "Last-Event-ID: " + future, "-o", capture.path,
      server.url + "/collections/trips/items/stream",
    ]
    try listener.run()
    listener.waitUntilExit()
    let text = try String(contentsOf: capture, encoding: .utf8)
    #expect(text.contains("event: reset"), "\(text.prefix(300))")
    let data = try #require(
      text.components(separatedBy: "\n").first { $0.hasPrefix("data: ") }?.dropFirst(6))
    let reset = try #require(
      try JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any])
    #expect((reset["features"] as? [Any])?.count == 240)
    // The token the store did give is resumed from its log, with no reset.
    listener.arguments![5] = "Last-Event-ID: " + newest
    let again = Process()
    again.executableURL = listener.executableURL
    again.arguments = listener.arguments
    try again.run()
    again.waitUntilExit()
    #expect(!(try String(contentsOf: capture, encoding: .utf8)).contains("event: reset"))
  }

  @Test(
    "the CLI's add and update, CSV and JSON imports refuse each with exit 65", arguments: impossible
  )
  func cli(time: String) throws {
    let scratch = Scratch()
    let add = try trips(
      [
        "add", "--name", "x", "--destination", "y", "--start", time, "--end", "2028-01-01",
        "--latitude", "1", "--longitude", "1",
      ], store: scratch.store)
    // A flag's bad value is a usage error (64), as for an impossible day alone.
    #expect(
      add.status == 64 && add.stderr.contains("for '--start'"), "add \(time): \(add.stderr)")
    let csv = try scratch.write(
      "t.csv",
      "name,destination,start_date,end_date,latitude,longitude\nx,y,\(time),2028-01-01,1,1\n")
    let json = try scratch.write(
      "t.json",
      #"[{"name":"x","destination":"y","startDate":"\#(time)","endDate":"2028-01-01","latitude":1,"longitude":1}]"#
    )
    for file in [csv, json] {
      let run = try trips(["import", file.path], store: scratch.store)
      #expect(run.status == 65, "\(file.lastPathComponent) \(time): \(run.stderr)")
    }
    let list = try trips(["list", "--json"], store: scratch.store)
    #expect(
      list.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]" || list.stdout.isEmpty)
  }

  @Test("the service's POST, PATCH and datetime= refuse each with 400")
  func service() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let token = String(repeating: "d4te-", count: 5)
    let tokens = try tokenFile(in: scratch, "alice:\(token)")
    let server = try ServerProcess(store: scratch.store, ["--token-file", tokens.path])
    defer { #expect(server.stop() == 0) }
    let auth = ["Authorization: Bearer \(token)", "Content-Type: application/geo+json"]
    let created = try server.request(
      "POST", "/collections/trips/items", headers: auth, body: featureBody())
    let location = try #require(created.headers["location"])
    let path = String(location.dropFirst(server.url.count))
    for time in Self.impossible {
      let body = String(decoding: featureBody(), as: UTF8.self).replacingOccurrences(
        of: "\"startDate\":\"2027-05-01\"", with: "\"startDate\":\"\(time)\"")
      let post = try server.request(
        "POST", "/collections/trips/items", headers: auth, body: Data(body.utf8))
      #expect(post.status == 400, "POST \(time): \(post.text)")
      let patch = try server.request(
        "PATCH", path, headers: auth,
        body: Data(#"{"properties":{"endDate":"\#(time)"}}"#.utf8))
      #expect(patch.status == 400, "PATCH \(time): \(patch.text)")
      let encoded = time.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
      let query = try server.request("/collections/trips/items?datetime=\(encoded)")
      #expect(query.status == 400, "datetime=\(time): \(query.text)")
    }
    for time in ["2027-02-28T23:59:59Z", "2028-02-29T10:00:00Z", "2027-05-01T22:00-05:00"] {
      let encoded = time.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
      #expect(try server.request("/collections/trips/items?datetime=\(encoded)").status == 200)
    }
  }
}

@Suite("Hardening: readers never create stores")
struct ReadersNeverCreateTests {
  @Test(
    "serve without writes, sync watch from a missing store and watch leave a missing store missing; a writing server says it creates one"
  )
  func readersLeaveMissingStores() throws {
    let scratch = Scratch()
    let missing = scratch.file("typo.sqlite")
    func leftAlone() -> Bool {
      let names = (try? FileManager.default.contentsOfDirectory(atPath: scratch.url.path)) ?? []
      return !names.contains { $0.hasPrefix("typo.sqlite") || $0.hasPrefix("other.sqlite") }
    }
    for extra in [["--read-only"], []] {
      let run = try trips(["serve", "--port", "0"] + extra, store: missing)
      #expect(run.status == 66, "serve \(extra): \(run.stderr)")
      #expect(run.stderr.contains("does not exist"), "\(run.stderr)")
      #expect(leftAlone())
    }
    let sync = try trips(
      ["sync", "watch", "--once", "--to", scratch.file("other.sqlite").path], store: missing)
    #expect(sync.status == 66, "\(sync.stderr)")
    let push = try trips(
      ["sync", "watch", "--once", "--to", "http://127.0.0.1:1", "--token-file", "/dev/null"],
      store: missing)
    #expect(push.status != 0 && leftAlone(), "\(push.stderr)")
    let watch = try trips(["watch", "--count", "1"], store: missing)
    #expect(watch.status == 0, "\(watch.stderr)")
    #expect(watch.stderr.contains("does not exist yet"))
    #expect(watch.stdout.hasPrefix("{\"count\":0"), "\(watch.stdout)")
    #expect(leftAlone())
    // A writing server creates its store, and says so.
    let tokens = try tokenFile(in: scratch, "alice:\(String(repeating: "w", count: 20))")
    let server = try ServerProcess(store: missing, ["--token-file", tokens.path])
    #expect(server.stop() == 0)
    #expect(server.log.contains("Note: the store \(missing.path) does not exist yet"))
    #expect(FileManager.default.fileExists(atPath: missing.path))
  }

  @Test(
    "watch on a store that does not exist yet reports it empty, then follows it once a writer creates it"
  )
  func watchWaitsForTheStore() throws {
    let scratch = Scratch()
    let output = scratch.file("watch.out")
    _ = FileManager.default.createFile(atPath: output.path, contents: nil)
    let process = Process()
    process.executableURL = tripsExecutable
    process.arguments = ["watch", "--count", "2", "--store", scratch.store.path]
    process.environment = childEnvironment(["PATH": "/usr/bin:/bin"])
    process.standardOutput = try FileHandle(forWritingTo: output)
    process.standardError = FileHandle.nullDevice
    try process.run()
    Thread.sleep(forTimeInterval: 1)
    #expect(!FileManager.default.fileExists(atPath: scratch.store.path))
    let added = try trips(
      [
        "add", "--name", "x", "--destination", "y", "--start", "2027-01-01", "--end", "2027-01-02",
        "--latitude", "10", "--longitude", "20",
      ], store: scratch.store)
    #expect(added.status == 0)
    let deadline = Date().addingTimeInterval(20)
    while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
    let lines = (try String(contentsOf: output, encoding: .utf8)).split(separator: "\n")
    #expect(lines.count == 2, "\(lines)")
    #expect(lines.first?.hasPrefix("{\"count\":0") == true)
    #expect(lines.last?.hasPrefix("{\"count\":1") == true)
  }
}

@Suite(
  "Hardening: the cost of live streams is bounded per query, not per client, and shared fairly",
  .serialized)
struct BoundedStreamsTests {
  /// A stream read by curl into a file (status line and headers included) for `seconds`.
  final class Listener {
    let process = Process()
    let file: URL

    /// `from`: the loopback address the client connects from (127.0.0.1 by default): the
    /// server counts each address's live queries apart.
    /// `lastEventID`: sent as `Last-Event-ID`, to resume after that token.
    init(
      _ url: String, in scratch: Scratch, seconds: Int = 20, from: String? = nil,
      lastEventID: String? = nil
    ) throws {
      file = scratch.file("stream-\(UUID().uuidString).txt")
      process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      process.arguments =
        [
          "-s", "-i", "-N", "--max-time", String(seconds), "-H", "Accept: text/event-stream", "-o",
          file.path, url,
        ] + (from.map { ["--interface", $0] } ?? [])
        + (lastEventID.map { ["-H", "Last-Event-ID: \($0)"] } ?? [])
      try process.run()
    }

    var text: String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }
    /// The data of the first event, once it came.
    var firstData: String? {
      text.components(separatedBy: "\n").first { $0.hasPrefix("data: ") }.map {
        String($0.dropFirst(6))
      }
    }
    var status: Int? {
      text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) }
    }

    /// Ends the client at once (``endClient(_:)``); the server sees its connection close.
    func stop() { endClient(process) }

    deinit { stop() }
  }

  /// JSON text with sorted keys, for comparing documents.
  func canonical(_ text: String) throws -> String {
    let object = try JSONSerialization.jsonObject(with: Data(text.utf8))
    return String(
      decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
      as: UTF8.self)
  }

  @Test(
    "forty viewports of one bounds query share one feed, each with its own camera (as GET /bounds gives it); distinct queries past the maximum get 503 with Retry-After, and clients of followed queries still join"
  )
  func boundsFeedsShareAndCap() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let server = try ServerProcess(store: scratch.store, ["--keep-alive", "1"])
    defer { _ = server.stop() }
    let base = server.url + "/collections/trips/bounds"
    var listeners: [(Listener, String)] = []
    for index in 0..<40 {
      let query = "?viewport=\(600 + index * 7)x\(400 + index * 3)&padding=\(index % 5)"
      listeners.append((try Listener(base + "/stream" + query, in: scratch), query))
    }
    #expect(eventually(20) { listeners.allSatisfy { $0.0.firstData != nil } })
    for (listener, query) in listeners {
      let expected = try server.request("GET", "/collections/trips/bounds" + query)
      #expect(expected.status == 200)
      #expect(
        try canonical(listener.firstData ?? "{}") == canonical(expected.text),
        "the stream's document for \(query) is the one GET /bounds gives")
    }
    // Distinct filtered queries: one client (address) may start 4; a fifth is refused with
    // its share named. Four clients make the server's 16; a 17th is refused, as a whole
    // response. The plain query's 40 viewports above count toward neither.
    let destinations = try jsonArray(
      try trips(["destinations", "--json"], store: scratch.store).stdout
    )
    .compactMap { $0["destination"] as? String }
    #expect(destinations.count > 20)
    func stream(_ destination: String) -> String {
      base + "/stream?destination="
        + destination.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }
    var distinct: [Listener] = []
    for (index, destination) in destinations.prefix(16).enumerated() {
      distinct.append(
        try Listener(stream(destination), in: scratch, from: "127.0.0.\(2 + index / 4)"))
      if index == 3 {
        #expect(eventually(20) { distinct.allSatisfy { $0.firstData != nil } })
        let fifth = try Listener(
          stream(destinations[20]), in: scratch, seconds: 3, from: "127.0.0.2")
        fifth.process.waitUntilExit()
        #expect(fifth.status == 429 && fifth.text.contains("its share"), "\(fifth.text)")
      }
    }
    #expect(eventually(20) { distinct.allSatisfy { $0.firstData != nil } })
    let encoded = destinations[16].addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    let refused = try curl("GET", base + "/stream?destination=" + encoded)
    #expect(refused.status == 503, "\(refused.text)")
    #expect(refused.headers["retry-after"] == "30", "\(refused.headers)")
    #expect(refused.text.contains("distinct live bounds queries"), "\(refused.text)")
    // Another viewport of a followed query still joins it.
    let joined = try Listener(base + "/stream?viewport=333x222", in: scratch)
    #expect(eventually(10) { joined.firstData != nil }, "\(joined.text)")
    // When the clients leave, the feeds go (the server notices at its next keep-alive), and a
    // new query is followed again.
    for (listener, _) in listeners { listener.stop() }
    for listener in distinct { listener.stop() }
    joined.stop()
    #expect(
      eventually(40) {
        (try? Listener(base + "/stream?destination=" + encoded, in: scratch, seconds: 2)).map {
          $0.process.waitUntilExit()
          return $0.status == 200 && $0.firstData != nil
        } ?? false
      })
  }

  @Test(
    "the plain trips' and stays' streams count toward no maximum: beside both, of nine filtered item queries started at once, --live-queries 4 admits exactly four (a query being started counts) and refuses the others"
  )
  func plainQueriesUncounted() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let server = try ServerProcess(store: scratch.store, ["--live-queries", "4"])
    defer { _ = server.stop() }
    let trips = server.url + "/collections/trips/items/stream"
    let plain = [
      try Listener(trips, in: scratch),
      try Listener(server.url + "/collections/stays/items/stream", in: scratch),
    ]
    #expect(eventually(10) { plain.allSatisfy { $0.status == 200 } }, "\(plain.map(\.text))")
    // Nine distinct queries at once, from nine addresses (a client's share is 4): exactly
    // four admitted, the others refused with the maximum named.
    let racing = try (0..<9).map { index in
      try Listener(
        trips + "?bbox=\(index),0,\(index + 1),1", in: scratch, seconds: 5,
        from: "127.0.0.\(2 + index)")
    }
    #expect(eventually(10) { racing.allSatisfy { $0.status != nil } })
    #expect(racing.filter { $0.status == 200 }.count == 4, "\(racing.map(\.status))")
    let past = racing.filter { $0.status == 503 }
    #expect(past.count == 5, "\(racing.map(\.status))")
    for listener in past { listener.process.waitUntilExit() }
    #expect(past.first?.text.contains("follows 4 distinct live item queries") == true)
  }

  @Test(
    "queries a client left give way at once (not after their 30 s grace, nor at the next keep-alive): the client starts four new ones past its share, another client one past the maximum; queries with clients are never ended for them"
  )
  func idleQueriesGiveWay() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    // The default keep-alive (15 s): the server would notice a client gone only at the next
    // one; a query past the share finds it at once.
    let server = try ServerProcess(store: scratch.store, ["--live-queries", "6"])
    defer { _ = server.stop() }
    let trips = server.url + "/collections/trips/items/stream"
    func open(_ boxes: Range<Int>, from: String) throws -> [Listener] {
      let listeners = try boxes.map { index in
        try Listener(trips + "?bbox=\(index),0,\(index + 1),1", in: scratch, from: from)
      }
      #expect(eventually(10) { listeners.allSatisfy { $0.status != nil } })
      return listeners
    }
    // A client pans from four boxes to four others: the ones it left give way.
    let first = try open(0..<4, from: "127.0.0.2")
    #expect(first.allSatisfy { $0.status == 200 }, "\(first.map(\.status))")
    for listener in first { listener.stop() }
    Thread.sleep(forTimeInterval: 0.2)
    let second = try open(4..<8, from: "127.0.0.2")
    #expect(second.allSatisfy { $0.status == 200 }, "\(second.map(\.status))")
    // Another client holds two; the server's 6 are full of queries with clients, but two of
    // the first client's left ones in their grace period give way.
    let other = try open(20..<22, from: "127.0.0.3")
    #expect(other.allSatisfy { $0.status == 200 }, "\(other.map(\.status))")
    // Now every query followed has a client: a new one is refused, none is ended for it.
    let refused = try open(30..<31, from: "127.0.0.4")
    #expect(refused.first?.status == 503, "\(refused.map(\.text))")
    let stillLive = second + other
    #expect(stillLive.allSatisfy { $0.process.isRunning })
  }

  @Test(
    "on PostgreSQL, distinct item and bounds streams past the maximum get 503 and the database keeps sessions for everyone else"
  )
  func postgreSQLSessionsBounded() throws {
    let cluster = try PostgreSQLCluster.shared.get()
    let database = try cluster.makeDatabase("streams")
    let store = URL(string: database)!
    let scratch = Scratch()
    let imported = try trips(["import", sampleTrips.path, "--store", database])
    #expect(imported.status == 0, "\(imported.stderr)")
    let server = try ServerProcess(store: store)
    defer { _ = server.stop() }
    func sessions() throws -> Int {
      let run = try shell(
        "psql -q -X -A -t -d \"$1\" -c 'SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()'",
        arguments: [database])
      return Int(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
    let before = try sessions()
    var listeners: [Listener] = []
    for index in 0..<40 {
      // From ten addresses, so that the server's maximum, not one client's share, is reached.
      let box = "-180,-90,\(170 + Double(index) / 10),90"
      let from = "127.0.0.\(2 + index % 10)"
      listeners.append(
        try Listener(
          server.url + "/collections/trips/items/stream?bbox=" + box, in: scratch, from: from))
      listeners.append(
        try Listener(
          server.url + "/collections/trips/bounds/stream?bbox=" + box, in: scratch, from: from))
    }
    #expect(
      eventually(30) {
        listeners.allSatisfy { $0.status != nil }
          && listeners.filter { $0.status == 200 }.count == 32
      }, "\(listeners.map(\.status))")
    #expect(listeners.filter { $0.status == 503 }.count == 48)
    let during = try sessions()
    // One follower of the store for every feed, and the request threads' sessions.
    #expect(during - before <= 5, "sessions: \(before) before, \(during) with the streams")
    let list = try trips(["list", "--store", database])
    #expect(list.status == 0, "\(list.stderr)")
    for listener in listeners { listener.stop() }
  }
}

@Suite("Hardening: HTTP as RFC 9110 and 9112 say")
struct HTTPRulesTests {
  /// The status of a raw request, answered within 3 s (0 when none came).
  func status(_ server: ServerProcess, _ request: String) throws -> (Int, String) {
    let client = try RawClient(url: server.url)
    client.send(request)
    let answer = client.receive(seconds: 3)
    let status = answer.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) }
    return (status ?? 0, answer)
  }

  @Test(
    "requests a proxy and the server could frame differently are refused with 400 at once: no Host, two Hosts, a space before the colon, two Content-Lengths, a coding not ending in chunked, Content-Length beside Transfer-Encoding"
  )
  func framing() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    let refused = [
      "GET /conformance HTTP/1.1\r\n\r\n",
      "GET /conformance HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
      "GET /conformance HTTP/1.1\r\nHost : a\r\n\r\n",
      "POST /changes HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde",
      "POST /changes HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\nabc",
      "POST /changes HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ]
    for request in refused {
      let started = Date()
      let (code, answer) = try status(server, request)
      #expect(code == 400, "\(request.debugDescription): \(answer.prefix(200))")
      #expect(
        Date().timeIntervalSince(started) < 2.5, "answered at once: \(request.debugDescription)")
    }
    // What is well framed still works: HTTP/1.0 without Host, and one Host.
    #expect(try status(server, "GET /conformance HTTP/1.0\r\n\r\n").0 == 200)
    #expect(try status(server, "GET /conformance HTTP/1.1\r\nHost: a\r\n\r\n").0 == 200)
    #expect(try server.request("GET", "/conformance").status == 200)
  }

  @Test(
    "an absolute-form target is served as its path; %00 in a query value is refused, not cut; HEAD has the GET's length and no body"
  )
  func targetsAndHEAD() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    let (code, answer) = try status(
      server, "GET \(server.url)/collections/trips/items?limit=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    #expect(code == 200, "\(answer.prefix(300))")
    for target in [
      "/collections/trips/items?q=Accra%00zzz",
      "/collections/trips/items?bbox=-180,-90,180,90%00junk",
      "/collections/trips/items?limit=5%00abc", "/collections%00/trips", "/map%00",
    ] {
      let reply = try server.request("GET", target)
      let query = target
      #expect(reply.status == 400, "\(query): \(reply.text)")
      #expect(reply.text.contains("NUL"), "\(query): \(reply.text)")
    }
    for path in ["/collections", "/collections/trips/items?limit=3", "/api", "/map"] {
      let get = try server.request("GET", path)
      let head = try server.request("HEAD", path)
      #expect(head.status == 200)
      // (curl -I writes the headers where a body would go: the GET's bytes must not follow.)
      #expect(!head.text.contains(String(get.text.prefix(40))), "\(path): HEAD sent a body")
      #expect(head.headers["content-length"] == String(get.body.count), "\(path): \(head.headers)")
      #expect(head.headers["content-type"] == get.headers["content-type"])
    }
  }

  @Test(
    "Accept with q=0 is honoured (406), the most specific range deciding; /map/ is sent to /map; --host [::1] prints its URL once bracketed"
  )
  func negotiationAndPaths() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    let cases: [(String, String, Int)] = [
      ("/collections", "application/json;q=0", 406),
      ("/collections", "application/xml;q=1, application/json;q=0", 406),
      ("/collections", "application/*;q=0, */*", 406),
      ("/collections", "*/*;q=0", 406),
      ("/collections", "application/json;q=0.5", 200),
      ("/collections", "application/geo+json;q=0, application/json", 200),
      ("/collections", "application/*;q=0.1", 200),
      ("/collections/trips/items/stream", "text/event-stream;q=0", 406),
    ]
    for (path, accept, expected) in cases {
      let reply = try server.request(
        "GET", path, headers: ["Accept: " + accept, "Connection: close"])
      #expect(reply.status == expected, "\(path) with Accept \(accept): \(reply.status)")
    }
    let slash = try server.request("GET", "/map/")
    #expect(slash.status == 308)
    #expect(slash.headers["location"] == "/map")
    let served = try ServerProcess(store: scratch.store, ["--host", "[::1]"])
    defer { _ = served.stop() }
    #expect(served.url.hasPrefix("http://[::1]:") && !served.url.contains("[["), "\(served.url)")
  }
}

@Suite("Hardening: messages name the real cause")
struct MessagesNameTheCauseTests {
  static let writer = "w:" + String(repeating: "crlf-", count: 4)

  @Test(
    "invalid UTF-8 and half a surrogate pair in JSON are named as such, in a file and in a POST body, not as a number out of range"
  )
  func invalidUTF8() throws {
    let scratch = Scratch()
    let bodies: [Data] = [
      Data(#"[{"name":""#.utf8) + Data([0xFF, 0xFE]) + Data(#"","destination":"D"}]"#.utf8),
      Data(#"[{"name":"\ud800","destination":"D"}]"#.utf8),
      Data(#"[{"name":""#.utf8) + Data([0xC0, 0x80]) + Data(#""}]"#.utf8),
    ]
    for body in bodies {
      let file = scratch.file("bad-\(UUID().uuidString).json")
      try body.write(to: file)
      let run = try trips(["import", file.path], store: scratch.store)
      #expect(run.status == 65)
      #expect(run.stderr.contains("not valid UTF-8"), "\(run.stderr)")
      #expect(!run.stderr.contains("out of range"), "\(run.stderr)")
    }
    let number = scratch.file("number.json")
    try Data(#"[{"name":"x","latitude":1e999}]"#.utf8).write(to: number)
    #expect(
      try trips(["import", number.path], store: scratch.store).stderr.contains("out of range"))
    let tokens = try tokenFile(in: scratch, Self.writer)
    let server = try ServerProcess(store: scratch.store, ["--token-file", tokens.path])
    defer { _ = server.stop() }
    let token = String(Self.writer.split(separator: ":")[1])
    let posted = try server.request(
      "POST", "/collections/trips/items",
      headers: ["Authorization: Bearer " + token, "Content-Type: application/geo+json"],
      body: Data(#"{"type":"Feature","properties":{"name":""#.utf8) + Data([0xFF])
        + Data(#""},"geometry":{"type":"Point","coordinates":[1,1]}}"#.utf8))
    #expect(posted.status == 400)
    #expect(posted.text.contains("not valid UTF-8"), "\(posted.text)")
  }

  @Test(
    "TLS material that is not PEM, or a key that is not the certificate's, is named as such (exit 65), not as a port to change"
  )
  func tlsMessages() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let files = (0..<2).map { (scratch.file("key\($0).pem"), scratch.file("cert\($0).pem")) }
    for (key, certificate) in files {
      let made = try shell(
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout \"$1\" -out \"$2\" -days 1 -subj /CN=localhost 2>/dev/null",
        arguments: [key.path, certificate.path])
      #expect(made.status == 0)
    }
    let mismatched = try trips(
      [
        "serve", "--port", "0", "--tls-cert", files[0].1.path, "--tls-key", files[1].0.path,
      ], store: scratch.store)
    #expect(mismatched.status != 0)
    #expect(
      mismatched.stderr.contains("TLS certificate or key was refused"), "\(mismatched.stderr)")
    #expect(!mismatched.stderr.contains("--port"), "\(mismatched.stderr)")
    let notPEM = try trips(
      ["serve", "--port", "0", "--tls-cert", "/etc/passwd", "--tls-key", files[0].0.path],
      store: scratch.store)
    #expect(notPEM.status == 65)
    #expect(notPEM.stderr.contains("/etc/passwd is not a PEM certificate"), "\(notPEM.stderr)")
    let keyNotPEM = try trips(
      ["serve", "--port", "0", "--tls-cert", files[0].1.path, "--tls-key", "/etc/hostname"],
      store: scratch.store)
    #expect(keyNotPEM.status == 65)
    #expect(keyNotPEM.stderr.contains("is not a PEM private key"), "\(keyNotPEM.stderr)")
  }

  @Test(
    "token files with CRLF line ends work for serve and sync watch; a missing one is exit 66 for both"
  )
  func tokenFiles() throws {
    let scratch = Scratch()
    let server =
      "a:" + String(repeating: "crlf-", count: 4) + "\r\nb:"
      + String(
        repeating: "bbbb-", count: 4) + "\r\n"
    let tokens = try scratch.write("tokens", server)
    let own = try scratch.write("own.token", "a:" + String(repeating: "crlf-", count: 4) + "\r\n")
    for file in [tokens, own] {
      try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
    }
    let laptop = scratch.file("laptop.sqlite")
    let added = try trips(
      [
        "add", "--name", "CRLF", "--destination", "D", "--start", "2027-01-01", "--end",
        "2027-01-02", "--latitude", "1", "--longitude", "1",
      ], store: laptop)
    #expect(added.status == 0)
    let shared = scratch.file("shared.sqlite")
    let process = try ServerProcess(store: shared, ["--token-file", tokens.path])
    defer { _ = process.stop() }
    let pushed = try trips([
      "sync", "watch", "--once", "--store", laptop.path, "--to", process.url, "--token-file",
      own.path,
    ])
    #expect(pushed.status == 0, "\(pushed.stderr)")
    #expect(pushed.stdout == "Pushed 1 change, skipped 0.\n")
    let missing = scratch.file("no-such.tokens").path
    let serve = try trips(["serve", "--port", "0", "--token-file", missing], store: shared)
    #expect(serve.status == 66, "\(serve.stderr)")
    #expect(
      serve.stderr.contains("no-such.tokens (--token-file) does not exist"), "\(serve.stderr)")
    let sync = try trips([
      "sync", "watch", "--once", "--store", laptop.path, "--to", process.url, "--token-file",
      missing,
    ])
    #expect(sync.status == 66, "\(sync.stderr)")
  }

  @Test(
    "a CRLF feed is read by sync apply and POST /changes; /changes?after twice is 'given more than once'"
  )
  func crlfFeeds() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let feed = try trips(["sync", "export"], store: scratch.store)
    #expect(feed.status == 0)
    let crlf = feed.stdout.replacingOccurrences(of: "\n", with: "\r\n")
    let file = try scratch.write("feed-crlf.jsonl", crlf)
    let other = scratch.file("other.sqlite")
    let applied = try trips(["sync", "apply", file.path], store: other)
    #expect(applied.status == 0, "\(applied.stderr)")
    #expect(applied.stdout.hasPrefix("Applied 240 changes"), "\(applied.stdout)")
    let tokens = try tokenFile(in: scratch, Self.writer)
    let target = scratch.file("target.sqlite")
    let server = try ServerProcess(store: target, ["--token-file", tokens.path])
    defer { _ = server.stop() }
    let posted = try server.request(
      "POST", "/changes",
      headers: [
        "Authorization: Bearer " + String(Self.writer.split(separator: ":")[1]),
        "Content-Type: application/x-ndjson",
      ], body: Data(crlf.utf8))
    #expect(posted.status == 200, "\(posted.text)")
    #expect(try posted.json()["applied"] as? Int == 240)
    let twice = try server.request("GET", "/changes?after=a&after=b")
    #expect(twice.status == 400)
    #expect(twice.text.contains("'after' is given more than once"), "\(twice.text)")
  }

  @Test(
    "POSTGRESQL:// in capitals opens the database; postgresql: without slashes is a usage error, not a file; check says '1 trip'"
  )
  func storeNamesAndWording() throws {
    let database = try PostgreSQLCluster.shared.get().makeDatabase("caps")
    let capitals = "POSTGRESQL" + database.dropFirst("postgresql".count)
    let added = try trips([
      "add", "--name", "Caps", "--destination", "D", "--start", "2027-01-01", "--end",
      "2027-01-02", "--latitude", "1", "--longitude", "1", "--store", capitals,
    ])
    #expect(added.status == 0, "\(added.stderr)")
    let checked = try trips(["check", "--store", database])
    #expect(checked.stdout == "ok: 1 trip\n", "\(checked.stdout) \(checked.stderr)")
    let scratch = Scratch()
    for value in ["postgresql:", "postgres:trips", "PostgreSQL:x"] {
      let run = try trips(["list", "--store", value], cwd: scratch.url)
      #expect(run.status == 64, "\(value): \(run.stderr)")
      #expect(run.stderr.contains("is not a URL"), "\(value): \(run.stderr)")
      #expect(!FileManager.default.fileExists(atPath: scratch.file(value).path))
    }
  }
}

@Suite("Hardening: a busy store is 503, not a server fault")
struct BusyStoreTests {
  @Test(
    "a write while another process holds the store's write lock past the busy timeout gets 503 with Retry-After, and goes through once the lock is let go"
  )
  func busyIs503() throws {
    let scratch = Scratch()
    _ = try trips(["import", sampleTrips.path], store: scratch.store)
    let writer = "w:" + String(repeating: "busy-", count: 4)
    let tokens = try tokenFile(in: scratch, writer)
    let server = try ServerProcess(store: scratch.store, ["--token-file", tokens.path])
    defer { _ = server.stop() }
    // Another program takes the write lock and keeps it for 8 s (the busy timeout is 5 s).
    let holder = Process()
    holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    holder.arguments = [
      "-c",
      "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(8); c.execute('ROLLBACK')",
      scratch.store.path,
    ]
    let out = Pipe()
    holder.standardOutput = out
    try holder.run()
    defer { holder.waitUntilExit() }
    let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
    try #require(line.hasPrefix("locked"), "\(line)")
    let headers = [
      "Authorization: Bearer " + String(writer.split(separator: ":")[1]),
      "Content-Type: application/geo+json",
    ]
    let busy = try server.request(
      "POST", "/collections/trips/items", headers: headers, body: featureBody())
    #expect(busy.status == 503, "\(busy.status) \(busy.text)")
    #expect(busy.headers["retry-after"] == "1")
    #expect(busy.text.contains("busy"), "\(busy.text)")
    // Reads go on meanwhile (WAL), and the write goes through after the lock is let go.
    #expect(try server.request("GET", "/collections/trips/items?limit=1").status == 200)
    holder.waitUntilExit()
    let done = try server.request(
      "POST", "/collections/trips/items", headers: headers, body: featureBody())
    #expect(done.status == 201, "\(done.text)")
  }
}
