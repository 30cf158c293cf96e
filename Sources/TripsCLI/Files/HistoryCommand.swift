import CommandLineKit
import Foundation
import Persistence
import TripPlanner

/// `trips history`: the store's persistent history.
enum HistoryCommand: Subcommand {
  static var subcommands: [any Subcommand.Type] { [HistoryPruneCommand.self] }

  static let after = Option<String>(
    name: "after", valueName: "token",
    help: "Only changes after this token (as printed by --json, or its number).")
  static let by = Option<String>(
    name: "by", valueName: "author", help: "Only changes by this author.")
  static let format = CommonOptions.format([.text, .json], default: .text)

  static var spec: CommandSpec {
    var spec = CommandSpec(
      name: "history", abstract: "Shows the store's history: who changed which trips, and when.",
      discussion:
        "History is kept until pruned: 'trips history prune --before TOKEN' deletes older transactions. Prune only before the oldest token a sync still resumes from (see its state file); consumers holding an older token are told it expired.",
      options: [after, by, format, CommonOptions.json, CommonOptions.store],
      subcommands: subcommands.map { $0.spec })
    spec.renamed["author"] =
      "history filters by author with --by NAME; --author names who makes a change (add, update, delete, import, sync)."
    return spec
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let json = try CommonOptions.outputFormat(arguments, format, fallback: .text) == .json
    let store = try CommonOptions.openForReading(arguments, io)
    let context = store.context
    var descriptor = HistoryDescriptor(modelTypes: Trip.modelTypes)
    if let text = try arguments[after] {
      if let token = DefaultHistoryToken(text) {
        descriptor.token = token
      } else if let value = Int64(text), value >= 0 {
        descriptor.token = DefaultHistoryToken(
          storeIdentifier: store.container.storeIdentifier, value: value)
      } else {
        throw CLIError.usage("Invalid value '\(text)' for '--after': expected a history token.")
      }
    }
    if let author = try arguments[by] { descriptor.authors = [author] }
    let transactions: [DefaultHistoryTransaction]
    do {
      transactions = try context.fetchHistory(descriptor)
    } catch {
      throw SyncCommand.explain(error)
    }
    let subjects = try HistorySubjects(transactions, context: context)
    if json {
      let value = JSONValue.array(
        transactions.map { transaction in
          .object([
            ("token", .string(transaction.token.description)),
            ("author", transaction.author.map(JSONValue.string) ?? .null),
            ("timestamp", .string(TripDates.format(transaction.timestamp))),
            (
              "changes",
              .array(
                transaction.changes.map { change in
                  let subject = subjects[change]
                  var members: [(String, JSONValue)] = [
                    ("kind", .string(change.kind.rawValue)),
                    ("tripId", subject.tripID.map { .string($0.lowercasedString) } ?? .null),
                  ]
                  if let part = subject.part {
                    members.append(
                      (part.member, part.id.map { .string($0.lowercasedString) } ?? .null))
                  }
                  members.append(
                    (
                      "attributes",
                      .array(change.updatedAttributeNames.sorted().map(JSONValue.string))
                    ))
                  return .object(members)
                })
            ),
          ])
        })
      try io.out(value.rendered(pretty: true) + "\n")
      return
    }
    if transactions.isEmpty {
      io.err("No history.\n")
      return
    }
    for transaction in transactions {
      try io.out(
        io.bold("#\(transaction.token.value)") + "  " + TripDates.format(transaction.timestamp)
          + "  "
          + terminalSafe(transaction.author ?? "-") + "\n")
      var table = TextTable()
      for change in transaction.changes {
        let subject = subjects[change]
        var detail =
          change.kind == .update
          ? change.updatedAttributeNames.sorted().joined(separator: ", ") : ""
        if let part = subject.part {
          let name = "\(part.noun) \(part.id.map { String($0.lowercasedString.prefix(8)) } ?? "?")"
          detail = detail.isEmpty ? name : "\(name): \(detail)"
        }
        table.rows.append([
          change.kind.rawValue, subject.tripID?.lowercasedString ?? "(deleted later)", detail,
        ])
      }
      try io.out(table.render(indent: "    "))
    }
  }
}

