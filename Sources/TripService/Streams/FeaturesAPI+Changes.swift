import Foundation
import Persistence
import TripPlanner

extension FeaturesAPI {
  static let jsonLines = "application/x-ndjson"

  /// `GET /changes?after=TOKEN&exclude-author=NAME`: the sync feed (`trips sync export`'s
  /// JSON lines: one line per change after the token, then the token to resume from).
  /// `POST /changes`: applies such a feed with the rules of `trips sync apply` (a transaction
  /// per source transaction, idempotent, the last change wins), recorded under the bearer token's name, so a
  /// peer that exports with `exclude-author` set to that name gets no echo.
  ///
  /// Cost: GET reads the history after the token twice (the changes' token index,
  /// O(changes)) and each changed row, in one snapshot, and writes the lines as the client
  /// takes them (memory: a position per changed row and 1 MiB of text); POST looks up each
  /// trip of the feed by its id and its history.
  func changes(_ request: HTTPRequest) throws -> HTTPResponse {
    if request.method == "POST" {
      let author = try writer(request)
      guard !request.body.isEmpty else {
        throw ServiceError.request(400, "The request has no body: send a change feed (JSON lines).")
      }
      let feed: SyncFeed
      do {
        feed = try SyncFeed.parse(request.body, file: "body")
      } catch let error as TripPlannerError {
        throw ServiceError.request(400, error.description)
      }
      let result = try pool.withStore(author: author) { try $0.apply(feed) }
      return Self.document(
        .object([
          ("applied", .number(Double(result.applied))),
          ("skipped", .number(Double(result.skipped))),
        ]), type: Self.json)
    }
    try ItemsQuery.refuseUnknown(request, allowed: ["after", "exclude-author", "f"])
    for name in ["after", "exclude-author"] where request.queryValues(name).count > 1 {
      throw ServiceError.request(400, "The parameter '\(name)' is given more than once.")
    }
    var after: DefaultHistoryToken?
    if let text = request.queryValues("after").last {
      guard let token = DefaultHistoryToken(text) else {
        throw ServiceError.request(
          400,
          "Invalid value '\(HTTPServer.loggable(text))' for 'after': expected a history token (<store>:<number>)."
        )
      }
      after = token
    }
    let excluded = request.queryValues("exclude-author").last
    if excluded?.isEmpty == true {
      throw ServiceError.request(400, "Invalid value for 'exclude-author': it is empty.")
    }
    do {
      // The token is checked before the answer starts: a refused one gets its status.
      try pool.withStore(author: "service") { try $0.checkFeedToken(after) }
    } catch let cause as PersistenceError {
      switch cause.code {
      case .historyTokenExpired:
        throw ServiceError.request(
          410,
          "\(cause.message) Take a full copy instead (GET /collections/trips/items), then follow the changes after the token the copy was taken at."
        )
      case .historyTokenForeign, .historyTokenUnknown:
        throw ServiceError.request(400, "Invalid value for 'after': \(cause.message)")
      default:
        throw cause
      }
    }
    let headers = [("Content-Type", Self.jsonLines), ("Cache-Control", "no-store")]
    if request.method == "HEAD" { return HTTPResponse(status: 200, headers: headers) }
    // The lines are written as the changes are read, on a thread of their own, no faster than
    // the client takes them: neither the feed nor its text is held. A failure midway cuts the
    // answer (no resume line, an unfinished chunked body), which a reader takes as incomplete.
    let stream = HTTPStream()
    let pool = pool
    let token = after
    let thread = Thread {
      struct ClientGone: Error {}
      do {
        _ = try pool.withStore(author: "service") {
          try $0.writeChangeFeed(after: token, excludingAuthor: excluded) { chunk in
            guard stream.sendPaced(String(decoding: chunk, as: UTF8.self)) else {
              throw ClientGone()
            }
          }
        }
        stream.close()
      } catch {
        stream.abort()
      }
    }
    thread.start()
    return HTTPResponse(status: 200, headers: headers, stream: stream)
  }
}
