import Foundation
import Geo
import Persistence
import TripPlanner

extension FeaturesAPI {
  /// The collections of the trips' plans, beside `trips`: the stays, a Point each, and the
  /// bucket-list items, features without geometry (OGC API – Features allows `null`).
  enum PlanCollection: String, CaseIterable {
    case stays
    case bucketListItems = "bucket-list-items"

    var title: String {
      switch self {
      case .stays: "Stays"
      case .bucketListItems: "Bucket-list items"
      }
    }

    var description: String {
      switch self {
      case .stays:
        "Where one stays on each trip: a Point per stay, with its trip's id (tripId)."
      case .bucketListItems:
        "Things to do on each trip: a feature without geometry per item, with its trip's id (tripId) and its position in the trip's list."
      }
    }

    /// What a feature of the collection is, in messages.
    var noun: String {
      switch self {
      case .stays: "stay"
      case .bucketListItems: "bucket-list item"
      }
    }

    /// The query parameters of its items.
    var itemNames: Set<String> {
      switch self {
      case .stays: ["bbox", "bbox-crs", "trip", "limit", "offset", "f"]
      case .bucketListItems: ["trip", "q", "limit", "offset", "f"]
      }
    }

    var path: String { "/collections/\(rawValue)" }
  }

  /// `/collections/{stays|bucket-list-items}`: the collection's document; the stays' with
  /// their extent (the smallest box over every stay, west > east when it crosses the
  /// antimeridian), which map tools zoom a new layer to. Cost: for the stays, every stay's
  /// position, O(stays).
  func planCollection(_ collection: PlanCollection, _ links: Links) throws -> JSONValue {
    var members: [(String, JSONValue)] = [
      ("id", .string(collection.rawValue)),
      ("title", .string(collection.title)),
      ("description", .string(collection.description)),
      ("itemType", .string("feature")),
    ]
    if collection == .stays {
      let box = try pool.withStore(author: "service") { store in
        GeographicBox.enclosing(
          try store.stays().stays.compactMap(\.record.coordinate))
      }
      members.append(("crs", .array([.string(Self.crs84)])))
      members.append(
        (
          "extent",
          .object([
            (
              "spatial",
              .object([
                ("bbox", box.map { .array([.array($0.bbox.map(JSONValue.number))]) } ?? .null),
                ("crs", .string(Self.crs84)),
              ])
            )
          ])
        ))
    }
    members.append(
      (
        "links",
        .array([
          links.link(collection.path, rel: "self", type: Self.json),
          links.link(
            collection.path + "/items", rel: "items", type: Self.geoJSON, title: collection.title),
        ])
      ))
    return .object(members)
  }

  /// `GET /collections/{stays|bucket-list-items}/items`: a page of stays (filtered by `bbox`,
  /// west > east across the antimeridian, and `trip`) or of bucket-list items (by `trip` and
  /// `q`), with `numberMatched` and `next`/`prev` links. Cost: ``TripStore/stays(in:ofTrip:offset:limit:)``
  /// and ``TripStore/bucketListItems(ofTrip:search:offset:limit:)``: a count and a page query.
  func planItems(
    _ collection: PlanCollection, _ request: HTTPRequest, links: Links
  ) throws -> HTTPResponse {
    let parsed = try ItemsQuery(request, allowed: collection.itemNames)
    let tripID = try Self.tripParameter(request)
    let (features, matched) = try pool.withStore(author: "service") {
      store -> ([JSONValue], Int) in
      switch collection {
      case .stays:
        let (stays, matched) = try store.stays(
          in: parsed.query.bbox, ofTrip: tripID, offset: parsed.offset, limit: parsed.limit)
        return (stays.map { Self.stayFeature($0.record, tripID: $0.tripID) }, matched)
      case .bucketListItems:
        let (items, matched) = try store.bucketListItems(
          ofTrip: tripID, search: parsed.query.search, offset: parsed.offset, limit: parsed.limit)
        return (items.map { Self.itemFeature($0.record, tripID: $0.tripID) }, matched)
      }
    }
    let itemsPath = collection.path + "/items"
    var pageLinks: [JSONValue] = [
      links.link(parsed.path(itemsPath, offset: parsed.offset), rel: "self", type: Self.geoJSON),
      links.link(collection.path, rel: "collection", type: Self.json),
    ]
    if parsed.offset + features.count < matched {
      pageLinks.append(
        links.link(
          parsed.path(itemsPath, offset: parsed.offset + parsed.limit), rel: "next",
          type: Self.geoJSON))
    }
    if parsed.offset > 0 {
      pageLinks.append(
        links.link(
          parsed.path(itemsPath, offset: max(0, parsed.offset - parsed.limit)), rel: "prev",
          type: Self.geoJSON))
    }
    return Self.document(
      .object([
        ("type", .string("FeatureCollection")),
        ("features", .array(features)),
        ("numberMatched", .number(Double(matched))),
        ("numberReturned", .number(Double(features.count))),
        ("timeStamp", .string(TripDates.format(Date()))),
        ("links", .array(pageLinks)),
      ]), type: Self.geoJSON)
  }

