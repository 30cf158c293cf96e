import CommandLineKit
import Foundation

struct Options {
  var size = 10_000
  var rounds = 5
  var json: String?
  var directory = FileManager.default.temporaryDirectory.appendingPathComponent("trips-bench").path
  var cities = "Data/cities.csv"
  var watch = true
  var child: [String] = []
  /// Writes in the observers phase.
  var observerWrites = 10_000
  /// A PostgreSQL server to run against instead of SQLite files (a URL of a database the
  /// benchmark may create and drop databases from).
  var postgreSQL: String?
  /// The phases to run, by short name; nil for all.
  var phases: Set<String>?

  static let phaseNames = [
    "insert", "fetch", "macro", "sectioned", "values", "indexed", "contains", "count", "bounds",
    "update", "watch", "listhead", "memory",
  ]

  /// Phases that run only when named: long measurements beside the comparison.
  static let optInPhaseNames = [
    "observers", "serve", "streams", "relationships", "plans", "tailored", "subclasses",
  ]

  /// Whether the phase `name` (one of ``phaseNames`` or ``optInPhaseNames``) runs.
  func wants(_ name: String) -> Bool {
    phases?.contains(name) ?? !Options.optInPhaseNames.contains(name)
  }
}

/// The benchmark's options, declared once and read typed (the parser `trips` uses).
enum BenchOptions {
  static func positive(_ name: String) -> @Sendable (String) throws -> Int {
    { text in
      guard let value = Int(text), value > 0 else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--\(name)': expected a positive whole number."
        )
      }
      return value
    }
  }
  static let size = Option<Int>(
    name: "size", valueName: "n", help: "How many trips.", defaultDescription: "10000",
    parse: positive("size"))
  static let rounds = Option<Int>(
    name: "rounds", valueName: "n", help: "Rounds per phase; medians are reported.",
    defaultDescription: "5", parse: positive("rounds"))
  static let json = Option<String>(
    name: "json", valueName: "file", help: "Also write {\"phases\": [...]} here.")
  static let directory = Option<String>(
    name: "directory", valueName: "dir", help: "Where the store files go.",
    defaultDescription: "$TMPDIR/trips-bench")
  static let cities = Option<String>(
    name: "cities", valueName: "file", help: "The cities file.",
    defaultDescription: "Data/cities.csv")
  static let postgreSQL = Option<String>(
    name: "postgresql", valueName: "url",
    help:
      "Run the PostgreSQL phases against this server instead (a postgresql:// URL of a database it may create and drop databases from, such as postgresql://postgres@127.0.0.1:5432/postgres): insert, fetch, sectioned, indexed, contains and count against a C baseline written with libpq, and the update -> BoundsController latency through NOTIFY."
  )
  static let noWatch = Flag(
    name: "no-watch", help: "Skip the phase that runs `trips watch` in another process.")
  static let phases = Option<Set<String>>(
    name: "phases", valueName: "list",
    help:
      "Run only these phases, comma-separated, of: \(Options.phaseNames.joined(separator: ", ")); and, only when named, observers (100 observers and 10,000 writes), serve (trips serve under wrk, beside the same requests in-process) streams (1,000 stream clients, a 10,000-change burst, sync over HTTP) and relationships (--size owners with five items and a stay each: a prefetched fetch, the same without prefetch, a predicate through a to-one, a cascade delete of a parent with 1,000 children; and a many-to-many, --size groups each linked to five members, fetched with the members prefetched) and plans (the trips with five bucket-list items and a stay each beside the same without: an export as JSON, a list, bbox pages of 100) and subclasses (a fetch of a root model whose table holds a subclass, listed or with a tenth of the rows, beside the same table without). (The store is always filled.)",
    parse: { text in
      let names = Set(text.split(separator: ",").map(String.init))
      let known = Options.phaseNames + Options.optInPhaseNames
      if let unknown = names.subtracting(known).first {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(unknown))' for '--phases': expected some of \(known.joined(separator: ", "))."
        )
      }
      return names
    })
  static let observerWrites = Option<Int>(
    name: "observer-writes", valueName: "n", help: "Writes in the observers phase.",
    defaultDescription: "10000",
    parse: { text in
      guard let writes = Int(text), writes >= 10 else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--observer-writes': expected 10 or more.")
      }
      return writes
    })

  static let spec = CommandSpec(
    name: "trips-bench",
    abstract: "Times our persistence layer against a raw SQLite C baseline on generated trips.",
    options: [size, rounds, json, directory, cities, noWatch, phases, observerWrites, postgreSQL])
}

func parseOptions() -> Options {
  var options = Options()
  let arguments = Array(CommandLine.arguments.dropFirst())
  // The benchmark's own child process (peak memory of a fetch): `--child SIDE STORE CITIES`.
  if arguments.first == "--child", arguments.count == 4 {
    options.child = Array(arguments[1...3])
    return options
  }
  do {
    let parsed = try ArgumentParser.parse(arguments, for: BenchOptions.spec)
    if parsed[Flag.help] {
      print(HelpFormatter.help(BenchOptions.spec, path: ["trips-bench"]), terminator: "")
      exit(0)
    }
    options.size = try parsed[BenchOptions.size] ?? options.size
    options.rounds = try parsed[BenchOptions.rounds] ?? options.rounds
    options.json = try parsed[BenchOptions.json]
    options.directory = try parsed[BenchOptions.directory] ?? options.directory
    options.cities = try parsed[BenchOptions.cities] ?? options.cities
    options.watch = !parsed[BenchOptions.noWatch]
    options.phases = try parsed[BenchOptions.phases]
    options.observerWrites = try parsed[BenchOptions.observerWrites] ?? options.observerWrites
    options.postgreSQL = try parsed[BenchOptions.postgreSQL]
  } catch {
    let failure = error as? CLIError ?? CLIError.usage("\(error)")
    FileHandle.standardError.write(
      Data(
        "Error: \(terminalSafeMessage(failure.message))\nUsage: \(HelpFormatter.usage(BenchOptions.spec, path: ["trips-bench"]))\n  See 'trips-bench --help' for more information.\n"
          .utf8))
    exit(failure.exitCode)
  }
  return options
}
