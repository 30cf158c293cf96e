import CommandLineKit
import Dispatch
import Foundation
import Geo
import Persistence
import Synchronization
import TripPlanner

/// How a command prints data: one type for every command, each offering the formats that
/// apply to it (`--format`), with `--json` kept as the shorthand of `--format json`.
enum OutputFormat: String, CaseIterable, Sendable {
  case text, json, csv, geojson, svg
}

/// Options shared by every subcommand.
enum CommonOptions {
  /// `--format` offering `allowed`.
  static func format(
    _ allowed: [OutputFormat], default value: OutputFormat? = nil, detail: String? = nil
  ) -> Option<OutputFormat> {
    Option(
      name: "format", valueName: "format", help: "Print as", allowed: allowed, detail: detail,
      defaultDescription: value?.rawValue)
  }

  /// The format a command prints in: `--format`, `--json` (its shorthand) or `fallback`;
  /// both at once must agree.
  static func outputFormat(
    _ arguments: ParsedArguments, _ option: Option<OutputFormat>, fallback: OutputFormat
  ) throws -> OutputFormat {
    let chosen = try arguments[option]
    if arguments[json] {
      guard chosen == nil || chosen == .json else {
        throw CLIError.usage(
          "--json is --format json; it cannot go with --format \(chosen!.rawValue).")
      }
      return .json
    }
    return chosen ?? fallback
  }

  static let store = Option<String>(
    name: "store", valueName: "store",
    help: "The trip store: a SQLite file, or a postgresql:// URL (libpq's forms, service= names).",
    defaultDescription:
      "$TRIPS_STORE, else $XDG_DATA_HOME/trips/trips.sqlite, else ~/.local/share/trips/trips.sqlite"
  ).completingFiles
  static let author = Option<String>(
    name: "author", valueName: "name", help: "The author recorded in history for this change.",
    defaultDescription: "cli")
  static let json = Flag(name: "json", help: "Print JSON instead of text (--format json).")

  static let timeZone = Option<String>(
    name: "time-zone", valueName: "zone",
    help:
      "Show dates, and read the days of --from and --to, in this time zone (an IANA name such as America/New_York, or UTC).",
    defaultDescription: "$TZ, else UTC")

  /// The zone named by `--time-zone` or, when absent, `$TZ` (`:Europe/Zurich` too); UTC when
  /// neither is set.
  static func timeZone(_ arguments: ParsedArguments, environment: [String: String]) throws
    -> TimeZone
  {
    if let name = try arguments[timeZone] {
      guard let zone = zone(named: name) else {
        throw CLIError.usage(
          "Invalid value '\(name)' for '--time-zone': expected a time zone such as UTC or Europe/Zurich."
        )
      }
      return zone
    }
    // An unknown $TZ (a POSIX rule such as "<+03>-3") falls back to UTC.
    if let name = environment["TZ"], !name.isEmpty, let zone = zone(named: name) {
      return zone
    }
    return TimeZone(identifier: "UTC")!
  }

  private static func zone(named text: String) -> TimeZone? {
    let name = text.hasPrefix(":") ? String(text.dropFirst()) : text
    if name == "UTC" || name == "Z" { return TimeZone(identifier: "UTC") }
    guard name.allSatisfy({ $0.isASCII && !$0.isWhitespace }), !name.isEmpty else { return nil }
    if let zone = TimeZone(identifier: name) { return zone }
    if let zone = TimeZone(abbreviation: name), name.count <= 5 { return zone }
    return nil
  }

  static let search = Option<String>(
    name: "search", valueName: "text",
    help:
      "Only trips whose name, destination or a bucket-list title contains the text, ignoring case and accents."
  )
  static let bucketList = Option<String>(
    name: "bucket-list", valueName: "text",
    help: "Only trips with a bucket-list item whose title or details contain the text.")
  static let hasReservation = Flag(
    name: "has-reservation", help: "Only trips with a bucket-list item that needs a reservation.")
  static let notInPlan = Flag(
    name: "not-in-plan", help: "Only trips with a bucket-list item not in the plan yet.")
  static let destination = Option<String>(
    name: "destination", valueName: "destination", help: "Only trips to this destination.")
  static let from = Option<String>(
    name: "from", valueName: "date", help: "Only trips that end on or after this date (YYYY-MM-DD)."
  ).completing(["today"])
  static let to = Option<String>(
    name: "to", valueName: "date",
    help: "Only trips that start on or before this date (YYYY-MM-DD)."
  ).completing(["today"])

  /// The filters of `list`, `bounds` and `destinations`.
  static let filters: [any OptionDescriptor] = [
    search, destination, from, to, bucketList, hasReservation, notInPlan, timeZone,
  ]

