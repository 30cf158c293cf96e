import Foundation
import TripPlanner

/// `trips update`: changes fields of one trip.
enum UpdateCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "update", abstract: "Changes fields of one trip and prints it.",
      discussion: "Give only the fields to change; --place-id '' removes the place id.",
      options: AddCommand.fields + [CommonOptions.author, CommonOptions.store],
      arguments: [
        ArgumentSpec(name: "id", help: "The trip's id, or its first 4 or more characters.")
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let fields = AddCommand.fields.map(\.name)
    guard fields.contains(where: { arguments.value($0) != nil }) else {
      throw CLIError.usage(
        "Nothing to change: give at least one of --\(fields.joined(separator: ", --")).")
    }
    let start = try arguments.value("start").map { try CommonOptions.date($0, option: "start") }
    let end = try arguments.value("end").map { try CommonOptions.date($0, option: "end") }
    let latitude = try arguments.value("latitude").map {
      try CommonOptions.number($0, option: "latitude")
    }
    let longitude = try arguments.value("longitude").map {
      try CommonOptions.number($0, option: "longitude")
    }
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = try store.update(arguments.positionals[0]) { record in
      if let name = arguments.value("name") { record.name = name }
      if let destination = arguments.value("destination") { record.destination = destination }
      if let start { record.startDate = start }
      if let end { record.endDate = end }
      if let latitude { record.latitude = latitude }
      if let longitude { record.longitude = longitude }
      if let place = arguments.value("place-id") {
        record.placeIdentifier = place.isEmpty ? nil : place
      }
    }
    try io.out(ShowCommand.describe(trip, io: io))
  }
}
