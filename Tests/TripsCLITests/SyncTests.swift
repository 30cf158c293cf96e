import Foundation
import Testing

/// The last line of a feed names the token to resume from.
func resumeToken(_ feed: String) throws -> String {
  let last = try #require(feed.split(separator: "\n").last)
  let object = try #require(
    try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: String])
  return try #require(object["resumeToken"])
}

/// Every trip of a store, as exported JSON.
func everything(_ store: URL) throws -> String {
  try trips(["export", "--format", "json"], store: store).stdout
}

@Suite("trips sync", .serialized)
struct SyncTests {
  let scratch = Scratch()
  var a: URL { scratch.file("a.sqlite") }
  var b: URL { scratch.file("b.sqlite") }

  func add(_ name: String, _ store: URL) throws -> String {
    let run = try trips(
      [
        "add", "--name", name, "--destination", "Paris", "--start", "2027-05-01", "--end",
        "2027-05-03",
        "--latitude", "48.85", "--longitude", "2.35",
      ], store: store)
    #expect(run.status == 0)
    return run.stdout.trimmingCharacters(in: .newlines)
  }

  /// Exports `from` after `token` (leaving out what a sync applied) and applies it to `to`.
  func exchange(from: URL, to: URL, after token: String?) throws -> String {
    var arguments = ["sync", "export", "--exclude-author", "sync"]
    if let token { arguments += ["--after", token] }
    let feed = try trips(arguments, store: from)
    #expect(feed.status == 0, "\(feed.stderr)")
    let apply = try trips(
      ["sync", "apply", "-", "--author", "sync"], store: to, stdin: Data(feed.stdout.utf8))
    #expect(apply.status == 0, "\(apply.stderr)")
    return try resumeToken(feed.stdout)
  }

  @Test("two stores edited independently converge, last writer wins, nothing echoes")
  func converge() throws {
    #expect(try trips(["import", sampleTrips.path], store: a).status == 0)
    var tokenA = try exchange(from: a, to: b, after: nil)
    var tokenB = try resumeToken(try trips(["sync", "export"], store: b).stdout)
    #expect(try everything(a) == (try everything(b)))

    let ids = try jsonArray(try trips(["list", "--json"], store: a).stdout).map {
      $0["id"] as! String
    }
    let (x, y, z, w) = (ids[0], ids[1], ids[2], ids[3])
    let onlyA = try add("Only in A", a)
    #expect(try trips(["update", x, "--name", "A's name"], store: a).status == 0)
    #expect(try trips(["delete", y], store: a).status == 0)
    Thread.sleep(forTimeInterval: 0.01)
    let onlyB = try add("Only in B", b)
    #expect(try trips(["update", z, "--name", "B's name for z"], store: b).status == 0)
    #expect(try trips(["update", x, "--name", "B's later name"], store: b).status == 0)
    #expect(try trips(["delete", w], store: b).status == 0)

    tokenA = try exchange(from: a, to: b, after: tokenA)
    tokenB = try exchange(from: b, to: a, after: tokenB)
    #expect(try everything(a) == (try everything(b)))
    let names = Dictionary(
      uniqueKeysWithValues: try jsonArray(try trips(["list", "--json"], store: a).stdout).map {
        ($0["id"] as! String, $0["name"] as! String)
      })
    #expect(names[x] == "B's later name", "the later write wins")
    #expect(names[z] == "B's name for z")
    #expect(names[y] == nil && names[w] == nil)
    #expect(names[onlyA] == "Only in A" && names[onlyB] == "Only in B")
    #expect(names.count == 240)

    // Nothing to send back: what each side applied is by "sync", left out of its feed.
    for (store, token) in [(a, tokenA), (b, tokenB)] {
      let feed = try trips(
        ["sync", "export", "--after", token, "--exclude-author", "sync"], store: store)
      #expect(feed.stdout.split(separator: "\n").count == 1, "\(feed.stdout)")
    }
  }