  static func storeURL(_ arguments: ParsedArguments, _ io: TerminalIO) throws -> URL {
    if let path = try arguments[store] { return try storeURL(path, option: "--store") }
    if let path = io.environment["TRIPS_STORE"], !path.isEmpty {
      return try storeURL(path, option: "TRIPS_STORE")
    }
    return TripStore.defaultURL(environment: io.environment)
  }

  /// A store path or a `postgresql://` URL (``storeLocation(_:option:)``).
  static func storeURL(_ value: String, option: String) throws -> URL {
    try storeLocation(value, option: option)
  }

  /// Whether the store at `url` exists: a file, or any PostgreSQL database.
  static func storeExists(_ url: URL) -> Bool {
    !url.isFileURL || FileManager.default.fileExists(atPath: url.path)
  }

  /// How messages name the store at `url`: its path, or its URL without a password.
  static func storeName(_ url: URL) -> String {
    url.isFileURL ? url.path : PostgreSQLEngine.displayName(of: url)
  }

  /// Throws exit 66 when the store at `url` (a file) does not exist or is empty: for commands
  /// that only read a store they follow or serve, where an empty stand-in would hide a
  /// mistyped `--store`. `why` says what the command needs it for.
  static func requireExistingStore(_ url: URL, _ why: String) throws {
    guard url.isFileURL else { return }
    let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
    guard FileManager.default.fileExists(atPath: url.path), size > 0 else {
      throw CLIError(
        kind: .noInput,
        message:
          "The store \(terminalSafe(url.path)) does not exist\(FileManager.default.fileExists(atPath: url.path) ? " (it is an empty file)" : ""): \(why) Check --store, or create it with trips add or trips import."
      )
    }
  }

  /// Throws exit 66 (a missing input, as sysexits says) when the file an option names does
  /// not exist.
  static func requireInputFile(_ path: String, _ option: String) throws {
    guard FileManager.default.fileExists(atPath: path) else {
      throw CLIError(
        kind: .noInput, message: "The file \(terminalSafe(path)) (\(option)) does not exist.")
    }
  }

  /// Prints a note when the store at `url` (a file) does not exist yet and is about to be
  /// created by a command that writes to it.
  static func noteCreation(_ url: URL, _ io: TerminalIO, _ why: String) {
    guard url.isFileURL, !FileManager.default.fileExists(atPath: url.path) else { return }
    io.err("Note: the store \(terminalSafe(url.path)) does not exist yet; \(why)\n")
  }

  /// Opens the store for writing, creating it and its folders if needed; a store made here is
  /// removed again if the command fails (``StoreCreation``).
  static func openForWriting(_ arguments: ParsedArguments, _ io: TerminalIO) throws -> TripStore {
    let url = try storeURL(arguments, io)
    io.creation.noteCreating(url)
    return try TripStore(url: url, author: try arguments[author] ?? "cli")
  }

  /// Opens the store for reading; a store that does not exist yet reads as empty. It is
  /// opened read-only (so a store in a read-only place can be read), or writable when it
  /// needs a migration first.
  ///
  /// A store that does not exist yet, or an empty file (which SQLite treats as a new
  /// database, and `add` would fill), reads as empty; a note on standard error names the path.
  ///
  /// A PostgreSQL database always exists (the server says otherwise when it does not); one
  /// without the store's tables yet is given them, as a file would be made by `add`.
  static func openForReading(_ arguments: ParsedArguments, _ io: TerminalIO) throws -> TripStore {
    let url = try storeURL(arguments, io)
    let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? nil
    guard !url.isFileURL || (FileManager.default.fileExists(atPath: url.path) && size != 0) else {
      let what = FileManager.default.fileExists(atPath: url.path) ? "is empty" : "does not exist"
      io.err("Note: the store \(terminalSafe(url.path)) \(what) yet; reading it as empty.\n")
      return try TripStore(inMemoryWithAuthor: "cli")
    }
    let author = try arguments[author] ?? "cli"
    do {
      return try TripStore(url: url, author: author, readOnly: true)
    } catch let error as PersistenceError where error.code == .schemaMismatch {
      return try TripStore(url: url, author: author)
    }
  }

  static func query(_ arguments: ParsedArguments, _ io: TerminalIO) throws -> TripQuery {
    let zone = io.timeZone
    var query = TripQuery()
    query.search = try arguments[search]
    query.destination = try arguments[destination]
    query.bucketListMentions = try arguments[bucketList]
    query.hasReservation = arguments[hasReservation]
    query.hasItemNotInPlan = arguments[notInPlan]
    let fromText = try arguments[from]
    let toText = try arguments[to]
    query.from = try fromText.map { try day($0, option: "from", zone: zone).start }
    query.to = try toText.map { try day($0, option: "to", zone: zone).end }
    if let start = query.from, let end = query.to, end < start {
      throw CLIError.usage("--to \(toText ?? "") is before --from \(fromText ?? "").")
    }
    return query
  }