  /// `GET /collections/{stays|bucket-list-items}/items/{id}`, with its `ETag` (304 for an
  /// `If-None-Match` of it). Cost: one lookup in the unique index on id, and one for its trip.
  func planItem(
    _ collection: PlanCollection, _ id: String, links: Links, ifNoneMatch: String? = nil
  ) throws -> HTTPResponse {
    let uuid = try Self.planID(collection, id)
    let feature: JSONValue? = try pool.withStore(author: "service") { store in
      switch collection {
      case .stays:
        return try store.stay(uuid).map { Self.stayFeature($0.record, tripID: $0.tripID) }
      case .bucketListItems:
        return try store.bucketListItem(uuid).map {
          Self.itemFeature($0.record, tripID: $0.tripID)
        }
      }
    }
    guard let feature else { throw Self.noPlanRow(collection, uuid) }
    let tag = Self.etag(of: feature)
    if Self.isCurrent(tag, ifNoneMatch: ifNoneMatch) {
      return HTTPResponse(status: 304, headers: [("ETag", tag)])
    }
    var response = Self.planFeatureResponse(collection, feature, links: links)
    response.headers.append(("ETag", tag))
    return response
  }

  /// `GET /collections/stays/items/stream`: each committed change to the stays in `bbox`
  /// and of `trip` as Server-Sent Events (see ``ItemsStreams/openStays(key:filter:lastEventID:)``).
  func staysStream(_ request: HTTPRequest) throws -> HTTPResponse {
    let parsed = try ItemsQuery(request, allowed: ["bbox", "bbox-crs", "trip", "f"])
    let filter = ItemsStreams.StayFilter(
      box: parsed.query.bbox, trip: try Self.tripParameter(request))
    _ = try ItemsStreams.resumeToken(request.header("Last-Event-ID"))
    if request.method == "HEAD" { return Self.streamResponse(nil) }
    let stream = try itemStreams.openStays(
      key: Self.streamKey(request), filter: filter,
      lastEventID: request.header("Last-Event-ID"), client: request.client)
    return Self.streamResponse(stream)
  }

  /// A plan row's feature with its `links` (self, collection, its trip).
  static func planFeatureResponse(
    _ collection: PlanCollection, _ feature: JSONValue, links: Links, status: Int = 200
  ) -> HTTPResponse {
    guard case .object(var members) = feature, case .string(let id)? = feature["id"],
      case .string(let trip)? = feature["properties"]?["tripId"]
    else { return document(feature, type: geoJSON, status: status) }
    members.append(
      (
        "links",
        .array([
          links.link(collection.path + "/items/" + id, rel: "self", type: geoJSON),
          links.link(collection.path, rel: "collection", type: json),
          links.link("/collections/trips/items/" + trip, rel: "related", type: geoJSON),
        ])
      ))
    return document(.object(members), type: geoJSON, status: status)
  }

  /// A stay as a Point feature: its id, its position as the geometry, and its trip's id and
  /// other fields (in declaration order) as properties.
  static func stayFeature(_ values: FieldValues<LivingAccommodation>, tripID: UUID) -> JSONValue {
    .object([
      ("type", .string("Feature")),
      ("id", values["id"] ?? .null),
      (
        "geometry",
        .object([
          ("type", .string("Point")),
          ("coordinates", .array([values["longitude"] ?? .null, values["latitude"] ?? .null])),
        ])
      ),
      (
        "properties",
        .object(
          [("tripId", .string(tripID.lowercasedString))]
            + values.jsonMembers(leaving: ["id", "latitude", "longitude"]))
      ),
    ])
  }

