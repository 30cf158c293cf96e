import Foundation
import Geo
import Persistence
import Synchronization
import TripPlanner
import TripService
import TripsBaseline
import TripsSynthetic

// trips-bench: our layer against a raw SQLite C baseline, phase by phase, in one process run,
// on the same generated trips. See Tools/README.md and README's Performance section.
//
//   swift run -c release trips-bench --size 1000000 --rounds 3 --json results.json

/// Seconds taken by `body`.
func time(_ body: () throws -> Void) rethrows -> Double {
  let start = DispatchTime.now().uptimeNanoseconds
  try body()
  return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  guard !sorted.isEmpty else { return .nan }
  return sorted.count % 2 == 1
    ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

struct Phase {
  var phase: String
  var n: Int
  var seconds: Double
  var baselineSeconds: Double?
  var unit = "s"
  /// The 99th percentile, for a phase whose `seconds` is a median of latencies.
  var p99: Double?
  var note = ""
  var ratio: Double? { baselineSeconds.map { seconds / $0 } }
}

var phases: [Phase] = []

@MainActor func report(_ phase: Phase) {
  phases.append(phase)
  func format(_ value: Double) -> String {
    phase.unit == "s"
      ? String(format: "%.6f s", value) : String(format: "%.0f %@", value, phase.unit)
  }
  var line = phase.phase.padding(toLength: 34, withPad: " ", startingAt: 0)
  line += "n=\(phase.n)".padding(toLength: 11, withPad: " ", startingAt: 0)
  line += "ours \(format(phase.seconds))".padding(toLength: 22, withPad: " ", startingAt: 0)
  if let baseline = phase.baselineSeconds, let ratio = phase.ratio {
    line += "baseline \(format(baseline))".padding(toLength: 26, withPad: " ", startingAt: 0)
    line += String(format: "ratio %.3f", ratio)
  }
  if !phase.note.isEmpty { line += "  (\(phase.note))" }
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func check(_ condition: Bool, _ message: String) {
  if !condition {
    FileHandle.standardError.write(Data("Error: results differ: \(message)\n".utf8))
    exit(1)
  }
}

/// The checksum the C side computes, over ids in order.
func checksum(_ trips: some Sequence<Trip>) -> UInt64 {
  var sum: UInt64 = 0
  for (index, trip) in trips.enumerated() {
    var hash: UInt64 = 1_469_598_103_934_665_603
    withUnsafeBytes(of: trip.id.uuid) { bytes in
      for byte in bytes { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
    }
    sum = sum &+ hash &* UInt64(index + 1)
  }
  return sum
}

let options = parseOptions()
let fileManager = FileManager.default

if !options.child.isEmpty {
  runChild(options.child)
  exit(0)
}

try? fileManager.removeItem(atPath: options.directory)
try fileManager.createDirectory(atPath: options.directory, withIntermediateDirectories: true)
func storeURL(_ name: String) -> URL {
  URL(fileURLWithPath: options.directory).appendingPathComponent(name)
}
func removeStore(_ url: URL) {
  for suffix in ["", "-wal", "-shm"] { try? fileManager.removeItem(atPath: url.path + suffix) }
}

guard let citiesData = fileManager.contents(atPath: options.cities) else {
  FileHandle.standardError.write(Data("Error: cannot read \(options.cities)\n".utf8))
  exit(66)
}
let cities = try SyntheticTrips.cities(citiesData)
var generator = SyntheticTrips(seed: 2027)
let records = (0..<options.size).map { generator.record($0, cities: cities) }

// The same trips as C structs, made before any timing.
var cTrips = records.map { record -> tb_trip in
  var trip = tb_trip()
  withUnsafeMutableBytes(of: &trip.id) { target in
    withUnsafeBytes(of: record.id!.uuid) { target.copyMemory(from: $0) }
  }
  trip.name = strdup(record.name)
  trip.destination = strdup(record.destination)
  trip.start_date = record.startDate.timeIntervalSinceReferenceDate
  trip.end_date = record.endDate.timeIntervalSinceReferenceDate
  trip.latitude = record.latitude
  trip.longitude = record.longitude
  trip.place_id = record.placeIdentifier.map { strdup($0.rawValue) } ?? nil
  return trip
}

if let server = options.postgreSQL {
  try runPostgreSQLBench(server: server)
  writeJSON()
  exit(0)
}

let cacheKiB = ModelConfiguration(url: storeURL("x")).cacheSizeKiB
FileHandle.standardOutput.write(
  Data(
    ("trips-bench: \(options.size) trips, \(options.rounds) rounds per phase, medians; SQLite \(String(cString: sqlite3_libversion_shim())), cache \(cacheKiB) KiB, WAL, synchronous NORMAL\n")
      .utf8))

// MARK: Insert

var oursInsert: [Double] = []
var baseInsert: [Double] = []
let insertRounds = options.wants("insert") ? options.rounds : 1
for round in 0..<insertRounds {
  let ours = storeURL("insert-ours-\(round).sqlite")
  let base = storeURL("insert-base-\(round).sqlite")
  removeStore(ours)
  removeStore(base)
  // The C side writes into a store the Swift layer created: the same schema and indexes.
  _ = try ModelContainer(for: Trip.modelTypes, configuration: ModelConfiguration(url: base))
  func runOurs() throws {
    let container = try ModelContainer(
      for: Trip.modelTypes, configuration: ModelConfiguration(url: ours))
    let context = ModelContext(container)
    context.author = "bench"
    oursInsert.append(
      try time {
        for record in records { context.insert(Trip(record)) }
        try context.save()
      })
  }
  func runBase() {
    let db = tb_open(base.path, Int32(cacheKiB))
    baseInsert.append(
      time { check(tb_insert(db, &cTrips, cTrips.count, "bench") == 0, "C insert failed") })
    tb_close(db)
  }
  try inTurn(round: round, runOurs, runBase)
  if round > 0 {
    removeStore(ours)
    removeStore(base)
  }
}
if options.wants("insert") {
  report(
    Phase(
      phase: "insert (insert + one save)", n: options.size, seconds: median(oursInsert),
      baselineSeconds: median(baseInsert)))
}

let store = storeURL("insert-ours-0.sqlite")
let container = try ModelContainer(
  for: Trip.modelTypes, configuration: ModelConfiguration(url: store))
let db = tb_open(store.path, Int32(cacheKiB))
defer { tb_close(db) }

/// Runs `ours` and `base` in the order for `round`: ours first in even rounds, the baseline
/// first in odd ones, so that neither side always runs on what the other warmed.
func inTurn(round: Int, _ ours: () throws -> Void, _ base: () throws -> Void) rethrows {
  if round % 2 == 0 {
    try ours()
    try base()
  } else {
    try base()
    try ours()
  }
}

/// Seconds of CPU this thread has used.
func threadCPUSeconds() -> Double {
  var now = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
  return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Runs both sides `rounds` times, alternating order, and reports medians (for either engine).
/// With `threadCPU`, the note also gives each side's median CPU time on this thread: against a
/// server, what of the wall-clock time is the client's own work.
@MainActor func compare(
  _ name: String, n: Int = options.size, threadCPU: Bool = false, ours: () throws -> Void,
  base: () -> Void
) throws {
  try ours()
  base()  // warm-up: both sides read the file once before timing
  var oursTimes: [Double] = []
  var baseTimes: [Double] = []
  var oursCPU: [Double] = []
  var baseCPU: [Double] = []
  func timed(_ body: () throws -> Void, _ times: inout [Double], _ cpu: inout [Double]) rethrows {
    let start = threadCPUSeconds()
    times.append(try time(body))
    cpu.append(threadCPUSeconds() - start)
  }
  for round in 0..<options.rounds {
    try inTurn(
      round: round, { try timed(ours, &oursTimes, &oursCPU) }, { timed(base, &baseTimes, &baseCPU) }
    )
  }
  let note =
    threadCPU
    ? String(
      format: "client CPU on this thread: ours %.1f ms, C %.1f ms", median(oursCPU) * 1000,
      median(baseCPU) * 1000) : ""
  report(
    Phase(
      phase: name, n: n, seconds: median(oursTimes), baselineSeconds: median(baseTimes),
      note: note))
}

// MARK: Fetch all, sorted by start date

if options.wants("fetch") {
  var oursSum: UInt64 = 0
  var baseSum: UInt64 = 0
  try compare(
    "fetch all sorted by start date",
    ours: {
      let context = ModelContext(container)
      let trips = try context.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]))
      oursSum = checksum(trips)
    },
    base: {
      var out = tb_trips()
      check(tb_fetch(db, nil, nil, "\"start_date\", \"_pk\"", 0, &out) == 0, "C fetch failed")
      baseSum = tb_checksum(&out)
      tb_free_trips(&out)
    })
  check(oursSum == baseSum, "fetch all checksums \(oursSum) vs \(baseSum)")
}

// MARK: A tailored fetch: two properties of each trip, beside a fetch of every property

if options.wants("tailored") {
  var tailoredSum = 0
  var fullSum = 0
  func sum(_ trips: [Trip]) -> Int {
    trips.reduce(0) { $0 &+ $1.name.utf8.count &+ Int($1.startDate.timeIntervalSince1970) }
  }
  try compare(
    "fetch of name and start date (propertiesToFetch) / fetch all (ours)",
    ours: {
      var descriptor = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)])
      descriptor.propertiesToFetch = [\.name, \.startDate]
      tailoredSum = sum(try ModelContext(container).fetch(descriptor))
    },
    base: {
      do {
        fullSum = sum(
          try ModelContext(container).fetch(
            FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)])))
      } catch {
        fatalError("fetch all failed: \(error)")
      }
    })
  check(tailoredSum == fullSum, "tailored fetch sums \(tailoredSum) vs \(fullSum)")
}