/// What each change of a history read is about: the trip, and for a bucket-list item or a
/// stay the row's own id. Read from the live rows (a lookup by key each) or, for rows deleted
/// since, from their tombstones, which keep every plan row's id and its trip's key. A read
/// that fails is an error, not an unknown trip.
struct HistorySubjects {
  struct Subject {
    var tripID: UUID?
    /// For a plan row: its noun ("item", "stay"), its JSON member and its id.
    var part: (noun: String, member: String, id: UUID?)?
  }
  private var subjects: [PersistentIdentifier: Subject] = [:]

  init(_ transactions: [DefaultHistoryTransaction], context: ModelContext) throws {
    let changes = transactions.flatMap(\.changes)
    // Rows are never renumbered, so a deleted row's tombstone names it for its earlier
    // inserts and updates too.
    var deletedTrips: [Int64: UUID] = [:]
    // A deleted row's change, by row: its tombstone, read as its model's.
    var deletions: [PersistentIdentifier: HistoryChange] = [:]
    for change in changes where change.kind == .delete {
      deletions[change.changedPersistentIdentifier] = change
      if let id = change.tombstone(as: Trip.self)?[\.id] as? UUID {
        deletedTrips[change.changedPersistentIdentifier.primaryKey] = id
      }
    }
    func trip(key: Int64?) throws -> UUID? {
      guard let key else { return nil }
      if let id = deletedTrips[key] { return id }
      let identifier = PersistentIdentifier(
        storeIdentifier: context.container.storeIdentifier, entityName: Trip.schema.name,
        primaryKey: key)
      return try context.model(for: identifier, as: Trip.self)?.id
    }
    for change in changes where subjects[change.changedPersistentIdentifier] == nil {
      let identifier = change.changedPersistentIdentifier
      let deletion = deletions[identifier]
      var subject = Subject()
      switch identifier.entityName {
      case BucketListItem.schema.name:
        if let item = try context.model(for: identifier, as: BucketListItem.self) {
          subject = Subject(tripID: item.trip?.id, part: ("item", "bucketListItemId", item.id))
        } else {
          let tombstone = deletion?.tombstone(as: BucketListItem.self)
          subject = Subject(
            tripID: try trip(key: tombstone?.key(of: \.trip)),
            part: ("item", "bucketListItemId", tombstone?[\.id] as? UUID))
        }
      case LivingAccommodation.schema.name:
        if let stay = try context.model(for: identifier, as: LivingAccommodation.self) {
          subject = Subject(tripID: stay.trip?.id, part: ("stay", "livingAccommodationId", stay.id))
        } else {
          let tombstone = deletion?.tombstone(as: LivingAccommodation.self)
          subject = Subject(
            tripID: try trip(key: tombstone?.key(of: \.trip)),
            part: ("stay", "livingAccommodationId", tombstone?[\.id] as? UUID))
        }
      default:
        subject.tripID =
          try deletedTrips[identifier.primaryKey]
          ?? context.model(for: identifier, as: Trip.self)?.id
      }
      subjects[identifier] = subject
    }
  }

  subscript(change: HistoryChange) -> Subject {
    subjects[change.changedPersistentIdentifier] ?? Subject()
  }
}

/// `trips history prune`.
enum HistoryPruneCommand: Subcommand {
  static let before = Option<String>(
    name: "before", valueName: "token", help: "Delete transactions before this token.")

  static var spec: CommandSpec {
    CommandSpec(
      name: "prune",
      abstract: "Deletes history transactions older than a token (the token itself is kept).",
      options: [before.required, CommonOptions.store])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let store = try CommonOptions.openForWriting(arguments, io)
    let text = try arguments[before] ?? ""
    let token: DefaultHistoryToken
    if let parsed = DefaultHistoryToken(text) {
      token = parsed
    } else if let value = Int64(text), value >= 0 {
      token = DefaultHistoryToken(storeIdentifier: store.container.storeIdentifier, value: value)
    } else {
      throw CLIError.usage("Invalid value '\(text)' for '--before': expected a history token.")
    }
    do {
      let deleted = try store.context.deleteHistory(before: token)
      try io.out("Deleted \(deleted) history transaction\(deleted == 1 ? "" : "s").\n")
    } catch let error as PersistenceError {
      throw CLIError(
        kind: error.code == .historyTokenForeign ? .data : .failure, message: error.message)
    }
  }
}
