import Foundation
import TestSupport
import Testing

@testable import TripPlanner

#if canImport(Glibc)
  import Glibc
#endif

@Suite("The plain-HTTP event stream reader")
struct PlainEventStreamTests {
  typealias Reader = PlainHTTP.ResponseReader

  static let events = Array(
    "retry: 2000\n\n: keep-alive\n\nevent: change\ndata: {\"a\":1}\n\nevent: change\ndata: 2\n\n"
      .utf8)

  static func chunked(_ body: [UInt8], sizes: [Int]) -> [UInt8] {
    var out = Array(
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        .utf8)
    var rest = body[...]
    var index = 0
    while !rest.isEmpty {
      let size = min(sizes[index % sizes.count], rest.count)
      index += 1
      out += Array(String(size, radix: 16).utf8) + [13, 10] + rest.prefix(size) + [13, 10]
      rest = rest.dropFirst(size)
    }
    return out + Array("0\r\n\r\n".utf8)
  }

  @Test("a chunked stream read in any pieces: the status once, the body whole, two events, its end")
  func chunkedInPieces() throws {
    var generator = SeededGenerator(seed: 3)
    for round in 0..<300 {
      let wire = Self.chunked(Self.events, sizes: [1 + round % 7, 13, 2])
      var reader = Reader()
      var blocks = EventBlocks()
      var statuses: [Int] = []
      var body: [UInt8] = []
      var events = 0
      var ended = false
      var position = 0
      while position < wire.count {
        let take = min(1 + Int(generator.next() % 9), wire.count - position)
        let answer = try reader.feed(wire[position..<position + take])
        position += take
        if let status = answer.status { statuses.append(status) }
        body += answer.body
        events += blocks.feed(answer.body)
        if answer.ended { ended = true }
      }
      #expect(statuses == [200] && body == Self.events && events == 2 && ended, "round \(round)")
    }
  }

  @Test("a response without chunks passes its body through; another status is reported")
  func plainAndStatus() throws {
    var reader = Reader()
    let head = Array("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n".utf8)
    let first = try reader.feed((head + Self.events.prefix(20))[...])
    #expect(first.status == 200 && first.body == Array(Self.events.prefix(20)))
    #expect(try reader.feed(Self.events.dropFirst(20)).body == Array(Self.events.dropFirst(20)))
    var refused = Reader()
    #expect(try refused.feed(Array("HTTP/1.1 401 Unauthorized\r\n\r\n".utf8)[...]).status == 401)
  }