// MARK: @Model trips: what the macro generates for Trip, beside the hand-written trip it replaced

if options.wants("macro") {
  // The same trips in a table of `HandTrip`, inserted in the main store's key order, so that
  // both tables lay their rows out alike (inserted in start-date order, the rows a sorted
  // fetch reads would be adjacent, which made that fetch 30% faster than the main store's)
  // and ties of start date come back in the same order (checksums agree).
  // And the same trips again as `Trip`s in a store of their own, made the same way (one
  // save, then a checkpoint): the main store's file was written by the insert phase, so a
  // difference between the two `Trip` stores is the file's, not the model code's.
  let handStore = storeURL("hand.sqlite")
  let macroStore = storeURL("macro.sqlite")
  removeStore(handStore)
  removeStore(macroStore)
  let handContainer = try ModelContainer(
    for: HandTrip.self, HandBucketItem.self, HandStay.self,
    configurations: ModelConfiguration(url: handStore))
  let macroContainer = try ModelContainer(
    for: Trip.modelTypes, configuration: ModelConfiguration(url: macroStore))
  do {
    let records = try ModelContext(container).fetch(FetchDescriptor<Trip>(), as: TripRecord.self)
    let context = ModelContext(handContainer)
    for record in records { context.insert(HandTrip(record)) }
    try context.save()
    let macroContext = ModelContext(macroContainer)
    for record in records { macroContext.insert(Trip(record)) }
    try macroContext.save()
  }
  for url in [handStore, macroStore] {
    if let handle = tb_open(url.path, 65_536) {
      check(tb_checkpoint(handle) == 0, "checkpoint failed")
      tb_close(handle)
    }
  }
  for (name, macroTrips) in [
    ("@Model Trip, own store / hand", macroContainer),
    ("@Model Trip: fetch all / hand-written", container),
  ] {
    var macroSum: UInt64 = 0
    var handSum: UInt64 = 0
    try compare(
      name,
      ours: {
        let trips = try ModelContext(macroTrips).fetch(
          FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]))
        macroSum = checksum(trips)
      },
      base: {
        do {
          let trips = try ModelContext(handContainer).fetch(
            FetchDescriptor<HandTrip>(sortBy: [SortDescriptor(\.startDate)]))
          handSum = checksum(trips)
        } catch {
          check(false, "hand-written fetch failed: \(error)")
        }
      })
    check(macroSum == handSum, "@Model and hand-written checksums \(macroSum) vs \(handSum)")
  }
}

