import CommandLineKit
import Foundation
import TripPlanner

/// `trips add`: adds one trip and prints its id.
enum AddCommand: Subcommand {
  static let id = Option<UUID>(
    name: "id", valueName: "uuid", help: "The trip's id; an existing id updates that trip.",
    parse: { text in
      guard let uuid = UUID(uuidString: text) else {
        throw CLIError.usage("Invalid value '\(terminalSafe(text))' for '--id': expected a UUID.")
      }
      return uuid
    })

  /// The fields of a trip, as `add` and `update` take them (``FieldOptions``): an option per
  /// field declared on ``Trip``, the dates and the place id under their short names.
  static let fields = FieldOptions<Trip>(renamed: renamed, requiringEveryField: true)
  /// The options named otherwise than their fields.
  static var renamed: [PartialKeyPath<Trip>: String] {
    [\.startDate: "start", \.endDate: "end", \.placeIdentifier: "place-id"]
  }

  static var spec: CommandSpec {
    CommandSpec(
      name: "add", abstract: "Adds one trip and prints its id.",
      options: fields.options + [id, CommonOptions.author, CommonOptions.store])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    // The required options are there: the parser refuses a command line without them.
    var record = try TripRecord(FieldValues())
    try fields.apply(arguments) { try record.set($0, $1) }
    record.id = try arguments[id]
    try record.validate()
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = try store.add(record)
    try io.out(trip.id.lowercasedString + "\n")
  }
}
