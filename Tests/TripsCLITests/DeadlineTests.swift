import Foundation
import Synchronization
import TestSupport
import Testing

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

  /// A filter of 8 clauses decided row by row (the budget's most), matching nothing.
  static let slowFilter = (0..<4).map { "ACCENTI(name) LIKE '%q\($0)z%'" }.joined(separator: " OR ")

  static func slowPath(_ endpoint: String = "/collections/trips/bounds") -> String {
    endpoint + "?filter=" + slowFilter.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
  }

  /// (status, seconds, Retry-After) of a GET through curl, giving up after `maxTime`.
  static func timed(_ url: String, maxTime: Double = 60) throws -> (Int, Double, String?) {
    let started = Date()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = [
      "-s", "-o", "/dev/null", "-D", "-", "-m", String(maxTime), "-w", "\nstatus:%{http_code}",
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
    .timeLimit(.minutes(4)), arguments: ["sqlite", "postgresql"])
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
    for _ in 0..<4 {
      DispatchQueue.global().async(group: group) {
        let answer = (try? Self.timed(server.url + Self.slowPath())) ?? (0, 0, nil)
        slow.withLock { $0.append(answer) }
      }
    }
    Thread.sleep(forTimeInterval: 0.2)
    // Past the pool, a slow request is refused at once.
    let extra = Mutex<[(Int, Double, String?)]>([])
    let extras = DispatchGroup()
    for _ in 0..<4 {
      DispatchQueue.global().async(group: extras) {
        let answer = (try? Self.timed(server.url + Self.slowPath(), maxTime: 0.5)) ?? (0, 0, nil)
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
    #expect(try server.request("/conformance").status == 200)
  }

  @Test(
    "a request past --request-timeout is stopped and answered 503 naming the limit, and one whose client hung up stops within a second, on both engines",
    .timeLimit(.minutes(4)), arguments: ["sqlite", "postgresql"])
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
