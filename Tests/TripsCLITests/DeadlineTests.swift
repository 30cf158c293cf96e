import Foundation
import Synchronization
import TestSupport
import Testing
import TripPlanner

#if canImport(Glibc)
  import Glibc
#endif

/// Requests with a deadline, slow work off the threads that answer connections, and work that
/// stops when its client goes: what keeps a few slow filters from stopping the service.
@Suite("Requests with a deadline: slow filters hold up no one", .serialized)
struct DeadlineTests {
  /// 60,000 generated trips in a store of the engine's kind: enough for a filter decided row
  /// by row in Swift to take a second or more.
  static func bigStore(_ engine: String, in scratch: Scratch) throws -> URL {
    let generator = tripsExecutable.deletingLastPathComponent().appendingPathComponent(
      "trips-generate")
    let csv = scratch.file("big.csv")
    let process = Process()
    process.executableURL = generator
    process.arguments = [
      "--count", "60000", "--output", csv.path, "--cities",
      repositoryRoot.appendingPathComponent("Data/cities.csv").path,
    ]
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    let store =
      engine == "sqlite"
      ? scratch.store : URL(string: try PostgreSQLCluster.shared.get().makeDatabase("deadline"))!
    let location = store.isFileURL ? store.path : store.absoluteString
    let imported = try trips(["import", "--store", location, csv.path])
    #expect(imported.status == 0, "\(imported.stderr)")
    return store
  }

  /// A filter of 8 clauses decided row by row (the budget's most), matching nothing; each
  /// `tag` makes a distinct query.
  static func slowFilter(_ tag: String = "q") -> String {
    (0..<4).map { "ACCENTI(name) LIKE '%\(tag)\($0)z%'" }.joined(separator: " OR ")
  }
  static let slowFilter = slowFilter()

  static func slowPath(_ endpoint: String = "/collections/trips/bounds") -> String {
    endpoint + "?filter=" + slowFilter.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
  }

