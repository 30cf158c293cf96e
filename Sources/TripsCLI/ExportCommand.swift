import Foundation
import TripPlanner

/// `trips export`: writes every trip in a format `import` reads back.
enum ExportCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "export", abstract: "Exports every trip as CSV, JSON or GeoJSON; import reads it back.",
      options: [
        OptionSpec(
          name: "format", valueName: "format", help: "csv, json or geojson.",
          defaultDescription: "from --output's extension, else csv"),
        OptionSpec(
          name: "output", valueName: "file",
          help:
            "Write to this file instead of standard output: a regular file is replaced whole (atomically), a FIFO or device is written through, - is standard output."
        ),
        CommonOptions.store,
      ])
  }

  static func format(_ value: String?, path: String?) throws -> TripFileFormat {
    if let value {
      guard let format = TripFileFormat(rawValue: value.lowercased()) else {
        throw CLIError.usage(
          "Invalid value '\(value)' for '--format': expected csv, json or geojson.")
      }
      return format
    }
    return path.flatMap(TripFileFormat.init(pathExtension:)) ?? .csv
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let output = arguments.value("output")
    let format = try format(arguments.value("format"), path: output == "-" ? nil : output)
    let store = try CommonOptions.openForReading(arguments, io)
    let data = format.encode(try store.exportRecords())
    try OutputFile.write(data, to: output ?? "-", io: io)
  }
}
