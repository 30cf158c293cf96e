import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The classes of defects a hostile user found in sync: a push too big for one request, a
/// push that failed once and was never tried again, and stores that stopped converging.
@Suite("Hardening: sync moves any amount, retries, and converges", .serialized)
struct SyncHardeningTests {
  static let writer = "w:" + String(repeating: "sync-", count: 4)

  /// A token file for the server and the writer's own, both mode 600.
  static func tokens(in scratch: Scratch) throws -> (server: URL, writer: URL) {
    let server = try tokenFile(in: scratch, writer)
    let own = try scratch.write("writer.token", writer + "\n")
    try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: own.path)
    return (server, own)
  }

  /// `count` trips as CSV, each its own id.
  static func csv(_ count: Int) -> String {
    var text = "name,destination,start_date,end_date,latitude,longitude\n"
    text.reserveCapacity(count * 64)
    for index in 0..<count {
      let latitude = Double(index % 160) - 80 + 0.25
      let longitude = Double(index % 358) - 179 + 0.5
      text += "Trip \(index),Place \(index % 500),2027-01-01,2027-01-0\(1 + index % 8),"
      text += "\(latitude),\(longitude)\n"
    }
    return text
  }

  func count(_ store: URL) throws -> Int {
    let run = try trips(["check"], store: store)
    #expect(run.status == 0, "\(run.stderr)")
    let words = run.stdout.split(separator: " ")
    return words.count > 1 ? Int(words[1]) ?? -1 : -1
  }

  @Test(
    "100,000 trips pushed to a server in batches under its body limit; a push killed midway resumes from its last batch, each trip inserted once"
  )
  func pushAnyAmount() throws {
    let scratch = Scratch()
    let (serverTokens, writerToken) = try Self.tokens(in: scratch)
    let big = scratch.file("big.sqlite")
    let file = try scratch.write("big.csv", Self.csv(100_000))
    let imported = try trips(["import", file.path], store: big)
    #expect(imported.status == 0, "\(imported.stderr)")
    let target = scratch.file("target.sqlite")
    let server = try ServerProcess(store: target, ["--token-file", serverTokens.path])
    defer { _ = server.stop() }
    let arguments = [
      "--once", "--store", big.path, "--to", server.url, "--token-file", writerToken.path,
    ]
    // A first push, killed once a few batches are in.
    let first = try WatcherProcess(arguments, in: scratch, name: "first")
    let started = Date()
    while try count(target) < 15_000, first.process.isRunning,
      Date().timeIntervalSince(started) < 120
    {
      usleep(50_000)
    }
    first.killHard()
    let partial = try count(target)
    #expect(partial >= 15_000, "the first push got batches in before it was killed")
    // The second resumes: it sends what the first had not finished, not everything again.
    let second = try trips(["sync", "watch"] + arguments)
    #expect(second.status == 0, "\(second.stderr)")
    let pushed = second.stdout.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? -1
    #expect(pushed > 0 && pushed <= 100_000 - partial + 20_000, "\(second.stdout)")
    #expect(!second.stderr.contains("413"), "\(second.stderr)")
    #expect(try count(target) == 100_000)
    // Each trip was inserted once on the server, in a transaction per batch.
    let history = try jsonArray(try trips(["history", "--json"], store: target).stdout)
    var inserts = 0
    for transaction in history {
      inserts +=
        (transaction["changes"] as? [[String: Any]] ?? []).filter {
          $0["kind"] as? String == "insert"
        }.count
    }
    #expect(inserts == 100_000)
    #expect(history.count >= 10, "pushed in batches: \(history.count) transactions")
  }

  @Test(
    "a watcher started before its server is reachable pushes the change it had once the server comes up, and a later one"
  )
  func failedPushRetried() throws {
    let scratch = Scratch()
    let (serverTokens, writerToken) = try Self.tokens(in: scratch)
    let laptop = scratch.file("laptop.sqlite")
    let made = try trips(
      [
        "add", "--name", "Made before the watcher", "--destination", "A", "--start",
        "2027-01-01", "--end", "2027-01-02", "--latitude", "1", "--longitude", "1",
      ], store: laptop)
    #expect(made.status == 0, "\(made.stderr)")
    let port = try freePort()
    let address = "http://127.0.0.1:\(port)"
    let watcher = try WatcherProcess(
      ["--store", laptop.path, "--to", address, "--token-file", writerToken.path],
      in: scratch, name: "late")
    defer { watcher.killHard() }
    // The push fails: nothing listens yet.
    #expect(eventually(10) { watcher.errors.contains("Cannot reach") }, "\(watcher.errors)")
    sleep(2)
    #expect(watcher.process.isRunning, "an unreachable server is waited for: \(watcher.errors)")
    let shared = scratch.file("shared.sqlite")
    let server = try ServerProcess(
      store: shared, ["--token-file", serverTokens.path, "--port", String(port)])
    defer { _ = server.stop() }
    #expect(try eventually(15) { try count(shared) == 1 }, "\(watcher.errors)")
    #expect(watcher.output.contains("Pushed 1 change"), "\(watcher.output)")
    let later = try trips(
      [
        "add", "--name", "Made after", "--destination", "B", "--start", "2027-01-01", "--end",
        "2027-01-02", "--latitude", "2", "--longitude", "2",
      ], store: laptop)
    #expect(later.status == 0)
    #expect(try eventually(15) { try count(shared) == 2 }, "\(watcher.errors)")
  }
}
