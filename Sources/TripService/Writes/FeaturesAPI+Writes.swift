import Foundation
import Persistence
import TripPlanner

extension FeaturesAPI {
  /// The author of a write: the name of the bearer token presented. 405 when the service is
  /// read-only, 401 without a token file, a token, or with a wrong one.
  func writer(_ request: HTTPRequest) throws -> String {
    if configuration.readOnly {
      throw ServiceError.request(
        405, "This service is read-only (--read-only): it takes no writes.")
    }
    guard let tokens = configuration.tokens else {
      throw ServiceError.request(
        401, "This service takes no writes: it was started without --token-file.")
    }
    guard let header = request.header("Authorization"), header.hasPrefix("Bearer "),
      let name = tokens.writer(for: String(header.dropFirst("Bearer ".count)))
    else {
      throw ServiceError.request(
        401, "Writes need Authorization: Bearer <token> with a valid token.")
    }
    return name
  }

  /// Decides from the request line and headers, before any byte of a body is read (and
  /// before `100 Continue`): a write is refused here for an unknown path (404), a method the
  /// path does not allow (405, with `Allow`), a read-only service (405), a missing or wrong
  /// token (401), or a content type that is not taken (415). Only the body of a write that
  /// passes all of these is read; any other request's body is discarded unread. O(headers).
  func admit(_ request: HTTPRequest) -> HTTPServer.Admission {
    guard Self.writeMethods.contains(request.method) else { return .ignoreBody }
    guard let route = Route(path: request.path) else { return .refuse(respond(to: request)) }
    guard methods(route).contains(request.method) else { return .refuse(respond(to: request)) }
    do {
      _ = try writer(request)
      if case .changes = route {
      } else {
        try Self.checkContentType(request)
      }
    } catch {
      return .refuse(respond(to: request))
    }
    return .readBody
  }

  static let writeMethods: Set<String> = ["POST", "PUT", "PATCH", "DELETE"]

  /// The media types a write with a body takes, by method: a feature as GeoJSON or JSON, and
  /// for PATCH a JSON Merge Patch too (what `/api` lists for each).
  static func bodyTypes(_ method: String) -> [String] {
    ["application/geo+json", "application/json"]
      + (method == "PATCH" ? ["application/merge-patch+json"] : [])
  }

  /// 415 unless a body's type is one the write takes (``bodyTypes(_:)``); a body without a
  /// type is read as JSON.
  static func checkContentType(_ request: HTTPRequest) throws {
    guard request.method != "DELETE",
      let type = request.header("Content-Type")?.split(separator: ";").first?
        .trimmingCharacters(in: .whitespaces).lowercased()
    else { return }
    let taken = bodyTypes(request.method)
    if !taken.contains(type) {
      throw ServiceError.request(
        415,
        "A \(request.method) body is \(taken.joined(separator: ", ")), not \(HTTPServer.loggable(type))."
      )
    }
  }

