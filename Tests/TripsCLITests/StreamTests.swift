import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A client that opens a stream and then reads nothing: the slowest reader there is. Its
/// receive buffer is made small, so the server's queue for it fills after a few hundred KiB.
final class StalledClient {
  let socket: Int32

  init(url: String, path: String) throws {
    let port = UInt16(url.split(separator: ":").last!)!
    socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var size: Int32 = 4096
    setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
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
    let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    _ = request.withCString { send(socket, $0, strlen($0), 0) }
  }

  /// Reads what is left until the server closes the connection (or `seconds` pass): the bytes
  /// read, and whether the connection ended.
  func drain(seconds: Double) -> (bytes: Int, ended: Bool) {
    var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
    setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var total = 0
    var buffer = [UInt8](repeating: 0, count: 65_536)
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
      let count = recv(socket, &buffer, buffer.count, 0)
      if count > 0 {
        total += count
      } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
        return (total, true)
      }
    }
    return (total, false)
  }

  deinit { close(socket) }
}

@Suite("Streams under load")
struct StreamTests {
  /// Events of a Server-Sent Events capture, by kind.
  func events(_ file: URL) -> [String] {
    let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
    return text.components(separatedBy: "\n\n").compactMap { block in
      block.split(separator: "\n").first { $0.hasPrefix("event: ") }.map {
        String($0.dropFirst(7))
      }
    }
  }

  func listen(_ url: String, to file: URL, seconds: Int = 60) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = [
      "-s", "-N", "--max-time", String(seconds), "-H", "Accept: text/event-stream", "-o",
      file.path, url,
    ]
    try process.run()
    return process
  }

  @Test(
    "a client that stops reading is dropped once stalled past its queue; the others get every event and keep-alives"
  )
  func slowClientDropped() throws {
    let scratch = Scratch()
    try makeEmptyStore(scratch.store)
    let server = try ServerProcess(store: scratch.store, ["--keep-alive", "1"])
    defer { _ = server.stop() }
    let path = "/collections/trips/items/stream"
    let stalled = try StalledClient(url: server.url, path: path)
    let good = scratch.file("good.txt")
    let reader = try listen(server.url + path, to: good)
    defer {
      kill(reader.processIdentifier, SIGKILL)
      reader.waitUntilExit()
    }
    Thread.sleep(forTimeInterval: 0.5)
    // 20,000 trips in one transaction: about 7 MB of events, queued whole (one transaction is
    // never split), far beyond the stalled client's socket buffers.
    let csv = scratch.file("burst.csv")
    let generator = tripsExecutable.deletingLastPathComponent().appendingPathComponent(
      "trips-generate")
    let generate = Process()
    generate.executableURL = generator
    generate.arguments = [
      "--count", "20000", "--output", csv.path, "--cities",
      repositoryRoot.appendingPathComponent("Data/cities.csv").path,
    ]
    try generate.run()
    generate.waitUntilExit()
    #expect(try trips(["import", csv.path], store: scratch.store).status == 0)
    #expect(try trips(addSuva, store: scratch.store).status == 0)
    #expect(
      eventually(60) { events(good).count == 20_001 },
      "the reading client got every event: \(events(good).count)")
    #expect(Set(events(good)) == ["insert"])
    // Megabytes wait for the stalled client and it reads nothing: within 5 s and a keep-alive
    // it is dropped, its connection cut after what its socket buffers held.
    Thread.sleep(forTimeInterval: 7)
    #expect(try String(contentsOf: good, encoding: .utf8).contains(": keep-alive\n\n"))
    let (bytes, ended) = stalled.drain(seconds: 10)
    let full = (try Data(contentsOf: good)).count
    #expect(ended, "the server closed the stalled connection")
    #expect(bytes < full / 2, "it got \(bytes) of \(full) bytes")
    // The server answers as before.
    #expect(try server.request("/").status == 200)
  }

  @Test("two servers on one store file both stream a change made through either")
  func twoServers() throws {
    let scratch = Scratch()
    try checkTwoServers(on: scratch.store, between: {})
  }

  @Test(
    "two servers on one PostgreSQL database both stream a change made through either, across a restart of the database server"
  )
  func twoServersOnPostgreSQL() throws {
    let cluster = try PostgreSQLCluster.makePrivate()
    let store = try #require(URL(string: try cluster.makeDatabase("serve")))
    // The database server restarts between the two changes: every connection is cut.
    try checkTwoServers(on: store, between: { try cluster.restart() })
  }

  /// Two `trips serve` on `store`, a stream client on each: a trip posted through the first
  /// reaches both clients, then, after `between`, one posted through the second does too, and
  /// a search through the first finds both.
  func checkTwoServers(on store: URL, between: () throws -> Void) throws {
    let scratch = Scratch()
    let secret = String(repeating: "t0k3n-", count: 4)
    let tokens = try tokenFile(in: scratch, "alice:" + secret)
    let first = try ServerProcess(store: store, ["--token-file", tokens.path])
    let second = try ServerProcess(store: store, ["--token-file", tokens.path])
    defer {
      _ = first.stop()
      _ = second.stop()
    }
    let path = "/collections/trips/items/stream"
    let (one, two) = (scratch.file("one.txt"), scratch.file("two.txt"))
    let readers = [try listen(first.url + path, to: one), try listen(second.url + path, to: two)]
    defer {
      for reader in readers {
        kill(reader.processIdentifier, SIGKILL)
        reader.waitUntilExit()
      }
    }
    Thread.sleep(forTimeInterval: 0.5)
    func post(_ server: ServerProcess, _ name: String) throws {
      let body = """
        {"type":"Feature","geometry":{"type":"Point","coordinates":[10,45]},
         "properties":{"name":"\(name)","destination":"D","startDate":"2027-01-01",
         "endDate":"2027-01-02"}}
        """
      let reply = try server.request(
        "POST", "/collections/trips/items",
        headers: ["Authorization: Bearer \(secret)", "Content-Type: application/geo+json"],
        body: Data(body.utf8))
      #expect(reply.status == 201, "\(reply.text)")
    }
    try post(first, "Through the first")
    #expect(eventually(10) { events(one).count == 1 && events(two).count == 1 })
    try between()
    try post(second, "Through the second")
    #expect(eventually(15) { events(one).count == 2 && events(two).count == 2 })
    for file in [one, two] {
      let text = try String(contentsOf: file, encoding: .utf8)
      #expect(text.contains("Through the first") && text.contains("Through the second"))
    }
    #expect(
      try first.request("/collections/trips/items?q=through").text.contains(
        "\"numberMatched\":2"))
    // A bbox page is chosen in each server's memory, which follows the shared store's history.
    for server in [first, second] {
      let page = try server.request("/collections/trips/items?bbox=9,44,11,46&limit=5").json()
      #expect(page["numberMatched"] as? Int == 2, "\(page)")
      #expect((page["features"] as? [[String: Any]])?.count == 2)
    }
  }
}
