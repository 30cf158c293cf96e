import Foundation
import Geo

/// Trips as GeoJSON (RFC 7946): a FeatureCollection with a `bbox` (the smallest box over all
/// trips, crossing the antimeridian when that is smaller) and one Point feature per trip, its
/// `id` the trip id and its `properties` the other fields.
public enum TripGeoJSON {
  /// The feature collection for `records`.
  public static func collection(_ records: [TripRecord]) -> JSONValue {
    let box = GeographicBox.enclosing(
      records.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) })
    var members: [(String, JSONValue)] = [("type", .string("FeatureCollection"))]
    if let box { members.append(("bbox", .array(box.bbox.map(JSONValue.number)))) }
    members.append(("features", .array(records.map(feature))))
    return .object(members)
  }

  /// The trip's fields a feature gives elsewhere than in its properties: its id and its
  /// point.
  static let outsideProperties: Set<String> = ["id", "latitude", "longitude"]

  /// The point's fields' indexes in the trip's field table, found by key path once.
  static let point = (
    longitude: FieldValues<Trip>.index(of: \Trip.longitude) ?? 0,
    latitude: FieldValues<Trip>.index(of: \Trip.latitude) ?? 0
  )

  /// ``outsideProperties`` as a mask of the trip's fields.
  static let outsideMask = FieldValues<Trip>.mask(outsideProperties)

  /// The properties of a trip's feature, in its order: its fields but its id and point, then
  /// its plan's members.
  public static let propertyNames =
    Trip.schema.fields.map(\.name).filter { !outsideProperties.contains($0) }
    + TripJSON.planMemberNames

  /// One trip as a Point feature: its id, its point, and its other fields and its plan as
  /// properties.
  public static func feature(_ record: TripRecord) -> JSONValue {
    var properties = record.values.jsonMembers(leaving: outsideProperties)
    if let plan = record.plan { properties += TripJSON.planMembers(plan) }
    return .object([
      ("type", .string("Feature")),
      ("id", record.id.map { .string($0.lowercasedString) } ?? .null),
      (
        "geometry",
        .object([
          ("type", .string("Point")),
          ("coordinates", .array([.number(record.longitude), .number(record.latitude)])),
        ])
      ),
      ("properties", .object(properties)),
    ])
  }

  /// Writes ``feature(_:)`` compactly, straight to UTF-8 bytes: the same text as
  /// `feature(record).utf8()`, without building the tree (a page of 100 features is written
  /// in a fraction of the time). O(size of the text).
  public static func writeFeature(_ record: TripRecord, into output: inout [UInt8]) {
    // Fixed text goes in from static bytes, values without a String in between where they
    // can (the id, whole-second dates): this runs for every feature of every page served.
    func raw(_ text: StaticString) {
      output.append(
        contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
    raw(#"{"type":"Feature","id":"#)
    FieldValue.uuidOrNull(record.id).writeJSON(into: &output)
    raw(#","geometry":{"type":"Point","coordinates":["#)
    // By index (no key path looked up per feature).
    JSONValue.writeNumber(record.values[field: point.longitude]?.number ?? 0, into: &output)
    output.append(UInt8(ascii: ","))
    JSONValue.writeNumber(record.values[field: point.latitude]?.number ?? 0, into: &output)
    raw(#"]},"properties":{"#)
    record.values.writeJSONMembers(skipping: outsideMask, after: false, into: &output)
    if let plan = record.plan {
      // The plan's members as planMembers(_:) renders them, each row's values written once
      // over its model's fields.
      raw(#","bucketList":["#)
      for (index, item) in plan.bucketList.enumerated() {
        if index > 0 { output.append(UInt8(ascii: ",")) }
        item.writeJSONObject(into: &output)
      }
      raw(#"],"livingAccommodation":"#)
      if let stay = plan.livingAccommodation {
        stay.writeJSONObject(into: &output)
      } else {
        raw("null")
      }
    }
    raw("}}")
  }

  /// Writes the collection, indented, with a final newline.
  public static func encode(_ records: [TripRecord]) -> Data {
    Data((collection(records).rendered(pretty: true) + "\n").utf8)
  }

  /// Reads a FeatureCollection of Points; throws every problem at once.
  public static func decode(_ data: Data, file: String) throws -> [(line: Int?, record: TripRecord)]
  {
    var problems = ProblemList(file: file)
    let document = try TripJSON.parseDocument(data, problems: &problems)
    guard document["type"] == .string("FeatureCollection"),
      case .array(let features)? = document["features"]
    else {
      problems.add(nil, "expected a GeoJSON FeatureCollection with a features array")
      try problems.throwIfAny()
      return []
    }
    let lines = JSONLines.objectStarts(in: data, depth: 2)
    var records: [(line: Int?, record: TripRecord)] = []
    for (index, feature) in features.enumerated() {
      let line = index < lines.count ? lines[index] : nil
      if let record = record(fromFeature: feature, line: line, problems: &problems, plans: true) {
        records.append((line, record))
      }
    }
    try problems.throwIfAny()
    return records
  }

  /// Reads one Feature document (a request body, `"id"` optional); throws every problem at
  /// once, each as `FILE: error: reason`. With `plans`, its properties may carry the trip's
  /// `bucketList` and `livingAccommodation` (``TripRecord/plan``); else those members are
  /// unknown, an error.
  public static func decodeFeature(_ data: Data, file: String, plans: Bool = false) throws
    -> TripRecord
  {
    var problems = ProblemList(file: file)
    let document = try TripJSON.parseDocument(data, problems: &problems)
    let record = record(fromFeature: document, line: nil, problems: &problems, plans: plans)
    try problems.throwIfAny()
    guard let record else {
      throw TripPlannerError(code: .invalidInput, message: "\(file): expected a Feature.")
    }
    return record
  }

  /// One feature as a record, or nil with its problems added; with `plans`, its properties
  /// may carry the trip's plan (a file to import), else those members are unknown.
  static func record(
    fromFeature feature: JSONValue, line: Int?, problems: inout ProblemList, plans: Bool = false
  ) -> TripRecord? {
    guard feature["type"] == .string("Feature") else {
      problems.add(line, "expected a Feature")
      return nil
    }
    guard let geometry = feature["geometry"], geometry["type"] == .string("Point"),
      case .array(let position)? = geometry["coordinates"], position.count >= 2,
      case .number(let longitude) = position[0], case .number(let latitude) = position[1]
    else {
      problems.add(line, "the geometry must be a Point with [longitude, latitude]")
      return nil
    }
    var properties = feature["properties"] ?? .object([])
    if case .object(var members) = properties, let id = feature["id"], id != .null,
      !members.contains(where: { $0.0 == "id" })
    {
      members.append(("id", id))
      properties = .object(members)
    }
    return TripJSON.record(
      from: properties, line: line, problems: &problems, coordinates: (latitude, longitude),
      plans: plans)
  }
}
