import Foundation
import Persistence
import TripPlanner

/// Options shared by every subcommand.
enum CommonOptions {
  static let store = OptionSpec(
    name: "store", valueName: "path", help: "The trip store file.",
    defaultDescription:
      "$TRIPS_STORE, else $XDG_DATA_HOME/trips/trips.sqlite, else ~/.local/share/trips/trips.sqlite"
  )
  static let author = OptionSpec(
    name: "author", valueName: "name", help: "The author recorded in history for this change.",
    defaultDescription: "cli")
  static let json = OptionSpec(name: "json", valueName: nil, help: "Print JSON instead of text.")

  /// The filters of `list` and `bounds`.
  static let filters: [OptionSpec] = [
    OptionSpec(
      name: "search", valueName: "text",
      help: "Only trips whose name or destination contains the text, ignoring case and accents."),
    OptionSpec(
      name: "destination", valueName: "destination", help: "Only trips to this destination."),
    OptionSpec(
      name: "from", valueName: "date",
      help: "Only trips that end on or after this date (YYYY-MM-DD)."),
    OptionSpec(
      name: "to", valueName: "date",
      help: "Only trips that start on or before this date (YYYY-MM-DD)."),
  ]

  static func storeURL(_ arguments: ParsedArguments, _ io: TerminalIO) throws -> URL {
    if let path = arguments.value("store") { return try storeURL(path, option: "--store") }
    if let path = io.environment["TRIPS_STORE"], !path.isEmpty {
      return try storeURL(path, option: "TRIPS_STORE")
    }
    return TripStore.defaultURL(environment: io.environment)
  }

  /// A store path, or an error for a value with a URL scheme this build cannot open (it is
  /// never taken for a folder named `postgresql:`). `file://` URLs name files.
  static func storeURL(_ value: String, option: String) throws -> URL {
    guard !value.isEmpty else { throw CLIError.usage("\(option) needs a store path.") }
    if let colon = value.range(of: "://") {
      let scheme = value[..<colon.lowerBound]
      let isScheme =
        scheme.first?.isLetter == true
        && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
      if isScheme {
        if scheme.lowercased() == "file", let url = URL(string: value), url.isFileURL {
          return URL(fileURLWithPath: url.path)
        }
        if ["postgresql", "postgres"].contains(scheme.lowercased()) {
          throw CLIError.usage(
            "\(option) names a PostgreSQL database (\(scheme)://…), which this build of trips cannot open yet; give the path of a SQLite store file."
          )
        }
        throw CLIError.usage(
          "\(option) has the URL scheme '\(scheme)', which trips cannot open; give the path of a SQLite store file."
        )
      }
    }
    return URL(fileURLWithPath: value)
  }

  /// Opens the store for writing (creating it and its folders if needed).
  static func openForWriting(_ arguments: ParsedArguments, _ io: TerminalIO) throws -> TripStore {
    try TripStore(url: try storeURL(arguments, io), author: arguments.value("author") ?? "cli")
  }

  /// Opens the store for reading; a store that does not exist yet reads as empty. It is
  /// opened read-only (so a store in a read-only place can be read), or writable when it
  /// needs a migration first.
  ///
  /// A store that does not exist yet, or an empty file (which SQLite treats as a new
  /// database, and `add` would fill), reads as empty; a note on standard error names the path.
  static func openForReading(_ arguments: ParsedArguments, _ io: TerminalIO) throws -> TripStore {
    let url = try storeURL(arguments, io)
    let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? nil
    guard FileManager.default.fileExists(atPath: url.path), size != 0 else {
      let what = FileManager.default.fileExists(atPath: url.path) ? "is empty" : "does not exist"
      io.err("Note: the store \(terminalSafe(url.path)) \(what) yet; reading it as empty.\n")
      return try TripStore(inMemoryWithAuthor: "cli")
    }
    let author = arguments.value("author") ?? "cli"
    do {
      return try TripStore(url: url, author: author, readOnly: true)
    } catch let error as TripPlannerError {
      guard let cause = error.cause as? PersistenceError, cause.code == .schemaMismatch else {
        throw error
      }
      return try TripStore(url: url, author: author)
    }
  }

