import Foundation

/// Trips in CSV: a column per field of ``Trip``, named as its stored column
/// (`id,name,destination,start_date,end_date,latitude,longitude,place_id`), in declaration
/// order. The header is required; the id and optional fields may be left out, and an empty
/// cell of an optional field is none; unknown columns are an error. Dates are `YYYY-MM-DD`
/// (UTC midnight) or ISO 8601 with a zone; a date at UTC midnight is written as its day.
///
/// Cost: O(cells) each way, each cell read or written by its field's type.
public enum TripCSV {
  /// A column: the field it carries and its type.
  struct Column {
    let name: String
    let field: String
    /// The field's index in the trip's field table.
    let index: Int
    let type: any FormatValue.Type
    let isOptional: Bool
    let isIdentity: Bool
    /// Whether a file must have it: a field that is neither the id nor optional, unless its
    /// type fills it in when it is left out (a count, a flag).
    var isRequired: Bool {
      !isIdentity && !isOptional && (type.valueWhenAbsent == nil || type.isText)
    }
  }

  /// The columns, in the order export writes them.
  static let layout: [Column] = Trip.schema.fields.enumerated().compactMap { index, field in
    formatType(of: field).map {
      Column(
        name: field.column, field: field.name, index: index, type: $0,
        isOptional: field.isOptional, isIdentity: field.isIdentity)
    }
  }

  /// The columns' names, in the order export writes them.
  public static let columns = layout.map(\.name)

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
    for column in layout where column.isRequired && index[column.name] == nil {
      problems.add(header.line, "the required column '\(column.name)' is missing")
    }
    try problems.throwIfAny()
    // Each column of the layout with its position in the file, nil where the file has none.
    let positions = layout.map { index[$0.name] }

    var records: [(line: Int?, record: TripRecord)] = []
    records.reserveCapacity(rows.count - 1)
    for row in rows.dropFirst() {
      guard row.fields.count == header.fields.count else {
        problems.add(
          row.line, "\(row.fields.count) fields, but the header has \(header.fields.count)")
        continue
      }
      var values = FieldValues<Trip>()
      var valid = true
      for (column, position) in zip(layout, positions) {
        guard let position else { continue }  // left out: a new trip's value
        var text = row.fields[position]
        if !column.type.isText { text = text.trimmingCharacters(in: .whitespaces) }
        if column.isIdentity && text.isEmpty { continue }
        guard let value = column.type.json(text: text, optional: column.isOptional) else {
          problems.add(
            row.line, "\(column.name) '\(text)' is not \(column.type.textExpectation)")
          valid = false
          continue
        }
        // The value is of the field's type: it was read as that type reads text.
        try? values.set(column.field, value)
      }
      let record = TripRecord(given: values)
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
      text += CSVWriter.line(
        layout.map { column in
          record.values[field: column.index]?.plainText ?? ""
        })
    }
    return text
  }
}
