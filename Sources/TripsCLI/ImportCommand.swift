import Foundation
import TripPlanner

/// `trips import`: loads a CSV, JSON or GeoJSON file, all or nothing.
enum ImportCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "import",
      abstract: "Imports trips from a file: all of them, or none if any row is bad.",
      discussion:
        "Every bad row is reported as FILE:LINE: error: reason. Trips whose id exists are updated.",
      options: [
        OptionSpec(
          name: "format", valueName: "format",
          help: "csv, json or geojson.", defaultDescription: "from the file's extension; csv for -"),
        CommonOptions.author, CommonOptions.store,
      ],
      arguments: [ArgumentSpec(name: "file", help: "The file to import, or - for standard input.")])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let path = arguments.positionals[0]
    let format = try ExportCommand.format(arguments.value("format"), path: path == "-" ? nil : path)
    let data = try readInput(path, io)
    let name = path == "-" ? "<stdin>" : path
    let records = try format.decode(data, file: name)
    let store = try CommonOptions.openForWriting(arguments, io)
    let showProgress = io.errIsTerminal && records.count >= 50_000
    let count = try store.importRecords(records, file: name) { done in
      if showProgress { io.err("\rImporting \(done)/\(records.count) trips…") }
    }
    if showProgress { io.err("\r\u{1B}[K") }
    try io.out("Imported \(count) trip\(count == 1 ? "" : "s").\n")
  }
}
