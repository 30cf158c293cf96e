import Foundation
import TripPlanner

/// The service's OpenAPI 3.0 definition (`/api`). A test requests every path it lists, so it
/// cannot describe an endpoint that does not answer.
enum OpenAPIDocument {
  /// A query parameter.
  static func parameter(_ name: String, _ description: String, schema: JSONValue) -> JSONValue {
    .object([
      ("name", .string(name)), ("in", .string("query")), ("required", .bool(false)),
      ("description", .string(description)), ("schema", schema),
      ("style", .string("form")), ("explode", .bool(false)),
    ])
  }

  static let string: JSONValue = .object([("type", .string("string"))])

  /// Text as every query parameter takes it: 1 to 1,000 characters, none of them a control
  /// character (or U+FFFD, which stands for bytes that were not UTF-8).
  static func text(pattern: String? = nil, maxLength: Int = ItemsQuery.maximumValueLength)
    -> JSONValue
  {
    .object([
      ("type", .string("string")), ("minLength", .number(1)),
      ("maxLength", .number(Double(maxLength))),
      ("pattern", .string(pattern ?? "^[^\\u0000-\\u001F\\uFFFD]+$")),
    ])
  }

  /// An RFC 3339 date or instant (with a zone), as `datetime` takes them: a real day of the
  /// Gregorian calendar from year 1 (29 February in leap years only), a real time of day, a
  /// zone within ±18:00 (as Foundation's ISO 8601 parser takes them).
  static let instantPattern: String = {
    let year = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
    let leapYear = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
    let day =
      "(\(year)-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|\(year)-(0[13-9]|1[0-2])-(29|30)"
      + "|\(year)-(0[13578]|1[02])-31|\(leapYear)-02-29)"
    let time =
      "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-](0[0-9]|1[0-7]):[0-5][0-9]|[+-]18:00)"
    return "\(day)(\(time))?"
  }()

  /// A UUID, as ids are written.
  static let uuidPattern =
    "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"

  /// `properties` and `skipGeometry` of items: what of each feature the page carries.
  static let selection: [JSONValue] = [
    parameter(
      "properties",
      "The properties each feature carries, comma-separated (empty for none): \(FeatureSelection.names.joined(separator: ", ")).",
      schema: .object([
        ("type", .string("array")),
        (
          "items",
          .object([
            ("type", .string("string")),
            ("enum", .array(FeatureSelection.names.map(JSONValue.string))),
          ])
        ),
      ])),
    parameter(
      "skipGeometry", "true: each feature's geometry is null.",
      schema: .object([("type", .string("boolean")), ("default", .bool(false))])),
  ]

  /// `crs` of items and items/{id} (Part 2): the CRS of the coordinates answered.
  static let crsParameter = parameter(
    "crs",
    "The CRS of the coordinates answered (Content-Crs says it): CRS84 (the default), EPSG:4326 (latitude first) or EPSG:3857 (metres).",
    schema: .object([
      ("type", .string("string")), ("format", .string("uri")),
      ("enum", .array(FeatureCRS.offered.map(JSONValue.string))),
    ]))