  /// A bucket-list item as a feature without geometry: its id, and its trip's id and other
  /// fields (in declaration order) as properties.
  static func itemFeature(_ values: FieldValues<BucketListItem>, tripID: UUID) -> JSONValue {
    .object([
      ("type", .string("Feature")),
      ("id", values["id"] ?? .null),
      ("geometry", .null),
      (
        "properties",
        .object(
          [("tripId", .string(tripID.lowercasedString))] + values.jsonMembers(leaving: ["id"]))
      ),
    ])
  }

  /// The `trip` parameter: one trip id, or nil when not given; else 400.
  static func tripParameter(_ request: HTTPRequest) throws -> UUID? {
    guard let text = request.queryValues("trip").last else { return nil }
    guard request.queryValues("trip").count == 1, let id = UUID(uuidString: text) else {
      throw ServiceError.request(
        400, "Invalid value '\(HTTPServer.loggable(text))' for 'trip': expected one trip id.")
    }
    return id
  }

  static func planID(_ collection: PlanCollection, _ id: String) throws -> UUID {
    guard let uuid = UUID(uuidString: id) else {
      throw ServiceError.request(
        404, "There is no \(collection.noun) with the id '\(HTTPServer.loggable(id))'.")
    }
    return uuid
  }

  static func noPlanRow(_ collection: PlanCollection, _ id: UUID) -> ServiceError {
    ServiceError.request(404, "There is no \(collection.noun) with the id \(id.lowercasedString).")
  }
}

extension FeaturesAPI {
  /// `POST /collections/bucket-list-items/items` (an item added to the trip its `tripId`
  /// names, at its `position` or at the end) and `POST /collections/stays/items` (the stay of
  /// a trip that has none: 409 when it has one): 201 with `Location`. Cost: as
  /// ``TripStore/addBucketListItem(_:toTrip:at:)`` and ``TripStore/setStay(_:forTrip:)``.
  func planPost(
    _ collection: PlanCollection, _ request: HTTPRequest, author: String, links: Links,
    condition: Precondition?
  ) throws -> HTTPResponse {
    guard request.method == "POST" else {
      throw ServiceError.request(405, "\(request.method) is not allowed here.")
    }
    if condition != nil {
      throw ServiceError.request(
        412,
        "If-Match cannot be honoured on the collection: send it with PATCH or DELETE of one item.")
    }
    let feature: JSONValue = try pool.withStore(author: author) { store in
      switch collection {
      case .bucketListItems:
        let (record, tripID, position) = try Self.decodingPlan {
          try TripGeoJSON.decodeItemFeature(request.body, file: "body")
        }
        let trip = try Self.requiredTrip(tripID, collection)
        let item = try Self.onTrip(trip) {
          try store.addBucketListItem(record, toTrip: trip.uuidString, at: position)
        }
        return Self.itemFeature(FieldValues(item), tripID: trip)
      case .stays:
        let (record, tripID) = try Self.decodingPlan {
          try TripGeoJSON.decodeStayFeature(request.body, file: "body")
        }
        let trip = try Self.requiredTrip(tripID, collection)
        try record.validate()  // a bad body is a 400 whether or not the trip has a stay
        let stay = try store.context.performExclusively {
          try Self.onTrip(trip) {
            let owner = try store.trip(matching: trip.uuidString)
            // The stay read as values (a failure is thrown; no model's read traps).
            let plan = try store.withPlans([owner.record])[0].plan
            if let current = plan?.livingAccommodation {
              throw ServiceError.request(
                409,
                "The trip \(trip.lowercasedString) has a stay (\(current.id?.lowercasedString ?? "")); PATCH or DELETE it."
              )
            }
            return FieldValues(try store.setStay(record, forTrip: trip.uuidString))
          }
        }
        return Self.stayFeature(stay, tripID: trip)
      }
    }
    var response = Self.planFeatureResponse(collection, feature, links: links, status: 201)
    if case .string(let id)? = feature["id"] {
      response.headers.append(("Location", links.base + collection.path + "/items/" + id))
      response.headers.append(("ETag", Self.etag(of: feature)))
    }
    return response
  }

