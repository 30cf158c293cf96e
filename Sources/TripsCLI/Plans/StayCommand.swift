import CommandLineKit
import Foundation
import TripPlanner

/// `trips stay`: where one stays on a trip.
enum StayCommand: Subcommand {
  static var subcommands: [any Subcommand.Type] { [StaySetCommand.self, StayClearCommand.self] }

  static var spec: CommandSpec {
    CommandSpec(
      name: "stay", abstract: "Sets or clears where one stays on a trip ('trips show' shows it).",
      subcommands: subcommands.map { $0.spec })
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    throw CLIError.usage("Missing subcommand: set or clear.")
  }

  /// The stay as `trips show` prints it: `name, address (latitude, longitude)`.
  static func describe(_ stay: LivingAccommodation?) -> String {
    guard let stay else { return "none" }
    var text = stay.name
    if !stay.address.isEmpty { text += ", " + stay.address }
    text += " (\(stay.latitude), \(stay.longitude))"
    if let place = stay.placeIdentifier { text += " " + place.rawValue }
    return text
  }
}

/// `trips stay set`: an option for each field of a stay (``FieldOptions``).
enum StaySetCommand: Subcommand {
  static let fields = FieldOptions<LivingAccommodation>(
    renamed: [\.placeIdentifier: "place-id"], required: [\.name, \.latitude, \.longitude])

  static var spec: CommandSpec {
    CommandSpec(
      name: "set", abstract: "Sets a trip's stay (replacing the one it had) and prints the trip.",
      options: fields.options + [CommonOptions.author, CommonOptions.store],
      arguments: [BucketCommand.trip])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    var record = FieldValues<LivingAccommodation>()
    try fields.apply(arguments, to: &record)
    try record.validate()
    let store = try CommonOptions.openForWriting(arguments, io)
    let stay = try store.setStay(record, forTrip: arguments.positionals[0])
    if let trip = stay.trip { try io.out(ShowCommand.describe(trip, io: io)) }
  }
}

/// `trips stay clear`.
enum StayClearCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "clear", abstract: "Clears a trip's stay and prints the trip.",
      options: [CommonOptions.author, CommonOptions.store], arguments: [BucketCommand.trip])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = arguments.positionals[0]
    guard try store.clearStay(ofTrip: trip) != nil else {
      throw TripPlannerError(code: .notFound, message: "The trip has no stay to clear.")
    }
    try io.out(ShowCommand.describe(try store.trip(matching: trip), io: io))
  }
}
