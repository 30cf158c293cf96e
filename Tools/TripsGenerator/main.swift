import Foundation
import TripPlanner
import TripsSynthetic

// trips-generate: a deterministic generator of synthetic trips from Data/cities.csv.
//
//   swift run -c release trips-generate --count 1000000 --output trips-1m.csv
//   swift run -c release trips-generate --count 1000000 --store trips-1m.sqlite
//
// The same --count and --seed always give the same trips (SplitMix64, no system randomness).

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("Error: \(message)\n".utf8))
  exit(64)
}

var count = 1000
var seed: UInt64 = 2027
var output: String?
var storePath: String?
var citiesPath = "Data/cities.csv"
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
  func value() -> String {
    guard let next = arguments.next() else { fail("missing value for \(argument)") }
    return next
  }
  switch argument {
  case "--count":
    guard let value = Int(value()), value >= 0 else { fail("--count takes a whole number") }
    count = value
  case "--seed":
    guard let value = UInt64(value()) else { fail("--seed takes a whole number") }
    seed = value
  case "--output": output = value()
  case "--store": storePath = value()
  case "--cities": citiesPath = value()
  case "-h", "--help":
    print(
      """
      OVERVIEW: Generates synthetic trips from Data/cities.csv, deterministically.

      USAGE: trips-generate [--count <n>] [--seed <n>] [--cities <file>] [--output <file> | --store <file>]

      OPTIONS:
        --count <n>             How many trips. (default: 1000)
        --seed <n>              The generator's seed. (default: 2027)
        --cities <file>         The cities file. (default: Data/cities.csv)
        --output <file>         Write CSV in the import format here. (default: standard output)
        --store <file>          Insert straight into this trip store instead.
        -h, --help              Show help information.
      """)
    exit(0)
  default: fail("unknown argument '\(argument)'")
  }
}

guard let citiesData = FileManager.default.contents(atPath: citiesPath) else {
  FileHandle.standardError.write(Data("Error: cannot read \(citiesPath)\n".utf8))
  exit(66)
}
let cities = try SyntheticTrips.cities(citiesData)
guard !cities.isEmpty else { fail("no cities in \(citiesPath)") }
var generator = SyntheticTrips(seed: seed)

if let storePath {
  let store = try TripStore(url: URL(fileURLWithPath: storePath), author: "generator")
  let batch = 100_000
  var done = 0
  while done < count {
    var records: [(line: Int?, record: TripRecord)] = []
    for index in done..<min(count, done + batch) {
      records.append((nil, generator.record(index, cities: cities)))
    }
    try store.importRecords(records, file: "generated")
    done += records.count
    store.context.rollback()
    FileHandle.standardError.write(Data("\rInserted \(done)/\(count)".utf8))
  }
  FileHandle.standardError.write(Data("\n".utf8))
} else {
  let handle: FileHandle
  if let output {
    _ = FileManager.default.createFile(atPath: output, contents: nil)
    guard let opened = FileHandle(forWritingAtPath: output) else { fail("cannot write \(output)") }
    handle = opened
  } else {
    handle = FileHandle.standardOutput
  }
  var chunk: [TripRecord] = []
  var wroteHeader = false
  for index in 0..<count {
    chunk.append(generator.record(index, cities: cities))
    if chunk.count == 50_000 || index == count - 1 {
      var data = TripCSV.encode(chunk)
      if wroteHeader, let newline = data.firstIndex(of: 0x0A) { data = data[(newline + 1)...] }
      handle.write(data)
      wroteHeader = true
      chunk.removeAll(keepingCapacity: true)
    }
  }
  if count == 0 { handle.write(TripCSV.encode([])) }
}
