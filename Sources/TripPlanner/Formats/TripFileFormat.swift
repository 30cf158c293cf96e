import Foundation

/// The file formats `trips import` and `trips export` speak.
public enum TripFileFormat: String, Sendable, CaseIterable {
  /// RFC 4180 CSV with a header.
  case csv
  /// A JSON array of trip objects.
  case json
  /// A GeoJSON FeatureCollection of Points.
  case geojson

  /// The format a file name's extension names (`.csv`, `.json`, `.geojson`), if any.
  public init?(pathExtension path: String) {
    switch (path as NSString).pathExtension.lowercased() {
    case "csv": self = .csv
    case "json": self = .json
    case "geojson": self = .geojson
    default: return nil
    }
  }

  /// Reads trip records from `data`. Throws ``TripPlannerError/Code/invalidInput`` listing
  /// every problem (syntax, missing or unknown fields, values, and the trip rules).
  public func decode(_ data: Data, file: String) throws -> [(line: Int?, record: TripRecord)] {
    let records =
      switch self {
      case .csv: try TripCSV.decode(data, file: file)
      case .json: try TripJSON.decode(data, file: file)
      case .geojson: try TripGeoJSON.decode(data, file: file)
      }
    // The same id twice in one file is refused here, before any store is opened.
    let duplicates = TripStore.duplicateProblems(records, file: file)
    guard duplicates.isEmpty else {
      throw TripPlannerError(
        code: .invalidInput, message: "\(file): nothing was imported.", problems: duplicates)
    }
    return records
  }

  /// Reads trip records without their line numbers (see ``decode(_:file:)``).
  public func decodeRecords(_ data: Data, file: String) throws -> [TripRecord] {
    try decode(data, file: file).map(\.record)
  }

  /// Writes trip records.
  public func encode(_ records: [TripRecord]) -> Data {
    switch self {
    case .csv: TripCSV.encode(records)
    case .json: TripJSON.encode(records)
    case .geojson: TripGeoJSON.encode(records)
    }
  }
}

/// Collects problems while decoding, then throws them all at once.
struct ProblemList {
  let file: String
  var problems: [TripPlannerError.Problem] = []

  mutating func add(_ line: Int?, _ reason: String) {
    problems.append(.init(file: file, line: line, reason: reason))
  }

  /// Adds the trip rules' violations for a record that parsed.
  mutating func check(_ record: TripRecord, line: Int?) {
    for violation in record.violations { add(line, violation.reason) }
  }

  func throwIfAny() throws {
    guard problems.isEmpty else {
      throw TripPlannerError(
        code: .invalidInput,
        message:
          "\(file): \(problems.count) problem\(problems.count == 1 ? "" : "s"); nothing was imported.",
        problems: problems)
    }
  }
}

/// Formats a coordinate or other number as the shortest text that reads back to it.
func formatNumber(_ value: Double) -> String {
  if value == value.rounded(), abs(value) < 1e15 { return String(format: "%.1f", value) }
  return "\(value)"
}

/// Dates in files: the day alone at UTC midnight, else ISO 8601 (with milliseconds if needed).
func formatFileDate(_ date: Date, dayOnly: Bool) -> String {
  let seconds = date.timeIntervalSince1970
  if dayOnly && seconds.truncatingRemainder(dividingBy: 86400) == 0 {
    return TripDates.formatDay(date)
  }
  if seconds == seconds.rounded() { return TripDates.format(date) }
  return date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
}
