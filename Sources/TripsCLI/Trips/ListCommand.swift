import CommandLineKit
import Foundation
import Persistence
import TripPlanner

/// `trips list`: lists trips, optionally grouped by destination.
enum ListCommand: Subcommand {
  /// `--group-by`: the one grouping there is.
  enum Grouping: String, CaseIterable { case destination }

  static let groupBy = Option<Grouping>(
    name: "group-by", valueName: "group-by", help: "Group the trips into sections by")
  static let sort = Option<TripQuery.Sort>(
    name: "sort", valueName: "sort", help: "Order by", defaultDescription: "start")
  static let reverse = Flag(name: "reverse", help: "Reverse the order.")
  static let limit = Option<Int>(
    name: "limit", valueName: "n", help: "Show at most n trips.",
    parse: { try CommonOptions.count($0, option: "limit") })
  static let offset = Option<Int>(
    name: "offset", valueName: "n", help: "Skip the first n trips.",
    parse: { try CommonOptions.count($0, option: "offset") })
  static let format = CommonOptions.format([.text, .json], default: .text)

  static var spec: CommandSpec {
    CommandSpec(
      name: "list", abstract: "Lists trips, by start date or grouped by destination.",
      options: [groupBy] + CommonOptions.filters + [
        sort, reverse, limit, offset, format, CommonOptions.json, CommonOptions.store,
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    var query = try CommonOptions.query(arguments, io)
    if let value = try arguments[sort] { query.sort = value }
    query.reverse = arguments[reverse]
    query.limit = try arguments[limit]
    query.offset = try arguments[offset]
    let grouped = try arguments[groupBy] != nil
    let json = try CommonOptions.outputFormat(arguments, format, fallback: .text) == .json
    let store = try CommonOptions.openForReading(arguments, io)
    if grouped {
      let sections = try store.sectionRecords(query)
      if json {
        let value = JSONValue.array(
          sections.map { section in
            .object([
              ("id", .string(section.id)),
              ("trips", .array(section.map(TripJSON.object))),
            ])
          })
        try io.out(value.rendered(pretty: true) + "\n")
      } else if sections.isEmpty {
        io.err("No trips.\n")
      } else {
        try io.out(renderSections(sections, io: io))
      }
    } else {
      if json {
        let records = try store.records(query)
        try io.out(JSONValue.array(records.map(TripJSON.object)).rendered(pretty: true) + "\n")
      } else {
        try streamTable(store, query, io: io)
      }
    }
  }

  /// How many rows are read before the first are printed; their widths set the columns'.
  static let streamBatch = 1_000

  /// Prints the table as the rows are read, a batch at a time, so that the first rows appear
  /// before the whole result is read (`trips list | head -1` on a million trips returns at
  /// once). Column widths come from the first batch (capped at
  /// ``TextTable/maximumColumnWidth``); a later, longer cell widens only its own row.
  /// Cost: O(rows), memory O(batch).
  static func streamTable(_ store: TripStore, _ query: TripQuery, io: TerminalIO) throws {
    var rows: [[String]] = [["START", "END", "NAME", "DESTINATION", "ID"]]
    var widths: [Int]?
    var printedHeader = false
    func flush() throws {
      if widths == nil { widths = TextTable.widths(rows) }
      var text = ""
      for row in rows {
        let line = TextTable.line(row, widths: widths!, cutsLongCells: io.outIsTerminal)
        text += (printedHeader ? line : io.dim(line)) + "\n"
        printedHeader = true
      }
      rows.removeAll(keepingCapacity: true)
      try io.out(text)
    }
    var count = 0
    try store.forEachRecord(query) { trip in
      count += 1
      rows.append([
        displayDate(trip.startDate, io: io), displayDate(trip.endDate, io: io), trip.name,
        trip.destination, trip.shortID,
      ])
      if rows.count >= streamBatch { try flush() }
    }
    if count == 0 {
      io.err("No trips.\n")
      return
    }
    if !rows.isEmpty { try flush() }
  }

  /// Each destination as a header with its count, then its trips in aligned columns (the
  /// columns line up across sections).
  static func renderSections(_ sections: [ResultsSection<String, TripRecord>], io: TerminalIO)
    -> String
  {
    var table = TextTable(cutsLongCells: io.outIsTerminal)
    for section in sections {
      for trip in section {
        table.rows.append([
          displayDate(trip.startDate, io: io), displayDate(trip.endDate, io: io), trip.name,
          trip.shortID,
        ])
      }
    }
    // One line per row (cells never hold a line break: see `terminalSafe`).
    let lines = table.lines().map { "  " + $0 }
    var text = ""
    var line = 0
    for (index, section) in sections.enumerated() {
      if index > 0 { text += "\n" }
      let count = section.count == 1 ? "1 trip" : "\(section.count) trips"
      text += io.bold(terminalSafe(section.id)) + " " + io.dim("(\(count))") + "\n"
      for _ in section {
        text += lines[line] + "\n"
        line += 1
      }
    }
    return text
  }
}