  /// `If-Match`: the write goes ahead only if the trip's ETag is one of these (or `*`).
  static let ifMatch: JSONValue = .object([
    ("name", .string("If-Match")), ("in", .string("header")), ("required", .bool(false)),
    (
      "description",
      .string(
        "The trip's ETag from a GET (or *): the write is done only if the trip is still that version, else 412."
      )
    ),
    (
      "schema",
      .object([
        ("type", .string("string")),
        ("pattern", .string(#"^(\*|(W/)?"[^,]*"([ \t]*,[ \t]*(W/)?"[^,]*")*)$"#)),
      ])
    ),
  ])

  /// The answers of a conditional write of one trip.
  static let conditionalWrite: [(String, JSONValue)] = [
    ("401", response("A valid bearer token is needed.", FeaturesAPI.json)),
    ("412", response("The trip changed since the version in If-Match.", FeaturesAPI.json)),
  ]

  static let filters: [JSONValue] = [
    parameter(
      "bbox",
      "west,south,east,north in CRS84; west greater than east crosses the antimeridian and selects trips on both sides.",
      schema: .object([
        ("type", .string("array")), ("minItems", .number(4)), ("maxItems", .number(4)),
        ("items", .object([("type", .string("number"))])),
      ])),
    parameter(
      "bbox-crs",
      "The CRS of bbox (its numbers in that CRS's axis order: latitude first in EPSG:4326); CRS84 by default.",
      schema: .object([
        ("type", .string("string")), ("format", .string("uri")),
        ("enum", .array(FeatureCRS.offered.map(JSONValue.string))),
      ])),
    parameter(
      "datetime",
      "An RFC 3339 instant or date, or an interval start/end with .. (or nothing) for an open end, a real date, the end not before the start; a trip matches when its dates overlap it.",
      schema: text(
        pattern: "^(\(instantPattern)|(\(instantPattern)|\\.\\.)?/(\(instantPattern)|\\.\\.)?)$")),
    parameter(
      "destination", "Trips to this destination, ignoring case and accents (whole).",
      schema: text()),
    parameter(
      "q", "Trips whose name or destination contains this, ignoring case and accents.",
      schema: text()),
    parameter(
      "filter",
      "A CQL2 filter (OGC API – Features Part 3) over the queryables (/collections/trips/queryables), in filter-lang. Its budget: at most \(TripFilter.Budget.maximumTerms) terms, \(TripFilter.Budget.maximumListItems) items in one IN list, \(TripFilter.Budget.maximumDepth) levels of operators within one another (an AND or OR chain of n terms counts log2 n), \(TripFilter.Budget.maximumSwiftClauses) functions decided row by row (each LIKE, CASEI or ACCENTI of a property, /, %, div, ^, line or polygon), \(TripFilter.Budget.maximumPatternCharacters) characters in a LIKE pattern and \(TripFilter.Budget.maximumVertices) positions of lines and polygons; past one, 400 naming it.",
      schema: .object([
        ("type", .string("string")), ("minLength", .number(1)),
        ("maxLength", .number(Double(ItemsQuery.maximumFilterLength))),
        ("format", .string("cql2")),
      ])),
    parameter(
      "filter-lang", "The language of filter: cql2-text (the default) or cql2-json.",
      schema: .object([
        ("type", .string("string")),
        ("enum", .array([.string("cql2-text"), .string("cql2-json")])),
        ("default", .string("cql2-text")),
      ])),
    parameter(
      "filter-crs", "The CRS of the filter's geometries: only \(FeaturesAPI.crs84).",
      schema: .object([
        ("type", .string("string")), ("enum", .array([.string(FeaturesAPI.crs84)])),
      ])),
    parameter(
      "f", "The format: json.",
      schema: .object([("type", .string("string")), ("enum", .array([.string("json")]))])),
  ]

  /// The answer to a GET of one feature whose `If-None-Match` names its current ETag.
  static let notModified: (String, JSONValue) = (
    "304", .object([("description", .string("If-None-Match names the current ETag."))])
  )

  /// The parameters of a bounds document besides its filters.
  static let boundsParameters: [JSONValue] = [
    parameter(
      "viewport",
      "WIDTHxHEIGHT in whole pixels from 1 to \(Viewport.maximumSide): also fit a camera.",
      schema: text(pattern: "^[0-9]{1,20}[xX][0-9]{1,20}$")),
    parameter(
      "padding", "Pixels kept free on each side of the camera fit.",
      schema: .object([
        ("type", .string("integer")), ("minimum", .number(0)), ("maximum", .number(10_000)),
      ])),
    parameter(
      "crs",
      "The projected CRS of the extent (default EPSG:3857): any CRS PROJ knows, by code (EPSG:32633), URI or PROJ string.",
      schema: text()),
  ]

  static func response(_ description: String, _ type: String) -> JSONValue {
    .object([
      ("description", .string(description)),
      ("content", .object([(type, .object([("schema", .object([("type", .string("object"))]))]))])),
    ])
  }

  static let errors: [(String, JSONValue)] = [
    ("400", response("A parameter is invalid (named in the description).", "application/json")),
    ("404", response("Not found.", "application/json")),
    ("406", response("Only JSON can be returned.", "application/json")),
    (
      "414",
      .object([
        (
          "description",
          .string(
            "The request line and headers are longer than the server holds for a connection (64 KiB by default); no body is promised."
          )
        )
      ])
    ),
  ]

  /// The 503 every operation may answer: past its deadline, the worker pool full, stopping.
  static let unavailable =
    "The request was stopped at its time limit (trips serve --request-timeout), the threads for slow requests and their queue are full, or the service is stopping; nothing was changed. Retry after Retry-After."

  /// The 429 of an operation that may be slow (run on the worker pool).
  static let tooManySlow =
    "This client (its address) has its share of the slow requests running or waiting (an eighth of the worker pool); retry after Retry-After."

  /// The answers every write may get besides its own: the store busy or full.
  static let writeErrors: [(String, JSONValue)] = [
    (
      "503",
      response(
        "The store is busy (another writer held it past its timeout), or the bodies being read take the server's memory for them; or "
          + unavailable.prefix(1).lowercased() + unavailable.dropFirst(),
        "application/json")
    ),
    ("507", response("The store is full; nothing was written.", "application/json")),
  ]

  /// What a PATCH body is.
  static let mergePatch =
    "A JSON Merge Patch (RFC 7396) of the feature: properties and geometry given are merged into the current ones (objects member by member, arrays replaced); a member null is removed, except a trip's bucketList and livingAccommodation, for which null means none (an empty list, no stay), and which are kept when left out. type and id are ignored."

  /// `If-None-Match`, which a GET of one feature answers with 304 when it names the current
  /// ETag.
  static let ifNoneMatch: JSONValue = .object([
    ("name", .string("If-None-Match")), ("in", .string("header")), ("required", .bool(false)),
    (
      "description",
      .string("An ETag: 304 without a body when it is the feature's current one (or *).")
    ),
    ("schema", .object([("type", .string("string"))])),
  ])

  /// `Last-Event-ID`, with which a stream's client comes back.
  static let lastEventID: JSONValue = .object([
    ("name", .string("Last-Event-ID")), ("in", .string("header")), ("required", .bool(false)),
    (
      "description",
      .string(
        "The id of the last event received (a history token, STORE:N): the events after it come first, or one reset when they are no longer at hand. An empty value is none, as if the header were not sent; any other value is 400."
      )
    ),
    (
      "schema",
      .object([
        ("type", .string("string")),
        (
          "pattern",
          .string(
            "^[ \t]*([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}:[0-9]{1,18})?[ \t]*$"
          )
        ),
      ])
    ),
  ])

  /// An operation: `parameters`, the `ok` answer, `extra` answers of its own and the errors
  /// every operation may answer. A write (`secured`) also lists 401, 405 (a read-only service,
  /// with `Allow`) and the store's 503 and 507; one with a `body`, 413 and 415 and the media
  /// types the server takes for `method` (``FeaturesAPI/bodyTypes(_:)``) unless `bodyTypes`
  /// names its own, each with the schema `bodySchema` names (one of `featureSchemas`, written
  /// over the models' fields), else any object. A GET answering 304
  /// lists `If-None-Match`. An answer in `extra` takes the place of a default one.
  static func operation(
    _ summary: String, _ id: String, parameters: [JSONValue] = [], ok: (String, JSONValue),
    extra: [(String, JSONValue)] = [], body: Bool = false, secured: Bool = false,
    method: String = "POST", bodyDescription: String? = nil, bodyTypes: [String]? = nil,
    bodySchema: String? = nil, notAcceptable: String = "Only JSON can be returned."
  ) -> JSONValue {
    // A body of its own types (a change feed) is read whatever its Content-Type says.
    let checksType = bodyTypes == nil
    let bodyTypes = bodyTypes ?? FeaturesAPI.bodyTypes(method)
    let json = FeaturesAPI.json
    var defaults = errors.map {
      $0.0 == "406" ? ("406", response(notAcceptable, "application/json")) : $0
    }
    if secured {
      defaults += [
        ("401", response("A valid bearer token is needed.", json)),
        (
          "405",
          response(
            "The service is read-only (--read-only); Allow names the methods it takes.", json)
        ),
      ]
    }
    if body {
      defaults.append(("413", response("The body is larger than 16 MiB.", json)))
    }
    if body && checksType {
      defaults.append(
        (
          "415",
          response(
            "The body's Content-Type is not one of " + bodyTypes.joined(separator: ", ") + ".",
            json)
        ))
    }
    if secured {
      defaults += writeErrors
    } else {
      defaults.append(("503", response(unavailable, json)))
    }
    if secured || id.contains("Sections")
      || parameters.contains(where: {
        if case .string(let name)? = $0["name"] {
          FeaturesAPI.slowParameters.contains(name)
        } else {
          false
        }
      })
    {
      defaults.append(("429", response(tooManySlow, json)))
    }
    let own = Set(extra.map(\.0))
    var responses = [ok] + extra + defaults.filter { !own.contains($0.0) }
    responses.sort { $0.0 < $1.0 }
    var parameters = parameters
    if own.contains("304") { parameters.append(ifNoneMatch) }
    var members: [(String, JSONValue)] = [
      ("summary", .string(summary)), ("operationId", .string(id)),
      ("parameters", .array(parameters)),
      ("responses", .object(responses)),
    ]
    if body {
      var content: [(String, JSONValue)] = []
      let schema: JSONValue =
        bodySchema.map { .object([("$ref", .string("#/components/schemas/" + $0))]) }
        ?? .object([("type", .string("object"))])
      for type in bodyTypes { content.append((type, .object([("schema", schema)]))) }
      var requestBody: [(String, JSONValue)] = [("required", .bool(true))]
      if let bodyDescription { requestBody.append(("description", .string(bodyDescription))) }
      requestBody.append(("content", .object(content)))
      members.append(("requestBody", .object(requestBody)))
    }
    if secured { members.append(("security", .array([.object([("bearer", .array([]))])]))) }
    return .object(members)
  }

  static let idParameter: JSONValue = .object([
    ("name", .string("featureId")), ("in", .string("path")), ("required", .bool(true)),
    ("description", .string("The trip's id (a UUID).")), ("schema", string),
  ])

  /// What the service promises about time and room, for the document's description.
  static func limitsDescription(_ limits: HTTPLimits) -> String {
    let deadline =
      limits.requestSeconds > 0
      ? "Each request may work at most \(Int(limits.requestSeconds)) seconds (trips serve --request-timeout), then it is stopped and answered 503 with Retry-After; a request whose client hung up is stopped too."
      : "Requests have no time limit (trips serve --request-timeout 0)."
    let pool =
      limits.slowRequestThreads > 0
      ? " Requests that may be slow (a filter, q, destination, sortby, an offset past 1000, sections, every write) run on \(limits.slowRequestThreads) threads of their own with \(limits.slowRequestQueue) more waiting, never holding up the others; past that they are answered 503 with Retry-After at once, and one client (by its address) past \(limits.slowRequestShare) of them running or waiting 429. A request's time counts from its arrival, waiting included."
      : ""
    return deadline + pool
  }

}