  /// The period a `--from`/`--to` value names: a day (`YYYY-MM-DD`, `today`) from its first to
  /// its last instant in `zone`, or an ISO 8601 instant with a zone (start and end alike).
  static func day(_ text: String, option: String, zone: TimeZone) throws -> (start: Date, end: Date)
  {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = zone
    var dayStart: Date?
    if text.lowercased() == "today" {
      dayStart = calendar.startOfDay(for: Date())
    } else if text.count == 10, let utc = TripDates.parse(text) {
      // The same calendar day, in the zone.
      var utcCalendar = Calendar(identifier: .gregorian)
      utcCalendar.timeZone = TimeZone(identifier: "UTC")!
      let parts = utcCalendar.dateComponents([.year, .month, .day], from: utc)
      dayStart = calendar.date(from: parts)
    }
    if let dayStart {
      let next = calendar.date(byAdding: .day, value: 1, to: dayStart) ?? dayStart
      return (dayStart, next.addingTimeInterval(-0.001))
    }
    guard let instant = TripDates.parse(text) else {
      throw CLIError.usage(
        "Invalid value '\(terminalSafe(text))' for '--\(option)': expected a day as YYYY-MM-DD or today, or ISO 8601 with a zone."
      )
    }
    return (instant, instant)
  }

  static func date(_ text: String, option: String) throws -> Date {
    guard let date = TripDates.parse(text) else {
      throw CLIError.usage(
        "Invalid value '\(terminalSafe(text))' for '--\(option)': expected a date as YYYY-MM-DD or ISO 8601 with a zone."
      )
    }
    return date
  }

  static func number(_ text: String, option: String) throws -> Double {
    guard let value = TripRecord.parseNumber(text) else {
      throw CLIError.usage(
        "Invalid value '\(terminalSafe(text))' for '--\(option)': expected a decimal number, such as -33.86."
      )
    }
    return value
  }

  static func count(_ text: String, option: String) throws -> Int {
    guard let value = Int(text), value >= 0 else {
      throw CLIError.usage(
        "Invalid value '\(terminalSafe(text))' for '--\(option)': expected a whole number, 0 or more."
      )
    }
    return value
  }

