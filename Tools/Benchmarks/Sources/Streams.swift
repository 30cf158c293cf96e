import Dispatch
import Foundation
import Persistence
import TripPlanner

#if canImport(Glibc)
  import Glibc
#endif

/// A Server-Sent Events client on a raw non-blocking socket, so that a thousand of them cost
/// the benchmark little: it counts the events it has read and notes when each arrived.
final class RawStreamClient {
  let socket: Int32
  private var tail: [UInt8] = []
  /// When each event arrived (monotonic nanoseconds), and its `data:` lines.
  private(set) var arrivals: [UInt64] = []
  private(set) var data: [String] = []
  var keepData = false

  init?(port: UInt16, path: String) {
    socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { return nil }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else {
      close(socket)
      return nil
    }
    let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    _ = request.withCString { send(socket, $0, strlen($0), 0) }
    _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK)
  }

  deinit { close(socket) }

  /// The buffer every client reads into (the benchmark reads on one thread). One zeroed
  /// 64 KiB buffer per read, a thousand clients per event, cost the benchmark's own reading
  /// about 64 MB of zeroing per round, which counted in the latencies of the clients read last.
  nonisolated(unsafe) private static var buffer = [UInt8](repeating: 0, count: 65_536)

  /// Reads what is there; false when the server closed the connection. Call it from one
  /// thread at a time (the benchmark's).
  func readAvailable() -> Bool {
    while true {
      let count = Self.buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
      if count > 0 {
        let now = DispatchTime.now().uptimeNanoseconds
        tail += Self.buffer[0..<count]
        // Events end with a blank line; each one that names an event is counted.
        while let end = Self.blankLine(in: tail) {
          let block = String(decoding: tail[..<end], as: UTF8.self)
          tail.removeSubrange(..<(end + 2))
          let lines = block.split(separator: "\n")
          if lines.contains(where: { $0.hasPrefix("event: ") }) {
            arrivals.append(now)
            if keepData {
              data.append(
                lines.first { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) } ?? "")
            }
          }
        }
      } else if count == 0 {
        return false
      } else {
        return errno == EAGAIN || errno == EWOULDBLOCK
      }
    }
  }

  private static func blankLine(in bytes: [UInt8]) -> Int? {
    guard bytes.count >= 2 else { return nil }
    for index in 0..<(bytes.count - 1) where bytes[index] == 0x0A && bytes[index + 1] == 0x0A {
      return index
    }
    return nil
  }
}

/// Reads from every client until `done` says so or `seconds` pass; false on time-out.
func pump(_ clients: [RawStreamClient], seconds: Double, until done: () -> Bool) -> Bool {
  var descriptors = clients.map { pollfd(fd: $0.socket, events: Int16(POLLIN), revents: 0) }
  let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
  while !done() {
    if DispatchTime.now().uptimeNanoseconds > deadline { return false }
    let ready = poll(&descriptors, nfds_t(descriptors.count), 50)
    guard ready > 0 else { continue }
    for index in descriptors.indices where descriptors[index].revents != 0 {
      descriptors[index].revents = 0
      _ = clients[index].readAvailable()
    }
  }
  return true
}

/// The value at quantile `q` of `values` (nearest rank).
func quantile(_ values: [Double], _ q: Double) -> Double {
  let sorted = values.sorted()
  guard !sorted.isEmpty else { return .nan }
  return sorted[min(sorted.count - 1, Int((q * Double(sorted.count)).rounded(.up)) - 1)]
}

/// Starts `trips serve` and returns it with its port.
func startServer(_ executable: URL, store: URL, extra: [String] = []) throws -> (Process, UInt16) {
  let server = Process()
  server.executableURL = executable
  server.arguments = ["serve", "--port", "0", "--store", store.path] + extra
  let out = Pipe()
  server.standardOutput = out
  server.standardError = FileHandle.nullDevice
  try server.run()
  var line = Data()
  while !line.contains(0x0A) {
    let chunk = out.fileHandleForReading.availableData
    if chunk.isEmpty { break }
    line.append(chunk)
  }
  let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  guard let port = text.split(separator: ":").last.flatMap({ UInt16($0) }) else {
    throw CocoaError(.fileReadUnknown, userInfo: ["reason": "trips serve said: \(text)"])
  }
  return (server, port)
}

