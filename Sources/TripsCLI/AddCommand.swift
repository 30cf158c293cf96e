import Foundation
import TripPlanner

/// `trips add`: adds one trip and prints its id.
enum AddCommand: Subcommand {
  static let fields: [OptionSpec] = [
    OptionSpec(name: "name", valueName: "name", help: "What the trip is called."),
    OptionSpec(name: "destination", valueName: "destination", help: "Where it goes."),
    OptionSpec(name: "start", valueName: "date", help: "First day (YYYY-MM-DD or ISO 8601)."),
    OptionSpec(name: "end", valueName: "date", help: "Last day, not before the start."),
    OptionSpec(name: "latitude", valueName: "degrees", help: "Degrees north, -90 to 90."),
    OptionSpec(name: "longitude", valueName: "degrees", help: "Degrees east, -180 to 180."),
    OptionSpec(
      name: "place-id", valueName: "id", help: "The place in a gazetteer, such as geonames:1850147."
    ),
  ]

  static var spec: CommandSpec {
    var required = fields
    for index in required.indices where required[index].name != "place-id" {
      required[index].isRequired = true
    }
    return CommandSpec(
      name: "add", abstract: "Adds one trip and prints its id.",
      options: required + [
        OptionSpec(
          name: "id", valueName: "uuid", help: "The trip's id; an existing id updates that trip."),
        CommonOptions.author, CommonOptions.store,
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    var id: UUID?
    if let text = arguments.value("id") {
      guard let uuid = UUID(uuidString: text) else {
        throw CLIError.usage("Invalid value '\(text)' for '--id': expected a UUID.")
      }
      id = uuid
    }
    let record = TripRecord(
      id: id, name: arguments.value("name") ?? "",
      destination: arguments.value("destination") ?? "",
      startDate: try CommonOptions.date(arguments.value("start") ?? "", option: "start"),
      endDate: try CommonOptions.date(arguments.value("end") ?? "", option: "end"),
      latitude: try CommonOptions.number(arguments.value("latitude") ?? "", option: "latitude"),
      longitude: try CommonOptions.number(arguments.value("longitude") ?? "", option: "longitude"),
      placeIdentifier: arguments.value("place-id").flatMap { $0.isEmpty ? nil : $0 })
    try record.validate()
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = try store.add(record)
    try io.out(trip.id.lowercasedString + "\n")
  }
}