  @Test(
    "garbage is an error, never a hang or a crash",
    arguments: [
      "SSH-2.0-OpenSSH_9.2\r\n\r\n", "HTTP/1.1 OK\r\n\r\n", "\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n",
    ])
  func garbage(text: String) {
    var reader = Reader()
    #expect(throws: (any Error).self, "\(text.debugDescription)") {
      _ = try reader.feed(Array(text.utf8)[...])
    }
  }

  @Test("a block that never ends does not grow the follower's memory; the next event counts")
  func endlessBlock() {
    var blocks = EventBlocks()
    for _ in 0..<40 { #expect(blocks.feed([UInt8](repeating: 0x61, count: 65_536)) == 0) }
    #expect(blocks.pending.count <= EventBlocks.maximumBlock + 65_536)
    #expect(blocks.feed(Array("\n\nevent: change\ndata: 1\n\n".utf8)) == 1)
  }

  @Test("an endless head or chunk size line is refused at its limit")
  func limits() {
    var head = Reader()
    #expect(throws: (any Error).self) {
      _ = try head.feed(Array("HTTP/1.1 200 OK\r\nX: ".utf8)[...])
      _ = try head.feed(ArraySlice(repeating: UInt8(ascii: "a"), count: 70_000))
    }
    var size = Reader()
    #expect(throws: (any Error).self) {
      _ = try size.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)[...])
      _ = try size.feed(ArraySlice(repeating: UInt8(ascii: "1"), count: 2_000))
    }
  }

  /// Feeds `wire` to a reader `piece` bytes at a time: the statuses, the body, whether it ended.
  static func read(_ wire: String, piece: Int) throws -> (
    statuses: [Int], body: String, ended: Bool
  ) {
    let bytes = Array(wire.utf8)
    var reader = Reader()
    var statuses: [Int] = []
    var body: [UInt8] = []
    var ended = false
    var start = 0
    while start < bytes.count, !ended {
      let answer = try reader.feed(bytes[start..<min(start + piece, bytes.count)])
      start += piece
      if let status = answer.status { statuses.append(status) }
      body += answer.body
      ended = answer.ended
    }
    return (statuses, String(decoding: body, as: UTF8.self), ended)
  }

  @Test(
    "an answer of a given length ends with its last byte (a server that keeps the connection open is not waited for); 204 and 304 have no body; an interim 100 or 103 is passed over"
  )
  func lengthsAndInterimAnswers() throws {
    for piece in [1, 3, 1000] {
      let kept = try Self.read(
        "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: keep-alive\r\n\r\nabc\ndeMORE",
        piece: piece)
      #expect(kept.statuses == [200] && kept.body == "abc\nde" && kept.ended, "\(piece)")
      let empty = try Self.read("HTTP/1.1 204 No Content\r\n\r\n", piece: piece)
      #expect(empty.statuses == [204] && empty.body.isEmpty && empty.ended)
      let interim = try Self.read(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
          + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        piece: piece)
      #expect(interim.statuses == [200] && interim.body == "ok" && interim.ended, "\(piece)")
      let unended = try Self.read("HTTP/1.0 200 OK\r\n\r\nuntil close", piece: piece)
      #expect(unended.body == "until close" && !unended.ended)
    }
    #expect(throws: PlainHTTP.Failure.self) {
      _ = try Self.read("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", piece: 100)
    }
  }

  @Test(
    "a listener that never accepts (its queue full): a GET fails within its timeout, never waits for the kernel's retries",
    // The bound is measured in the body; the limit only stops a hang (under the whole
    // suite, a test may wait minutes for a thread before its body runs).
    .timeLimit(.minutes(6)))
  func listenerThatNeverAccepts() throws {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0
      }
    }
    try #require(bound && listen(listener, 0) == 0)
    let port = Int(UInt16(bigEndian: address.sin_port))
    // Connections that are never accepted fill the queue; the kernel then drops new SYNs.
    var fillers: [Int32] = []
    defer { for filler in fillers { close(filler) } }
    for _ in 0..<3 {
      let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue), 0)
      withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          _ = connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
      fillers.append(filler)
    }
    let started = ContinuousClock.now
    #expect(throws: PlainHTTP.Failure.self) {
      try PlainHTTP.get(
        URL(string: "http://127.0.0.1:\(port)/changes")!, headers: [], timeout: 2,
        status: { _ in }, body: { _ in })
    }
    // Connecting, or (if the kernel took the connection after all) the first read, gave up.
    #expect(ContinuousClock.now - started < .seconds(15))
  }

  @Test(
    "a pulled answer's line that never ends is refused past its limit, the lines before it read")
  func endlessLine() throws {
    var splitter = LineSplitter()
    var lines: [String] = []
    try splitter.feed(Array("one\ntwo\n".utf8)[...]) {
      lines.append(String(decoding: $0, as: UTF8.self))
    }
    let chunk = [UInt8](repeating: 0x61, count: 1 << 20)
    let error = #expect(throws: TripPlannerError.self) {
      for _ in 0...(LineSplitter.maximumLine >> 20) {
        try splitter.feed(chunk[...]) { lines.append(String(decoding: $0, as: UTF8.self)) }
      }
    }
    #expect(error?.message.contains("over 64 MiB") == true)
    #expect(lines == ["one", "two"])
  }
}
