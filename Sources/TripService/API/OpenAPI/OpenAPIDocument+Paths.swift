import Foundation
import TripPlanner

// The document: the landing page, conformance, the trips collection and its items, and
// what the other files add.

extension OpenAPIDocument {
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
}