// MARK: Sectioned fetch by destination

if options.wants("sectioned") {
  var oursSections = 0
  var baseSections = 0
  var oursSum: UInt64 = 0
  var baseSum: UInt64 = 0
  try compare(
    "sectioned fetch by destination",
    ours: {
      let context = ModelContext(container)
      let sections = try context.fetch(
        FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]), sectionBy: \Trip.destination)
      oursSections = sections.count
      oursSum = checksum(sections.lazy.flatMap { $0 })
    },
    base: {
      var out = tb_trips()
      check(
        tb_fetch(db, nil, nil, "\"destination\", \"start_date\", \"_pk\"", 1, &out) == 0,
        "C fetch failed")
      baseSections = out.sections
      baseSum = tb_checksum(&out)
      tb_free_trips(&out)
    })
  check(
    oursSections == baseSections && oursSum == baseSum,
    "sections \(oursSections) vs \(baseSections)")
}

// MARK: Value fetches: the same three reads as Sendable values, no models

/// The checksum the C side computes, over the values' ids in order.
func checksum(_ records: some Sequence<TripRecord>) -> UInt64 {
  var sum: UInt64 = 0
  for (index, record) in records.enumerated() {
    var hash: UInt64 = 1_469_598_103_934_665_603
    withUnsafeBytes(of: record.id!.uuid) { bytes in
      for byte in bytes { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
    }
    sum = sum &+ hash &* UInt64(index + 1)
  }
  return sum
}

if options.wants("values") {
  var oursSum: UInt64 = 0
  var baseSum: UInt64 = 0
  try compare(
    "value fetch all sorted by start date",
    ours: {
      let values = try ModelContext(container).fetch(
        FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]), as: TripRecord.self)
      oursSum = checksum(values)
    },
    base: {
      var out = tb_trips()
      check(tb_fetch(db, nil, nil, "\"start_date\", \"_pk\"", 0, &out) == 0, "C fetch failed")
      baseSum = tb_checksum(&out)
      tb_free_trips(&out)
    })
  check(oursSum == baseSum, "value fetch all checksums \(oursSum) vs \(baseSum)")
  var oursSections = 0
  var baseSections = 0
  try compare(
    "value sectioned fetch by destination",
    ours: {
      let sections = try ModelContext(container).fetch(
        FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]), as: TripRecord.self,
        sectionBy: \.destination)
      oursSections = sections.count
      oursSum = checksum(sections.lazy.flatMap { $0 })
    },
    base: {
      var out = tb_trips()
      check(
        tb_fetch(db, nil, nil, "\"destination\", \"start_date\", \"_pk\"", 1, &out) == 0,
        "C fetch failed")
      baseSections = out.sections
      baseSum = tb_checksum(&out)
      tb_free_trips(&out)
    })
  check(
    oursSections == baseSections && oursSum == baseSum,
    "value sections \(oursSections) vs \(baseSections)")
  let text = "lights"
  try compare(
    "value contains scan (name contains)",
    ours: {
      oursSum = checksum(
        try ModelContext(container).fetch(
          FetchDescriptor<Trip>(predicate: #Predicate { $0.name.contains(text) }),
          as: TripRecord.self))
    },
    base: {
      var out = tb_trips()
      check(tb_fetch(db, "(instr(\"name\", ?) > 0)", text, "\"_pk\"", 0, &out) == 0, "C fetch")
      baseSum = tb_checksum(&out)
      tb_free_trips(&out)
    })
  check(oursSum == baseSum, "value contains checksums")
}

// MARK: Indexed predicate, 100 destinations