/// A trip far enough out to move the bounds each round.
func movingTrip(_ round: Int) -> TripRecord {
  TripRecord(
    name: "Bench \(round)", destination: "Bench", startDate: TripDates.parse("2027-01-01")!,
    endDate: TripDates.parse("2027-01-02")!, latitude: 80 + Double(round) * 0.01, longitude: 10)
}

struct FanOut {
  var latencies: [Double]  // milliseconds, every client and round
  /// Per round: the first and the last client's delay, in milliseconds.
  var rounds: [(first: Double, last: Double)] = []
  var perClientKiB: Double
  var baselineKiB: Double
}

/// `clients` clients on one bounds stream; `rounds` trips added from this process (another
/// process than the server's); the delay from each commit to each client's event.
func fanOut(
  executable: URL, store: URL, clients count: Int, rounds roundCount: Int
) throws -> FanOut {
  let (server, port) = try startServer(executable, store: store)
  defer {
    server.terminate()
    server.waitUntilExit()
  }
  let path = "/collections/trips/bounds/stream"
  // One client first: the shared controller exists, the store is open: the idle baseline.
  let first = RawStreamClient(port: port, path: path)!
  guard pump([first], seconds: 120, until: { first.arrivals.count >= 1 }) else {
    throw CocoaError(.fileReadUnknown, userInfo: ["reason": "no first bounds event"])
  }
  Thread.sleep(forTimeInterval: 0.5)
  let baseline = residentKiB(server.processIdentifier)
  var clients = [first]
  for _ in 1..<count {
    guard let client = RawStreamClient(port: port, path: path) else {
      throw CocoaError(.fileReadUnknown, userInfo: ["reason": "cannot connect"])
    }
    clients.append(client)
  }
  guard pump(clients, seconds: 60, until: { clients.allSatisfy { $0.arrivals.count >= 1 } })
  else { throw CocoaError(.fileReadUnknown, userInfo: ["reason": "not every client connected"]) }
  Thread.sleep(forTimeInterval: 1)
  let connected = residentKiB(server.processIdentifier)
  let writer = try TripStore(url: store, author: "bench")
  var latencies: [Double] = []
  var rounds: [(first: Double, last: Double)] = []
  for round in 1...roundCount {
    _ = try writer.add(movingTrip(round))
    let committed = DispatchTime.now().uptimeNanoseconds
    guard
      pump(clients, seconds: 10, until: { clients.allSatisfy { $0.arrivals.count > round } })
    else { throw CocoaError(.fileReadUnknown, userInfo: ["reason": "an event went missing"]) }
    let delays = clients.map { Double($0.arrivals[round] - committed) / 1e6 }
    latencies += delays
    rounds.append((delays.min() ?? .nan, delays.max() ?? .nan))
    Thread.sleep(forTimeInterval: 0.05)
  }
  var added = TripQuery()
  added.destination = "Bench"
  _ = try writer.delete(try writer.trips(added).map(\.id))
  return FanOut(
    latencies: latencies, rounds: rounds,
    perClientKiB: count > 1 ? (connected - baseline) / Double(count - 1) : 0,
    baselineKiB: baseline)
}

struct Burst {
  var seconds: Double
  var inOrder: Bool
  var received: Int
  var beforeKiB: Double
  var afterKiB: Double
  var writeSeconds: Double
}

