import CommandLineKit
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
    guard AddCommand.fields.contains(where: arguments.contains) else {
      throw CLIError.usage(
        "Nothing to change: give at least one of --\(AddCommand.fields.map(\.spec.name).joined(separator: ", --"))."
      )
    }
    let name = try arguments[AddCommand.name]
    let destination = try arguments[AddCommand.destination]
    let start = try arguments[AddCommand.start]
    let end = try arguments[AddCommand.end]
    let latitude = try arguments[AddCommand.latitude]
    let longitude = try arguments[AddCommand.longitude]
    let place = try arguments[AddCommand.placeID]
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = try store.update(arguments.positionals[0]) { record in
      if let name { record.name = name }
      if let destination { record.destination = destination }
      if let start { record.startDate = start }
      if let end { record.endDate = end }
      if let latitude { record.latitude = latitude }
      if let longitude { record.longitude = longitude }
      if let place { record.placeIdentifier = place.isEmpty ? nil : place }
    }
    try io.out(ShowCommand.describe(trip, io: io))
  }
}
