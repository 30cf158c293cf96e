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

  /// The document, with `base` as its server and `limits` in its description.
  static func make(base: String, limits: HTTPLimits = HTTPLimits()) -> JSONValue {
    let json = FeaturesAPI.json
    let paging: [JSONValue] = [
      parameter(
        "limit", "At most this many trips (default 10; larger than 10000 is taken as 10000).",
        schema: .object([
          ("type", .string("integer")), ("minimum", .number(1)), ("default", .number(10)),
          ("maximum", .number(9_007_199_254_740_991)),
        ])),
      parameter(
        "offset", "Skip this many trips (the next link sets it).",
        schema: .object([
          ("type", .string("integer")), ("minimum", .number(0)),
          ("maximum", .number(9_007_199_254_740_991)),
        ])),
      parameter(
        "sortby", "startDate, endDate, name or destination; - before it for descending.",
        schema: text(pattern: "^[+-]?(startDate|start|endDate|end|name|destination)$")),
    ]
    let paths: [(String, JSONValue)] =
      [
        (
          "/",
          .object([
            (
              "get",
              operation(
                "The landing page", "getLandingPage",
                ok: ("200", response("Links to the API, conformance and data.", json)))
            )
          ])
        ),
        (
          "/conformance",
          .object([
            (
              "get",
              operation(
                "The conformance classes", "getConformance",
                ok: ("200", response("The classes implemented.", json)))
            )
          ])
        ),
        (
          "/api",
          .object([
            (
              "get",
              operation(
                "This definition", "getAPI",
                ok: ("200", response("OpenAPI 3.0.", FeaturesAPI.openAPI)))
            )
          ])
        ),
        (
          "/collections",
          .object([
            (
              "get",
              operation(
                "The collections", "getCollections",
                ok: ("200", response("The trips collection.", json)))
            )
          ])
        ),
        (
          "/collections/trips",
          .object([
            (
              "get",
              operation(
                "The trips collection, with its extent", "describeCollection",
                ok: ("200", response("The collection.", json)))
            )
          ])
        ),
        (
          "/collections/trips/items",
          .object([
            (
              "get",
              operation(
                "Trips, a page at a time", "getFeatures",
                parameters: filters + paging + [crsParameter] + selection,
                ok: (
                  "200",
                  featureResponse(
                    "A FeatureCollection with numberMatched, numberReturned and next/prev links.",
                    "TripFeatureCollection")
                ))
            ),
            (
              "post",
              operation(
                "Add a trip (a GeoJSON Feature; its properties may carry its bucketList and livingAccommodation)",
                "createFeature",
                ok: ("201", featureResponse("The trip, with its Location.", "TripFeature")),
                extra: [
                  ("401", response("A valid bearer token is needed.", json)),
                  ("405", response("The service is read-only.", json)),
                  ("409", response("The id exists.", json)),
                  (
                    "412",
                    response("If-Match was sent: a collection has no version to match.", json)
                  ),
                  ("413", response("The body is larger than 16 MiB.", json)),
                ], body: true, secured: true, bodySchema: "TripFeatureInput")
            ),
          ])
        ),
        (
          "/collections/trips/queryables",
          .object([
            (
              "get",
              operation(
                "What a filter can name", "getQueryables",
                ok: (
                  "200",
                  response(
                    "A JSON Schema of the trips' queryables, each with its type and format.",
                    FeaturesAPI.schemaJSON)
                ))
            )
          ])
        ),
        (
          "/collections/trips/sortables",
          .object([
            (
              "get",
              operation(
                "What sortby can name", "getSortables",
                ok: (
                  "200",
                  response(
                    "A JSON Schema of the trips' sortables.", FeaturesAPI.schemaJSON)
                ))
            )
          ])
        ),
        (
          "/collections/trips/items/{featureId}",
          .object([
            (
              "get",
              operation(
                "One trip", "getFeature", parameters: [idParameter, crsParameter],
                ok: (
                  "200", featureResponse("The trip as a Feature, with its ETag.", "TripFeature")
                ),
                extra: [notModified])
            ),
            (
              "put",
              operation(
                "Replace a trip (a plan given replaces its plan, one left out keeps it)",
                "replaceFeature", parameters: [idParameter, ifMatch],
                ok: ("200", featureResponse("The trip, with its new ETag.", "TripFeature")),
                extra: conditionalWrite, body: true, secured: true, bodySchema: "TripFeatureInput")
            ),
            (
              "patch",
              operation(
                "Change some of a trip's properties or its geometry", "updateFeature",
                parameters: [idParameter, ifMatch],
                ok: ("200", featureResponse("The trip, with its new ETag.", "TripFeature")),
                extra: conditionalWrite, body: true, secured: true, method: "PATCH",
                bodyDescription: mergePatch, bodySchema: "TripFeature")
            ),
            (
              "delete",
              operation(
                "Delete a trip", "deleteFeature", parameters: [idParameter, ifMatch],
                ok: ("204", .object([("description", .string("Deleted."))])),
                extra: conditionalWrite, secured: true)
            ),
          ])
        ),
        (
          "/collections/trips/bounds",
          .object([
            (
              "get",
              operation(
                "The bounds of the matching trips, for map cameras", "getBounds",
                parameters: filters + boundsParameters + [
                  parameter(
                    "stays",
                    "true to cover the trips' stays too (a stay can be far from its trip).",
                    schema: .object([("type", .string("boolean")), ("default", .bool(false))]))
                ],
                ok: (
                  "200",
                  response(
                    "The bounds report, with the box as RFC 7946, unwrapped and non-wrapping.", json
                  )
                ))
            )
          ])
        ),
        (
          "/collections/trips/items/stream",
          .object([
            (
              "get",
              operation(
                "Each committed change to the matching trips (Server-Sent Events; Last-Event-ID resumes)",
                "streamItems", parameters: filters + [lastEventID],
                ok: (
                  "200",
                  response(
                    "text/event-stream: events insert and update (a Feature), delete ({id}), reset (every matching trip), with id = the history token; error ({message, retry}, no id) when a changed trip cannot be read, then the stream ends.",
                    "text/event-stream")
                ),
                extra: [
                  (
                    "503",
                    response(
                      "The server follows its maximum of distinct live queries (--live-queries); join a followed one or retry after Retry-After.",
                      "application/json")
                  ),
                  (
                    "429",
                    response(
                      "This client (its address) has started its share of the distinct live queries followed (4 of each kind); close one, join a followed one, or retry after Retry-After.",
                      "application/json")
                  ),
                ])
            )
          ])
        ),
        (
          "/collections/trips/bounds/stream",
          .object([
            (
              "get",
              operation(
                "The bounds now and after every change that alters them (Server-Sent Events)",
                "streamBounds", parameters: filters + boundsParameters,
                ok: (
                  "200",
                  response(
                    "text/event-stream: events 'bounds' with id = the history token, data = the bounds document; a comment every 15 s; error ({message, retry}, no id) when a changed trip cannot be evaluated, then the stream ends.",
                    "text/event-stream")
                ),
                extra: [
                  (
                    "503",
                    response(
                      "The server follows its maximum of distinct live queries (--live-queries); join a followed one or retry after Retry-After.",
                      "application/json")
                  ),
                  (
                    "429",
                    response(
                      "This client (its address) has started its share of the distinct live queries followed (4 of each kind); close one, join a followed one, or retry after Retry-After.",
                      "application/json")
                  ),
                ])
            )
          ])
        ),
        (
          "/changes",
          .object([
            (
              "get",
              operation(
                "The change feed after a history token (JSON lines)", "getChanges",
                parameters: [
                  parameter(
                    "after", "A history token (<store>:<number>); all kept history without it.",
                    schema: text(
                      pattern:
                        "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}:[0-9]{1,18}$"
                    )),
                  parameter(
                    "exclude-author",
                    "Leave out changes by this author (a peer's own, applied by sync).",
                    schema: text()),
                ],
                ok: (
                  "200",
                  response(
                    "One JSON line per change, then the token to resume from.",
                    FeaturesAPI.jsonLines)
                ),
                extra: [("410", response("The token has expired: take a full copy.", json))])
            ),
            (
              "post",
              operation(
                "Apply a change feed (idempotent; the last change of a trip wins, by when it was made)",
                "applyChanges",
                ok: ("200", response("How many changes were applied and skipped.", json)),
                body: true, secured: true, bodyTypes: [FeaturesAPI.jsonLines])
            ),
          ])
        ),
        (
          "/collections/trips/sections",
          .object([
            (
              "get",
              operation(
                "Destinations with counts and bounds", "getSections", parameters: filters,
                ok: ("200", response("The sections.", json)))
            )
          ])
        ),
        (
          "/map",
          .object([
            (
              "get",
              operation(
                "A live map of the trips (HTML; Leaflet over the shipped world outlines)", "getMap",
                ok: ("200", response("The map page.", "text/html")))
            )
          ])
        ),
      ] + planPaths(paging: Array(paging.prefix(2))) + tilePaths()
    return .object([
      ("openapi", .string("3.0.3")),
      (
        "info",
        .object([
          ("title", .string("Trip planner")), ("version", .string("0.1.0")),
          (
            "description",
            .string(
              "Trips as OGC API – Features, with bounds for map cameras. "
                + limitsDescription(limits))
          ),
        ])
      ),
      ("servers", .array([.object([("url", .string(base))])])),
      ("paths", .object(paths)),
      (
        "components",
        .object([
          ("schemas", .object(featureSchemas)),
          (
            "securitySchemes",
            .object([
              ("bearer", .object([("type", .string("http")), ("scheme", .string("bearer"))]))
            ])
          ),
        ])
      ),
    ])
  }

  /// The paths of the vector tiles (OGC API – Tiles): the tile matrix sets, the trips'
  /// tilesets, the TileJSON and a tile.
  static func tilePaths() -> [(String, JSONValue)] {
    let json = FeaturesAPI.json
    // The filters of items but bbox (the tile is the box), and f: json for the documents.
    let tileFilters = filters.filter {
      guard case .object(let members) = $0,
        case .string(let name) = members.first(where: { $0.0 == "name" })?.1
      else { return false }
      return !["bbox", "bbox-crs"].contains(name)
    }
    let set: JSONValue = .object([
      ("name", .string("tileMatrixSetId")), ("in", .string("path")), ("required", .bool(true)),
      ("description", .string("The tile matrix set: \(FeaturesAPI.tileMatrixSetID).")),
      (
        "schema",
        .object([
          ("type", .string("string")),
          ("enum", .array([.string(FeaturesAPI.tileMatrixSetID)])),
        ])
      ),
    ])
    func index(_ name: String, _ description: String, maximum: Int) -> JSONValue {
      .object([
        ("name", .string(name)), ("in", .string("path")), ("required", .bool(true)),
        ("description", .string(description)),
        (
          "schema",
          .object([
            ("type", .string("integer")), ("minimum", .number(0)),
            ("maximum", .number(Double(maximum))),
          ])
        ),
      ])
    }
    let tile: JSONValue = .object([
      (
        "description",
        .string(
          "The tile as MVT 2.1 (empty when it holds no trip), with its ETag and OGC-NumberMatched.")
      ),
      (
        "content",
        .object([
          (
            FeaturesAPI.mvt,
            .object([
              ("schema", .object([("type", .string("string")), ("format", .string("binary"))]))
            ])
          )
        ])
      ),
    ])
    let tileFormat = parameter(
      "f", "The format: mvt.",
      schema: .object([("type", .string("string")), ("enum", .array([.string("mvt")]))]))
    return [
      (
        "/tileMatrixSets",
        .object([
          (
            "get",
            operation(
              "The tile matrix sets of the tiles", "getTileMatrixSetsList",
              parameters: [filters.last!],
              ok: ("200", response("The list (WebMercatorQuad).", json)))
          )
        ])
      ),
      (
        "/tileMatrixSets/{tileMatrixSetId}",
        .object([
          (
            "get",
            operation(
              "A tile matrix set's definition (OGC 17-083r4, JSON)", "getTileMatrixSet",
              parameters: [set, filters.last!],
              ok: ("200", response("The definition, tile matrices 0 to 24.", json)))
          )
        ])
      ),
      (
        "/collections/trips/tiles",
        .object([
          (
            "get",
            operation(
              "The trips' vector tilesets", "getCollectionVectorTilesetsList",
              parameters: tileFilters,
              ok: ("200", response("The tilesets (one per tile matrix set).", json)))
          )
        ])
      ),
      (
        "/collections/trips/tiles/{tileMatrixSetId}",
        .object([
          (
            "get",
            operation(
              "The trips' vector tileset: its layers and the template of its tiles (with the filters given)",
              "getCollectionVectorTileSet", parameters: [set] + tileFilters,
              ok: ("200", response("The tileset's metadata.", json)))
          )
        ])
      ),
      (
        "/collections/trips/tiles/{tileMatrixSetId}/tilejson.json",
        .object([
          (
            "get",
            operation(
              "The tileset as TileJSON 3.0.0 (with the filters given in its tiles' template)",
              "getCollectionTileJSON", parameters: [set] + tileFilters,
              ok: ("200", response("The TileJSON.", json)), extra: [notModified])
          )
        ])
      ),
      (
        "/collections/trips/tiles/{tileMatrixSetId}/{tileMatrix}/{tileRow}/{tileCol}",
        .object([
          (
            "get",
            operation(
              "A vector tile of the trips: points, or clusters where there are more than \(TripTile.featureBudget)",
              "getCollectionVectorTile",
              parameters: [
                set, index("tileMatrix", "The zoom level, 0 to 24.", maximum: 24),
                index(
                  "tileRow", "The row, 0 to 2^tileMatrix − 1, from the north.",
                  maximum: (1 << 24) - 1),
                index(
                  "tileCol", "The column, 0 to 2^tileMatrix − 1, from 180° W.",
                  maximum: (1 << 24) - 1),
              ] + tileFilters.dropLast() + [tileFormat],
              ok: ("200", tile), extra: [notModified],
              notAcceptable: "Only a Mapbox Vector Tile can be returned.")
          )
        ])
      ),
    ]
  }

  /// The paths of the plan collections (`stays`, `bucket-list-items`): the collection, its
  /// items (GET a page, POST one) and one item (GET, PATCH, DELETE).
  static func planPaths(paging: [JSONValue]) -> [(String, JSONValue)] {
    let json = FeaturesAPI.json
    let trip = parameter(
      "trip", "Only those of the trip with this id.", schema: text(pattern: uuidPattern))
    return FeaturesAPI.PlanCollection.allCases.flatMap { collection -> [(String, JSONValue)] in
      let noun = collection.noun
      let name = collection == .stays ? "Stay" : "BucketListItem"
      let filters: [JSONValue] =
        collection == .stays
        ? [filters[0], filters[1], trip, filters.last!]
        : [
          trip,
          parameter(
            "q", "Items whose title or details contain this, ignoring case and accents.",
            schema: text()),
          filters.last!,
        ]
      let id: JSONValue = .object([
        ("name", .string("featureId")), ("in", .string("path")), ("required", .bool(true)),
        ("description", .string("The \(noun)'s id (a UUID).")), ("schema", string),
      ])
      let write: [(String, JSONValue)] = [
        ("401", response("A valid bearer token is needed.", json)),
        ("412", response("The \(noun) changed since the version in If-Match.", json)),
      ]
      let bounds: [(String, JSONValue)] =
        collection == .stays
        ? [
          (
            collection.path + "/bounds",
            .object([
              (
                "get",
                operation(
                  "The bounds of the matching stays, for map cameras", "getStaysBounds",
                  parameters: [filters[0], filters[1], trip, filters.last!] + boundsParameters,
                  ok: (
                    "200",
                    response(
                      "The bounds report of the stays, with the box as RFC 7946, unwrapped and non-wrapping.",
                      json)
                  ))
              )
            ])
          ),
          (
            collection.path + "/items/stream",
            .object([
              (
                "get",
                operation(
                  "Each committed change to the matching stays (Server-Sent Events; Last-Event-ID resumes within the feed's latest events, else one reset)",
                  "streamStays",
                  parameters: [filters[0], filters[1], trip, filters.last!, lastEventID],
                  ok: (
                    "200",
                    response(
                      "text/event-stream: events insert and update (a stay's Feature), delete ({id}), reset (every matching stay), with id = the history token; error ({message, retry}, no id) when a changed trip cannot be read, then the stream ends.",
                      "text/event-stream")
                  ),
                  extra: [
                    (
                      "503",
                      response(
                        "The server follows its maximum of distinct live queries; Retry-After.",
                        json)
                    ),
                    (
                      "429",
                      response(
                        "This client (its address) has started its share of the distinct live queries followed; Retry-After.",
                        json)
                    ),
                  ])
              )
            ])
          ),
        ] : []
      return bounds + [
        (
          collection.path,
          .object([
            (
              "get",
              operation(
                "The \(collection.title.lowercased()) collection", "describe\(name)Collection",
                ok: ("200", response("The collection.", json)))
            )
          ])
        ),
        (
          collection.path + "/items",
          .object([
            (
              "get",
              operation(
                "\(collection.title), a page at a time", "get\(name)Features",
                parameters: filters + paging,
                ok: (
                  "200",
                  featureResponse(
                    "A FeatureCollection with numberMatched, numberReturned and next/prev links.",
                    name + "FeatureCollection")
                ))
            ),
            (
              "post",
              operation(
                collection == .stays
                  ? "Set the stay of the trip properties.tripId names (a Point Feature; 409 when it has one)"
                  : "Add an item to the trip properties.tripId names (a Feature without geometry; at properties.position, else last)",
                "create\(name)",
                ok: ("201", featureResponse("The \(noun), with its Location.", name + "Feature")),
                extra: [
                  ("401", response("A valid bearer token is needed.", json)),
                  ("405", response("The service is read-only.", json)),
                  ("409", response("The trip has a stay already.", json)),
                  (
                    "412",
                    response("If-Match was sent: a collection has no version to match.", json)
                  ),
                  ("413", response("The body is larger than 16 MiB.", json)),
                ], body: true, secured: true, bodySchema: name + "FeatureInput")
            ),
          ])
        ),
        (
          collection.path + "/items/{featureId}",
          .object([
            (
              "get",
              operation(
                "One \(noun)", "get\(name)", parameters: [id],
                ok: (
                  "200",
                  featureResponse("The \(noun) as a Feature, with its ETag.", name + "Feature")
                ),
                extra: [notModified])
            ),
            (
              "patch",
              operation(
                "Change some of the \(noun)'s properties\(collection == .stays ? " or its geometry" : " (position moves it)")",
                "update\(name)", parameters: [id, ifMatch],
                ok: ("200", featureResponse("The \(noun), with its new ETag.", name + "Feature")),
                extra: write, body: true, secured: true, method: "PATCH",
                bodyDescription: mergePatch, bodySchema: name + "Feature")
            ),
            (
              "delete",
              operation(
                "Delete the \(noun)", "delete\(name)", parameters: [id, ifMatch],
                ok: ("204", .object([("description", .string("Deleted."))])),
                extra: write, secured: true)
            ),
          ])
        ),
      ]
    }
  }
}