/// `count` trips added one transaction each, as fast as this process can, while one client
/// follows the items stream: every insert must arrive, in order; then the server's memory.
func burst(executable: URL, store: URL, count: Int) throws -> Burst {
  let (server, port) = try startServer(executable, store: store)
  defer {
    server.terminate()
    server.waitUntilExit()
  }
  let client = RawStreamClient(port: port, path: "/collections/trips/items/stream")!
  client.keepData = true
  // The stream is open once its `retry:` line has come; give it a moment.
  _ = pump([client], seconds: 1, until: { false })
  let before = residentKiB(server.processIdentifier)
  let writer = try TripStore(url: store, author: "bench")
  var ids: [String] = []
  let start = DispatchTime.now().uptimeNanoseconds
  let writing = time {
    for index in 0..<count {
      var trip = movingTrip(index)
      trip.name = "Burst \(index)"
      trip.latitude = 10
      ids.append((try? writer.add(trip))?.id.uuidString.lowercased() ?? "")
    }
  }
  let delivered = pump([client], seconds: 120, until: { client.arrivals.count >= count })
  let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
  let received = client.data.compactMap { text -> String? in
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["id"] as? String
  }
  Thread.sleep(forTimeInterval: 3)
  let after = residentKiB(server.processIdentifier)
  _ = try writer.delete(ids.compactMap(UUID.init(uuidString:)))
  return Burst(
    seconds: delivered ? seconds : .nan, inOrder: received == ids, received: received.count,
    beforeKiB: before, afterKiB: after, writeSeconds: writing)
}

/// `trips sync watch` from store A to store B, through a server (`http`) or straight (`file`):
/// the delay from a commit in A to the trip being readable in B, per round, in milliseconds.
func syncLatencies(executable: URL, directory: URL, throughServer: Bool, rounds: Int) throws
  -> [Double]
{
  let folder = directory.appendingPathComponent(
    "sync-\(throughServer ? "http" : "file")-\(UUID().uuidString)")
  try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
  defer { try? FileManager.default.removeItem(at: folder) }
  let (a, b) = (
    folder.appendingPathComponent("a.sqlite"), folder.appendingPathComponent("b.sqlite")
  )
  let storeA = try TripStore(url: a, author: "bench")
  let storeB = try TripStore(url: b, author: "reader")
  var processes: [Process] = []
  defer {
    for process in processes {
      kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
    }
  }
  func watch(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = executable
    process.arguments = ["sync", "watch"] + arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    processes.append(process)
  }
  if throughServer {
    let secret = String(repeating: "bench-", count: 4)
    let tokens = folder.appendingPathComponent("tokens")
    let mine = folder.appendingPathComponent("a.token")
    let theirs = folder.appendingPathComponent("b.token")
    try Data("a:\(secret)a\nb:\(secret)b\n".utf8).write(to: tokens)
    try Data("a:\(secret)a\n".utf8).write(to: mine)
    try Data("b:\(secret)b\n".utf8).write(to: theirs)
    for file in [tokens, mine, theirs] {
      try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
    }
    let (server, port) = try startServer(
      executable, store: folder.appendingPathComponent("s.sqlite"),
      extra: ["--token-file", tokens.path])
    processes.append(server)
    let url = "http://127.0.0.1:\(port)"
    try watch(["--store", a.path, "--to", url, "--token-file", mine.path])
    try watch(["--store", b.path, "--from", url, "--token-file", theirs.path])
  } else {
    try watch(["--store", a.path, "--to", b.path])
  }
  Thread.sleep(forTimeInterval: 2)
  var latencies: [Double] = []
  for round in 0..<rounds {
    let start = DispatchTime.now().uptimeNanoseconds
    let id = try storeA.add(movingTrip(round)).id
    let deadline = start + 10_000_000_000
    while (try? storeB.trip(matching: id.uuidString)) == nil {
      if DispatchTime.now().uptimeNanoseconds > deadline { return latencies + [.nan] }
      usleep(1000)
    }
    latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    Thread.sleep(forTimeInterval: 0.05)
  }
  return latencies
}