let destinations = Array(Set(records.map(\.destination)).sorted().prefix(100))
if options.wants("indexed") {
  var oursCount = 0
  var baseCount = 0
  try compare(
    "indexed predicate (destination ==) x100", n: options.size,
    ours: {
      let context = ModelContext(container)
      oursCount = 0
      for destination in destinations {
        oursCount += try context.fetch(
          FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == destination })
        ).count
      }
    },
    base: {
      baseCount = 0
      for destination in destinations {
        var out = tb_trips()
        check(tb_fetch(db, "\"destination\" IS ?", destination, "\"_pk\"", 0, &out) == 0, "C fetch")
        baseCount += out.count
        tb_free_trips(&out)
      }
    })
  check(oursCount == baseCount, "indexed \(oursCount) vs \(baseCount)")
}

// MARK: contains scan

if options.wants("contains") {
  let text = "lights"
  var oursSum: UInt64 = 0
  var baseSum: UInt64 = 0
  try compare(
    "contains scan (name contains)",
    ours: {
      let context = ModelContext(container)
      oursSum = checksum(
        try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name.contains(text) })))
    },
    base: {
      var out = tb_trips()
      check(tb_fetch(db, "(instr(\"name\", ?) > 0)", text, "\"_pk\"", 0, &out) == 0, "C fetch")
      baseSum = tb_checksum(&out)
      tb_free_trips(&out)
    })
  check(oursSum == baseSum, "contains checksums")
}

// MARK: fetchCount with a predicate

if options.wants("count") {
  var ours = 0
  var base = 0
  try compare(
    "fetchCount (destination ==) x100",
    ours: {
      let context = ModelContext(container)
      ours = 0
      for destination in destinations {
        ours += try context.fetchCount(
          FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == destination }))
      }
    },
    base: {
      base = 0
      for destination in destinations { base += tb_count(db, "\"destination\" IS ?", destination) }
    })
  check(ours == base, "counts \(ours) vs \(base)")
}

// MARK: Bounds from scratch

/// Bounds from scratch as the library offers it (`trips bounds` does the same): the two
/// coordinate columns read with `fetchValues`, no models made.
func oursBoundsFromScratch() throws -> GeographicBox? {
  let context = ModelContext(container)
  let values = try context.fetchValues(FetchDescriptor<Trip>(), \.latitude, \.longitude)
  return GeographicBox.enclosing(values.map { Coordinate(latitude: $0, longitude: $1) })
}
if options.wants("bounds") {
  var ours: GeographicBox?
  var base = GeographicBox(west: 0, south: 0, east: 0, north: 0)
  try compare(
    "bounds of all from scratch",
    ours: { ours = try oursBoundsFromScratch() },
    base: {
      var count = 0
      check(
        tb_bounds(db, &base.west, &base.south, &base.east, &base.north, &count) == 0, "C bounds")
    })
  check(ours == base, "bounds \(String(describing: ours)) vs \(base)")
}

// MARK: One trip added, moved, deleted with an observer and a BoundsController attached

/// Seconds from each `save()` returning until `controller`'s report changes, for `changes`
/// probe trips each added at the south pole's edge, moved to the north's and deleted through
/// `writer` (three measures each): what the update phases of both engines report.
@MainActor func boundsLatencies(
  controller: BoundsController, writer context: ModelContext, changes: Int
) throws -> [Double] {
  context.author = "bench"
  var latencies: [Double] = []
  /// Saves, then spins until the controller's report differs from `before`.
  func measure(_ change: () throws -> Void) throws {
    let before = controller.report
    try change()
    let start = DispatchTime.now().uptimeNanoseconds
    // Yield while waiting: on two cores a busy spin would compete with the threads it waits for.
    while controller.report == before { sched_yield() }
    latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
  }
  for index in 0..<changes {
    let trip = Trip(
      TripRecord(
        name: "probe \(index)", destination: "Probe", startDate: .now, endDate: .now,
        latitude: -89.5 + Double(index) / 1000, longitude: 0))
    try measure {
      context.insert(trip)
      try context.save()
    }
    try measure {
      trip.latitude = 89.5 - Double(index) / 1000
      try context.save()
    }
    try measure {
      context.delete(trip)
      try context.save()
    }
  }
  return latencies
}

if options.wants("update") {
  let controller = try BoundsController(container: container)
  let latencies = try boundsLatencies(
    controller: controller, writer: ModelContext(container), changes: max(options.rounds * 4, 20))
  var refetch: [Double] = []
  for _ in 0..<options.rounds { refetch.append(try time { _ = try oursBoundsFromScratch() }) }
  report(
    Phase(
      phase: "one-trip change -> bounds current", n: options.size, seconds: median(latencies),
      baselineSeconds: median(refetch),
      note: "baseline: refetch all + recompute, same run; \(latencies.count) changes; "
        + String(
          format: "the first %.2f ms, the slowest %.2f ms", (latencies.first ?? .nan) * 1000,
          (latencies.max() ?? .nan) * 1000)))
}

// MARK: A hundred observers and ten thousand writes (only with --phases observers)

