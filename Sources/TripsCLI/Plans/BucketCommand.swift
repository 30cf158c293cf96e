import CommandLineKit
import Foundation
import TripPlanner

/// `trips bucket`: a trip's bucket list.
enum BucketCommand: Subcommand {
  static var subcommands: [any Subcommand.Type] {
    [
      BucketListCommand.self, BucketAddCommand.self, BucketUpdateCommand.self,
      BucketMoveCommand.self, BucketRemoveCommand.self,
    ]
  }

  static var spec: CommandSpec {
    CommandSpec(
      name: "bucket", abstract: "Lists and changes a trip's bucket list (things to do there).",
      discussion:
        "Items are numbered from 1 in their trip's order, as 'trips bucket list' shows them; an item's id, or its first 4 or more characters, names it too.",
      subcommands: subcommands.map { $0.spec })
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    throw CLIError.usage("Missing subcommand: list, add, update, move or remove.")
  }

  static let trip = ArgumentSpec(
    name: "trip", help: "The trip's id, or its first 4 or more characters.")
  static let item = ArgumentSpec(
    name: "item", help: "The item's number in its trip's list (from 1), or its id.")

  /// The options of an item's fields but those the commands spell their own way: whether it
  /// needs a reservation and is in the plan (flags with their negations), and its position
  /// (1-based `--at`).
  static let fields = FieldOptions<BucketListItem>(
    leaving: leaving)
  /// The fields `add` and `update` spell their own way.
  static var leaving: Set<PartialKeyPath<BucketListItem>> {
    [\.hasReservation, \.isInPlan, \.position]
  }
  static let reservation = Flag(name: "reservation", help: "It needs a reservation.")
  static let noReservation = Flag(name: "no-reservation", help: "It needs no reservation.")
  static let inPlan = Flag(name: "in-plan", help: "It is in the plan.")
  static let notInPlan = Flag(name: "not-in-plan", help: "It is not in the plan.")
  static let position = Option<Int>(
    name: "at", valueName: "n", help: "Its place in the list, from 1.",
    parse: { try positionNumber($0, option: "at") })

  /// A 1-based place in a list, as the command line gives it.
  static func positionNumber(_ text: String, option: String) throws -> Int {
    guard let number = Int(text), number >= 1 else {
      throw CLIError.usage(
        "Invalid value '\(terminalSafe(text))' for '--\(option)': expected a place in the list, from 1."
      )
    }
    return number
  }

  /// The item `reference` names in `trip`'s list: a number from 1 (without leading zeros), or
  /// an id or its first 4 or more characters (an all-digit prefix, such as `120394`, that is
  /// no place in the list is read as one). O(items of the trip).
  static func item(_ reference: String, in list: [BucketListItem]) throws -> BucketListItem {
    if let number = Int(reference), !reference.hasPrefix("0"), !reference.hasPrefix("+"),
      number <= list.count || reference.count < 4
    {
      guard number >= 1, number <= list.count else {
        throw TripPlannerError(
          code: .notFound,
          message:
            "The bucket list has \(list.count) item\(list.count == 1 ? "" : "s"); there is no item \(number)."
        )
      }
      return list[number - 1]
    }
    let digits = reference.lowercased().filter(\.isHexDigit)
    guard digits.count >= 4, reference.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
      throw TripPlannerError(
        code: .notFound,
        message:
          "'\(terminalSafe(reference))' is not an item: give its number in the list, or its id or its first 4 or more characters."
      )
    }
    let matches = list.filter { $0.id.lowercasedString.filter(\.isHexDigit).hasPrefix(digits) }
    guard matches.count == 1 else {
      throw TripPlannerError(
        code: .notFound,
        message: matches.isEmpty
          ? "No item of the bucket list has an id starting with \(terminalSafe(reference))."
          : "\(matches.count) items' ids start with \(terminalSafe(reference)); give more characters."
      )
    }
    return matches[0]
  }

  /// The list as lines: `1. [in plan] [reservation] Title: details`.
  static func describe(_ list: [BucketListItem]) -> String {
    guard !list.isEmpty else { return "(no bucket-list items)\n" }
    return list.enumerated().map { index, item in
      var line = "\(index + 1). \(terminalSafe(item.title))"
      var marks: [String] = []
      if item.isInPlan { marks.append("in plan") }
      if item.hasReservation { marks.append("reservation") }
      if !marks.isEmpty { line += " [" + marks.joined(separator: ", ") + "]" }
      if !item.details.isEmpty { line += ": " + terminalSafe(item.details) }
      return line + "\n"
    }.joined()
  }

  /// `flag` or `negated` as a value: nil when neither is given; a usage error for both.
  static func choice(_ arguments: ParsedArguments, _ flag: Flag, _ negated: Flag) throws -> Bool? {
    switch (arguments[flag], arguments[negated]) {
    case (true, true):
      throw CLIError.usage(
        "--\(flag.spec.name) and --\(negated.spec.name) contradict each other: give one.")
    case (true, false): return true
    case (false, true): return false
    case (false, false): return nil
    }
  }
}

