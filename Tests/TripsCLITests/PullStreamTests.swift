import Foundation
import Testing
import TripPlanner

#if canImport(Glibc)
  import Glibc
#endif

/// A pull applies the server's feed as it streams in, in batches of whole transactions, and a
/// push sends the local feed as it is read: neither holds a whole feed.
@Suite("Sync with a server: feeds applied and sent as they stream")
struct PullStreamTests {
  /// A trip named `Trip <index>`.
  func record(_ index: Int) -> TripRecord {
    TripRecord(
      name: "Trip \(index)", destination: "D", startDate: TripDates.parse("2027-01-01")!,
      endDate: TripDates.parse("2027-01-02")!, latitude: 45, longitude: Double(index))
  }

  /// Adds `count` trips to `store`, one transaction each (through the library: a process per
  /// trip made these tests slow beside the rest of the suite).
  func addTrips(_ count: Int, to store: URL) throws {
    let trips = try TripStore(url: store, author: "test")
    for index in 0..<count { _ = try trips.add(record(index)) }
  }

  /// The server's whole feed (`GET /changes`), one string per line.
  func feedLines(_ server: ServerProcess) throws -> [String] {
    let feed = try server.request("/changes").body
    return String(decoding: feed, as: UTF8.self).split(separator: "\n").map(String.init)
  }

  /// A server on a store of `count` trips added one transaction each.
  func server(of count: Int, in scratch: Scratch) throws -> (store: URL, ServerProcess) {
    let store = scratch.file("server.sqlite")
    try addTrips(count, to: store)
    return (store, try ServerProcess(store: store))
  }

  func names(_ store: URL) throws -> [String] {
    try TripStore(url: store, author: "test").trips().map(\.name).sorted()
  }

  @Test(
    "a pull in batches of one change applies every transaction and records the feed's token; a push in batches of one line sends them all",
    .timeLimit(.minutes(10)))
  func batchesOfOne() throws {
    let scratch = Scratch()
    let (serverStore, server) = try self.server(of: 5, in: scratch)
    defer { _ = server.stop() }
    let local = scratch.file("local.sqlite")
    let state = scratch.file("state.json")
    let sync = try ServerSync(
      local: local, server: URL(string: server.url)!, directions: [.pull], writer: nil,
      state: state, pullBatchChanges: 1)
    let pulled = try sync.pullOnce()
    #expect(pulled.applied == 5 && pulled.skipped == 0)
    #expect(try names(local) == names(serverStore))
    // Nothing new: the recorded token is the feed's, so the next pull applies nothing.
    #expect(try sync.pullOnce().applied == 0)
  }