if options.wants("observers") {
  // Updates of a fixed set of trips, so that every observer's results keep their size: what
  // grows, if anything, is per-change state.
  let directory = storeURL("observers.sqlite")
  removeStore(directory)
  let observed = try ModelContainer(
    for: Trip.modelTypes, configuration: ModelConfiguration(url: directory))
  let writer = ModelContext(observed)
  writer.author = "bench"
  for record in records.prefix(1000) { writer.insert(Trip(record)) }
  try writer.save()
  let trips = try writer.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]))
  var step = 0
  func write(_ count: Int) throws -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<count {
      step += 1
      trips[step % trips.count].longitude = Double(step % 360) - 180
      try writer.save()
    }
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
  }
  let writes = options.observerWrites
  let alone = try write(writes / 10) / Double(writes / 10)
  let observers = try (0..<100).map { index in
    let threshold = Double(index % 50) * 3.6 - 180
    return try ResultsObserver(
      FetchDescriptor<Trip>(predicate: #Predicate { $0.longitude >= threshold }),
      container: observed)
  }
  for observer in observers { observer.waitForPendingUpdates() }
  let startVersions = observers.map(\.version)
  // Resident memory after each fifth of the writes: bounded means it levels off.
  var watched = 0.0
  var residents: [String] = []
  for _ in 0..<5 {
    watched += try write(writes / 5)
    for observer in observers { observer.waitForPendingUpdates() }
    residents.append("\(currentResidentKiB()) (SQLite \(tb_sqlite_memory_used() / 1024))")
  }
  let reader = ModelContext(observed)
  for (index, observer) in observers.enumerated() {
    let threshold = Double(index % 50) * 3.6 - 180
    let matching = try reader.fetchCount(
      FetchDescriptor<Trip>(predicate: #Predicate { $0.longitude >= threshold }))
    check(observer.results.count == matching, "observer \(index) is behind")
  }
  let maxRuns = zip(observers, startVersions).map { $0.version - $1 }.max() ?? 0
  check(maxRuns <= writes, "an observer updated more often than there were writes")
  report(
    Phase(
      phase: "write with 100 observers attached", n: writes, seconds: watched / Double(writes),
      baselineSeconds: alone,
      note:
        "baseline: the same write with no observer; observers current and correct; at most \(maxRuns) updates per observer for \(writes) writes; RSS (of which SQLite's heap) in KiB after each \(writes / 5) writes: \(residents.joined(separator: ", "))"
    ))
}

// MARK: The same change seen by `trips watch` in another process

if options.watch && options.wants("watch") {
  let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("trips")
  if fileManager.isExecutableFile(atPath: executable.path) {
    let process = Process()
    process.executableURL = executable
    process.arguments = ["watch", "--store", store.path]
    let pipe = Pipe()
    process.standardOutput = pipe
    let lines = Mutex(0)
    let arrived = DispatchSemaphore(value: 0)
    pipe.fileHandleForReading.readabilityHandler = { handle in
      let data = handle.availableData
      let newlines = data.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
      lines.withLock { $0 += newlines }
      for _ in 0..<newlines { arrived.signal() }
    }
    try process.run()
    /// Waits for the next report line; a missing one fails the run instead of hanging it.
    func nextLine() {
      if arrived.wait(timeout: .now() + 30) == .timedOut {
        process.terminate()
        FileHandle.standardError.write(
          Data("Error: trips watch printed no report within 30 s\n".utf8))
        exit(1)
      }
    }
    nextLine()
    let context = ModelContext(container)
    var latencies: [Double] = []
    for index in 0..<max(options.rounds * 4, 20) {
      let trip = Trip(
        TripRecord(
          name: "watch \(index)", destination: "Probe", startDate: .now, endDate: .now,
          latitude: -89.5 + Double(index) / 1000, longitude: 0))
      context.insert(trip)
      try context.save()
      let start = DispatchTime.now().uptimeNanoseconds
      nextLine()
      latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
      context.delete(trip)
      try context.save()
      nextLine()
    }
    process.interrupt()
    process.waitUntilExit()
    report(
      Phase(
        phase: "one-trip change -> trips watch line", n: options.size, seconds: median(latencies),
        baselineSeconds: nil, note: "another process; polls every 5 ms"))
  } else {
    print("(skipping the watch phase: build the trips product in the same configuration)")
  }
}

// MARK: `trips list | head -1`: the first row arrives before the whole result is read

if options.wants("listhead") {
  let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("trips")
  if fileManager.isExecutableFile(atPath: executable.path) {
    /// Runs `trips list`; with `firstLineOnly`, reads one line and closes the pipe as `head -1`
    /// does. Returns the seconds until the process exited.
    func listRun(firstLineOnly: Bool) throws -> Double {
      let process = Process()
      process.executableURL = executable
      process.arguments = ["list", "--store", store.path]
      let pipe = Pipe()
      process.standardOutput = firstLineOnly ? pipe : FileHandle.nullDevice
      let start = DispatchTime.now().uptimeNanoseconds
      try process.run()
      if firstLineOnly {
        let reader = pipe.fileHandleForReading
        var seen = Data()
        while !seen.contains(0x0A) {
          let chunk = reader.availableData
          if chunk.isEmpty { break }
          seen.append(chunk)
        }
        try reader.close()
      }
      process.waitUntilExit()
      check(process.terminationStatus == 0, "trips list exited \(process.terminationStatus)")
      return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
    var heads: [Double] = []
    var wholes: [Double] = []
    for _ in 0..<options.rounds {
      heads.append(try listRun(firstLineOnly: true))
      wholes.append(try listRun(firstLineOnly: false))
    }
    report(
      Phase(
        phase: "trips list | head -1", n: options.size, seconds: median(heads),
        baselineSeconds: median(wholes),
        note: "baseline: the whole listing to /dev/null; streamed a batch of 1,000 at a time"))
  } else {
    print("(skipping the listhead phase: build the trips product in the same configuration)")
  }
}

// MARK: `trips serve` under load (only with --phases serve)

/// A number shared between threads.
final class PeakBox: Sendable {
  private let state: Mutex<Double>
  init(_ value: Double) { state = Mutex(value) }
  var value: Double { state.withLock { $0 } }
  func raise(to value: Double) { state.withLock { $0 = max($0, value) } }
  func add(_ value: Double) { state.withLock { $0 += value } }
}

/// The resident set of a process, in KiB (VmRSS).
@Sendable nonisolated func residentKiB(_ pid: Int32) -> Double {
  let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
  let line = text.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
  return Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan
}

if options.wants("serve") {
  let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("trips")
  let wrk = ["/usr/bin/wrk", "/usr/local/bin/wrk"].first {
    fileManager.isExecutableFile(atPath: $0)
  }
  if fileManager.isExecutableFile(atPath: executable.path), let wrk {
    // A server's store has its write-ahead log folded in by routine checkpoints; the store
    // just filled by one big insert has all of it still in the log, which slows every read.
    if let handle = tb_open(store.path, 65_536) {
      check(tb_checkpoint(handle) == 0, "checkpoint failed")
      tb_close(handle)
    }
    let (server, port) = try startServer(executable, store: store)
    let url = "http://127.0.0.1:\(port)"
    check(url.hasPrefix("http://"), "trips serve did not start")
    // A trip, and a city-sized box (about 50 km) around it.
    let probe = try ModelContext(container).fetch(
      {
        var first = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)])
        first.fetchLimit = 1
        return first
      }()
    ).first!
    let itemPath = "/collections/trips/items/" + probe.id.uuidString.lowercased()
    let box = String(
      format: "%.4f,%.4f,%.4f,%.4f", probe.longitude - 0.25, probe.latitude - 0.25,
      probe.longitude + 0.25, probe.latitude + 0.25)
    let bboxPath = "/collections/trips/items?limit=100&bbox=" + box
    // Warm up, then the idle size once the store is open and the paths have run once.
    for path in [itemPath, bboxPath] {
      let warm = Process()
      warm.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      warm.arguments = ["-s", "-o", "/dev/null", url + path]
      try warm.run()
      warm.waitUntilExit()
    }
    let idle = residentKiB(server.processIdentifier)
    var peak = idle
    /// wrk's requests per second and p50/p99 latency in milliseconds.
    func load(_ path: String) throws -> (rate: Double, p50: Double, p99: Double) {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: wrk)
      process.arguments = ["-t", "2", "-c", "64", "-d", "10s", "--latency", url + path]
      let pipe = Pipe()
      process.standardOutput = pipe
      try process.run()
      let sampler = DispatchSource.makeTimerSource(queue: .global())
      let peakBox = PeakBox(peak)
      let pid = server.processIdentifier
      sampler.schedule(deadline: .now(), repeating: .milliseconds(200))
      // Not isolated to the main actor: it runs on a global queue.
      sampler.setEventHandler { @Sendable in peakBox.raise(to: residentKiB(pid)) }
      sampler.resume()
      let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
      process.waitUntilExit()
      sampler.cancel()
      peak = peakBox.value
      func milliseconds(_ label: String) -> Double {
        guard
          let line = text.split(separator: "\n").first(where: {
            $0.trimmingCharacters(in: .whitespaces).hasPrefix(label)
          })
        else { return .nan }
        let value = line.split(separator: " ").last.map(String.init) ?? ""
        if value.hasSuffix("us") { return (Double(value.dropLast(2)) ?? .nan) / 1000 }
        if value.hasSuffix("ms") { return Double(value.dropLast(2)) ?? .nan }
        if value.hasSuffix("s") { return (Double(value.dropLast(1)) ?? .nan) * 1000 }
        return .nan
      }
      let rateLine = text.split(separator: "\n").first { $0.hasPrefix("Requests/sec:") } ?? ""
      let rate = Double(rateLine.split(separator: " ").last ?? "") ?? .nan
      check(!text.contains("Non-2xx"), "wrk saw errors: \(text)")
      return (rate, milliseconds("50%"), milliseconds("99%"))
    }
    /// The same requests answered in this process without HTTP, on two threads for 5 s.
    func inProcess(_ path: String) throws -> Double {
      let service = try TripService(
        container: container,
        configuration: {
          var configuration = ServiceConfiguration()
          configuration.port = 0
          return configuration
        }(), log: { _ in })
      defer { service.stop() }
      let parts = path.split(separator: "?", maxSplits: 1)
      let query: [(name: String, value: String)] =
        parts.count > 1
        ? parts[1].split(separator: "&").map {
          let pair = $0.split(separator: "=", maxSplits: 1)
          return (String(pair[0]), pair.count > 1 ? String(pair[1]) : "")
        } : []
      let request = HTTPRequest(method: "GET", path: String(parts[0]), query: query)
      let count = PeakBox(0)
      let deadline = DispatchTime.now() + .seconds(5)
      DispatchQueue.concurrentPerform(iterations: 2) { @Sendable _ in
        var answered = 0.0
        while DispatchTime.now() < deadline {
          let response = service.respond(to: request)
          precondition(response.status == 200)
          answered += 1
        }
        count.add(answered)
      }
      return count.value / 5
    }
    // As every phase: `--rounds` rounds, HTTP and in-process one after the other, medians
    // reported (rate, p50 and p99 each its own median), every round listed.
    for (label, path) in [("items/{id}", itemPath), ("items?bbox=<city>&limit=100", bboxPath)] {
      var runs: [(rate: Double, p50: Double, p99: Double)] = []
      var locals: [Double] = []
      for _ in 0..<options.rounds {
        runs.append(try load(path))
        locals.append(try inProcess(path))
      }
      let rate = median(runs.map(\.rate))
      let local = median(locals)
      report(
        Phase(
          phase: "serve \(label)", n: options.size, seconds: 1 / rate,
          baselineSeconds: 1 / local, unit: "s",
          note: String(
            format:
              "HTTP %.0f req/s, p50 %.2f ms, p99 %.2f ms, 64 connections; in-process %.0f req/s on 2 threads",
            rate, median(runs.map(\.p50)), median(runs.map(\.p99)), local)
            + "; rounds: "
            + zip(runs, locals).map {
              String(format: "%.0f req/s p99 %.1f ms in-process %.0f", $0.rate, $0.p99, $1)
            }.joined(separator: ", ")))
    }
    server.terminate()
    server.waitUntilExit()
    report(
      Phase(
        phase: "serve resident memory under load", n: options.size, seconds: peak,
        baselineSeconds: idle, unit: "KiB", note: "peak VmRSS during wrk against idle after opening"
      ))
  } else {
    print("(skipping the serve phase: needs wrk (apt-get install wrk) and the trips product)")
  }
}

