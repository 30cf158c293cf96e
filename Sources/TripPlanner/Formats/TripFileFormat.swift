import Foundation
import Geo

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

  /// Writes trip records (JSON and GeoJSON with their plans, when ``TripRecord/plan`` is
  /// read): ``TripFileWriter``'s bytes for all of them at once.
  public func encode(_ records: [TripRecord]) -> Data {
    let box =
      self == .geojson
      ? GeographicBox.enclosing(
        records.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) }) : nil
    var writer = TripFileWriter(self, box: box)
    var bytes = writer.header()
    bytes += writer.write(records)
    bytes += writer.footer()
    return Data(bytes)
  }
}

/// Trips written as a file of one format a batch at a time, so that an export's memory is
/// bound by a batch, not by the document: ``header()``, then ``write(_:)`` for each batch in
/// order, then ``footer()``; together, the bytes ``TripFileFormat/encode(_:)`` writes for all
/// the trips at once. ``TripStore/export(_:as:batchSize:to:)`` uses it.
///
/// Cost: O(size of a batch's text) a batch; O(1) state between batches.
public struct TripFileWriter {
  /// The format written.
  public let format: TripFileFormat
  private let box: GeographicBox?
  private var array: JSONArrayWriter

  /// A writer of `format`. For GeoJSON, `box` is the collection's `bbox`: the box enclosing
  /// every trip that will be written (`GeographicBox.enclosing(_:)`), nil for none.
  public init(_ format: TripFileFormat, box: GeographicBox? = nil) {
    self.format = format
    self.box = box
    array = JSONArrayWriter(pretty: true, depth: format == .geojson ? 1 : 0)
  }

  /// The bytes before the first trip: CSV's header line, or GeoJSON's members before its
  /// features.
  public func header() -> [UInt8] {
    switch format {
    case .csv:
      return Array(CSVWriter.line(TripCSV.columns).utf8)
    case .json:
      return []
    case .geojson:
      var output: [UInt8] = [UInt8(ascii: "{")]
      JSONArrayWriter.memberName("type", pretty: true, depth: 0, into: &output)
      JSONArrayWriter.write(.string("FeatureCollection"), pretty: true, depth: 1, into: &output)
      if let box {
        output.append(UInt8(ascii: ","))
        JSONArrayWriter.memberName("bbox", pretty: true, depth: 0, into: &output)
        JSONArrayWriter.write(
          .array(box.bbox.map(JSONValue.number)), pretty: true, depth: 1, into: &output)
      }
      output.append(UInt8(ascii: ","))
      JSONArrayWriter.memberName("features", pretty: true, depth: 0, into: &output)
      return output
    }
  }

  /// The bytes of `records`, the next trips in order.
  public mutating func write(_ records: [TripRecord]) -> [UInt8] {
    var output: [UInt8] = []
    switch format {
    case .csv:
      output = Array(TripCSV.rows(records).utf8)
    case .json:
      // Straight to bytes, as `TripJSON.object(record)` renders at the array's depth.
      let depth = array.depth + 1
      for record in records {
        array.beginElement(into: &output)
        output.append(UInt8(ascii: "{"))
        record.values.writeJSONMembers(
          skipping: nil, after: false, pretty: true, depth: depth, into: &output)
        if let plan = record.plan {
          for (name, value) in TripJSON.planMembers(plan) {
            output.append(UInt8(ascii: ","))
            JSONArrayWriter.memberName(name, pretty: true, depth: depth, into: &output)
            JSONArrayWriter.write(value, pretty: true, depth: depth + 1, into: &output)
          }
        }
        JSONValue.newline(into: &output, depth: depth)
        output.append(UInt8(ascii: "}"))
      }
    case .geojson:
      for record in records { array.append(TripGeoJSON.feature(record), into: &output) }
    }
    return output
  }

  /// The bytes after the last trip.
  public func footer() -> [UInt8] {
    var output: [UInt8] = []
    switch format {
    case .csv:
      break
    case .json:
      array.finish(into: &output)
      output.append(0x0A)
    case .geojson:
      array.finish(into: &output)
      output.append(contentsOf: "\n}\n".utf8)
    }
    return output
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
