import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Sync under hostile and careless use, by class: a push too big for one request, a push
/// that fails before its server is up, and stores that must converge whatever the order.
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
    let run = try trips(["check", "--store", store.path])
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

  // MARK: Convergence

  /// Each trip of a store: id → name.
  func names(_ store: URL) throws -> [String: String] {
    let run = try trips([
      "export", "--format", "json", "--store", store.isFileURL ? store.path : store.absoluteString,
    ])
    #expect(run.status == 0, "\(run.stderr)")
    var names: [String: String] = [:]
    for trip in try jsonArray(run.stdout) {
      names[trip["id"] as? String ?? ""] = trip["name"] as? String ?? ""
    }
    return names
  }

  /// Each trip's plan (its bucket list and stay) as canonical JSON text, by trip id.
  func plans(_ store: URL) throws -> [String: String] {
    let run = try trips([
      "export", "--format", "json", "--store", store.isFileURL ? store.path : store.absoluteString,
    ])
    #expect(run.status == 0, "\(run.stderr)")
    var plans: [String: String] = [:]
    for trip in try jsonArray(run.stdout) {
      let plan: [String: Any] = [
        "bucketList": trip["bucketList"] ?? NSNull(),
        "livingAccommodation": trip["livingAccommodation"] ?? NSNull(),
      ]
      let data = try JSONSerialization.data(withJSONObject: plan, options: [.sortedKeys])
      plans[trip["id"] as? String ?? ""] = String(decoding: data, as: UTF8.self)
    }
    return plans
  }

  func push(_ from: URL, _ to: URL) throws {
    let run = try trips([
      "sync", "watch", "--once", "--store", from.path, "--to", to.path, "--author",
      "from-" + from.deletingPathExtension().lastPathComponent,
    ])
    #expect(run.status == 0, "\(run.stderr)")
  }

  @Test(
    "a later delete beats an older edit, store to store, in both orders of sync: the stores end equal"
  )
  func laterDeleteWins() throws {
    let scratch = Scratch()
    let (a, b) = (scratch.file("a.sqlite"), scratch.file("b.sqlite"))
    let added = try trips(
      [
        "add", "--name", "Orig", "--destination", "D", "--start", "2027-01-01", "--end",
        "2027-01-05", "--latitude", "1", "--longitude", "1",
      ], store: a)
    let id = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    try push(a, b)
    #expect(try trips(["update", id, "--name", "Edited on A"], store: a).status == 0)
    usleep(20_000)
    #expect(try trips(["delete", id], store: b).status == 0)
    try push(a, b)  // the older edit arrives at B after B's delete: it stays deleted
    try push(b, a)  // the newer delete reaches A
    try push(a, b)
    try push(b, a)
    #expect(try names(a).isEmpty)
    #expect(try names(b).isEmpty)
  }

  @Test(
    "random edits, deletes and adds of trips and of their bucket lists and stays on three stores, synced at random through a server (on SQLite, on PostgreSQL) and store to store: every store ends with the last change of each trip, and with the same plans",
    arguments: ["sqlite", "postgresql"])
  func randomInterleavingConverges(serverEngine: String) throws {
    let scratch = Scratch()
    let writers = [
      "a:" + String(repeating: "aa-", count: 6), "b:" + String(repeating: "bb-", count: 6),
    ]
    let serverTokens = try tokenFile(in: scratch, writers.joined(separator: "\n"))
    var tokenFiles: [URL] = []
    for (index, line) in writers.enumerated() {
      let file = try scratch.write("writer\(index).token", line + "\n")
      try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
      tokenFiles.append(file)
    }
    let stores = ["a", "b", "c"].map { scratch.file("\($0).sqlite") }
    let shared =
      serverEngine == "sqlite"
      ? scratch.file("shared.sqlite")
      : URL(string: try PostgreSQLCluster.shared.get().makeDatabase("converge"))!
    let server = try ServerProcess(store: shared, ["--token-file", serverTokens.path])
    defer { _ = server.stop() }
    // A and B sync through the server (both ways), C with A store to store (both ways).
    func syncWithServer(_ index: Int) throws {
      let run = try trips([
        "sync", "watch", "--once", "--store", stores[index].path, "--to", server.url, "--from",
        server.url, "--token-file", tokenFiles[index].path, "--author", "from-server",
      ])
      #expect(run.status == 0, "\(run.stderr)")
    }
    let syncs: [() throws -> Void] = [
      { try syncWithServer(0) }, { try syncWithServer(1) },
      { try self.push(stores[0], stores[2]) }, { try self.push(stores[2], stores[0]) },
    ]
    var random = SeededGenerator(seed: 7)
    // The oracle: the last change of each trip, in the order the test made them (each later
    // than the one before): its name, or nil when it was deleted.
    var expected: [String: String?] = [:]
    var counter = 0
    func add(on store: Int) throws {
      counter += 1
      let name = "add \(counter)"
      let run = try trips(
        [
          "add", "--name", name, "--destination", "D", "--start", "2027-01-01", "--end",
          "2027-01-05", "--latitude", "1", "--longitude", "1",
        ], store: stores[store])
      #expect(run.status == 0, "\(run.stderr)")
      expected[run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)] = .some(name)
    }
    // A change to a trip's plan: an item added, changed or removed, or the stay set or cleared.
    func changePlan(of id: String, on store: Int) throws {
      let items = try trips(["bucket", "list", id], store: stores[store]).stdout
        .split(separator: "\n").filter { $0.first?.isNumber == true }.count
      var arguments: [String]
      switch Int.random(in: 0..<5, using: &random) {
      case 0 where items > 0:
        arguments = ["bucket", "remove", id, String(Int.random(in: 1...items, using: &random))]
      case 1 where items > 0:
        arguments = [
          "bucket", "update", id, String(Int.random(in: 1...items, using: &random)), "--details",
          "changed \(counter) on \(store)",
        ]
      case 2 where items > 1:
        arguments = ["bucket", "move", id, "1", "--to", String(items)]
      case 3:
        arguments = [
          "stay", "set", id, "--name", "stay \(counter) on \(store)", "--latitude", "1",
          "--longitude", "2",
        ]
      case 4
      where !(try trips(["show", id], store: stores[store]).stdout.contains("stay:         none")):
        arguments = ["stay", "clear", id]
      default:
        arguments = ["bucket", "add", id, "--title", "item \(counter) on \(store)"]
      }
      let run = try trips(arguments, store: stores[store])
      #expect(run.status == 0, "\(arguments) \(run.stderr)")
    }
    // Trips every store has, so that the stores' changes meet; some with a plan.
    for _ in 0..<8 { try add(on: 0) }
    for id in try names(stores[0]).keys.sorted().prefix(4) {
      counter += 1
      try changePlan(of: id, on: 0)
    }
    for _ in 0..<2 {
      for sync in syncs { try sync() }
    }
    // Rounds of changes made apart, then some of the syncs in a random order.
    for _ in 0..<12 {
      for _ in 0..<Int.random(in: 2...5, using: &random) {
        let store = Int.random(in: 0..<3, using: &random)
        let present = try names(stores[store]).keys.sorted()
        counter += 1
        switch Int.random(in: 0..<13, using: &random) {
        case 0..<2:
          try add(on: store)
        case 2..<7 where !present.isEmpty:
          let id = present.randomElement(using: &random)!
          let name = "edit \(counter) on \(store)"
          #expect(try trips(["update", id, "--name", name], store: stores[store]).status == 0)
          expected[id] = .some(name)
        case 7..<9 where !present.isEmpty:
          let id = present.randomElement(using: &random)!
          #expect(try trips(["delete", id], store: stores[store]).status == 0)
          expected[id] = .some(nil)
        case 9..<13 where !present.isEmpty:
          try changePlan(of: present.randomElement(using: &random)!, on: store)
        default:
          try add(on: store)
        }
        usleep(5_000)
      }
      for sync in syncs.shuffled(using: &random).prefix(Int.random(in: 1...4, using: &random)) {
        try sync()
      }
    }
    // Everything reaches everyone: rounds until nothing moves.
    for _ in 0..<3 {
      for sync in syncs { try sync() }
    }
    let oracle = expected.compactMapValues { $0 }
    #expect(try names(stores[0]) == oracle)
    #expect(try names(stores[1]) == oracle)
    #expect(try names(stores[2]) == oracle)
    #expect(try names(shared) == oracle)
    let plans = try plans(stores[0])
    #expect(plans.values.contains { $0.contains("item") || $0.contains("stay ") })
    #expect(try self.plans(stores[1]) == plans)
    #expect(try self.plans(stores[2]) == plans)
    #expect(try self.plans(shared) == plans)
  }
}
