import Foundation

/// Trips as JSON: an array of objects with a member per field of ``Trip`` in declaration
/// order (`id`, `name`, `destination`, `startDate`, `endDate`, `latitude`, `longitude`,
/// `placeIdentifier`), each as its type writes it (``FormatValue``: dates in ISO 8601 UTC,
/// `null` for none), then the plan's `bucketList` and `livingAccommodation`. Import also
/// accepts a missing `id` or optional member and `YYYY-MM-DD` dates; unknown members are an
/// error.
public enum TripJSON {
  /// The members that carry a trip's plan: read by the file decoders (import), refused as
  /// unknown where a plan is not written (a service's request body, a sync feed's trip).
  static let planKeys = Set(planMemberNames)
  /// The plan's members, in the order they are written.
  static let planMemberNames = ["bucketList", "livingAccommodation"]

  /// One trip as a JSON object.
  public static func object(_ record: TripRecord) -> JSONValue {
    var members = record.values.jsonMembers()
    if let plan = record.plan { members += planMembers(plan) }
    return .object(members)
  }

  /// `bucketList` (an array of items) and `livingAccommodation` (an object or `null`).
  static func planMembers(_ plan: TripPlan) -> [(String, JSONValue)] {
    [
      ("bucketList", .array(plan.bucketList.map(object))),
      ("livingAccommodation", plan.livingAccommodation.map(object) ?? .null),
    ]
  }

  /// Writes an array of trips, indented, with a final newline: `object(_:)` of each, rendered,
  /// written straight to bytes by ``TripFileWriter``.
  public static func encode(_ records: [TripRecord]) -> Data { TripFileFormat.json.encode(records) }

  /// Reads an array of trips; throws every problem at once.
  public static func decode(_ data: Data, file: String) throws -> [(line: Int?, record: TripRecord)]
  {
    var problems = ProblemList(file: file)
    let document = try parseDocument(data, problems: &problems)
    guard case .array(let items) = document else {
      problems.add(nil, "expected a JSON array of trips")
      try problems.throwIfAny()
      return []
    }
    let lines = JSONLines.objectStarts(in: data, depth: 1)
    var records: [(line: Int?, record: TripRecord)] = []
    for (index, item) in items.enumerated() {
      let line = index < lines.count ? lines[index] : nil
      if let record = record(from: item, line: line, problems: &problems, plans: true) {
        records.append((line, record))
      }
    }
    try problems.throwIfAny()
    return records
  }

  /// Reads one trip object (also the `properties` of a GeoJSON feature, with the coordinates
  /// given separately, then not members), its plan's members too when `plans`.
  static func record(
    from item: JSONValue, line: Int?, problems: inout ProblemList,
    coordinates: (latitude: Double, longitude: Double)? = nil, plans: Bool = false
  ) -> TripRecord? {
    guard case .object = item else {
      problems.add(line, "expected a trip object")
      return nil
    }
    let before = problems.problems.count
    var values = FieldValues<Trip>.read(
      item, label: "", line: line, problems: &problems,
      leaving: coordinates == nil ? [] : ["latitude", "longitude"], other: plans ? planKeys : [])
    if let coordinates {
      values?.latitude = coordinates.latitude
      values?.longitude = coordinates.longitude
    }
    var plan: TripPlan?
    if plans, item["bucketList"] != nil || item["livingAccommodation"] != nil {
      plan = self.plan(from: item, line: line, problems: &problems)
    }
    guard let values, problems.problems.count == before else { return nil }
    var record = TripRecord(given: values)
    record.plan = plan
    problems.check(record, line: line)
    return record
  }

  /// Parses a JSON document, or throws the one problem that it is not JSON.
  static func parseDocument(_ data: Data, problems: inout ProblemList) throws -> JSONValue {
    do {
      return try JSONValue.parse(data)
    } catch {
      problems.add(nil, "not valid JSON (\(describe(error)))")
      try problems.throwIfAny()
      return .null
    }
  }

  static func describe(_ error: any Error) -> String { JSONValue.describe(error) }
}
