import CommandLineKit
import Foundation
import TripPlanner

/// `trips import`: loads a CSV, JSON or GeoJSON file, all or nothing.
enum ImportCommand: Subcommand {
  static let format = Option<OutputFormat>(
    name: "format", valueName: "format", help: "Read as", allowed: [.csv, .json, .geojson],
    detail:
      "Default: from the file's extension, else from its first character: [ is JSON, { is GeoJSON, anything else CSV."
  )

  static var spec: CommandSpec {
    CommandSpec(
      name: "import",
      abstract: "Imports trips from a file: all of them, or none if any row is bad.",
      discussion:
        "Every bad row is reported as FILE:LINE: error: reason. Trips whose id exists are updated.",
      options: [format, CommonOptions.author, CommonOptions.store],
      arguments: [ArgumentSpec(name: "file", help: "The file to import, or - for standard input.")])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let path = arguments.positionals[0]
    let data = try readInput(path, io)
    let name = path == "-" ? "<stdin>" : path
    let format: TripFileFormat
    let asked = try arguments[Self.format]
    if asked == nil, path == "-" || TripFileFormat(pathExtension: path) == nil {
      format = sniff(data)
    } else {
      format = ExportCommand.fileFormat(asked, path: path)
    }
    let records = try format.decode(data, file: name)
    let store = try CommonOptions.openForWriting(arguments, io)
    let showProgress = io.errIsTerminal && records.count >= 50_000
    let count = try store.importRecords(records, file: name) { done in
      if showProgress { io.err("\rImporting \(done)/\(records.count) trips…") }
    }
    if showProgress { io.err("\r\u{1B}[K") }
    try io.out("Imported \(count) trip\(count == 1 ? "" : "s").\n")
  }

  /// The format of a document without a telling name: `[` starts JSON, `{` GeoJSON, anything
  /// else is read as CSV (after a byte-order mark and white space).
  static func sniff(_ data: Data) -> TripFileFormat {
    var bytes = data.prefix(4096)[...]
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
    let first = bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
    switch first {
    case UInt8(ascii: "["): return .json
    case UInt8(ascii: "{"): return .geojson
    default: return .csv
    }
  }
}
