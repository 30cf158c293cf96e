import Foundation
import TripPlanner

/// `trips check`: is the store file sound?
enum CheckCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "check",
      abstract: "Checks the store file's integrity (SQLite's integrity_check and the history).",
      options: [CommonOptions.store])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let url = CommonOptions.storeURL(arguments, io)
    guard FileManager.default.fileExists(atPath: url.path) else {
      throw CLIError(kind: .noInput, message: "There is no store at \(url.path).")
    }
    let store = try TripStore(url: url, readOnly: true)
    let problems = try store.container.checkIntegrity()
    guard problems.isEmpty else {
      throw CLIError(
        kind: .data, message: "The store is damaged:\n" + problems.joined(separator: "\n"))
    }
    io.out("ok: \(try store.count()) trips\n")
  }
}