  /// `PATCH` and `DELETE` of one item or stay, with `If-Match` of its ETag checked in the
  /// transaction of the write. A PATCH merges `properties` (and a stay's `geometry`); an item's
  /// `position` moves it in its list; `tripId` cannot change (400). Cost: the row's lookup by
  /// id, then as ``TripStore/updateBucketListItem(_:_:)`` (and
  /// ``TripStore/moveBucketListItem(_:to:)``), ``TripStore/setStay(_:forTrip:)``,
  /// ``TripStore/removeBucketListItem(_:)`` or ``TripStore/clearStay(ofTrip:)``.
  func planChange(
    _ collection: PlanCollection, _ id: String, _ request: HTTPRequest, author: String,
    links: Links, condition: Precondition?
  ) throws -> HTTPResponse {
    let uuid = try Self.planID(collection, id)
    let feature: JSONValue? = try pool.withStore(author: author) { store in
      try store.context.performExclusively {
        let current: (feature: JSONValue, tripID: UUID)
        switch collection {
        case .bucketListItems:
          guard let found = try store.bucketListItem(uuid) else {
            throw Self.noPlanRow(collection, uuid)
          }
          current = (Self.itemFeature(found.record, tripID: found.tripID), found.tripID)
        case .stays:
          guard let found = try store.stay(uuid) else { throw Self.noPlanRow(collection, uuid) }
          current = (Self.stayFeature(found.record, tripID: found.tripID), found.tripID)
        }
        try condition?.check(tag: Self.etag(of: current.feature), of: collection.noun)
        switch (collection, request.method) {
        case (.bucketListItems, "DELETE"):
          try store.removeBucketListItem(uuid)
          return nil
        case (.stays, "DELETE"):
          try store.clearStay(ofTrip: current.tripID.uuidString)
          return nil
        case (_, "PATCH"):
          break
        default:
          throw ServiceError.request(405, "\(request.method) is not allowed here.")
        }
        let merged = Data(try Self.merged(request.body, into: current.feature).utf8())
        switch collection {
        case .bucketListItems:
          let (record, tripID, position) = try Self.decodingPlan {
            try TripGeoJSON.decodeItemFeature(merged, file: "body")
          }
          try Self.sameTrip(tripID, current.tripID, collection)
          var item = try store.updateBucketListItem(uuid) { $0 = record }
          if let position, position != item.position {
            item = try store.moveBucketListItem(uuid, to: position)
          }
          return Self.itemFeature(FieldValues(item), tripID: current.tripID)
        case .stays:
          var (record, tripID) = try Self.decodingPlan {
            try TripGeoJSON.decodeStayFeature(merged, file: "body")
          }
          try Self.sameTrip(tripID, current.tripID, collection)
          record.id = uuid
          let stay = try store.setStay(record, forTrip: current.tripID.uuidString)
          return Self.stayFeature(FieldValues(stay), tripID: current.tripID)
        }
      }
    }
    guard let feature else { return HTTPResponse(status: 204) }
    var response = Self.planFeatureResponse(collection, feature, links: links)
    response.headers.append(("ETag", Self.etag(of: feature)))
    return response
  }

  /// What `body` decodes, its problems as a 400.
  static func decodingPlan<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch let error as TripPlannerError {
      throw ServiceError.request(400, error.description)
    }
  }

  /// The `tripId` a new plan row needs, or 400.
  static func requiredTrip(_ tripID: UUID?, _ collection: PlanCollection) throws -> UUID {
    guard let tripID else {
      throw ServiceError.request(
        400, "A \(collection.noun) needs properties.tripId: the id of the trip it belongs to.")
    }
    return tripID
  }

  /// 400 unless a PATCH leaves the row in its trip.
  static func sameTrip(_ given: UUID?, _ current: UUID, _ collection: PlanCollection) throws {
    guard let given else {
      throw ServiceError.request(
        400,
        "properties.tripId cannot be removed: a \(collection.noun) belongs to a trip (\(current.lowercasedString))."
      )
    }
    guard given == current else {
      throw ServiceError.request(
        400,
        "A \(collection.noun) stays in its trip (\(current.lowercasedString)): to have it in another trip, POST a new one there (without this id) and DELETE this one."
      )
    }
  }

  /// `body`, a trip that does not exist (deleted, or never made) reported as a 400 naming it:
  /// the request's `tripId` is at fault, not its path.
  static func onTrip<T>(_ trip: UUID, _ body: () throws -> T) throws -> T {
    do { return try body() } catch let error as TripPlannerError where error.code == .notFound {
      throw ServiceError.request(
        400, "properties.tripId names no trip: there is no trip \(trip.lowercasedString).")
    }
  }
}
