import Foundation
import TripPlanner

// The paths of the plan collections (stays, bucket-list items).

extension OpenAPIDocument {
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