  /// A whole number within `range`; `unit` names what it counts in the message ("whole
  /// seconds from 1 to 3600"), else "a whole number from 1 to 256".
  static func wholeNumber(
    _ text: String, option: String, in range: ClosedRange<Int>, unit: String? = nil
  ) throws -> Int {
    guard let value = Int(text), range.contains(value) else {
      let expected = unit.map { "whole \($0)" } ?? "a whole number"
      throw CLIError.usage(
        "Invalid value '\(terminalSafe(text))' for '--\(option)': expected \(expected) from \(range.lowerBound) to \(range.upperBound)."
      )
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
  case let error as ServerSyncError:
    return CLIError(
      kind: CLIError.Kind(exit: FailureStatus(of: error).exit), message: error.message)
  case let error as TripPlannerError:
    // The exit status from the one table (FailureStatus), as the service's HTTP status is.
    let kind = CLIError.Kind(exit: FailureStatus(of: error).exit)
    return CLIError(kind: kind, message: kind == .noInput ? error.message : error.description)
  case let error as PersistenceError:
    // A damaged row names the trip and points to `trips check`, wherever it was read.
    if error.row != nil {
      return CLIError(
        kind: .data,
        message:
          "A stored trip cannot be read: \(TripStore.describeDamage(error)). Run 'trips check' to list every damaged trip."
      )
    }
    let kind = CLIError.Kind(exit: FailureStatus(of: error).exit)
    // The store error's own text carries the message (and the engine's detail) for a failure.
    return CLIError(kind: kind, message: kind == .data ? error.message : error.description)
  case let error as GeoError:
    return CLIError(kind: .failure, message: error.message)
  case let error as NSError
  where error.domain == NSCocoaErrorDomain || error.domain == NSPOSIXErrorDomain:
    return CLIError(kind: .failure, message: error.localizedDescription)
  default:
    // Never a Swift type name or a debug description: errors a user can cause are mapped
    // above; anything else is a bug to report.
    return CLIError(
      kind: .failure,
      message: "An unexpected error stopped the command. Please report it with the command you ran."
    )
  }
}

extension Trip {
  /// The first 8 characters of the id, enough to name it in a listing.
  var shortID: String { String(id.lowercasedString.prefix(8)) }
}

extension TripRecord {
  /// The first 8 characters of the id, enough to name it in a listing (empty without one).
  var shortID: String { id.map { String($0.lowercasedString.prefix(8)) } ?? "" }
}

/// A date as people read it, in the command's zone (`--time-zone`, `$TZ`, else UTC):
/// `2027-04-01` for a midnight there, else `2027-04-01 22:00-05:00` (`…Z` in UTC).
func displayDate(_ date: Date, io: TerminalIO) -> String {
  var calendar = Calendar(identifier: .gregorian)
  calendar.timeZone = io.timeZone
  let parts = calendar.dateComponents(
    [.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
  let day = String(
    format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
  if parts.hour == 0 && parts.minute == 0 && parts.second == 0
    && (parts.nanosecond ?? 0) < 1_000_000
  {
    return day
  }
  let offset = io.timeZone.secondsFromGMT(for: date)
  let zone =
    offset == 0
    ? "Z"
    : String(
      format: "%@%02d:%02d", offset < 0 ? "-" : "+", abs(offset) / 3600, abs(offset) % 3600 / 60)
  return day + String(format: " %02d:%02d", parts.hour ?? 0, parts.minute ?? 0) + zone
}

/// Reads a whole file, or standard input for `-`. Character devices and FIFOs are read like
/// files (`/dev/stdin`, `<(…)`); a folder or an unreadable file is a clear error.
func readInput(_ path: String, _ io: TerminalIO) throws -> Data {
  if path == "-" {
    do {
      return try io.readInput()
    } catch {
      throw CLIError(kind: .noInput, message: "Standard input cannot be read.")
    }
  }
  var isDirectory: ObjCBool = false
  guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
    throw CLIError(kind: .noInput, message: "The file \(terminalSafe(path)) does not exist.")
  }
  guard !isDirectory.boolValue else {
    throw CLIError(kind: .noInput, message: "\(terminalSafe(path)) is a directory, not a file.")
  }
  guard let handle = FileHandle(forReadingAtPath: path) else {
    throw CLIError(
      kind: .noInput,
      message: "The file \(terminalSafe(path)) cannot be opened. Check its permissions.")
  }
  defer { try? handle.close() }
  do {
    return try handle.readToEnd() ?? Data()
  } catch {
    throw CLIError(kind: .noInput, message: "The file \(terminalSafe(path)) cannot be read.")
  }
}

/// SIGINT and SIGTERM as a request to stop: long-running commands (`watch`, `sync watch`,
/// `serve`) stop cleanly and exit 0 on either, even when started with SIGTERM ignored.
///
/// The signals are caught from the moment the initializer returns: a `sigaction` handler,
/// installed at once, writes a byte to a pipe (one async-signal-safe `write`), and a thread of
/// its own, where the signals are unblocked, reads the pipe and calls `handler`. (A dispatch signal source registers later, on
/// its own queue; a signal that came in between, with the default action turned off for it,
/// was lost, and the command ran on.) One instance at a time; ``cancel()`` when done.
final class StopSignals: Sendable {
  /// The pipe's write end, read by the handler; -1 when none.
  private static let writeEnd = Atomic<Int32>(-1)
  private static let signals: [Int32] = [SIGINT, SIGTERM]
  private let readEnd: Int32

  init(_ handler: @escaping @Sendable () -> Void) {
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else {
      // No pipe (out of descriptors): the signals keep their default actions and end the
      // process as they would any other command.
      readEnd = -1
      return
    }
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    readEnd = ends[0]
    Self.writeEnd.store(ends[1], ordering: .releasing)
    for number in Self.signals {
      var action = sigaction()
      action.__sigaction_handler.sa_handler = { _ in
        let end = StopSignals.writeEnd.load(ordering: .acquiring)
        guard end >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(end, &byte, 1)
      }
      sigemptyset(&action.sa_mask)
      action.sa_flags = SA_RESTART
      sigaction(number, &action, nil)
    }
    let readEnd = readEnd
    Thread.detachNewThread {
      // The handler runs on this thread: a process started with the signals blocked (a
      // child of a dispatch thread inherits its mask) keeps them pending until here.
      var stops = sigset_t()
      sigemptyset(&stops)
      for number in StopSignals.signals { sigaddset(&stops, number) }
      pthread_sigmask(SIG_UNBLOCK, &stops, nil)
      var byte: UInt8 = 0
      while true {
        let count = read(readEnd, &byte, 1)
        if count == 1 {
          handler()
        } else if count < 0, errno == EINTR {
          continue
        } else {
          break
        }
      }
      close(readEnd)
    }
  }

  /// Stops calling the handler: later signals are ignored, as the process is on its way out.
  func cancel() {
    let end = Self.writeEnd.exchange(-1, ordering: .acquiringAndReleasing)
    if end >= 0 { close(end) }
  }
}

extension CLIError.Kind {
  /// The kind whose exit status is `exit` (``FailureStatus/exit``): 65 data, 66 no input,
  /// anything else a failure (1).
  init(exit: Int32) {
    switch exit {
    case 65: self = .data
    case 66: self = .noInput
    default: self = .failure
    }
  }
}