// MARK: Live streams (only with --phases streams)

if options.wants("streams") {
  let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("trips")
  if fileManager.isExecutableFile(atPath: executable.path) {
    if let handle = tb_open(store.path, 65_536) {
      check(tb_checkpoint(handle) == 0, "checkpoint failed")
      tb_close(handle)
    }
    // One client, then 1,000 on the same bounds query: the delay from a commit in this process
    // to each client's event; the baseline is the same delay with one client.
    let one = try fanOut(executable: executable, store: store, clients: 1, rounds: 20)
    let many = try fanOut(executable: executable, store: store, clients: 1000, rounds: 20)
    report(
      Phase(
        phase: "stream fan-out p99 (1,000 clients)", n: options.size,
        seconds: quantile(many.latencies, 0.99) / 1000,
        baselineSeconds: quantile(one.latencies, 0.99) / 1000, unit: "s",
        note: String(
          format:
            "commit → event at every client, 20 trips added from another process: p50 %.1f ms, p99 %.1f ms, worst %.1f ms; one client: p99 %.1f ms",
          quantile(many.latencies, 0.5), quantile(many.latencies, 0.99),
          many.latencies.max() ?? .nan, quantile(one.latencies, 0.99))
          + "; per round, first client to last: "
          + many.rounds.map { String(format: "%.0f–%.0f", $0.first, $0.last) }
          .joined(separator: ", ") + " ms"))
    report(
      Phase(
        phase: "stream memory per idle client", n: options.size, seconds: many.perClientKiB,
        baselineSeconds: 64, unit: "KiB",
        note: String(
          format:
            "server VmRSS growth from 1 to 1,000 connected clients / 999, against the 64 KiB target; idle %.0f KiB",
          many.baselineKiB)))
    let burstResult = try burst(executable: executable, store: store, count: 10_000)
    report(
      Phase(
        phase: "stream burst of 10,000 changes", n: options.size, seconds: burstResult.seconds,
        baselineSeconds: burstResult.writeSeconds, unit: "s",
        note: String(
          format:
            "10,000 one-trip transactions from another process; all %d inserts arrived %@; server VmRSS %.0f KiB before, %.0f KiB 3 s after (%.2f×); baseline: the writing alone",
          burstResult.received, burstResult.inOrder ? "in order" : "OUT OF ORDER OR MISSING",
          burstResult.beforeKiB, burstResult.afterKiB, burstResult.afterKiB / burstResult.beforeKiB)
      ))
    check(burstResult.inOrder, "the burst's events were missing or out of order")
    let directory = URL(fileURLWithPath: options.directory)
    let http = try syncLatencies(
      executable: executable, directory: directory, throughServer: true, rounds: 30)
    let file = try syncLatencies(
      executable: executable, directory: directory, throughServer: false, rounds: 30)
    report(
      Phase(
        phase: "sync watch over HTTP p99", n: 30, seconds: quantile(http, 0.99) / 1000,
        baselineSeconds: quantile(file, 0.99) / 1000, unit: "s",
        note: String(
          format:
            "a trip committed in store A, readable in store B through a server (A --to, B --from): p50 %.1f ms, p99 %.1f ms; baseline: sync watch straight from A to B, p99 %.1f ms",
          quantile(http, 0.5), quantile(http, 0.99), quantile(file, 0.99))))
  } else {
    print("(skipping the streams phase: build the trips product in the same configuration)")
  }
}