  @Test(
    "a feed cut short before its resume line: the whole transactions before the cut are applied and their token recorded, the last is not, and the error says so",
    .timeLimit(.minutes(10)))
  func cutShort() throws {
    let scratch = Scratch()
    let (_, server) = try self.server(of: 4, in: scratch)
    defer { _ = server.stop() }
    // The server's own feed, less its resume line, served by a server that then closes.
    let lines = try feedLines(server)
    try #require(lines.count == 5 && lines.last!.contains("resumeToken"))
    let cut = lines.dropLast().joined(separator: "\n") + "\n"
    let junk = try JunkServer(response: "HTTP/1.1 200 OK\r\n\r\n" + cut)
    defer { junk.stop() }
    let local = scratch.file("local.sqlite")
    let state = scratch.file("state.json")
    let sync = try ServerSync(
      local: local, server: URL(string: junk.url)!, directions: [.pull], writer: nil,
      state: state, pullBatchChanges: 1)
    let error = try #require(throws: TripPlannerError.self) { _ = try sync.pullOnce() }
    #expect(error.code == .invalidInput)
    #expect(error.message.contains("cut short") && error.message.contains("3 changes"))
    #expect(try names(local) == ["Trip 0", "Trip 1", "Trip 2"])
    // The third line's token is the one recorded: the next pull asks for what follows it.
    let third = try #require(
      JSONSerialization.jsonObject(with: Data(lines[2].utf8)) as? [String: Any])
    let recorded = try #require(
      JSONSerialization.jsonObject(with: Data(contentsOf: state)) as? [String: String])
    #expect(recorded["pull " + junk.url] == third["token"] as? String, "\(recorded)")
  }

  @Test(
    "one transaction of four trips pulled in batches of one and cut short: three applied, no token recorded, and the next pull applies the fourth and skips the rest",
    .timeLimit(.minutes(10)))
  func cutInsideATransaction() throws {
    let scratch = Scratch()
    let serverStore = scratch.file("server.sqlite")
    try TripStore(url: serverStore, author: "test").importRecords((0..<4).map(record))
    let server = try ServerProcess(store: serverStore)
    defer { _ = server.stop() }
    let lines = try feedLines(server)
    try #require(lines.count == 5)
    let junk = try JunkServer(
      response: "HTTP/1.1 200 OK\r\n\r\n" + lines.dropLast().joined(separator: "\n") + "\n")
    defer { junk.stop() }
    let local = scratch.file("local.sqlite")
    let state = scratch.file("state.json")
    let cut = try ServerSync(
      local: local, server: URL(string: junk.url)!, directions: [.pull], writer: nil,
      state: state, pullBatchChanges: 1)
    #expect(throws: TripPlannerError.self) { _ = try cut.pullOnce() }
    let partial = try names(local)
    let all = try names(serverStore)
    #expect(partial.count == 3 && Set(partial).isSubset(of: all))
    let recorded = (try? String(contentsOf: state, encoding: .utf8)) ?? ""
    #expect(!recorded.contains("pull "), "a token inside the transaction: \(recorded)")
    let whole = try ServerSync(
      local: local, server: URL(string: server.url)!, directions: [.pull], writer: nil,
      state: state, pullBatchChanges: 1)
    let pulled = try whole.pullOnce()
    #expect(pulled.applied == 1 && pulled.skipped == 3, "\(pulled)")
    #expect(try names(local) == names(serverStore))
  }

  @Test(
    "a bad line in the middle of a pulled feed: the batches complete before it are applied, none after, and the error names the line",
    .timeLimit(.minutes(10)))
  func badLineMidway() throws {
    let scratch = Scratch()
    let (_, server) = try self.server(of: 4, in: scratch)
    defer { _ = server.stop() }
    var lines = try feedLines(server)
    lines[2] = "{\"token\": 12"
    let junk = try JunkServer(response: "HTTP/1.1 200 OK\r\n\r\n" + lines.joined(separator: "\n"))
    defer { junk.stop() }
    let local = scratch.file("local.sqlite")
    let sync = try ServerSync(
      local: local, server: URL(string: junk.url)!, directions: [.pull], writer: nil,
      state: scratch.file("state.json"), pullBatchChanges: 1)
    let error = try #require(throws: TripPlannerError.self) { _ = try sync.pullOnce() }
    #expect(error.problems.map(\.line) == [3], "\(error.problems)")
    // The first batch was complete before the bad line came; the second's end (the next
    // transaction's first line) came after it.
    #expect(error.message.contains("the 1 change before them was applied"), "\(error.message)")
    #expect(try names(local) == ["Trip 0"])
  }

  @Test(
    "a push in bodies of one change each, with a pull running meanwhile: the server gets every trip",
    .timeLimit(.minutes(10)))
  func pushInBatches() throws {
    let scratch = Scratch()
    let tokens = try tokenFile(in: scratch, "alice:" + String(repeating: "x", count: 20))
    let serverStore = scratch.file("server.sqlite")
    let server = try ServerProcess(store: serverStore, ["--token-file", tokens.path])
    defer { _ = server.stop() }
    let local = scratch.file("local.sqlite")
    try addTrips(6, to: local)
    let sync = try ServerSync(
      local: local, server: URL(string: server.url)!, directions: [.push, .pull],
      writer: (name: "alice", token: String(repeating: "x", count: 20)),
      state: scratch.file("state.json"), pushBatchBytes: 1)
    let pulling = DispatchGroup()
    DispatchQueue.global().async(group: pulling) { _ = try? sync.pullOnce() }
    let pushed = try sync.pushOnce()
    pulling.wait()
    #expect(pushed.applied == 6, "\(pushed)")
    #expect(try names(serverStore) == names(local))
    #expect(try sync.pushOnce().applied == 0)
  }
}
