import CommandLineKit
import Foundation
import TripPlanner

/// `trips update`: changes fields of one trip.
enum UpdateCommand: Subcommand {
  /// `add`'s options, none required.
  static let fields = FieldOptions<Trip>(renamed: AddCommand.renamed)

  static var spec: CommandSpec {
    CommandSpec(
      name: "update", abstract: "Changes fields of one trip and prints it.",
      discussion: "Give only the fields to change; --place-id '' removes the place id.",
      options: fields.options + [CommonOptions.author, CommonOptions.store],
      arguments: [
        ArgumentSpec(name: "id", help: "The trip's id, or its first 4 or more characters.")
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    guard fields.anyGiven(in: arguments) else {
      throw CLIError.usage(
        "Nothing to change: give at least one of --\(fields.options.map(\.spec.name).joined(separator: ", --"))."
      )
    }
    var changes: [(String, JSONValue)] = []
    try fields.apply(arguments) { changes.append(($0, $1)) }
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = try store.update(arguments.positionals[0]) { record in
      for (field, value) in changes { try record.set(field, value) }
    }
    try io.out(ShowCommand.describe(trip, io: io))
  }
}