  /// (status, seconds, Retry-After) of a GET through curl, giving up after `maxTime`.
  static func timed(_ url: String, maxTime: Double = 60, from address: String = "127.0.0.1")
    throws -> (Int, Double, String?)
  {
    let started = Date()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = [
      "-s", "-o", "/dev/null", "-D", "-", "-m", String(maxTime), "--interface", address, "-w",
      "\nstatus:%{http_code}",
      url,
    ]
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let seconds = Date().timeIntervalSince(started)
    let status = text.components(separatedBy: "status:").last.flatMap { Int($0) } ?? 0
    let retry = text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("retry-after:") }
      .map { String($0.dropFirst("retry-after:".count)).trimmingCharacters(in: .whitespaces) }
    return (status, seconds, retry)
  }

  @Test(
    "with four slow filters in flight, items?limit=1 and /conformance answer within 100 ms (median of five), on both engines; more slow requests than the pool holds are 503 with Retry-After at once",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func slowHoldsUpNoOne(engine: String) throws {
    let scratch = Scratch()
    let store = try Self.bigStore(engine, in: scratch)
    // Four threads for slow requests and no queue: the four slow filters fill the pool.
    let server = try ServerProcess(store: store, ["--workers", "4", "--worker-queue", "0"])
    defer { #expect(server.stop() == 0) }
    // The slow request alone, for scale: it must be slow for the check to mean anything.
    let (alone, aloneSeconds, _) = try Self.timed(server.url + Self.slowPath())
    #expect(alone == 200)
    let slow = Mutex<[(Int, Double, String?)]>([])
    let group = DispatchGroup()
    // From four addresses: one address may have 2 of this pool's slow requests at once.
    for index in 0..<4 {
      DispatchQueue.global().async(group: group) {
        let answer =
          (try? Self.timed(server.url + Self.slowPath(), from: "127.0.0.\(2 + index)"))
          ?? (0, 0, nil)
        slow.withLock { $0.append(answer) }
      }
    }
    Thread.sleep(forTimeInterval: 0.2)
    // Past the pool, a slow request is refused at once.
    let extra = Mutex<[(Int, Double, String?)]>([])
    let extras = DispatchGroup()
    for index in 0..<4 {
      DispatchQueue.global().async(group: extras) {
        let answer =
          (try? Self.timed(
            server.url + Self.slowPath(), maxTime: 0.5, from: "127.0.0.\(10 + index)"))
          ?? (0, 0, nil)
        extra.withLock { $0.append(answer) }
      }
    }
    extras.wait()
    let refused = extra.withLock { $0.filter { $0.0 == 503 } }
    #expect(!refused.isEmpty, "no slow request was refused past the pool: \(extra.withLock { $0 })")
    #expect(refused.allSatisfy { $0.2 == "1" && $0.1 < 0.5 }, "\(refused)")
    var probes: [Double] = []
    for path in ["/collections/trips/items?limit=1", "/conformance"] {
      for _ in 0..<5 {
        let (status, seconds, _) = try Self.timed(server.url + path)
        #expect(status == 200)
        probes.append(seconds)
      }
      let sorted = probes.suffix(5).sorted()
      #expect(sorted[2] < 0.1, "\(path): \(sorted) beside slow filters of \(aloneSeconds) s")
    }
    let stillSlow = slow.withLock { $0.count } < 4
    group.wait()
    #expect(aloneSeconds > 0.3, "the slow filter took \(aloneSeconds) s alone")
    #expect(slow.withLock { $0.allSatisfy { $0.0 == 200 } }, "\(slow.withLock { $0 })")
    #expect(stillSlow, "the slow filters ended before the probes: \(aloneSeconds) s alone")
    // One address past its share (2 of this pool's 4) is refused with 429 while others
    // are served.
    let mine = Mutex<[Int]>([])
    let share = DispatchGroup()
    for _ in 0..<3 {
      DispatchQueue.global().async(group: share) {
        let answer =
          (try? Self.timed(server.url + Self.slowPath(), from: "127.0.0.20")) ?? (0, 0, nil)
        mine.withLock { $0.append(answer.0) }
      }
    }
    share.wait()
    #expect(mine.withLock { $0.sorted() } == [200, 200, 429], "\(mine.withLock { $0 })")
    #expect(try server.request("/conformance").status == 200)
  }

  @Test(
    "a new stream query whose first read is slow holds up neither another stream's start nor the live events of the streams followed, and misses no change made during that read, on both engines",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func slowStreamStart(engine: String) throws {
    typealias Listener = BoundedStreamsTests.Listener
    let scratch = Scratch()
    let store = try Self.bigStore(engine, in: scratch)
    let location = store.isFileURL ? store.path : store.absoluteString
    let server = try ServerProcess(store: store)
    defer { #expect(server.stop() == 0) }
    let items = server.url + "/collections/trips/items/stream"
    func slow(_ tag: String) -> String {
      items + "?filter="
        + Self.slowFilter(tag).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }
    func started(_ listener: Listener) -> Bool { listener.status != nil }
    // The slow query's start alone, for scale.
    var clock = Date()
    let alone = try Listener(slow("a"), in: scratch, seconds: 60, from: "127.0.0.2")
    #expect(eventually(60) { started(alone) })
    let aloneSeconds = Date().timeIntervalSince(clock)
    alone.stop()
    let live = try Listener(items, in: scratch, seconds: 60)
    #expect(eventually(10) { live.status == 200 })
    let before = try #require(
      try jsonArray(try trips(["history", "--json", "--store", location]).stdout).last?["token"]
        as? String)
    // A query matching a trip added while its first read runs: it must get that insert,
    // resuming from the token before it, exactly once.
    let slowStream = try Listener(
      slow("b"), in: scratch, seconds: 60, from: "127.0.0.3", lastEventID: before)
    Thread.sleep(forTimeInterval: 0.3)
    clock = Date()
    let other = try Listener(items + "?bbox=0,0,1,1", in: scratch, seconds: 60)
    #expect(eventually(10) { started(other) })
    let otherSeconds = Date().timeIntervalSince(clock)
    let added = try trips([
      "add", "--name", "Caught b0z", "--destination", "Suva", "--start", "2027-05-01", "--end",
      "2027-05-09", "--latitude", "-18.1", "--longitude", "178.4", "--store", location,
    ])
    #expect(added.status == 0, "\(added.stderr)")
    clock = Date()
    #expect(eventually(10) { live.text.contains("event: insert") })
    let liveSeconds = Date().timeIntervalSince(clock)
    let slowWasStarting = !started(slowStream)
    #expect(eventually(60) { slowStream.status == 200 })
    #expect(aloneSeconds > 1, "the slow query's start took \(aloneSeconds) s alone")
    #expect(slowWasStarting, "the slow start ended before the probes: \(aloneSeconds) s alone")
    #expect(otherSeconds < 1, "another query started in \(otherSeconds) s beside a slow start")
    #expect(liveSeconds < 1, "a followed stream got its event \(liveSeconds) s after the commit")
    #expect(eventually(10) { slowStream.text.contains("event: insert") })
    Thread.sleep(forTimeInterval: 0.5)
    let inserts = serverSentEvents(slowStream.text).filter { $0.kind == "insert" }
    #expect(inserts.count == 1, "\(slowStream.text.prefix(600))")
    #expect(
      (inserts.first?.data["properties"] as? [String: Any])?["name"] as? String == "Caught b0z")
  }

  @Test(
    "replays from an old Last-Event-ID run on the workers: beside four of them (every trip since the store began, from four addresses), /conformance and items?limit=1 answer within 100 ms, and every replay is answered whole or refused, never cut off empty, on both engines",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func replaysHoldUpNoOne(engine: String) throws {
    let scratch = Scratch()
    let store = try Self.bigStore(engine, in: scratch)
    let location = store.isFileURL ? store.path : store.absoluteString
    let first = try #require(
      try jsonArray(try trips(["history", "--json", "--store", location]).stdout).first?["token"]
        as? String)
    let storeID = try #require(first.split(separator: ":").first)
    let server = try ServerProcess(store: store, ["--workers", "4"])
    defer { #expect(server.stop() == 0) }
    let answers = Mutex<[(status: Int, bytes: Int)]>([])
    let group = DispatchGroup()
    for index in 0..<4 {
      DispatchQueue.global().async(group: group) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = [
          "-s", "-N", "-o", "/dev/null", "-m", "25", "--interface", "127.0.0.\(2 + index)",
          "-H", "Last-Event-ID: \(storeID):0", "-w", "%{http_code} %{size_download}",
          server.url + "/collections/trips/items/stream",
        ]
        let out = Pipe()
        process.standardOutput = out
        try? process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let parts = text.split(separator: " ").compactMap { Int($0) }
        answers.withLock { $0.append((parts.first ?? 0, parts.last ?? 0)) }
      }
    }
    Thread.sleep(forTimeInterval: 0.3)
    for path in ["/conformance", "/collections/trips/items?limit=1"] {
      var probes: [Double] = []
      for _ in 0..<5 {
        let (status, seconds, _) = try Self.timed(server.url + path)
        #expect(status == 200)
        probes.append(seconds)
      }
      #expect(probes.sorted()[2] < 0.1, "\(path): \(probes.sorted()) beside four replays")
    }
    group.wait()
    let all = answers.withLock { $0 }
    // A replay answered is every trip (about 400 bytes each), or a refusal at once.
    #expect(
      all.allSatisfy {
        ($0.status == 200 && $0.bytes > 60_000 * 100) || [429, 503].contains($0.status)
      },
      "\(all)")
    #expect(all.contains { $0.status == 200 }, "\(all)")
  }

  @Test(
    "a request past --request-timeout is stopped and answered 503 naming the limit, and one whose client hung up stops within a second, on both engines",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func deadlines(engine: String) throws {
    let scratch = Scratch()
    let store = try Self.bigStore(engine, in: scratch)
    do {
      let server = try ServerProcess(store: store, ["--request-timeout", "1"])
      defer { #expect(server.stop() == 0) }
      for endpoint in [
        "/collections/trips/bounds", "/collections/trips/items", "/collections/trips/sections",
      ] {
        let reply = try server.request(Self.slowPath(endpoint))
        if reply.status == 200 { continue }  // a machine fast enough to answer within 1 s
        #expect(reply.status == 503, "\(endpoint): \(reply.text)")
        #expect(reply.text.contains("limit of 1 seconds"), "\(reply.text)")
        #expect(reply.headers["retry-after"] != nil)
      }
      let (status, seconds, _) = try Self.timed(server.url + Self.slowPath())
      #expect(status == 503 || seconds < 1.5)
      #expect(seconds < 3, "stopped after \(seconds) s with a limit of 1 s")
      #expect(try server.request("/conformance").status == 200)
    }
    // No limit to speak of: the client hangs up after 0.3 s, and the work stops soon after.
    let server = try ServerProcess(store: store, ["--request-timeout", "600"])
    defer { #expect(server.stop() == 0) }
    let (_, full, _) = try Self.timed(server.url + Self.slowPath())
    _ = try Self.timed(server.url + Self.slowPath(), maxTime: 0.3)
    Thread.sleep(forTimeInterval: 1.5)
    #expect(try server.request("/conformance").status == 200)
    #expect(server.stop() == 0)
    // The log's last bounds request: the abandoned one, which ran far less than the full one.
    let lines = server.log.split(separator: "\n").filter {
      $0.hasPrefix("GET /collections/trips/bounds")
    }
    let milliseconds = lines.last.flatMap { line in
      line.split(separator: " ").first { $0.hasSuffix("ms") }.flatMap { Double($0.dropLast(2)) }
    }
    let stoppedAfter = try #require(milliseconds, "\(lines)") / 1_000
    #expect(
      stoppedAfter < 0.3 + 0.5 || full < 0.8,
      "the abandoned request ran \(stoppedAfter) s; the whole one takes \(full) s")
  }
}

/// A replay from an old `Last-Event-ID` is bounded: past ``ItemsStreams`` replay budget it is
/// one `reset` with the matching trips, not a `delete` for every trip changed since.
@Suite("Stream replays are bounded in bytes")
struct ReplayBudgetTests {
  @Test(
    "an old token on a box holding no trip gets one small reset, not 3,000 deletes; a recent token still gets exactly the missed events",
    .timeLimit(.minutes(6)), arguments: ["sqlite", "postgresql"])
  func replayIsBounded(engine: String) throws {
    let scratch = Scratch()
    let generator = tripsExecutable.deletingLastPathComponent().appendingPathComponent(
      "trips-generate")
    let csv = scratch.file("many.csv")
    let process = Process()
    process.executableURL = generator
    process.arguments = [
      "--count", "3000", "--output", csv.path, "--cities",
      repositoryRoot.appendingPathComponent("Data/cities.csv").path,
    ]
    try process.run()
    process.waitUntilExit()
    let store =
      engine == "sqlite"
      ? scratch.store : URL(string: try PostgreSQLCluster.shared.get().makeDatabase("replay"))!
    let location = store.isFileURL ? store.path : store.absoluteString
    #expect(try trips(["import", "--store", location, csv.path]).status == 0)
    let tokens = try jsonArray(try trips(["history", "--json", "--store", location]).stdout)
      .compactMap { $0["token"] as? String }
    let storeID = try #require(tokens.first?.split(separator: ":").first)
    let server = try ServerProcess(store: store)
    defer { #expect(server.stop() == 0) }
    func replay(_ query: String, from token: String) throws -> String {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      process.arguments = [
        "-s", "-N", "-m", "6", "-H", "Last-Event-ID: \(token)",
        server.url + "/collections/trips/items/stream" + query,
      ]
      let out = Pipe()
      process.standardOutput = out
      try process.run()
      let data = out.fileHandleForReading.readDataToEndOfFile()
      process.waitUntilExit()
      return String(decoding: data, as: UTF8.self)
    }
    let empty = try replay("?bbox=0,0,0.001,0.001", from: "\(storeID):0")
    let kinds = serverSentEvents(empty).map(\.kind)
    #expect(kinds == ["reset"], "\(kinds.prefix(5)) … \(kinds.count) events")
    #expect(empty.utf8.count < 4_096, "\(empty.utf8.count) bytes")
    // A recent token: the one change since, exactly.
    let added = try trips([
      "add", "--name", "Late", "--destination", "Suva", "--start", "2027-05-01", "--end",
      "2027-05-09", "--latitude", "0.0005", "--longitude", "0.0005", "--store", location,
    ])
    #expect(added.status == 0)
    let recent = try replay("?bbox=0,0,0.001,0.001", from: try #require(tokens.last))
    #expect(serverSentEvents(recent).map(\.kind) == ["insert"], "\(recent.prefix(300))")
  }
}

/// A sync's HTTP calls are made outside its store's lock: a push waiting on a slow server does
/// not hold a pull (nor the store) for as long.
@Suite("Sync: no HTTP call under the store's lock")
struct SyncLockTests {
  @Test(
    "a pull answers within 3 s while a push waits 15 s on a server that is slow to take it",
    .timeLimit(.minutes(6)))
  func pullBesideSlowPush() throws {
    let scratch = Scratch()
    // A server whose GET /changes is an empty feed at once and whose POST takes 15 s.
    let script = """
      import http.server, socketserver, sys, time
      class H(http.server.BaseHTTPRequestHandler):
          def log_message(self, *a): pass
          def reply(self, body):
              self.send_response(200)
              self.send_header("Content-Type", "application/json")
              self.send_header("Content-Length", str(len(body)))
              self.end_headers()
              self.wfile.write(body)
          def do_GET(self):
              self.reply(b'{"resumeToken":"00000000-0000-0000-0000-000000000001:0"}\\n')
          def do_POST(self):
              self.rfile.read(int(self.headers.get("Content-Length", "0")))
              time.sleep(15)
              self.reply(b'{"applied":0,"skipped":0}')
      class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
          daemon_threads = True
      s = S(("127.0.0.1", 0), H)
      print(s.server_address[1], flush=True)
      s.serve_forever()
      """
    let (server, port) = try startFakeServer(script)
    defer {
      kill(server.processIdentifier, SIGKILL)
      server.waitUntilExit()
    }
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let sync = try ServerSync(
      local: scratch.store, server: URL(string: "http://127.0.0.1:\(port)")!,
      directions: [.push, .pull], writer: (name: "w", token: "t"),
      state: scratch.file("state.json"))
    let pushing = DispatchGroup()
    DispatchQueue.global().async(group: pushing) { _ = try? sync.pushOnce() }
    Thread.sleep(forTimeInterval: 1)
    let started = Date()
    _ = try sync.pullOnce()
    let seconds = Date().timeIntervalSince(started)
    #expect(seconds < 3, "the pull waited \(seconds) s for the push")
    kill(server.processIdentifier, SIGKILL)
    pushing.wait()
  }
}

/// A push whose answer does not say what the server applied is an error, and the pushed token
/// stays where it was (the push is tried again), never a success of nothing.
@Suite("Sync: a push's answer must say what was applied")
struct PushAnswerTests {
  @Test(
    "a 200 without applied and skipped fails the push and records nothing", .timeLimit(.minutes(6)))
  func answerWithoutCounts() throws {
    let scratch = Scratch()
    let script = """
      import http.server, socketserver
      class H(http.server.BaseHTTPRequestHandler):
          def log_message(self, *a): pass
          def do_POST(self):
              self.rfile.read(int(self.headers.get("Content-Length", "0")))
              body = b'{"ok":true}'
              self.send_response(200)
              self.send_header("Content-Type", "application/json")
              self.send_header("Content-Length", str(len(body)))
              self.end_headers()
              self.wfile.write(body)
      s = socketserver.TCPServer(("127.0.0.1", 0), H)
      print(s.server_address[1], flush=True)
      s.serve_forever()
      """
    let (server, port) = try startFakeServer(script)
    defer {
      kill(server.processIdentifier, SIGKILL)
      server.waitUntilExit()
    }
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let state = scratch.file("state.json")
    let sync = try ServerSync(
      local: scratch.store, server: URL(string: "http://127.0.0.1:\(port)")!,
      directions: [.push], writer: (name: "w", token: "t"), state: state)
    let error = try #require(throws: ServerSyncError.self) { _ = try sync.pushOnce() }
    #expect(error.message.contains("does not say what it applied"), "\(error.message)")
    // No pushed token was recorded (its key is "push <store>"): the push is tried again.
    let saved = (try? String(contentsOf: state, encoding: .utf8)) ?? ""
    #expect(!saved.contains("push "), "\(saved)")
  }
}

/// Starts `script` (Python, printing its port on its first line) as a fake HTTP server: the
/// process, which the caller kills with SIGKILL (the test runner's children may ignore
/// SIGTERM), and its port.
func startFakeServer(_ script: String) throws -> (Process, String) {
  let server = Process()
  server.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
  server.arguments = ["-c", script]
  let out = Pipe()
  server.standardOutput = out
  try server.run()
  let port = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
    .trimmingCharacters(in: .whitespacesAndNewlines)
  #expect(Int(port) != nil, "the fake server printed \(port)")
  return (server, port)
}
