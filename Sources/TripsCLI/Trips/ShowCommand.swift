import CommandLineKit
import Foundation
import TripPlanner

/// `trips show`: one trip in full.
enum ShowCommand: Subcommand {
  static let format = CommonOptions.format([.text, .json], default: .text)

  static var spec: CommandSpec {
    CommandSpec(
      name: "show", abstract: "Shows one trip.",
      options: [format, CommonOptions.json, CommonOptions.timeZone, CommonOptions.store],
      arguments: [
        ArgumentSpec(name: "id", help: "The trip's id, or its first 4 or more characters.")
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let json = try CommonOptions.outputFormat(arguments, format, fallback: .text) == .json
    let store = try CommonOptions.openForReading(arguments, io)
    let trip = try store.trip(matching: arguments.positionals[0])
    if json {
      guard case .object(var members) = TripJSON.object(trip.record) else { return }
      members.append(
        ("bucketList", .array(trip.bucketList.map { TripJSON.object(FieldValues($0)) })))
      members.append(
        (
          "livingAccommodation",
          trip.livingAccommodation.map { TripJSON.object(FieldValues($0)) } ?? .null
        ))
      try io.out(JSONValue.object(members).rendered(pretty: true) + "\n")
    } else {
      try io.out(describe(trip, io: io))
    }
  }

  /// The fields ``describe(_:io:)`` lays out itself.
  private static var shown: Set<String> {
    [
      "id", "name", "destination", "startDate", "endDate", "latitude", "longitude",
      "placeIdentifier",
    ]
  }

  /// A row for each other field declared on ``Trip``: `notes: …`, `none` for none.
  static func otherFields(of trip: Trip) -> [[String]] {
    FieldValues(trip).fieldValues(leaving: shown).map { name, value in
      let text = value.map(\.plainText) ?? ""
      return [FieldOptions<Trip>.kebabCase(name) + ":", value == .null ? "none" : text]
    }
  }

  static func describe(_ trip: Trip, io: TerminalIO) -> String {
    let days = Int(((trip.endDate.timeIntervalSince(trip.startDate)) / 86400).rounded(.down)) + 1
    let table = TextTable(
      rows: [
        ["id:", trip.id.lowercasedString],
        ["name:", trip.name],
        ["destination:", trip.destination],
        ["start:", displayDate(trip.startDate, io: io)],
        ["end:", displayDate(trip.endDate, io: io) + " (\(days) day\(days == 1 ? "" : "s"))"],
        ["latitude:", "\(trip.latitude)"],
        ["longitude:", "\(trip.longitude)"],
        ["place id:", trip.placeIdentifier?.rawValue ?? "none"],
      ] + otherFields(of: trip) + [["stay:", StayCommand.describe(trip.livingAccommodation)]])
    // Cells are escaped by the table (no control character from data reaches the terminal).
    var text = table.render()
    let list = trip.bucketList
    if !list.isEmpty { text += "bucket list:\n" + BucketCommand.describe(list) }
    return text
  }
}
