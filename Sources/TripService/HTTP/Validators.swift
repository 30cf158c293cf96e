import Foundation
import Persistence
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Entity tags of the documents that depend on the store (pages of items, bounds, sections,
/// the collections), with the history token each was made at: HTTP caching (RFC 9110).
///
/// An answer's `ETag` is a hash of its content (FNV-1a, 64 bits; the `timeStamp` member of a
/// page left out), so a change by any process changes the tags of the answers it changes, and
/// only those. `If-None-Match` naming the current tag is a 304. When the store has not
/// changed since a tag was made for the same request (the same path and query), the 304 is
/// answered from this table without making the document: one read of the store's current
/// history token. Otherwise the document is made and its tag compared.
///
/// Cost: O(1) per request to look up (a lock and a hash of the request's path and query); the
/// table holds at most ``capacity`` requests (emptied when full), about 200 bytes each.
final class Validators: Sendable {
  static let capacity = 4_096
  private let table = Mutex<[String: (token: DefaultHistoryToken, tag: String)]>([:])

  /// The tag kept for `key` if it was made at `token`.
  func tag(for key: String, at token: DefaultHistoryToken) -> String? {
    table.withLock { table in
      guard let kept = table[key], kept.token == token else { return nil }
      return kept.tag
    }
  }

  /// Keeps `tag`, made at `token`, for `key`.
  func keep(_ tag: String, for key: String, at token: DefaultHistoryToken) {
    table.withLock { table in
      if table.count >= Self.capacity { table.removeAll(keepingCapacity: true) }
      table[key] = (token, tag)
    }
  }

  /// A weak tag of `body`: a 64-bit hash of its bytes but the value of its `"timeStamp"`
  /// member, folded 8 bytes at a time (FNV-1a's step over words, then the bytes left).
  ///
  /// The member is looked for in the last 4 KiB, from the end: where a page has it, after its
  /// features. A document whose time stamp came earlier, or that had two, would get a tag
  /// that changes with the time, so a 200 where a 304 could be, never a 304 for changed
  /// content.
  ///
  /// Cost: O(bytes) a word at a time, plus O(4 KiB) for the member: under a tenth of folding
  /// byte by byte with a check for the marker at each (13% of a bbox page's time under load).
  static func tag(of body: Data) -> String {
    var hash = fnvOffset
    let marker = Array(#""timeStamp":""#.utf8)
    body.withUnsafeBytes { raw in
      guard let found = lastMarker(marker, in: raw, within: 4_096) else {
        fold(&hash, raw)
        return
      }
      // The bytes up to the member's value, then those after its closing quote.
      var end = found + marker.count
      fold(&hash, UnsafeRawBufferPointer(rebasing: raw[..<end]))
      while end < raw.count, raw[end] != UInt8(ascii: "\"") { end += 1 }
      if end < raw.count { fold(&hash, UnsafeRawBufferPointer(rebasing: raw[(end + 1)...])) }
    }
    return "W/\"" + hex(hash) + "\""
  }

  /// The offset of the last `marker` in the last `window` bytes of `bytes`. O(window).
  private static func lastMarker(
    _ marker: [UInt8], in bytes: UnsafeRawBufferPointer, within window: Int
  ) -> Int? {
    var at = bytes.count - marker.count
    let stop = max(0, bytes.count - window)
    while at >= stop {
      if bytes[at] == marker[0], bytes[at + 1] == marker[1],
        marker.indices.allSatisfy({ bytes[at + $0] == marker[$0] })
      {
        return at
      }
      at -= 1
    }
    return nil
  }

  /// Folds `bytes` into `hash`: a word at a time, then the bytes left.
  private static func fold(_ hash: inout UInt64, _ bytes: UnsafeRawBufferPointer) {
    var index = 0
    while index + 8 <= bytes.count {
      hash =
        (hash ^ bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
        &* 0x0000_0100_0000_01b3
      hash ^= hash >> 29
      index += 8
    }
    while index < bytes.count {
      fnv(&hash, bytes[index])
      index += 1
    }
  }

  /// FNV-1a, 64 bits: the offset basis, and one byte folded in.
  static let fnvOffset: UInt64 = 0xcbf2_9ce4_8422_2325
  static func fnv(_ hash: inout UInt64, _ byte: UInt8) {
    hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
  }

  /// `hash` as 16 lower-case hexadecimal digits.
  static func hex(_ hash: UInt64) -> String {
    let hex = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
  }
}

extension FeaturesAPI {
  /// How long a client may use an answer without asking again: `no-cache` (always
  /// revalidate, with the `ETag`; a 304 costs one read of the store's history token).
  static let cacheControl = "no-cache"

  /// `build`'s answer with an `ETag` and `Cache-Control`, or a 304 when the request's
  /// `If-None-Match` names the current tag (see ``Validators``).
  func conditional(_ request: HTTPRequest, _ build: () throws -> HTTPResponse) throws
    -> HTTPResponse
  {
    // The base URL too: a document's links are absolute, on the host the client named.
    let key =
      baseURL(request) + request.path + "?"
      + request.query.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
    let ifNoneMatch = request.header("If-None-Match")
    let token = try pool.withStore(author: "service") { try $0.context.currentHistoryToken() }
    if let ifNoneMatch, let tag = validators.tag(for: key, at: token),
      Self.isCurrent(tag, ifNoneMatch: ifNoneMatch)
    {
      return Self.notModified(tag)
    }
    var response = try build()
    guard response.status == 200 else { return response }
    let tag = Validators.tag(of: response.body)
    validators.keep(tag, for: key, at: token)
    if Self.isCurrent(tag, ifNoneMatch: ifNoneMatch) { return Self.notModified(tag) }
    response.headers.append(("ETag", tag))
    response.headers.append(("Cache-Control", Self.cacheControl))
    return response
  }

  static func notModified(_ tag: String) -> HTTPResponse {
    HTTPResponse(status: 304, headers: [("ETag", tag), ("Cache-Control", cacheControl)])
  }
}
