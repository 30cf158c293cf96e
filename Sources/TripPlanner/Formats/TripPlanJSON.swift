import Foundation

extension TripJSON {
  /// One bucket-list item as a JSON object, its fields in declaration order (a field not
  /// given, `null`): `{"id","title","details","hasReservation","isInPlan","position"}`.
  public static func object(_ values: FieldValues<BucketListItem>) -> JSONValue {
    .object(values.jsonMembers())
  }

  /// One stay as a JSON object, its fields in declaration order (a field not given, `null`):
  /// `{"id","name","address","latitude","longitude","placeIdentifier"}`.
  public static func object(_ values: FieldValues<LivingAccommodation>) -> JSONValue {
    .object(values.jsonMembers())
  }
}

extension TripJSON {

  /// Reads a trip object's `bucketList` (an array of items, in order: an item's `position`,
  /// if given, is ignored for its place in the array) and `livingAccommodation` (an object or
  /// `null`); problems go to the trip's `line`. Nil when either is malformed.
  static func plan(from item: JSONValue, line: Int?, problems: inout ProblemList) -> TripPlan? {
    let before = problems.problems.count
    var plan = TripPlan()
    switch item["bucketList"] {
    case nil, .null?: break
    case .array(let items)?:
      for (index, element) in items.enumerated() {
        let label = "bucket-list item \(index + 1)"
        guard
          let record = bucketListItem(from: element, label: label, line: line, problems: &problems)
        else { continue }
        var placed = record
        placed.position = index
        plan.bucketList.append(placed)
      }
    case .some:
      problems.add(line, "bucketList must be an array of items")
    }
    switch item["livingAccommodation"] {
    case nil, .null?: break
    case .object?:
      plan.livingAccommodation = stay(
        from: item["livingAccommodation"]!, label: "stay", line: line, problems: &problems)
    case .some:
      problems.add(line, "livingAccommodation must be an object or null")
    }
    return problems.problems.count == before ? plan : nil
  }

  /// Reads one bucket-list item object (its fields, as ``FieldValues`` reads them), its
  /// `position` included (0 when absent: a plan's reader places items by their order
  /// instead); problems go to `line`, named by `label`. Nil when it is malformed.
  static func bucketListItem(
    from element: JSONValue, label: String, line: Int?, problems: inout ProblemList
  ) -> FieldValues<BucketListItem>? {
    FieldValues.read(element, label: label, line: line, problems: &problems)
  }

  /// Reads one stay object (its fields, as ``FieldValues`` reads them); problems go to
  /// `line`, named by `label`. Nil when it is malformed.
  static func stay(
    from value: JSONValue, label: String, line: Int?, problems: inout ProblemList
  ) -> FieldValues<LivingAccommodation>? {
    FieldValues.read(value, label: label, line: line, problems: &problems)
  }
}

extension TripGeoJSON {
  /// Reads a bucket-list item's Feature (a request body): `id` optional, `geometry` `null` or
  /// absent, `properties` the item's members (`title`, `details`, `hasReservation`,
  /// `isInPlan`, `position`) and its trip's `tripId`. Returns the record, the trip's id (nil
  /// when not given) and the position when given. Throws every problem at once.
  public static func decodeItemFeature(_ data: Data, file: String) throws -> (
    record: FieldValues<BucketListItem>, tripID: UUID?, position: Int?
  ) {
    var problems = ProblemList(file: file)
    let document = try TripJSON.parseDocument(data, problems: &problems)
    let (members, tripID) = planProperties(document, problems: &problems)
    switch document["geometry"] {
    case nil, .null?: break
    default: problems.add(nil, "a bucket-list item has no geometry: it must be null")
    }
    var record: FieldValues<BucketListItem>?
    if let members {
      record = TripJSON.bucketListItem(
        from: .object(members), label: "properties", line: nil, problems: &problems)
    }
    try problems.throwIfAny()
    guard let record else {
      throw TripPlannerError(code: .invalidInput, message: "\(file): expected a Feature.")
    }
    let given = members?.contains { $0.0 == "position" && $0.1 != .null } == true
    return (record, tripID, given ? record.position : nil)
  }

  /// Reads a stay's Feature (a request body): `id` optional, a Point `geometry`
  /// (`[longitude, latitude]`), `properties` the stay's `name`, `address`,
  /// `placeIdentifier` and its trip's `tripId`. Throws every problem at once.
  public static func decodeStayFeature(_ data: Data, file: String) throws -> (
    record: FieldValues<LivingAccommodation>, tripID: UUID?
  ) {
    var problems = ProblemList(file: file)
    let document = try TripJSON.parseDocument(data, problems: &problems)
    var (members, tripID) = planProperties(document, problems: &problems)
    if let given = members, given.contains(where: { ["latitude", "longitude"].contains($0.0) }) {
      problems.add(nil, "a stay's position is its geometry, not latitude and longitude properties")
    }
    if let geometry = document["geometry"], geometry["type"] == .string("Point"),
      case .array(let position)? = geometry["coordinates"], position.count >= 2,
      case .number(let longitude) = position[0], case .number(let latitude) = position[1]
    {
      members?.append(("latitude", .number(latitude)))
      members?.append(("longitude", .number(longitude)))
    } else {
      problems.add(nil, "the geometry must be a Point with [longitude, latitude]")
      members = nil
    }
    var record: FieldValues<LivingAccommodation>?
    if let members {
      record = TripJSON.stay(
        from: .object(members), label: "properties", line: nil, problems: &problems)
    }
    try problems.throwIfAny()
    guard let record else {
      throw TripPlannerError(code: .invalidInput, message: "\(file): expected a Feature.")
    }
    return (record, tripID)
  }

  /// A plan feature's properties without `tripId` (the feature's `id` among them, when given),
  /// and that `tripId`; problems added for a document that is not a Feature or a bad `tripId`.
  private static func planProperties(_ document: JSONValue, problems: inout ProblemList) -> (
    [(String, JSONValue)]?, UUID?
  ) {
    guard document["type"] == .string("Feature") else {
      problems.add(nil, "expected a Feature")
      return (nil, nil)
    }
    guard case .object(var members) = document["properties"] ?? .object([]) else {
      problems.add(nil, "properties must be an object")
      return (nil, nil)
    }
    var tripID: UUID?
    if let index = members.firstIndex(where: { $0.0 == "tripId" }) {
      switch members[index].1 {
      case .null: break
      case .string(let text) where UUID(uuidString: text) != nil: tripID = UUID(uuidString: text)
      default: problems.add(nil, "tripId must be a trip's id (a UUID)")
      }
      members.remove(at: index)
    }
    if let id = document["id"], id != .null, !members.contains(where: { $0.0 == "id" }) {
      members.append(("id", id))
    }
    return (members, tripID)
  }
}