  /// POST, PUT, PATCH and DELETE on items: validated exactly as the CLI validates (every problem
  /// listed, nothing written), saved in one transaction recorded under the token's name.
  func write(_ request: HTTPRequest, route: Route) throws -> HTTPResponse {
    switch route {
    case .item, .items, .planItem, .planItems: break
    default: throw ServiceError.request(405, "Only items can be written.")
    }
    let author = try writer(request)
    try Self.checkContentType(request)
    let links = Links(base: baseURL(request))
    let condition = try Precondition(request)
    switch route {
    case .planItems(let collection):
      return try planPost(collection, request, author: author, links: links, condition: condition)
    case .planItem(let collection, let id):
      return try planChange(
        collection, id, request, author: author, links: links, condition: condition)
    default: break
    }
    switch (route, request.method) {
    case (.items, "POST"):
      if condition != nil {
        throw ServiceError.request(
          412,
          "If-Match cannot be honoured on the collection: send it with PUT, PATCH or DELETE of one item."
        )
      }
      let record = try Self.decodeFeature(request.body)
      let saved = try pool.withStore(author: author) { store in
        try store.write(record.id ?? UUID()) { current in
          if let id = current?.id {
            throw ServiceError.request(
              409, "A trip with the id \(id.lowercasedString) exists; PUT it to replace it.")
          }
          return record
        }
      }
      var response = Self.feature(saved, links: links, status: 201)
      response.headers.append(
        ("Location", links.base + "/collections/trips/items/" + saved.id!.lowercasedString))
      return response
    case (.item(let id), "PUT"):
      let uuid = try Self.uuid(id)
      let record = try Self.decodeFeature(request.body)
      if let given = record.id, given != uuid {
        throw ServiceError.request(400, "The feature's id does not match the id in the path.")
      }
      // Read, checked and written under the store's write lock: nothing commits in between.
      let saved = try pool.withStore(author: author) { store in
        try store.write(uuid) { current in
          guard let current else { throw Self.noTrip(uuid) }
          try condition?.check(current)
          return record
        }
      }
      return Self.feature(saved, links: links)
    case (.item(let id), "PATCH"):
      let uuid = try Self.uuid(id)
      let saved = try pool.withStore(author: author) { store in
        try store.write(uuid) { current in
          guard let current else { throw Self.noTrip(uuid) }
          try condition?.check(current)
          return try Self.merge(request.body, into: current)
        }
      }
      return Self.feature(saved, links: links)
    case (.item(let id), "DELETE"):
      let uuid = try Self.uuid(id)
      try pool.withStore(author: author) {
        let store = $0
        _ = try store.delete([uuid.uuidString]) { trip in
          // The plan read as values, in the delete's transaction: no model whose read traps.
          try condition?.check(try store.withPlans([trip.record])[0])
        }
      }
      return HTTPResponse(status: 204)
    default:
      throw ServiceError.request(405, "\(request.method) is not allowed here.")
    }
  }

  /// `If-Match` on a write (OGC API – Features Part 4's optimistic locking, RFC 9110 §13.1.1):
  /// `*` or a list of entity tags; the write goes ahead only if the trip's current ``etag(_:)``
  /// is one of them (strong comparison: a weak tag never matches), else 412 and nothing is
  /// written. The check runs under the store's write lock, in the transaction of the write.
  /// `If-None-Match` and `If-Unmodified-Since` are refused on writes with 412 rather than
  /// ignored.
  struct Precondition {
    var tags: [String]?

    init?(_ request: HTTPRequest) throws {
      if request.header("If-None-Match") != nil || request.header("If-Unmodified-Since") != nil {
        throw ServiceError.request(
          412,
          "Only If-Match is honoured on writes (with an ETag from a GET of the item); If-None-Match and If-Unmodified-Since are not."
        )
      }
      guard let header = request.header("If-Match") else { return nil }
      let items = header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
      guard !items.isEmpty, items.allSatisfy({ !$0.isEmpty }) else {
        throw ServiceError.request(
          400, "Invalid If-Match: give * or entity tags such as \"3f2a…\", separated by commas.")
      }
      if items == ["*"] {
        tags = nil
      } else {
        for item in items
        where !(item.hasPrefix("W/\"") || item.hasPrefix("\"")) || !item.hasSuffix("\"")
          || item.count < 2
        {
          throw ServiceError.request(
            400,
            "Invalid If-Match value '\(HTTPServer.loggable(item))': an entity tag is quoted, such as \"3f2a…\"."
          )
        }
        tags = items
      }
    }

    /// Throws 412 unless `current` has one of the tags (`*`: any trip that exists).
    func check(_ current: TripRecord) throws {
      try check(tag: FeaturesAPI.etag(current), of: "trip")
    }

    /// Throws 412 unless `tag`, the current tag of a `what`, is one of the tags.
    func check(tag: String, of what: String) throws {
      guard let tags else { return }
      guard tags.contains(tag) else {
        throw ServiceError.request(
          412,
          "The \(what) changed since that version (If-Match \(tags.joined(separator: ", ")); it is now \(tag). GET it again, then retry."
        )
      }
    }
  }

  /// The trip's entity tag: a strong validator of its stored values (FNV-1a, 64 bits, over
  /// its canonical GeoJSON without links), quoted. The same values give the same tag on every
  /// server of one store; any change of any member gives another. O(size of the trip).
  static func etag(_ record: TripRecord) -> String {
    etag(of: TripGeoJSON.feature(record))
  }

