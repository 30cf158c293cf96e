import CQL2
import Foundation
import Geo
import TripPlanner

extension TripService {
  /// Parses the query parameters of `GET /collections/trips/items` as the service does (for
  /// fuzzing and for other front ends): the trip query with its page, or a ``ServiceError``
  /// with status 400 naming the parameter at fault.
  public static func itemsQuery(_ parameters: [(name: String, value: String)]) throws -> TripQuery {
    try ItemsQuery(HTTPRequest(method: "GET", path: "/collections/trips/items", query: parameters))
      .query
  }
}

/// The query parameters of `items`, `bounds` and `sections`, parsed strictly: every bad value
/// is a 400 naming the parameter, and a parameter the API does not define is refused too (OGC
/// API – Features, /req/core/query-param-unknown).
struct ItemsQuery {
  /// The filters, sort and page as a trip query.
  var query: TripQuery
  var limit: Int
  var offset: Int
  /// The parameters as given (but `offset`), to rebuild page links.
  var kept: [(name: String, value: String)]

  static let defaultLimit = 10
  /// The largest `limit` and `offset` taken, 2^53 − 1 (as /api states: the largest whole
  /// number every JSON reader holds exactly).
  static let largestWholeNumber = 9_007_199_254_740_991
  static let maximumLimit = 10_000
  /// The longest value accepted for any parameter.
  static let maximumValueLength = 1_000

  /// The longest `filter` accepted (a polygon with a few hundred positions).
  static let maximumFilterLength = 16_000

  static let filterNames: Set<String> = [
    "bbox", "bbox-crs", "datetime", "destination", "q", "f", "filter", "filter-lang",
    "filter-crs",
  ]
  static let itemNames: Set<String> = filterNames.union([
    "limit", "offset", "sortby", "crs", "properties", "skipGeometry",
  ])

  /// The same query without its page (for `numberMatched`).
  var unpaged: TripQuery {
    var query = self.query
    query.limit = nil
    query.offset = nil
    return query
  }

  init(_ request: HTTPRequest, allowed: Set<String> = ItemsQuery.itemNames) throws {
    try Self.refuseUnknown(request, allowed: allowed)
    var query = TripQuery()
    func single(_ name: String) throws -> String? {
      let values = request.queryValues(name)
      guard values.count <= 1 else {
        throw ServiceError.request(400, "The parameter '\(name)' is given more than once.")
      }
      return values.first
    }
    let bboxCRS = try single("bbox-crs").map { try FeatureCRS.named($0, parameter: "bbox-crs") }
    if let text = try single("bbox") { query.bbox = try Self.bbox(text, crs: bboxCRS ?? .crs84) }
    if let text = try single("datetime") {
      let (from, to) = try Self.datetime(text)
      query.from = from
      query.to = to
    }
    if let destination = try single("destination") {
      guard !destination.isEmpty else {
        throw ServiceError.request(400, "Invalid value for 'destination': it is empty.")
      }
      query.destination = destination
    }
    if let text = try single("q") {
      guard !text.isEmpty else {
        throw ServiceError.request(400, "Invalid value for 'q': it is empty.")
      }
      query.search = text
    }
    query.filter = try Self.filter(
      try single("filter"), language: try single("filter-lang"), crs: try single("filter-crs"))
    if let text = try single("sortby") { (query.sort, query.reverse) = try Self.sort(text) }
    limit = Self.defaultLimit
    if let text = try single("limit") {
      guard let value = Int(text), value >= 1, value <= Self.largestWholeNumber else {
        throw ServiceError.request(
          400,
          "Invalid value '\(HTTPServer.loggable(text))' for 'limit': expected a whole number from 1 to 2^53 − 1."
        )
      }
      limit = min(value, Self.maximumLimit)  // larger is clamped, as the standard allows
    }
    offset = 0
    if let text = try single("offset") {
      guard let value = Int(text), value >= 0, value <= Self.largestWholeNumber else {
        throw ServiceError.request(
          400,
          "Invalid value '\(HTTPServer.loggable(text))' for 'offset': expected a whole number from 0 to 2^53 − 1."
        )
      }
      offset = value
    }
    query.limit = limit
    query.offset = offset
    self.query = query
    kept =
      request.query.filter { $0.name != "offset" && $0.name != "limit" } + [
        ("limit", String(limit))
      ]
  }

