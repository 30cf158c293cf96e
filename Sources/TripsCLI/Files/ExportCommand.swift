import CommandLineKit
import Foundation
import TripPlanner

/// `trips export`: writes every trip in a format `import` reads back.
enum ExportCommand: Subcommand {
  static let format = CommonOptions.format(
    [.csv, .json, .geojson], detail: "Default: from --output's extension, else csv.")
  static let output = Option<String>(
    name: "output", valueName: "file",
    help:
      "Write to this file instead of standard output: a regular file is replaced whole (atomically), a FIFO or device is written through, - is standard output."
  ).completingFiles

  static var spec: CommandSpec {
    CommandSpec(
      name: "export", abstract: "Exports every trip as CSV, JSON or GeoJSON; import reads it back.",
      options: [format, output, CommonOptions.store])
  }

  /// The file format: the one asked for, else the one `path`'s extension names, else CSV.
  static func fileFormat(_ format: OutputFormat?, path: String?) -> TripFileFormat {
    if let format, let file = TripFileFormat(rawValue: format.rawValue) { return file }
    return path.flatMap(TripFileFormat.init(pathExtension:)) ?? .csv
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let output = try arguments[output]
    let format = fileFormat(try arguments[format], path: output == "-" ? nil : output)
    let store = try CommonOptions.openForReading(arguments, io)
    // JSON and GeoJSON carry each trip's plan; CSV stays one row a trip. Written a batch at
    // a time: memory is bound by a batch, not by the store.
    try OutputFile.write(to: output ?? "-", io: io) { sink in
      try store.export(as: format, to: sink)
    }
  }
}
