import CommandLineKit
import Foundation

/// A `trips` subcommand: its specification and what it does.
protocol Subcommand: SendableMetatype {
  static var spec: CommandSpec { get }
  /// Nested subcommands (`trips sync export`); empty for most.
  static var subcommands: [any Subcommand.Type] { get }
  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws
}

extension Subcommand {
  static var subcommands: [any Subcommand.Type] { [] }
}

/// The `trips` command line. Everything here is testable without a process: pass a
/// ``TerminalIO`` that collects output.
public enum TripsCommand {
  /// The version `--version` prints.
  public static let version = "0.1.0"

  static let subcommands: [any Subcommand.Type] = [
    AddCommand.self, ListCommand.self, ShowCommand.self, UpdateCommand.self, DeleteCommand.self,
    BucketCommand.self, StayCommand.self,
    ImportCommand.self, ExportCommand.self, BoundsCommand.self, WatchCommand.self,
    DestinationsCommand.self, HistoryCommand.self, SyncCommand.self, CheckCommand.self,
    CompletionCommand.self, ServeCommand.self,
  ]

  static var spec: CommandSpec {
    CommandSpec(
      name: "trips",
      abstract:
        "Plan trips from the terminal: list them by destination, import, export, and read their history.",
      subcommands: subcommands.map { $0.spec })
  }

  /// Runs the command line `arguments` (without the program name) and returns the exit code:
  /// 0 success, 64 usage error, 65 invalid data, 66 missing input, 1 anything else.
  public static func main(_ arguments: [String], io: TerminalIO) -> Int32 {
    var io = io
    var path = ["trips"]
    do {
      guard let first = arguments.first else {
        try io.out(HelpFormatter.help(spec, path: path))
        return 0
      }
      switch first {
      case "--help", "-h":
        try io.out(HelpFormatter.help(spec, path: path))
        return 0
      case "--version":
        try io.out(version + "\n")
        return 0
      case "help":
        guard arguments.count > 1 else {
          try io.out(HelpFormatter.help(spec, path: path))
          return 0
        }
        var command = try subcommand(named: arguments[1])
        path.append(command.spec.name)
        // Subcommands at any depth: `trips help sync watch`.
        for name in arguments.dropFirst(2) {
          guard let nested = command.subcommands.first(where: { $0.spec.name == name }) else {
            break
          }
          command = nested
          path.append(nested.spec.name)
        }
        try io.out(HelpFormatter.help(command.spec, path: path))
        return 0
      default:
        var command = try subcommand(named: first)
        path.append(command.spec.name)
        var rest = Array(arguments.dropFirst())
        // Subcommands at any depth: each word that names one of the current command's.
        while let next = rest.first,
          let nested = command.subcommands.first(where: { $0.spec.name == next })
        {
          command = nested
          path.append(nested.spec.name)
          rest.removeFirst()
        }
        let parsed = try ArgumentParser.parse(rest, for: command.spec)
        if parsed[Flag.help] {
          try io.out(HelpFormatter.help(command.spec, path: path))
          return 0
        }
        io.timeZone = try CommonOptions.timeZone(parsed, environment: io.environment)
        do {
          try command.run(parsed, io)
        } catch {
          // The command's store is closed by now (it lived in `run`). Output fails only after
          // the write it reports: what was written stays.
          if !(error is OutputError) { io.creation.undo() }
          throw error
        }
        return 0
      }
    } catch OutputError.readerGone {
      // The reader went away (`trips list | head -1`): stop quietly, as `cat` does.
      return 0
    } catch {
      let failure = cliError(error)
      io.err("Error: \(terminalSafeMessage(failure.message))\n")
      if failure.kind == .usage {
        var command = path.count > 1 ? try? subcommand(named: path[1]) : nil
        for name in path.dropFirst(2) {
          command = command?.subcommands.first { $0.spec.name == name }
        }
        let usage = HelpFormatter.usage(command?.spec ?? spec, path: path)
        io.err(
          "Usage: \(usage)\n  See '\(path.joined(separator: " ")) --help' for more information.\n")
      }
      return failure.exitCode
    }
  }

  static func subcommand(named name: String) throws -> any Subcommand.Type {
    if let command = subcommands.first(where: { $0.spec.name == name }) { return command }
    let names = subcommands.map { $0.spec.name }
    let closest = names.min {
      ArgumentParser.editDistance($0, name) < ArgumentParser.editDistance($1, name)
    }
    var message =
      name.hasPrefix("-") ? "Unknown option '\(name)'." : "Unknown subcommand '\(name)'."
    if let closest, ArgumentParser.editDistance(closest, name) <= 2 {
      message += " Did you mean '\(closest)'?"
    }
    throw CLIError.usage(message)
  }
}
