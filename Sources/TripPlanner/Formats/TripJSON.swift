import Foundation

/// Trips as JSON: an array of
/// `{"id","name","destination","startDate","endDate","latitude","longitude","placeIdentifier"}`,
/// dates in ISO 8601 UTC, `placeIdentifier` a string or `null`. Import also accepts a missing
/// `id` or `placeIdentifier` and `YYYY-MM-DD` dates; unknown members are an error.
public enum TripJSON {
  static let keys: Set<String> = [
    "id", "name", "destination", "startDate", "endDate", "latitude", "longitude", "placeIdentifier",
  ]
  /// The members that carry a trip's plan: read by the file decoders (import), refused as
  /// unknown where a plan is not written (a service's request body, a sync feed's trip).
  static let planKeys: Set<String> = ["bucketList", "livingAccommodation"]

  /// One trip as a JSON object.
  public static func object(_ record: TripRecord) -> JSONValue {
    var members: [(String, JSONValue)] = [
      ("id", record.id.map { .string($0.lowercasedString) } ?? .null),
      ("name", .string(record.name)),
      ("destination", .string(record.destination)),
      ("startDate", .string(formatFileDate(record.startDate, dayOnly: false))),
      ("endDate", .string(formatFileDate(record.endDate, dayOnly: false))),
      ("latitude", .number(record.latitude)),
      ("longitude", .number(record.longitude)),
      ("placeIdentifier", record.placeIdentifier.map(JSONValue.string) ?? .null),
    ]
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

  /// Writes an array of trips, indented, with a final newline.
  public static func encode(_ records: [TripRecord]) -> Data {
    Data((JSONValue.array(records.map(object)).rendered(pretty: true) + "\n").utf8)
  }

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
      if let record = record(
        from: item, line: line, problems: &problems, allowedKeys: keys.union(planKeys))
      {
        records.append((line, record))
      }
    }
    try problems.throwIfAny()
    return records
  }

  /// Reads one trip object (also the `properties` of a GeoJSON feature, with the coordinates
  /// given separately).
  static func record(
    from item: JSONValue, line: Int?, problems: inout ProblemList,
    coordinates: (latitude: Double, longitude: Double)? = nil, allowedKeys: Set<String> = keys
  ) -> TripRecord? {
    guard case .object(let members) = item else {
      problems.add(line, "expected a trip object")
      return nil
    }
    let before = problems.problems.count
    for (key, _) in members where !allowedKeys.contains(key) {
      problems.add(line, "unknown member '\(key)'")
    }
    func string(_ key: String, required: Bool = true) -> String? {
      switch item[key] {
      case .string(let value): return value
      case nil, .null?:
        if required { problems.add(line, "\(key) is missing") }
        return nil
      default:
        problems.add(line, "\(key) must be a string")
        return nil
      }
    }
    func number(_ key: String) -> Double {
      switch item[key] {
      case .number(let value): return value
      case nil, .null?: problems.add(line, "\(key) is missing")
      default: problems.add(line, "\(key) must be a number")
      }
      return 0
    }
    func date(_ key: String) -> Date {
      guard let text = string(key) else { return Date(timeIntervalSinceReferenceDate: 0) }
      if let date = TripDates.parse(text) { return date }
      problems.add(line, "\(key) '\(text)' is not a date (ISO 8601 with a zone, or YYYY-MM-DD)")
      return Date(timeIntervalSinceReferenceDate: 0)
    }
    var id: UUID?
    if let text = string("id", required: false) {
      id = UUID(uuidString: text)
      if id == nil { problems.add(line, "id '\(text)' is not a UUID") }
    }
    var record = TripRecord(
      id: id, name: string("name") ?? "", destination: string("destination") ?? "",
      startDate: date("startDate"), endDate: date("endDate"),
      latitude: coordinates?.latitude ?? number("latitude"),
      longitude: coordinates?.longitude ?? number("longitude"),
      placeIdentifier: string("placeIdentifier", required: false))
    if allowedKeys.contains("bucketList"),
      item["bucketList"] != nil || item["livingAccommodation"] != nil
    {
      record.plan = plan(from: item, line: line, problems: &problems)
    }
    guard problems.problems.count == before else { return nil }
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