  @Test("applying a feed twice changes nothing")
  func idempotent() throws {
    #expect(try trips(["import", sampleTrips.path], store: a).status == 0)
    let feed = scratch.file("feed.jsonl")
    #expect(try trips(["sync", "export", "--output", feed.path], store: a).status == 0)
    #expect(
      try trips(["sync", "apply", feed.path], store: b).stdout
        == "Applied 240 changes, skipped 0.\n")
    let history = try trips(["history", "--json"], store: b).stdout
    let second = try trips(["sync", "apply", feed.path], store: b)
    #expect(second.stdout == "Applied 0 changes, skipped 240.\n")
    #expect(try trips(["history", "--json"], store: b).stdout == history, "no new history")
  }

  @Test("a killed apply leaves the target as it was, or fully applied, never half")
  func killedApply() throws {
    let source = scratch.file("big.sqlite")
    let generator = tripsExecutable.deletingLastPathComponent().appendingPathComponent(
      "trips-generate")
    let generate = Process()
    generate.executableURL = generator
    generate.arguments = [
      "--count", "30000", "--store", source.path, "--cities",
      repositoryRoot.appendingPathComponent("Data/cities.csv").path,
    ]
    generate.standardError = FileHandle.nullDevice
    try generate.run()
    generate.waitUntilExit()
    let feed = scratch.file("big.jsonl")
    #expect(try trips(["sync", "export", "--output", feed.path], store: source).status == 0)
    var outcomes: Set<Int> = []
    for (index, delay) in [0.05, 0.2, 0.4, 0.8, 1.5].enumerated() {
      let target = scratch.file("target-\(index).sqlite")
      #expect(
        try trips(
          [
            "add", "--name", "kept", "--destination", "X", "--start", "2027-01-01", "--end",
            "2027-01-01", "--latitude", "0", "--longitude", "0",
          ], store: target
        ).status == 0)
      let process = Process()
      process.executableURL = tripsExecutable
      process.arguments = ["sync", "apply", feed.path, "--store", target.path]
      process.standardOutput = FileHandle.nullDevice
      try process.run()
      Thread.sleep(forTimeInterval: delay)
      kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
      let count = try jsonArray(try trips(["list", "--json"], store: target).stdout).count
      #expect(count == 1 || count == 30_001, "after \(delay) s: \(count) trips")
      outcomes.insert(count)
      let history = try jsonArray(try trips(["history", "--json"], store: target).stdout)
      #expect(history.count == (count == 1 ? 1 : 2), "history matches the data")
    }
    #expect(outcomes.contains(1), "at least one kill landed before the commit")
  }

  @Test("live sync resumes after a restart, missing nothing and repeating nothing")
  func liveSync() throws {
    #expect(try trips(["import", sampleTrips.path], store: a).status == 0)
    let first = try trips(["sync", "watch", "--once", "--to", b.path], store: a)
    #expect(first.stdout == "Pushed 240 changes, skipped 0.\n")
    let watcher = try Watcher(["sync", "watch", "--to", b.path, "--store", a.path])
    let added = try add("While watching", a)
    let arrived = eventually {
      (try? jsonArray(try trips(["list", "--json", "--search", "While watching"], store: b).stdout)
        .count) == 1
    }
    #expect(watcher.stop() == 0)
    #expect(arrived, "stdout: \(watcher.output), stderr: \(watcher.errorOutput)")
    let whileStopped = try add("While stopped", a)
    let resumed = try trips(["sync", "watch", "--once", "--to", b.path], store: a)
    #expect(resumed.stdout == "Pushed 1 change, skipped 0.\n", "only what happened while stopped")
    let again = try trips(["sync", "watch", "--once", "--to", b.path], store: a)
    #expect(again.stdout == "Pushed 0 changes, skipped 0.\n")
    let ids = Set(
      try jsonArray(try trips(["list", "--json"], store: b).stdout).map { $0["id"] as! String })
    #expect(ids.contains(added) && ids.contains(whileStopped) && ids.count == 242)
    #expect(try everything(a) == (try everything(b)))
  }

  @Test("live sync carries updates made right after their inserts, from writers running at once")
  func liveSyncOfQuickUpdates() throws {
    _ = try add("seed", a)
    let watcher = try Watcher(["sync", "watch", "--to", b.path, "--store", a.path])
    // Two writer processes at once, each adding trips and renaming each right away: before the
    // fix, the watcher's long-lived context handed out the values it had seen at the insert,
    // so every rename was dropped as "nothing to do".
    let script = """
      set -e
      for i in 1 2 3 4 5; do
        id=$("$TRIPS" add --store "$STORE" --author "$WHO" --name "$WHO $i" --destination Oslo \
          --start 2027-01-01 --end 2027-01-02 --latitude 59.9 --longitude 10.7)
        "$TRIPS" update "$id" --store "$STORE" --author "$WHO" --name "$WHO $i renamed" >/dev/null
      done
      """
    let writers = try startWriters(["alpha", "beta"], script: script, store: a)
    for writer in writers {
      writer.waitUntilExit()
      #expect(writer.terminationStatus == 0)
    }
    let converged = eventually(15) { (try? everything(a)) == (try? everything(b)) }
    #expect(watcher.stop() == 0)
    #expect(converged, "stdout: \(watcher.output), stderr: \(watcher.errorOutput)")
    let names = try jsonArray(try trips(["list", "--json"], store: b).stdout).compactMap {
      $0["name"] as? String
    }
    #expect(names.filter { $0.hasSuffix("renamed") }.count == 10, "\(names)")
  }

  @Test("reports an expired token with what to do")
  func expired() throws {
    _ = try add("one", a)
    _ = try add("two", a)
    let history = try jsonArray(try trips(["history", "--json"], store: a).stdout)
    let tokens = history.map { $0["token"] as! String }
    _ = try add("three", a)
    let prune = try trips(["history", "prune", "--before", try #require(tokens.last)], store: a)
    #expect(prune.stdout == "Deleted 1 history transaction.\n")
    let old = try #require(tokens.first)
    let export = try trips(
      ["sync", "export", "--after", "\(old.prefix(while: { $0 != ":" })):0"], store: a)
    #expect(export.status == 65)
    #expect(export.stderr.contains("expired"))
    #expect(export.stderr.contains("'trips export' here and 'trips import' there"))
    let listing = try trips(
      ["history", "--after", "\(old.prefix(while: { $0 != ":" })):0"], store: a)
    #expect(listing.status == 65, "an expired token is invalid data for every command")
    #expect(listing.stderr == export.stderr)
    // A refused token opens no output: no file behind a dangling link, no wait for a FIFO's
    // reader, the token's error rather than the output's.
    let folder = a.deletingLastPathComponent()
    let dangling = folder.appendingPathComponent("dangling.jsonl")
    try FileManager.default.createSymbolicLink(
      at: dangling, withDestinationURL: folder.appendingPathComponent("target.jsonl"))
    let fifo = folder.appendingPathComponent("feed.fifo")
    #expect(mkfifo(fifo.path, 0o600) == 0)
    for output in [dangling.path, fifo.path, folder.path] {
      let refused = try trips(
        ["sync", "export", "--after", "\(old.prefix(while: { $0 != ":" })):0", "--output", output],
        store: a)
      #expect(refused.status == 65 && refused.stderr == export.stderr, "\(output)")
    }
    #expect(
      !FileManager.default.fileExists(atPath: folder.appendingPathComponent("target.jsonl").path))
    let garbage = try trips(["sync", "export", "--after", "nonsense"], store: a)
    #expect(garbage.status == 64)
    let feedless = try trips(
      ["sync", "apply", "-"], store: b, stdin: Data("{\"kind\": 1}\nnot json\n".utf8))
    #expect(feedless.status == 65)
    #expect(
      feedless.stderr.contains("<stdin>:1: error:")
        && feedless.stderr.contains("<stdin>:2: error: not a JSON object"))
  }
}
