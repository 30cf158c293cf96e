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

  /// `If-Match`: the write goes ahead only if the trip's ETag is one of these (or `*`).
  static let ifMatch: JSONValue = .object([
    ("name", .string("If-Match")), ("in", .string("header")), ("required", .bool(false)),
    (
      "description",
      .string(
        "The trip's ETag from a GET (or *): the write is done only if the trip is still that version, else 412."
      )
    ), ("schema", string),
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
    parameter("bbox-crs", "Only \(FeaturesAPI.crs84).", schema: string),
    parameter(
      "datetime",
      "An RFC 3339 instant or date, or an interval start/end with .. for an open end; a trip matches when its dates overlap it.",
      schema: string),
    parameter(
      "destination", "Trips to this destination, ignoring case and accents (whole).",
      schema: string),
    parameter(
      "q", "Trips whose name or destination contains this, ignoring case and accents.",
      schema: string),
    parameter(
      "f", "The format: json.",
      schema: .object([("type", .string("string")), ("enum", .array([.string("json")]))])),
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
  ]

  /// The answers every write may get besides its own: the store busy or full.
  static let writeErrors: [(String, JSONValue)] = [
    (
      "503",
      response(
        "The store is busy (another writer held it past its timeout), or the bodies being read take the server's memory for them; retry after Retry-After.",
        "application/json")
    ),
    ("507", response("The store is full; nothing was written.", "application/json")),
  ]

  static func operation(
    _ summary: String, _ id: String, parameters: [JSONValue] = [], ok: (String, JSONValue),
    extra: [(String, JSONValue)] = [], body: Bool = false, secured: Bool = false
  ) -> JSONValue {
    var members: [(String, JSONValue)] = [
      ("summary", .string(summary)), ("operationId", .string(id)),
      ("parameters", .array(parameters)),
      ("responses", .object([ok] + extra + errors + (secured ? writeErrors : []))),
    ]
    if body {
      members.append(
        (
          "requestBody",
          .object([
            ("required", .bool(true)),
            (
              "content",
              .object([
                (
                  "application/geo+json",
                  .object([("schema", .object([("type", .string("object"))]))])
                )
              ])
            ),
          ])
        ))
    }
    if secured { members.append(("security", .array([.object([("bearer", .array([]))])]))) }
    return .object(members)
  }

  static let idParameter: JSONValue = .object([
    ("name", .string("featureId")), ("in", .string("path")), ("required", .bool(true)),
    ("description", .string("The trip's id (a UUID).")), ("schema", string),
  ])

  /// The document, with `base` as its server.
  static func make(base: String) -> JSONValue {
    let json = FeaturesAPI.json
    let geo = FeaturesAPI.geoJSON
    let paging: [JSONValue] = [
      parameter(
        "limit", "At most this many trips (default 10; larger than 10000 is taken as 10000).",
        schema: .object([
          ("type", .string("integer")), ("minimum", .number(1)), ("default", .number(10)),
        ])),
      parameter(
        "offset", "Skip this many trips (the next link sets it).",
        schema: .object([("type", .string("integer")), ("minimum", .number(0))])),
      parameter(
        "sortby", "startDate, endDate, name or destination; - before it for descending.",
        schema: string),
    ]
    let boundsParameters: [JSONValue] = [
      parameter("viewport", "WIDTHxHEIGHT in pixels: also fit a camera.", schema: string),
      parameter(
        "padding", "Pixels kept free on each side of the camera fit.",
        schema: .object([("type", .string("integer")), ("minimum", .number(0))])),
      parameter("crs", "The projected CRS of the extent (default EPSG:3857).", schema: string),
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
                "Trips, a page at a time", "getFeatures", parameters: filters + paging,
                ok: (
                  "200",
                  response(
                    "A FeatureCollection with numberMatched, numberReturned and next/prev links.",
                    geo
                  )
                ))
            ),
            (
              "post",
              operation(
                "Add a trip (a GeoJSON Feature; its properties may carry its bucketList and livingAccommodation)",
                "createFeature",
                ok: ("201", response("The trip, with its Location.", geo)),
                extra: [
                  ("401", response("A valid bearer token is needed.", json)),
                  ("405", response("The service is read-only.", json)),
                  ("409", response("The id exists.", json)),
                  ("413", response("The body is larger than 16 MiB.", json)),
                ], body: true, secured: true)
            ),
          ])
        ),
        (
          "/collections/trips/items/{featureId}",
          .object([
            (
              "get",
              operation(
                "One trip", "getFeature", parameters: [idParameter],
                ok: ("200", response("The trip as a Feature, with its ETag.", geo)),
                extra: [
                  (
                    "304",
                    .object([("description", .string("If-None-Match names the current ETag."))])
                  )
                ])
            ),
            (
              "put",
              operation(
                "Replace a trip (a plan given replaces its plan, one left out keeps it)",
                "replaceFeature", parameters: [idParameter, ifMatch],
                ok: ("200", response("The trip, with its new ETag.", geo)),
                extra: conditionalWrite, body: true, secured: true)
            ),
            (
              "patch",
              operation(
                "Change some of a trip's properties or its geometry", "updateFeature",
                parameters: [idParameter, ifMatch],
                ok: ("200", response("The trip, with its new ETag.", geo)),
                extra: conditionalWrite, body: true, secured: true)
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
                "streamItems", parameters: filters,
                ok: (
                  "200",
                  response(
                    "text/event-stream: events insert and update (a Feature), delete ({id}), reset (every matching trip), with id = the history token.",
                    "text/event-stream")
                ),
                extra: [
                  (
                    "503",
                    response(
                      "The server follows its maximum of distinct live queries (--live-queries); join a followed one or retry after Retry-After.",
                      "application/json")
                  )
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
                    "text/event-stream: events 'bounds' with id = the history token, data = the bounds document; a comment every 15 s.",
                    "text/event-stream")
                ),
                extra: [
                  (
                    "503",
                    response(
                      "The server follows its maximum of distinct live queries (--live-queries); join a followed one or retry after Retry-After.",
                      "application/json")
                  )
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
                    schema: string),
                  parameter(
                    "exclude-author",
                    "Leave out changes by this author (a peer's own, applied by sync).",
                    schema: string),
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
                extra: [("401", response("A valid bearer token is needed.", json))], body: true,
                secured: true)
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
      ] + planPaths(paging: Array(paging.prefix(2)))
    return .object([
      ("openapi", .string("3.0.3")),
      (
        "info",
        .object([
          ("title", .string("Trip planner")), ("version", .string("0.1.0")),
          ("description", .string("Trips as OGC API – Features, with bounds for map cameras.")),
        ])
      ),
      ("servers", .array([.object([("url", .string(base))])])),
      ("paths", .object(paths)),
      (
        "components",
        .object([
          (
            "securitySchemes",
            .object([
              ("bearer", .object([("type", .string("http")), ("scheme", .string("bearer"))]))
            ])
          )
        ])
      ),
    ])
  }

  /// The paths of the plan collections (`stays`, `bucket-list-items`): the collection, its
  /// items (GET a page, POST one) and one item (GET, PATCH, DELETE).
  static func planPaths(paging: [JSONValue]) -> [(String, JSONValue)] {
    let json = FeaturesAPI.json
    let geo = FeaturesAPI.geoJSON
    let trip = parameter("trip", "Only those of the trip with this id.", schema: string)
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
            schema: string),
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
                  parameters: [filters[0], filters[1], trip, filters.last!] + [
                    parameter(
                      "viewport", "WIDTHxHEIGHT in pixels: also fit a camera.", schema: string),
                    parameter(
                      "padding", "Pixels kept free on each side of the camera fit.",
                      schema: .object([("type", .string("integer")), ("minimum", .number(0))])),
                    parameter(
                      "crs", "The projected CRS of the extent (default EPSG:3857).", schema: string),
                  ],
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
                  "streamStays", parameters: [filters[0], filters[1], trip, filters.last!],
                  ok: (
                    "200",
                    response(
                      "text/event-stream: events insert and update (a stay's Feature), delete ({id}), reset (every matching stay), with id = the history token.",
                      "text/event-stream")
                  ),
                  extra: [
                    (
                      "503",
                      response(
                        "The server follows its maximum of distinct live queries; Retry-After.",
                        json)
                    )
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
                  response(
                    "A FeatureCollection with numberMatched, numberReturned and next/prev links.",
                    geo)
                ))
            ),
            (
              "post",
              operation(
                collection == .stays
                  ? "Set the stay of the trip properties.tripId names (a Point Feature; 409 when it has one)"
                  : "Add an item to the trip properties.tripId names (a Feature without geometry; at properties.position, else last)",
                "create\(name)",
                ok: ("201", response("The \(noun), with its Location.", geo)),
                extra: [
                  ("401", response("A valid bearer token is needed.", json)),
                  ("405", response("The service is read-only.", json)),
                  ("409", response("The trip has a stay already.", json)),
                  ("413", response("The body is larger than 16 MiB.", json)),
                ], body: true, secured: true)
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
                ok: ("200", response("The \(noun) as a Feature, with its ETag.", geo)),
                extra: [
                  (
                    "304",
                    .object([("description", .string("If-None-Match names the current ETag."))])
                  )
                ])
            ),
            (
              "patch",
              operation(
                "Change some of the \(noun)'s properties\(collection == .stays ? " or its geometry" : " (position moves it)")",
                "update\(name)", parameters: [id, ifMatch],
                ok: ("200", response("The \(noun), with its new ETag.", geo)),
                extra: write, body: true, secured: true)
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
