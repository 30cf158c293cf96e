import CommandLineKit
import Foundation
import TripPlanner

/// `trips delete`: deletes trips, all or none.
enum DeleteCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "delete", abstract: "Deletes trips (all of them, or none if an id is unknown).",
      options: [CommonOptions.author, CommonOptions.store],
      arguments: [
        ArgumentSpec(
          name: "id", help: "Trip ids, or their first 4 or more characters.", isRepeating: true)
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let store = try CommonOptions.openForWriting(arguments, io)
    let trips = try store.delete(arguments.positionals)
    for trip in trips { try io.out(trip.id.lowercasedString + "\n") }
    io.err("Deleted \(trips.count) trip\(trips.count == 1 ? "" : "s").\n")
  }
}