// MARK: Peak memory of fetching all

func peakKiB(_ side: String, reading: Bool = false, child: String? = nil) throws -> Double {
  // The child reports its own VmHWM (peak resident set of its address space): wait4's
  // ru_maxrss would include the parent's size, which a vfork-style spawn shares until exec.
  let process = Process()
  process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
  process.arguments = [
    "--child", child ?? (reading ? "fetch-read-memory" : "fetch-memory"), side, store.path,
  ]
  let pipe = Pipe()
  process.standardOutput = pipe
  try process.run()
  let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
  process.waitUntilExit()
  guard process.terminationStatus == 0,
    let kib = Double(output.trimmingCharacters(in: .whitespacesAndNewlines))
  else { throw CocoaError(.executableLoad) }
  return kib
}

/// A field of this process's `/proc/self/status`, in KiB (0 when unreadable).
func statusKiB(_ field: String) -> Int {
  guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else {
    return 0
  }
  for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
    return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
  }
  return 0
}

/// This process's resident set now, in KiB.
func currentResidentKiB() -> Int { statusKiB("VmRSS") }

/// This process's peak resident set, in KiB.
func peakResidentKiB() -> Int { statusKiB("VmHWM") }

if options.wants("memory") {
  var ours: [Double] = []
  var base: [Double] = []
  for _ in 0..<max(1, min(options.rounds, 3)) {
    ours.append(try peakKiB("swift"))
    base.append(try peakKiB("c"))
  }
  report(
    Phase(
      phase: "peak memory of fetch all", n: options.size, seconds: median(ours),
      baselineSeconds: median(base), unit: "KiB",
      note: "peak RSS (VmHWM) of a child process that fetches all"))
  // The same, then every trip read through a property (a trip's observation registrar is
  // made on its first read: this is what a caller that uses every trip pays).
  var oursRead: [Double] = []
  for _ in 0..<max(1, min(options.rounds, 3)) {
    oursRead.append(try peakKiB("swift", reading: true))
  }
  report(
    Phase(
      phase: "peak memory of fetch all, read", n: options.size, seconds: median(oursRead),
      baselineSeconds: median(base), unit: "KiB",
      note: "the same, then each trip's name read (C's trips need no reading)"))
  var oursValues: [Double] = []
  for _ in 0..<max(1, min(options.rounds, 3)) {
    oursValues.append(try peakKiB("swift", child: "fetch-values-memory"))
  }
  report(
    Phase(
      phase: "peak memory of value fetch all", n: options.size, seconds: median(oursValues),
      baselineSeconds: median(base), unit: "KiB",
      note: "the same fetch as TripRecord values"))
}

