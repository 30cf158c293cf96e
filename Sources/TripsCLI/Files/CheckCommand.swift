import CommandLineKit
import Foundation
import TripPlanner

/// `trips check`: is the store file sound?
enum CheckCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "check",
      abstract:
        "Checks the store: SQLite's integrity_check, the history, and that every trip reads back and is valid.",
      options: [CommonOptions.store])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let url = try CommonOptions.storeURL(arguments, io)
    guard CommonOptions.storeExists(url) else {
      throw CLIError(kind: .noInput, message: "There is no store at \(url.path).")
    }
    let store = try TripStore(url: url, readOnly: true)
    var problems = try store.container.checkIntegrity()
    // Every trip is read back through the model and validated: damage inside a sound page (a
    // `.codable` value that no longer decodes, an out-of-range number) breaks reads but passes
    // SQLite's check.
    do {
      problems += try store.damagedTrips()
    } catch {
      problems.append("The trips cannot be read: \(cliError(error).message)")
    }
    guard problems.isEmpty else {
      throw CLIError(
        kind: .data, message: "The store is damaged:\n" + problems.joined(separator: "\n"))
    }
    let count = try store.count()
    try io.out("ok: \(count) trip\(count == 1 ? "" : "s")\n")
  }
}
