import CommandLineKit
import Foundation
import TripPlanner
import TripsSynthetic

// trips-generate: a deterministic generator of synthetic trips from Data/cities.csv.
//
//   swift run -c release trips-generate --count 1000000 --output trips-1m.csv
//   swift run -c release trips-generate --count 1000000 --store trips-1m.sqlite
//   swift run -c release trips-generate --count 100000 --items 5 --stays --store plans.sqlite
//
// The same --count and --seed always give the same trips (SplitMix64, no system randomness).

/// Writes all bytes to a descriptor with write(2): never traps (FileHandle.write does). A
/// reader that went away ends the program quietly; any other failure is an error, exit 1.
func emit(_ bytes: some Collection<UInt8>, to descriptor: Int32 = 1) {
  let array = Array(bytes)
  var offset = 0
  while offset < array.count {
    let written = array.withUnsafeBytes {
      write(descriptor, $0.baseAddress! + offset, array.count - offset)
    }
    if written >= 0 {
      offset += written
    } else if errno == EINTR {
      continue
    } else if errno == EPIPE {
      exit(0)
    } else {
      if descriptor != 2 {
        emit(
          Array("Error: cannot write the trips: \(String(cString: strerror(errno)))\n".utf8), to: 2)
      }
      exit(1)
    }
  }
}

func fail(_ message: String) -> Never {
  emit(Array("Error: \(message)\n".utf8), to: 2)
  exit(64)
}

/// `Data/cities.csv` from the working directory, else beside the executable's build folder
/// (`.build/<config>/trips-generate` → the package root), else the package this was built
/// from: the generator works from any directory.
func defaultCitiesPath() -> String {
  let relative = "Data/cities.csv"
  var candidates = [relative]
  var folder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    .deletingLastPathComponent()
  for _ in 0..<5 {
    candidates.append(folder.appendingPathComponent(relative).path)
    folder = folder.deletingLastPathComponent()
  }
  let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()
  candidates.append(source.appendingPathComponent(relative).path)
  return candidates.first { FileManager.default.isReadableFile(atPath: $0) } ?? relative
}

signal(SIGPIPE, SIG_IGN)

let settings = GeneratorOptions.parse()
let count = settings.count
let seed = settings.seed
let output = settings.output
let storeURL = settings.store
let citiesPath = settings.cities
let items = settings.items
let stays = settings.stays
let plans = items > 0 || stays

let resolvedCitiesPath = citiesPath ?? defaultCitiesPath()
guard let citiesData = FileManager.default.contents(atPath: resolvedCitiesPath) else {
  emit(Array("Error: cannot read \(resolvedCitiesPath); give --cities FILE\n".utf8), to: 2)
  exit(66)
}
let cities = try SyntheticTrips.cities(citiesData)
guard !cities.isEmpty else { fail("no cities in \(resolvedCitiesPath)") }
var generator = SyntheticTrips(seed: seed)
// Plans from a sequence of their own: the trips are the same with plans or without.
var planGenerator = SyntheticTrips(seed: seed ^ 0x504C_414E_5300_0000)

if let storeURL {
  let store = try TripStore(url: storeURL, author: "generator")
  let batch = 100_000
  var done = 0
  while done < count {
    var records: [(line: Int?, record: TripRecord)] = []
    for index in done..<min(count, done + batch) {
      var record = generator.record(index, cities: cities)
      if plans { record.plan = planGenerator.plan(for: record, items: items, stay: stays) }
      records.append((nil, record))
    }
    try store.importRecords(records, file: "generated")
    done += records.count
    store.context.rollback()
    emit(Array("\rInserted \(done)/\(count)".utf8), to: 2)
  }
  emit(Array("\n".utf8), to: 2)
} else {
  var descriptor: Int32 = 1
  if let output {
    descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
    guard descriptor >= 0 else { fail("cannot write \(output)") }
  }
  var chunk: [TripRecord] = []
  var wroteHeader = false
  if plans {
    // JSON in the import format, a trip a line: the array is written as it is made.
    emit(Array("[\n".utf8), to: descriptor)
    for index in 0..<count {
      var record = generator.record(index, cities: cities)
      record.plan = planGenerator.plan(for: record, items: items, stay: stays)
      let line = TripJSON.object(record).rendered(pretty: false)
      emit(Array(((index > 0 ? ",\n" : "") + line).utf8), to: descriptor)
    }
    emit(Array("\n]\n".utf8), to: descriptor)
    exit(0)
  }
  for index in 0..<count {
    chunk.append(generator.record(index, cities: cities))
    if chunk.count == 50_000 || index == count - 1 {
      var data = TripCSV.encode(chunk)
      if wroteHeader, let newline = data.firstIndex(of: 0x0A) { data = data[(newline + 1)...] }
      emit(data, to: descriptor)
      wroteHeader = true
      chunk.removeAll(keepingCapacity: true)
    }
  }
  if count == 0 { emit(TripCSV.encode([]), to: descriptor) }
}