  /// A feature's entity tag: FNV-1a, 64 bits, over its canonical JSON (without links), quoted.
  static func etag(of feature: JSONValue) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in feature.utf8() {
      hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }
    let hex = String(hash, radix: 16)
    return "\"" + String(repeating: "0", count: 16 - hex.count) + hex + "\""
  }

  /// The 404 of a write to a trip that does not exist.
  static func noTrip(_ id: UUID) -> ServiceError {
    ServiceError.request(404, "There is no trip with the id \(id.lowercasedString).")
  }

  static func uuid(_ id: String) throws -> UUID {
    guard let uuid = UUID(uuidString: id) else {
      throw ServiceError.request(404, "There is no trip with the id '\(HTTPServer.loggable(id))'.")
    }
    return uuid
  }

  /// A GeoJSON Feature body as a record, or 400 with every problem.
  static func decodeFeature(_ body: Data) throws -> TripRecord {
    guard !body.isEmpty else {
      throw ServiceError.request(400, "The request has no body: send a GeoJSON Feature.")
    }
    do {
      let record = try TripGeoJSON.decodeFeature(body, file: "body", plans: true)
      let problems = record.violations.map(\.reason)
      guard problems.isEmpty else {
        throw ServiceError.request(
          400, "The trip is not valid: " + problems.joined(separator: "; ") + ".")
      }
      return record
    } catch let error as TripPlannerError {
      throw ServiceError.request(400, error.description)
    }
  }

  /// A PATCH body (a partial Feature: `properties` to change, and/or a new `geometry`) merged
  /// into `record`.
  static func merge(_ body: Data, into record: TripRecord) throws -> TripRecord {
    let feature = try merged(
      body, into: TripGeoJSON.feature(record), noneWhenNull: ["bucketList", "livingAccommodation"])
    var merged = try decodeFeature(Data(feature.rendered(pretty: false).utf8))
    merged.id = record.id
    return merged
  }

  /// `feature` with a PATCH body applied as a JSON Merge Patch (RFC 7396): the body's
  /// `properties` and `geometry` are merged into the feature's (a member given sets it, objects
  /// merging member by member; a member `null` removes it, which for a required member makes
  /// the result invalid); `type` and `id` in the body are ignored, anything else is 400.
  ///
  /// A member of `noneWhenNull` (a trip's `bucketList` and `livingAccommodation`, which a
  /// write keeps when they are left out) is set to `null` instead, which a trip's body reads as
  /// none: an empty bucket list, no stay; removing it would keep it, a `null` changing nothing.
  /// O(size of the feature and the body).
  static func merged(
    _ body: Data, into feature: JSONValue, noneWhenNull: Set<String> = []
  ) throws -> JSONValue {
    let patch: JSONValue
    do {
      patch = try JSONValue.parse(body)
    } catch {
      throw ServiceError.request(
        400, "The PATCH body is not JSON: \(HTTPServer.loggable(JSONValue.describe(error))).")
    }
    guard case .object(let members) = patch else {
      throw ServiceError.request(
        400, "A PATCH body is a JSON object: {\"properties\": {…}} and/or {\"geometry\": {…}}.")
    }
    guard case .object(var feature) = feature else { return feature }
    for (key, value) in members {
      switch key {
      case "properties":
        guard case .object(let changes) = value,
          let index = feature.firstIndex(where: { $0.0 == "properties" })
        else { throw ServiceError.request(400, "'properties' must be an object.") }
        feature[index].1 = feature[index].1.merging(value)
        for (name, change) in changes where change == .null && noneWhenNull.contains(name) {
          guard case .object(var properties) = feature[index].1 else { continue }
          properties.append((name, .null))
          feature[index].1 = .object(properties)
        }
      case "geometry":
        if let index = feature.firstIndex(where: { $0.0 == "geometry" }) {
          feature[index].1 = feature[index].1.merging(value)
        } else {
          feature.append(("geometry", value))
        }
      case "type", "id":
        continue
      default:
        throw ServiceError.request(
          400, "Unknown member '\(HTTPServer.loggable(key))' in the PATCH body.")
      }
    }
    return .object(feature)
  }
}
