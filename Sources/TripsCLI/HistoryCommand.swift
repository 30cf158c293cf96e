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
    var descriptor = HistoryDescriptor(modelTypes: [Trip.self])
    if let text = try arguments[after] {
      if let token = HistoryToken(text) {
        descriptor.token = token
      } else if let value = Int64(text), value >= 0 {
        descriptor.token = HistoryToken(
          storeIdentifier: store.container.storeIdentifier, value: value)
      } else {
        throw CLIError.usage("Invalid value '\(text)' for '--after': expected a history token.")
      }
    }
    if let author = try arguments[by] { descriptor.authors = [author] }
    let transactions: [HistoryTransaction]
    do {
      transactions = try context.fetchHistory(descriptor)
    } catch {
      throw SyncCommand.explain(error)
    }
    // Rows are never renumbered, so a deleted row's tombstone names the trip of its earlier
    // inserts and updates too.
    var deletedIDs: [PersistentIdentifier: UUID] = [:]
    for change in transactions.flatMap(\.changes) {
      if let id = change.tombstone?[\Trip.id] { deletedIDs[change.changedIdentifier] = id }
    }
    func tripID(_ change: HistoryChange) -> String? {
      if let id = deletedIDs[change.changedIdentifier] { return id.lowercasedString }
      let trip = try? context.model(for: change.changedIdentifier, as: Trip.self)
      return trip?.id.lowercasedString
    }
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
                  .object([
                    ("kind", .string(change.kind.rawValue)),
                    ("tripId", tripID(change).map(JSONValue.string) ?? .null),
                    ("attributes", .array(change.updatedAttributes.sorted().map(JSONValue.string))),
                  ])
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
        let detail =
          change.kind == .update ? change.updatedAttributes.sorted().joined(separator: ", ") : ""
        table.rows.append([change.kind.rawValue, tripID(change) ?? "(deleted later)", detail])
      }
      try io.out(table.render(indent: "    "))
    }
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
    let token: HistoryToken
    if let parsed = HistoryToken(text) {
      token = parsed
    } else if let value = Int64(text), value >= 0 {
      token = HistoryToken(storeIdentifier: store.container.storeIdentifier, value: value)
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
