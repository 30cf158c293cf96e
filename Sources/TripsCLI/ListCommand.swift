import Foundation
import Persistence
import TripPlanner

/// `trips list`: lists trips, optionally grouped by destination.
enum ListCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "list", abstract: "Lists trips, by start date or grouped by destination.",
      options: [
        OptionSpec(
          name: "group-by", valueName: "group-by",
          help: "Group the trips into sections: destination.")
      ] + CommonOptions.filters + [
        OptionSpec(
          name: "sort", valueName: "sort",
          help: "Order by start, end, name or destination.", defaultDescription: "start"),
        OptionSpec(name: "reverse", valueName: nil, help: "Reverse the order."),
        OptionSpec(name: "limit", valueName: "n", help: "Show at most n trips."),
        OptionSpec(name: "offset", valueName: "n", help: "Skip the first n trips."),
        CommonOptions.json, CommonOptions.store,
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    var query = try CommonOptions.query(arguments)
    if let sort = arguments.value("sort") {
      guard let value = TripQuery.Sort(rawValue: sort) else {
        throw CLIError.usage(
          "Invalid value '\(sort)' for '--sort': expected one of start, end, name, destination.")
      }
      query.sort = value
    }
    query.reverse = arguments.has("reverse")
    query.limit = try arguments.value("limit").map { try CommonOptions.count($0, option: "limit") }
    query.offset = try arguments.value("offset").map {
      try CommonOptions.count($0, option: "offset")
    }
    var grouped = false
    if let group = arguments.value("group-by") {
      guard group == "destination" else {
        throw CLIError.usage("Invalid value '\(group)' for '--group-by': expected destination.")
      }
      grouped = true
    }
    let store = try CommonOptions.openForReading(arguments, io)
    if grouped {
      let sections = try store.sections(query)
      if arguments.has("json") {
        let value = JSONValue.array(
          sections.map { section in
            .object([
              ("id", .string(section.id)),
              ("trips", .array(section.map { TripJSON.object($0.record) })),
            ])
          })
        try io.out(value.rendered(pretty: true) + "\n")
      } else if sections.isEmpty {
        io.err("No trips.\n")
      } else {
        try io.out(renderSections(sections, io: io))
      }
    } else {
      let trips = try store.trips(query)
      if arguments.has("json") {
        try io.out(
          JSONValue.array(trips.map { TripJSON.object($0.record) }).rendered(pretty: true) + "\n")
      } else if trips.isEmpty {
        io.err("No trips.\n")
      } else {
        var table = TextTable(rows: [["START", "END", "NAME", "DESTINATION", "ID"]])
        for trip in trips {
          table.rows.append([
            displayDate(trip.startDate), displayDate(trip.endDate), trip.name, trip.destination,
            trip.shortID,
          ])
        }
        try io.out(table.render(header: io.dim))
      }
    }
  }

  /// Each destination as a header with its count, then its trips in aligned columns (the
  /// columns line up across sections).
  static func renderSections(_ sections: [ResultsSection<String, Trip>], io: TerminalIO) -> String {
    var table = TextTable()
    for section in sections {
      for trip in section {
        table.rows.append([
          displayDate(trip.startDate), displayDate(trip.endDate), trip.name, trip.shortID,
        ])
      }
    }
    let lines = table.render(indent: "  ").split(separator: "\n", omittingEmptySubsequences: false)
    var text = ""
    var line = 0
    for (index, section) in sections.enumerated() {
      if index > 0 { text += "\n" }
      let count = section.count == 1 ? "1 trip" : "\(section.count) trips"
      text += io.bold(section.id) + " " + io.dim("(\(count))") + "\n"
      for _ in section {
        text += lines[line] + "\n"
        line += 1
      }
    }
    return text
  }
}
