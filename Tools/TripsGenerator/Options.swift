import CommandLineKit
import Foundation

/// The options, declared once and read typed (the parser `trips` uses).
enum GeneratorOptions {
  static let count = Option<Int>(
    name: "count", valueName: "n", help: "How many trips.", defaultDescription: "1000",
    parse: { text in
      guard let value = Int(text), value >= 0 else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--count': expected a whole number, 0 or more."
        )
      }
      return value
    })
  static let seed = Option<UInt64>(
    name: "seed", valueName: "n", help: "The generator's seed.", defaultDescription: "2027",
    parse: { text in
      guard let value = UInt64(text) else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--seed': expected a whole number, 0 or more.")
      }
      return value
    })
  static let cities = Option<String>(
    name: "cities", valueName: "file", help: "The cities file.",
    defaultDescription: "Data/cities.csv, found from any directory")
  static let output = Option<String>(
    name: "output", valueName: "file", help: "Write CSV in the import format here.",
    defaultDescription: "standard output")
  static let store = Option<String>(
    name: "store", valueName: "file|url",
    help: "Insert straight into this trip store instead: a SQLite file or a postgresql:// URL.")
  static let items = Option<Int>(
    name: "items", valueName: "n",
    help:
      "Give each trip this many bucket-list items (generated from templates, not real places); a plan needs --store or a .json --output.",
    defaultDescription: "0",
    parse: { text in
      guard let value = Int(text), (0...1000).contains(value) else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--items': expected a whole number from 0 to 1000."
        )
      }
      return value
    })
  static let stays = Flag(
    name: "stays",
    help: "Give each trip a made-up stay within about 3 km of its destination.")

  static let spec = CommandSpec(
    name: "trips-generate",
    abstract: "Generates synthetic trips from Data/cities.csv, deterministically.",
    discussion: "The same --count and --seed always give the same trips.",
    options: [count, seed, cities, output, store, items, stays])

  /// What the command line asks for; help or a usage error ends the program here.
  static func parse() -> (
    count: Int, seed: UInt64, output: String?, store: URL?, cities: String?, items: Int,
    stays: Bool
  ) {
    do {
      let parsed = try ArgumentParser.parse(Array(CommandLine.arguments.dropFirst()), for: spec)
      if parsed[Flag.help] {
        emit(Array(HelpFormatter.help(spec, path: ["trips-generate"]).utf8))
        exit(0)
      }
      let settings = (
        count: try parsed[count] ?? 1000, seed: try parsed[seed] ?? 2027,
        output: try parsed[output],
        store: try parsed[store].map { try storeLocation($0, option: "--store") },
        cities: try parsed[cities],
        items: try parsed[items] ?? 0, stays: parsed[stays]
      )
      if settings.output != nil, settings.store != nil {
        throw CLIError.usage("--output and --store go to different places; give one of them.")
      }
      if settings.items > 0 || settings.stays, settings.store == nil,
        settings.output?.hasSuffix(".json") != true
      {
        throw CLIError.usage(
          "Plans (--items, --stays) go to a store (--store) or a JSON file (--output FILE.json): CSV holds one row a trip."
        )
      }
      return settings
    } catch {
      let failure = error as? CLIError ?? CLIError.usage("\(error)")
      emit(Array("Error: \(terminalSafeMessage(failure.message))\n".utf8), to: 2)
      let usage = HelpFormatter.usage(spec, path: ["trips-generate"])
      emit(
        Array("Usage: \(usage)\n  See 'trips-generate --help' for more information.\n".utf8),
        to: 2)
      exit(failure.exitCode)
    }
  }
}