/// `trips bucket list`.
enum BucketListCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "list", abstract: "Lists a trip's bucket list, in order.",
      options: [CommonOptions.json, CommonOptions.store], arguments: [BucketCommand.trip])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let store = try CommonOptions.openForReading(arguments, io)
    let list = try store.bucketList(ofTrip: arguments.positionals[0])
    if arguments[CommonOptions.json] {
      try io.out(
        JSONValue.array(list.map { TripJSON.object(FieldValues($0)) }).rendered(pretty: true) + "\n"
      )
    } else {
      try io.out(BucketCommand.describe(list))
    }
  }
}

/// `trips bucket add`.
enum BucketAddCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "add", abstract: "Adds an item to a trip's bucket list and prints the list.",
      options: FieldOptions<BucketListItem>(
        leaving: BucketCommand.leaving, required: [\.title]
      ).options + [
        BucketCommand.reservation, BucketCommand.inPlan, BucketCommand.position,
        CommonOptions.author, CommonOptions.store,
      ], arguments: [BucketCommand.trip])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    var record = FieldValues<BucketListItem>()
    try BucketCommand.fields.apply(arguments, to: &record)
    record.hasReservation = arguments[BucketCommand.reservation]
    record.isInPlan = arguments[BucketCommand.inPlan]
    try record.validate()
    let place = try arguments[BucketCommand.position]
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = arguments.positionals[0]
    if let place {
      let count = try store.bucketList(ofTrip: trip).count
      guard place <= count + 1 else {
        throw TripPlannerError(
          code: .invalidTrip,
          message:
            "--at \(place) is past the end of a bucket list of \(count) item\(count == 1 ? "" : "s"); give 1 to \(count + 1).",
          field: "position")
      }
    }
    try store.addBucketListItem(record, toTrip: trip, at: place.map { $0 - 1 })
    try io.out(BucketCommand.describe(try store.bucketList(ofTrip: trip)))
  }
}

/// `trips bucket update`.
enum BucketUpdateCommand: Subcommand {
  static var fields: [any OptionDescriptor] {
    BucketCommand.fields.options + [
      BucketCommand.reservation, BucketCommand.noReservation, BucketCommand.inPlan,
      BucketCommand.notInPlan,
    ]
  }

  static var spec: CommandSpec {
    CommandSpec(
      name: "update", abstract: "Changes an item of a trip's bucket list and prints the list.",
      discussion: "Give only what changes: --in-plan marks it done, --reservation reserved.",
      options: fields + [CommonOptions.author, CommonOptions.store],
      arguments: [BucketCommand.trip, BucketCommand.item])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    guard fields.contains(where: arguments.contains) else {
      throw CLIError.usage(
        "Nothing to change: give at least one of --\(fields.map(\.spec.name).joined(separator: ", --"))."
      )
    }
    var checked = FieldValues<BucketListItem>()
    try BucketCommand.fields.apply(arguments, to: &checked)  // every value read before the store
    let reservation = try BucketCommand.choice(
      arguments, BucketCommand.reservation, BucketCommand.noReservation)
    let inPlan = try BucketCommand.choice(
      arguments, BucketCommand.inPlan, BucketCommand.notInPlan)
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = arguments.positionals[0]
    let item = try BucketCommand.item(
      arguments.positionals[1], in: try store.bucketList(ofTrip: trip))
    try store.updateBucketListItem(item.id) { record in
      try BucketCommand.fields.apply(arguments, to: &record)
      if let reservation { record.hasReservation = reservation }
      if let inPlan { record.isInPlan = inPlan }
    }
    try io.out(BucketCommand.describe(try store.bucketList(ofTrip: trip)))
  }
}

/// `trips bucket move`.
enum BucketMoveCommand: Subcommand {
  static let to = Option<Int>(
    name: "to", valueName: "n", help: "Its new place in the list, from 1.",
    parse: { try BucketCommand.positionNumber($0, option: "to") })

  static var spec: CommandSpec {
    CommandSpec(
      name: "move", abstract: "Moves an item within a trip's bucket list and prints the list.",
      options: [to.required, CommonOptions.author, CommonOptions.store],
      arguments: [BucketCommand.trip, BucketCommand.item])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let place = try arguments[to] ?? 1
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = arguments.positionals[0]
    let list = try store.bucketList(ofTrip: trip)
    let item = try BucketCommand.item(arguments.positionals[1], in: list)
    guard place <= list.count else {
      throw TripPlannerError(
        code: .invalidTrip,
        message:
          "--to \(place) is past the end of a bucket list of \(list.count) item\(list.count == 1 ? "" : "s").",
        field: "position")
    }
    try store.moveBucketListItem(item.id, to: place - 1)
    try io.out(BucketCommand.describe(try store.bucketList(ofTrip: trip)))
  }
}

/// `trips bucket remove`.
enum BucketRemoveCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "remove", abstract: "Removes an item from a trip's bucket list and prints the list.",
      options: [CommonOptions.author, CommonOptions.store],
      arguments: [BucketCommand.trip, BucketCommand.item])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let store = try CommonOptions.openForWriting(arguments, io)
    let trip = arguments.positionals[0]
    let item = try BucketCommand.item(
      arguments.positionals[1], in: try store.bucketList(ofTrip: trip))
    try store.removeBucketListItem(item.id)
    try io.out(BucketCommand.describe(try store.bucketList(ofTrip: trip)))
  }
}