// MARK: Relationships

if options.wants("relationships") { try relationshipsPhase() }

// MARK: Plans (trips with bucket lists and stays)

if options.wants("plans") { try plansPhase() }

// MARK: Subclasses (a root model's table holding a subclass)

if options.wants("subclasses") { try subclassesPhase() }

writeJSON()

/// Writes `phases` to `--json`'s file, when given.
@MainActor func writeJSON() {
  guard let path = options.json else { return }
  var entries: [String] = []
  for phase in phases {
    let baseline = phase.baselineSeconds.map { String($0) } ?? "null"
    let ratio = phase.ratio.map { String($0) } ?? "null"
    let p99 = phase.p99.map { ", \"p99Seconds\": \($0)" } ?? ""
    entries.append(
      "{\"phase\": \"\(phase.phase)\", \"n\": \(phase.n), \"seconds\": \(phase.seconds), \"baselineSeconds\": \(baseline), \"ratio\": \(ratio), \"unit\": \"\(phase.unit)\"\(p99)}"
    )
  }
  let text = "{\"phases\": [\n  " + entries.joined(separator: ",\n  ") + "\n]}\n"
  do {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
  } catch {
    FileHandle.standardError.write(Data("Error: cannot write \(path): \(error)\n".utf8))
    exit(73)
  }
}
for trip in cTrips {
  free(trip.name)
  free(trip.destination)
  free(trip.place_id)
}

/// A child process: fetch everything once on one side, then exit (the parent reads max RSS).
func runChild(_ arguments: [String]) {
  let side = arguments[1]
  let path = arguments[2]
  if side == "c" {
    let db = tb_open(path, 65536)
    var out = tb_trips()
    _ = tb_fetch(db, nil, nil, "\"start_date\", \"_pk\"", 0, &out)
    print(peakResidentKiB())
    tb_free_trips(&out)
    tb_close(db)
  } else {
    do {
      let container = try ModelContainer(
        for: Trip.modelTypes, configuration: ModelConfiguration(url: URL(fileURLWithPath: path)))
      let descriptor = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)])
      if arguments[0] == "fetch-values-memory" {
        let values = try ModelContext(container).fetch(descriptor, as: TripRecord.self)
        if values.isEmpty { exit(2) }
        print(peakResidentKiB())
        return
      }
      let trips = try ModelContext(container).fetch(descriptor)
      if trips.isEmpty { exit(2) }
      if arguments[0] == "fetch-read-memory" {
        var length = 0
        for trip in trips { length &+= trip.name.utf8.count }
        if length == 0 { exit(3) }
      }
      print(peakResidentKiB())
    } catch {
      exit(1)
    }
  }
}
