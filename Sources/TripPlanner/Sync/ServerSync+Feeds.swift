import Foundation
import Persistence

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// A push and a pull as the server streams its feeds: neither holds a whole feed.
extension ServerSync {
  /// One push, in the push's turn: the feed read in a context of its own as it is sent, each
  /// batch posted as soon as it is full, and its token recorded once the server applied it.
  func pushTurn(_ writer: (name: String, token: String)) throws -> SyncResult {
    let key = pushKey
    let after = try stateFile.use { _ in
      try SyncState.read(stateURL)[key].flatMap(DefaultHistoryToken.init)
    }
    // Not the store's turn: a feed reader of its own over the shared container, so that a
    // pull's apply is never held behind this push's HTTP calls.
    let reader = TripStore(container: container, author: localAuthor)
    var batcher = FeedBatcher(after: after, maximumBytes: pushBatchBytes)
    var result = SyncResult()
    let resume = try reader.forEachFeedChange(after: after, excludingAuthor: localAuthor) {
      if let batch = batcher.add($0) { try post(batch, writer: writer, key: key, to: &result) }
    }
    if let batch = batcher.finish() { try post(batch, writer: writer, key: key, to: &result) }
    try record(key, resume)
    return result
  }

  /// Posts one batch; records its token (when it has one) once the server said what it
  /// applied.
  private func post(
    _ batch: FeedBatcher.Batch, writer: (name: String, token: String), key: String,
    to result: inout SyncResult
  ) throws {
    var request = URLRequest(url: server.appendingPathComponent("changes"))
    request.httpMethod = "POST"
    request.setValue("Bearer \(writer.token)", forHTTPHeaderField: "Authorization")
    request.setValue("application/x-ndjson", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data(batch.body.utf8)
    let reply = try Self.send(request)
    // A reply that does not say what was applied is no success: the pushed token is not
    // recorded, and the push is tried again.
    guard let object = try? JSONSerialization.jsonObject(with: reply) as? [String: Any],
      let applied = object["applied"] as? Int, let skipped = object["skipped"] as? Int
    else {
      throw ServerSyncError(
        status: 200,
        message:
          "The server's answer to a push does not say what it applied (JSON with the numbers applied and skipped): is \(server.absoluteString) a trips server?"
      )
    }
    result.applied += applied
    result.skipped += skipped
    if let resume = batch.resume { try record(key, resume) }
  }

  /// A feed cut into request bodies of at most `maximumBytes` (a single larger change goes
  /// alone), each with the token to record once the server applied it (see ``FeedBatcher``);
  /// the last batch's is nil (the feed's resume token is recorded after it).
  static func batches(of feed: SyncFeed, after: DefaultHistoryToken?, maximumBytes: Int)
    -> [(body: String, resume: DefaultHistoryToken?)]
  {
    var batcher = FeedBatcher(after: after, maximumBytes: maximumBytes)
    var batches: [(body: String, resume: DefaultHistoryToken?)] = []
    for change in feed.changes {
      if let batch = batcher.add(change) { batches.append((batch.body, batch.resume)) }
    }
    if let batch = batcher.finish() { batches.append((batch.body, batch.resume)) }
    return batches
  }

  /// One pull, in the pull's turn: the feed read line by line as it arrives, applied in
  /// batches of whole transactions, each batch's last token recorded after it.
  func pullTurn() throws -> SyncResult {
    let after = try stateFile.use { _ in try SyncState.read(stateURL)[pullKey] }
    var components = URLComponents(
      url: server.appendingPathComponent("changes"), resolvingAgainstBaseURL: false)!
    var items: [URLQueryItem] = []
    if let after { items.append(URLQueryItem(name: "after", value: after)) }
    if let writer { items.append(URLQueryItem(name: "exclude-author", value: writer.name)) }
    components.queryItems = items.isEmpty ? nil : items
    let file = server.absoluteString + "/changes"
    var reader = SyncFeed.LineReader(file: file)
    var batch: [FeedChange] = []
    var result = SyncResult()
    var resume: DefaultHistoryToken?
    var applied = 0
    /// Throws for the bad lines read so far, saying what was applied before them.
    func checkLines() throws {
      guard reader.hasProblems else { return }
      do {
        try reader.throwIfAny()
      } catch let error as TripPlannerError {
        throw TripPlannerError(
          code: error.code,
          message:
            "\(file): \(error.problems.count) bad line\(error.problems.count == 1 ? "" : "s") in the server's feed; the \(applied) change\(applied == 1 ? "" : "s") before them \(applied == 1 ? "was" : "were") applied.",
          problems: error.problems)
      }
    }
    /// The token of the last change read, and of the transaction before its own (where a pull
    /// cut inside a transaction resumes).
    var last: DefaultHistoryToken?
    var beforeCurrent = after.flatMap(DefaultHistoryToken.init)
    /// Applies the batch (if its lines were all good) and records `token`, if any.
    func apply(recording token: DefaultHistoryToken?) throws {
      try checkLines()
      let changes = batch
      batch.removeAll(keepingCapacity: true)
      try store.use { store in
        // The models a batch registered are let go: the context would otherwise keep every
        // row of the feed, and each batch's apply would take longer than the last.
        defer { store.context.reset() }
        if let token = token ?? changes.last?.token, !changes.isEmpty {
          let done = try store.apply(SyncFeed(changes: changes, resumeToken: token))
          result.applied += done.applied
          result.skipped += done.skipped
        }
        if let token { try record(pullKey, token) }
      }
      applied += changes.count
    }
    try Self.readLines(components.url!) { line in
      switch reader.read(line) {
      case .change(let change):
        // A batch that ends between two transactions resumes after the last; one that ends
        // inside a transaction (a large import is one) resumes before it, and applies its
        // first part again as no-ops.
        if batch.count >= pullBatchChanges, let last {
          try apply(recording: change.token != last ? last : beforeCurrent)
        }
        if let last, change.token != last { beforeCurrent = last }
        last = change.token
        batch.append(change)
      case .resume(let token): resume = token
      case nil: break
      }
    }
    try checkLines()
    guard let resume else {
      throw TripPlannerError(
        code: .invalidInput,
        message:
          "\(file): the feed has no resumeToken line: it was cut short; the \(applied) change\(applied == 1 ? "" : "s") before its end \(applied == 1 ? "was" : "were") applied."
      )
    }
    try apply(recording: resume)
    return result
  }

  /// Reads the answer to a GET of `url` line by line (each without its LF or CRLF), as it
  /// arrives: over a socket of its own for `http://` (``PlainHTTP``: no faster than `line`
  /// takes them), else through `URLSession` (the body read whole first).
  ///
  /// - Throws: ``ServerSyncError`` when the server cannot be reached, refuses (not 2xx), or
  ///   the answer is cut short; what `line` throws.
  static func readLines(_ url: URL, _ line: (ArraySlice<UInt8>) throws -> Void) throws {
    var splitter = LineSplitter()
    guard url.scheme?.lowercased() == "http" else {
      var request = URLRequest(url: url)
      request.setValue("application/x-ndjson", forHTTPHeaderField: "Accept")
      let data = try send(request)
      try splitter.feed(ArraySlice(data), line)
      try splitter.finish(line)
      return
    }
    var refusal: (status: Int, body: [UInt8])?
    do {
      try PlainHTTP.get(
        url, headers: [("Accept", "application/x-ndjson")],
        status: { status in
          if !(200..<300).contains(status) { refusal = (status, []) }
        },
        body: { bytes in
          if refusal != nil {
            // The refusal's own text, for its message (at most 64 KiB of it).
            if refusal!.body.count < 65_536 { refusal!.body.append(contentsOf: bytes) }
          } else {
            try splitter.feed(bytes, line)
          }
        })
    } catch let failure as PlainHTTP.Failure {
      // Reached, then failed: the answer broke off (a transient failure either way).
      throw ServerSyncError(
        status: nil,
        message: failure.connected
          ? "GET \(url.absoluteString) failed after connecting: \(failure.description)."
          : "Cannot reach \(url.absoluteString): \(failure.description).")
    }
    if let refusal {
      let data = Data(refusal.body)
      let description =
        (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["description"]
        as? String ?? String(decoding: data.prefix(200), as: UTF8.self)
      throw ServerSyncError(
        status: refusal.status,
        message: "GET \(url.absoluteString) answered \(refusal.status): \(description)")
    }
    try splitter.finish(line)
  }
}

/// Cuts bytes into lines as they arrive: each line handed over without its LF (or CRLF), as
/// bytes (their reader checks they are UTF-8, so a bad byte is an error, never a U+FFFD).
struct LineSplitter {
  /// The longest line taken (a feed's line is one row, a few KiB): a server that never ends a
  /// line cannot grow the client's memory past it.
  static let maximumLine = 64 << 20
  private var pending: [UInt8] = []

  /// Hands over every line `bytes` completes.
  mutating func feed(_ bytes: ArraySlice<UInt8>, _ line: (ArraySlice<UInt8>) throws -> Void)
    throws
  {
    var start = bytes.startIndex
    while let newline = bytes[start...].firstIndex(of: 10) {
      if pending.isEmpty {
        try line(Self.text(bytes[start..<newline]))
      } else {
        pending.append(contentsOf: bytes[start..<newline])
        try line(Self.text(pending[...]))
        pending.removeAll(keepingCapacity: true)
      }
      start = newline + 1
    }
    pending.append(contentsOf: bytes[start...])
    guard pending.count <= Self.maximumLine else {
      throw TripPlannerError(
        code: .invalidInput,
        message:
          "A line is over \(Self.maximumLine >> 20) MiB; nothing of it was applied.")
    }
  }

  /// Hands over the last line, if the bytes did not end with a line break.
  mutating func finish(_ line: (ArraySlice<UInt8>) throws -> Void) throws {
    guard !pending.isEmpty else { return }
    try line(Self.text(pending[...]))
    pending.removeAll()
  }

  private static func text(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    bytes.last == 13 ? bytes.dropLast() : bytes
  }
}

/// Cuts a feed into request bodies of at most `maximumBytes` as its changes come (a single
/// larger change goes alone), each with the token to record once the server applied it:
/// after a batch that ends between two transactions, the last one's token; after one that ends
/// inside a transaction, the token before that transaction (nil when none was recorded), so
/// that a push cut short there sends the transaction whole again; after the last batch, none
/// (the feed's resume token is recorded then). Each body ends with the resume line the
/// server's parser requires (the server does not use its value).
///
/// Memory: one batch's text. Cost: O(bytes) per change.
struct FeedBatcher {
  /// A request body and the token to record once the server applied it.
  struct Batch {
    var body: String
    var resume: DefaultHistoryToken?
  }

  let maximumBytes: Int
  private var body = ""
  private var count = 0
  /// The token of the last change added.
  private var last: DefaultHistoryToken?
  /// The token of the transaction before the current one (where a batch that ends inside the
  /// current one resumes): at first the token the feed was read after.
  private var beforeCurrent: DefaultHistoryToken?

  init(after: DefaultHistoryToken?, maximumBytes: Int) {
    beforeCurrent = after
    self.maximumBytes = max(1, maximumBytes)
  }

  /// Adds `change`; returns the batch to send first when the change does not fit in it.
  mutating func add(_ change: FeedChange) -> Batch? {
    let line = SyncFeed.line(for: change)
    var full: Batch?
    if count > 0, body.utf8.count + line.utf8.count > maximumBytes {
      let resume = change.token != last ? last : beforeCurrent
      full = Batch(body: body + SyncFeed.resumeLine(resume ?? change.token), resume: resume)
      body = ""
      count = 0
    }
    if let last, change.token != last { beforeCurrent = last }
    last = change.token
    body += line
    count += 1
    return full
  }

  /// The last batch, if any change is left (its resume token nil).
  mutating func finish() -> Batch? {
    guard count > 0, let last else { return nil }
    defer {
      body = ""
      count = 0
    }
    return Batch(body: body + SyncFeed.resumeLine(last), resume: nil)
  }
}