  static func query(_ arguments: ParsedArguments) throws -> TripQuery {
    var query = TripQuery()
    query.search = arguments.value("search")
    query.destination = arguments.value("destination")
    query.from = try arguments.value("from").map { try date($0, option: "from") }
    query.to = try arguments.value("to").map { try date($0, option: "to") }
    if let from = query.from, let to = query.to, to < from {
      throw CLIError.usage(
        "--to \(TripDates.formatDay(to)) is before --from \(TripDates.formatDay(from)).")
    }
    return query
  }

  static func date(_ text: String, option: String) throws -> Date {
    guard let date = TripDates.parse(text) else {
      throw CLIError.usage(
        "Invalid value '\(text)' for '--\(option)': expected a date as YYYY-MM-DD or ISO 8601 with a zone."
      )
    }
    return date
  }

  static func number(_ text: String, option: String) throws -> Double {
    guard let value = Double(text.trimmingCharacters(in: .whitespaces)), text.allSatisfy(\.isASCII)
    else {
      throw CLIError.usage("Invalid value '\(text)' for '--\(option)': expected a number.")
    }
    return value
  }

  static func count(_ text: String, option: String) throws -> Int {
    guard let value = Int(text), value >= 0 else {
      throw CLIError.usage(
        "Invalid value '\(text)' for '--\(option)': expected a whole number, 0 or more.")
    }
    return value
  }
}

/// Maps library errors to the CLI's messages and exit codes.
func cliError(_ error: any Error) -> CLIError {
  switch error {
  case let error as CLIError:
    return error
  case OutputError.failed(let reason):
    return CLIError(kind: .failure, message: "Cannot write to standard output: \(reason).")
  case let error as TripPlannerError:
    switch error.code {
    case .invalidTrip, .invalidInput:
      return CLIError(kind: .data, message: error.description)
    case .missingInput:
      return CLIError(kind: .noInput, message: error.message)
    case .store:
      if let cause = error.cause as? PersistenceError {
        if [.notAStore, .newerStore, .schemaMismatch].contains(cause.code) {
          return CLIError(kind: .data, message: cause.message)
        }
        if cause.row != nil {
          return CLIError(
            kind: .data,
            message: cause.message + ". Run 'trips check' to list every damaged trip.")
        }
        // The store error's own text already carries the message (and SQLite's detail).
        return CLIError(kind: .failure, message: cause.description)
      }
      return CLIError(kind: .failure, message: error.description)
    default:
      return CLIError(kind: .failure, message: error.description)
    }
  case let error as PersistenceError:
    let kind: CLIError.Kind =
      [.notAStore, .newerStore, .schemaMismatch].contains(error.code) ? .data : .failure
    return CLIError(kind: kind, message: error.description)
  default:
    return CLIError(kind: .failure, message: "\(error)")
  }
}

extension Trip {
  /// The first 8 characters of the id, enough to name it in a listing.
  var shortID: String { String(id.uuidString.lowercased().prefix(8)) }
}

/// `2027-04-01` for a UTC midnight, else `2027-04-01 13:45Z`.
func displayDate(_ date: Date) -> String {
  if date.timeIntervalSince1970.truncatingRemainder(dividingBy: 86400) == 0 {
    return TripDates.formatDay(date)
  }
  let text = TripDates.format(date)
  return text.replacingOccurrences(of: "T", with: " ")
}

/// Reads a whole file, or standard input for `-`.
func readInput(_ path: String, _ io: TerminalIO) throws -> Data {
  if path == "-" { return try io.readInput() }
  var isDirectory: ObjCBool = false
  guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
    throw CLIError(kind: .noInput, message: "The file \(path) does not exist.")
  }
  guard !isDirectory.boolValue else {
    throw CLIError(kind: .noInput, message: "\(path) is a directory, not a file.")
  }
  guard let data = FileManager.default.contents(atPath: path) else {
    throw CLIError(
      kind: .noInput, message: "The file \(path) cannot be read. Check its permissions.")
  }
  return data
}