  /// Refuses parameters the endpoint does not define, and values too long or not text.
  static func refuseUnknown(_ request: HTTPRequest, allowed: Set<String>) throws {
    for (name, value) in request.query {
      guard allowed.contains(name) else {
        throw ServiceError.request(
          400,
          "Unknown parameter '\(HTTPServer.loggable(name))'; this endpoint takes \(allowed.sorted().joined(separator: ", "))."
        )
      }
      let longest = name == "filter" ? maximumFilterLength : maximumValueLength
      // Characters as JSON Schema's maxLength counts them (Unicode scalars), which /api states.
      guard value.unicodeScalars.count <= longest else {
        throw ServiceError.request(
          400, "The value of '\(name)' is longer than \(longest) characters.")
      }
      guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == "\u{FFFD}" }) else {
        throw ServiceError.request(
          400, "The value of '\(name)' holds control characters or bytes that are not UTF-8.")
      }
    }
  }

  /// The CQL2 filter of `filter`, in `filter-lang` (`cql2-text`, the default, or
  /// `cql2-json`) and `filter-crs` (CRS84 only); nil without `filter`. A filter that does not
  /// parse or compile is a 400 naming the place in it and the reason.
  static func filter(_ text: String?, language: String?, crs: String?) throws -> TripFilter? {
    if let crs, crs != FeaturesAPI.crs84 {
      throw ServiceError.request(
        400, "Invalid value for 'filter-crs': only \(FeaturesAPI.crs84) is supported.")
    }
    if let language, language != "cql2-text", language != "cql2-json" {
      throw ServiceError.request(
        400,
        "Invalid value '\(HTTPServer.loggable(language))' for 'filter-lang': expected cql2-text or cql2-json."
      )
    }
    // Without a filter, a valid filter-lang or filter-crs says nothing, and is no error.
    guard let text else { return nil }
    do {
      if language == "cql2-json" { return try TripFilter(json: Data(text.utf8)) }
      return try TripFilter(text: text)
    } catch let error as CQL2Error {
      throw ServiceError.request(400, "Invalid value for 'filter': \(error)")
    }
  }

  /// `west,south,east,north` in CRS84 (in `crs`, its 4 numbers in that CRS's axis order);
  /// west > east crosses the antimeridian.
  static func bbox(_ text: String, crs: FeatureCRS = .crs84) throws -> GeographicBox {
    // Split on the comma's byte: splitting a String by Character runs grapheme breaking, most of
    // this function's cost on every bbox page. (A comma followed by a combining mark is split
    // here too, and its part then is not a number.)
    let parts = text.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
      .map { String(decoding: $0, as: UTF8.self) }
    if parts.count == 6 {
      throw ServiceError.request(
        400,
        "Invalid value for 'bbox': 6 numbers (a 3D box) are not supported; give west,south,east,north."
      )
    }
    let numbers = parts.compactMap(TripRecord.parseNumber)
    guard parts.count == 4, numbers.count == 4 else {
      throw ServiceError.request(
        400,
        "Invalid value '\(HTTPServer.loggable(text))' for 'bbox': expected 4 numbers, west,south,east,north."
      )
    }
    return try crs.geographicBox(numbers, text: text)
  }

  /// The box, or a 400 when a longitude is outside -180…180, a latitude outside -90…90, or
  /// south is above north.
  static func checkedBox(west: Double, south: Double, east: Double, north: Double, text: String)
    throws -> GeographicBox
  {
    guard (-180...180).contains(west), (-180...180).contains(east), (-90...90).contains(south),
      (-90...90).contains(north), south <= north
    else {
      throw ServiceError.request(
        400,
        "Invalid value '\(HTTPServer.loggable(text))' for 'bbox': longitudes must be within -180…180, latitudes within -90…90, south not above north."
      )
    }
    return GeographicBox(west: west, south: south, east: east, north: north)
  }

  /// An instant, or an interval `start/end` with `..` (or nothing) for an open end. A trip
  /// matches when its dates overlap it. A bare date is its whole day (UTC).
  static func datetime(_ text: String) throws -> (Date?, Date?) {
    func bad() -> ServiceError {
      ServiceError.request(
        400,
        "Invalid value '\(HTTPServer.loggable(text))' for 'datetime': expected an RFC 3339 instant, a date, or an interval start/end with .. for an open end."
      )
    }
    func instant(_ part: String, end: Bool) throws -> Date? {
      if part.isEmpty || part == ".." { return nil }
      guard let date = TripDates.parse(part) else { throw bad() }
      if part.count == 10, end { return date.addingTimeInterval(86_400 - 0.001) }
      return date
    }
    let parts = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    switch parts.count {
    case 1:
      guard parts[0] != "..", !parts[0].isEmpty else { throw bad() }
      return (try instant(parts[0], end: false), try instant(parts[0], end: true))
    case 2:
      let from = try instant(parts[0], end: false)
      let to = try instant(parts[1], end: true)
      if let from, let to, to < from {
        throw ServiceError.request(
          400,
          "Invalid value '\(HTTPServer.loggable(text))' for 'datetime': the interval ends before it starts."
        )
      }
      return (from, to)
    default:
      throw bad()
    }
  }

  /// `sortby=name`, `-startDate`, `+destination` (one key; `start` and `end` also).
  static func sort(_ text: String) throws -> (TripQuery.Sort, Bool) {
    var key = text
    var reverse = false
    if key.hasPrefix("-") {
      reverse = true
      key.removeFirst()
    } else if key.hasPrefix("+") {
      key.removeFirst()
    }
    // Each order by its field's name, and by its own (`start`, `end`).
    let sorts = TripQuery.Sort.allCases
    guard let sort = sorts.first(where: { $0.field.name == key || $0.rawValue == key }) else {
      throw ServiceError.request(
        400,
        "Invalid value '\(HTTPServer.loggable(text))' for 'sortby': expected one of \(sorts.map(\.field.name).joined(separator: ", ")), with - for descending."
      )
    }
    return (sort, reverse)
  }

  /// The items path (`items`, the trips' by default) with these parameters at `offset`.
  func path(_ items: String = "/collections/trips/items", offset: Int) -> String {
    let parameters = kept + [("offset", String(offset))]
    let query = parameters.map { "\(Self.escape($0.name))=\(Self.escape($0.value))" }.joined(
      separator: "&")
    return items + "?" + query
  }

  /// `text` percent-encoded for a query: unreserved characters, `,` and `:` kept as they are
  /// (so that a `bbox` reads as typed), every other UTF-8 byte as `%XX`. O(length).
  static func escape(_ text: String) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count)
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: ","), UInt8(ascii: ":"):
        bytes.append(byte)
      default:
        bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}
