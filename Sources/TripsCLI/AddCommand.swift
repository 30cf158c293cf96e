import CommandLineKit
import Foundation
import TripPlanner

/// `trips add`: adds one trip and prints its id.
enum AddCommand: Subcommand {
  static let name = Option<String>(
    name: "name", valueName: "name", help: "What the trip is called.")
  static let destination = Option<String>(
    name: "destination", valueName: "destination", help: "Where it goes.")
  static let start = Option<Date>(
    name: "start", valueName: "date", help: "First day (YYYY-MM-DD or ISO 8601).",
    parse: { try CommonOptions.date($0, option: "start") })
  static let end = Option<Date>(
    name: "end", valueName: "date", help: "Last day, not before the start.",
    parse: { try CommonOptions.date($0, option: "end") })
  static let latitude = Option<Double>(
    name: "latitude", valueName: "degrees", help: "Degrees north, -90 to 90.",
    parse: { try CommonOptions.number($0, option: "latitude") })
  static let longitude = Option<Double>(
    name: "longitude", valueName: "degrees", help: "Degrees east, -180 to 180.",
    parse: { try CommonOptions.number($0, option: "longitude") })
  static let placeID = Option<String>(
    name: "place-id", valueName: "id", help: "The place in a gazetteer, such as geonames:1850147.")
  static let id = Option<UUID>(
    name: "id", valueName: "uuid", help: "The trip's id; an existing id updates that trip.",
    parse: { text in
      guard let uuid = UUID(uuidString: text) else {
        throw CLIError.usage("Invalid value '\(terminalSafe(text))' for '--id': expected a UUID.")
      }
      return uuid
    })

  /// The fields of a trip, as `add` and `update` take them.
  static let fields: [any OptionDescriptor] = [
    name, destination, start, end, latitude, longitude, placeID,
  ]

  static var spec: CommandSpec {
    CommandSpec(
      name: "add", abstract: "Adds one trip and prints its id.",
      options: [
        name.required, destination.required, start.required, end.required, latitude.required,
        longitude.required, placeID, id, CommonOptions.author, CommonOptions.store,
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    // The required options are there: the parser refuses a command line without them.
    let record = TripRecord(
      id: try arguments[id], name: try arguments[name] ?? "",
      destination: try arguments[destination] ?? "",
      startDate: try arguments[start] ?? Date(), endDate: try arguments[end] ?? Date(),
      latitude: try arguments[latitude] ?? 0, longitude: try arguments[longitude] ?? 0,
      placeIdentifier: try arguments[placeID].flatMap { $0.isEmpty ? nil : $0 })
    try record.validate()
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = try store.add(record)
    try io.out(trip.id.lowercasedString + "\n")
  }
}
