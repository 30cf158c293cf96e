import CommandLineKit
import Foundation
import TripPlanner

/// `trips destinations`: every destination with its number of trips.
enum DestinationsCommand: Subcommand {
  static let format = CommonOptions.format([.text, .json], default: .text)

  static var spec: CommandSpec {
    CommandSpec(
      name: "destinations",
      abstract: "Lists the destinations with their number of trips (one SQL aggregate).",
      options: CommonOptions.filters.filter { $0.spec.name != "destination" } + [
        format, CommonOptions.json, CommonOptions.store,
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let json = try CommonOptions.outputFormat(arguments, format, fallback: .text) == .json
    let query = try CommonOptions.query(arguments, io)
    let store = try CommonOptions.openForReading(arguments, io)
    let destinations = try store.destinations(query)
    if json {
      let value = JSONValue.array(
        destinations.map {
          .object([("destination", .string($0.destination)), ("count", .number(Double($0.count)))])
        })
      try io.out(value.rendered(pretty: true) + "\n")
      return
    }
    guard !destinations.isEmpty else {
      io.err("No trips.\n")
      return
    }
    var table = TextTable(cutsLongCells: io.outIsTerminal)
    table.rows = [["DESTINATION", "TRIPS"]] + destinations.map { [$0.destination, "\($0.count)"] }
    try io.out(table.render(header: io.dim))
  }
}
