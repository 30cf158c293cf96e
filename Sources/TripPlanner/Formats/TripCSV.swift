import Foundation

/// Trips in CSV: `id,name,destination,start_date,end_date,latitude,longitude,place_id`.
/// `id` and `place_id` are optional columns; the header is required; unknown columns are an
/// error. Dates are `YYYY-MM-DD` (UTC midnight) or ISO 8601 with a zone.
public enum TripCSV {
  /// The columns, in the order export writes them.
  public static let columns = [
    "id", "name", "destination", "start_date", "end_date", "latitude", "longitude", "place_id",
  ]
  static let required: Set<String> = [
    "name", "destination", "start_date", "end_date", "latitude", "longitude",
  ]

  /// Reads records; throws every problem at once.
  public static func decode(_ data: Data, file: String) throws -> [(line: Int?, record: TripRecord)]
  {
    var problems = ProblemList(file: file)
    let rows: [CSVReader.Record]
    do {
      rows = try CSVReader.records(data)
    } catch {
      problems.add(error.line, error.reason)
      try problems.throwIfAny()
      return []
    }
    guard let header = rows.first else {
      problems.add(
        nil, "the file is empty; a CSV file needs a header line (\(columns.joined(separator: ",")))"
      )
      try problems.throwIfAny()
      return []
    }
    var index: [String: Int] = [:]
    for (position, name) in header.fields.enumerated() {
      let column = name.trimmingCharacters(in: .whitespaces).lowercased()
      if !columns.contains(column) {
        problems.add(
          header.line,
          "unknown column '\(name)'; the columns are \(columns.joined(separator: ", "))")
      } else if index[column] != nil {
        problems.add(header.line, "the column '\(column)' appears twice")
      } else {
        index[column] = position
      }
    }
    for column in columns where required.contains(column) && index[column] == nil {
      problems.add(header.line, "the required column '\(column)' is missing")
    }
    try problems.throwIfAny()

    var records: [(line: Int?, record: TripRecord)] = []
    records.reserveCapacity(rows.count - 1)
    for row in rows.dropFirst() {
      guard row.fields.count == header.fields.count else {
        problems.add(
          row.line, "\(row.fields.count) fields, but the header has \(header.fields.count)")
        continue
      }
      func value(_ column: String) -> String? { index[column].map { row.fields[$0] } }
      var valid = true
      func date(_ column: String) -> Date {
        let text = value(column) ?? ""
        if let date = TripDates.parse(text) { return date }
        problems.add(
          row.line, "\(column) '\(text)' is not a date (YYYY-MM-DD or ISO 8601 with a zone)")
        valid = false
        return Date(timeIntervalSinceReferenceDate: 0)
      }
      func number(_ column: String) -> Double {
        let text = (value(column) ?? "").trimmingCharacters(in: .whitespaces)
        if let number = TripRecord.parseNumber(text) { return number }
        problems.add(
          row.line,
          "\(column) '\(text)' is not a decimal number (such as -33.86 or 151.2)")
        valid = false
        return 0
      }
      var id: UUID?
      if let text = value("id"), !text.isEmpty {
        id = UUID(uuidString: text.trimmingCharacters(in: .whitespaces))
        if id == nil {
          problems.add(row.line, "id '\(text)' is not a UUID")
          valid = false
        }
      }
      let record = TripRecord(
        id: id, name: value("name") ?? "", destination: value("destination") ?? "",
        startDate: date("start_date"), endDate: date("end_date"), latitude: number("latitude"),
        longitude: number("longitude"),
        placeIdentifier: value("place_id").flatMap { $0.isEmpty ? nil : $0 })
      if valid { problems.check(record, line: row.line) }
      records.append((row.line, record))
    }
    try problems.throwIfAny()
    return records
  }

  /// Writes records with a header, every column included.
  public static func encode(_ records: [TripRecord]) -> Data {
    Data((CSVWriter.line(columns) + rows(records)).utf8)
  }

  /// The rows of `records`, without the header.
  static func rows(_ records: [TripRecord]) -> String {
    var text = ""
    for record in records {
      text += CSVWriter.line([
        record.id?.lowercasedString ?? "", record.name, record.destination,
        formatFileDate(record.startDate, dayOnly: true),
        formatFileDate(record.endDate, dayOnly: true),
        formatNumber(record.latitude), formatNumber(record.longitude), record.placeIdentifier ?? "",
      ])
    }
    return text
  }
}
