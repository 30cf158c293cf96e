import Dispatch
import Foundation
import Geo
import Persistence
import TripPlanner
import TripsBaseline

/// The PostgreSQL phases (`--postgresql URL`): the Swift layer's PostgreSQL engine beside a C
/// program doing the same work with libpq (`Tools/CBaseline/baseline_pq.c`), on stores in
/// databases this run creates on the server and drops at the end.
///
/// Phases: insert (one save of every trip), fetch all sorted by start date, sectioned by
/// destination, the indexed predicate (destination ==, one query per destination),
/// `contains` on names, `fetchCount` ×100; then the latency from a one-trip change in one
/// container to a `BoundsController` of another container (another connection) being current:
/// the NOTIFY path, the median and p99 of at least 300 changes (a hundred trips, each added,
/// moved and deleted).
@MainActor func runPostgreSQLBench(server: String) throws {
  guard let serverURL = URL(string: server), PostgreSQLEngine.handles(serverURL),
    URLComponents(url: serverURL, resolvingAgainstBaseURL: false) != nil
  else {
    FileHandle.standardError.write(
      Data(
        "Error: --postgresql needs a postgresql:// URL, such as postgresql://postgres@127.0.0.1:5432/postgres; got \(server)\n"
          .utf8))
    exit(64)
  }
  guard let admin = tbpq_open(server) else {
    FileHandle.standardError.write(Data("Error: cannot connect to \(server)\n".utf8))
    exit(69)
  }
  defer { tbpq_close(admin) }
  let version = String(cString: tbpq_server_version(admin))
  FileHandle.standardOutput.write(
    Data(
      "trips-bench: \(options.size) trips, \(options.rounds) rounds per phase, medians; PostgreSQL \(version) at \(PostgreSQLEngine.displayName(of: serverURL)), libpq baseline\n"
        .utf8))
  var made: [String] = []
  /// A new empty database, and its URL.
  func database(_ name: String) -> URL {
    let fullName = "trips_bench_\(name)"
    _ = tbpq_exec(admin, "DROP DATABASE IF EXISTS \(fullName)")
    check(tbpq_exec(admin, "CREATE DATABASE \(fullName)") == 0, "CREATE DATABASE \(fullName)")
    made.append(fullName)
    var parts = URLComponents(url: serverURL, resolvingAgainstBaseURL: false)
    parts?.path = "/" + fullName
    guard let url = parts?.url else {
      FileHandle.standardError.write(Data("Error: cannot make a URL for \(fullName)\n".utf8))
      exit(64)
    }
    return url
  }
  defer {
    for name in made { _ = tbpq_exec(admin, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }
  }

  // MARK: Insert

  var oursInsert: [Double] = []
  var baseInsert: [Double] = []
  let insertRounds = options.wants("insert") ? options.rounds : 1
  var filled: URL?
  for round in 0..<insertRounds {
    let ours = database("ours_\(round)")
    let base = database("base_\(round)")
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
      nonisolated(unsafe) let db = tbpq_open(base.absoluteString)
      baseInsert.append(
        time { check(tbpq_insert(db, &cTrips, cTrips.count, "bench") == 0, "C insert failed") })
      tbpq_close(db)
    }
    try inTurn(round: round, runOurs, runBase)
    if round == 0 { filled = ours }
  }
  if options.wants("insert") {
    report(
      Phase(
        phase: "insert (insert + one save)", n: options.size, seconds: median(oursInsert),
        baselineSeconds: median(baseInsert)))
  }
  let store = filled!
  _ = tbpq_exec(admin, "SELECT 1")
  let container = try ModelContainer(
    for: Trip.modelTypes, configuration: ModelConfiguration(url: store))
  nonisolated(unsafe) let db = tbpq_open(store.absoluteString)
  defer { tbpq_close(db) }
  _ = tbpq_exec(db, "VACUUM ANALYZE")

  if options.wants("fetch") {
    var oursSum: UInt64 = 0
    var baseSum: UInt64 = 0
    try compare(
      "fetch all sorted by start date",
      threadCPU: true,
      ours: {
        let trips = try ModelContext(container).fetch(
          FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]))
        oursSum = checksum(trips)
      },
      base: {
        var out = tb_trips()
        check(tbpq_fetch(db, nil, nil, "\"start_date\", \"_pk\"", 0, &out) == 0, "C fetch")
        baseSum = tb_checksum(&out)
        tb_free_trips(&out)
      })
    check(oursSum == baseSum, "fetch checksums")
  }
  if options.wants("sectioned") {
    var oursSections = 0
    var baseSections = 0
    try compare(
      "sectioned fetch by destination",
      threadCPU: true,
      ours: {
        let sections = try ModelContext(container).fetch(
          FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]), sectionBy: \.destination)
        oursSections = sections.count
      },
      base: {
        var out = tb_trips()
        check(
          tbpq_fetch(db, nil, nil, "\"destination\", \"start_date\", \"_pk\"", 1, &out) == 0,
          "C sectioned fetch")
        baseSections = out.sections
        tb_free_trips(&out)
      })
    check(oursSections == baseSections, "section counts")
  }
  if options.wants("values") {
    var oursSum: UInt64 = 0
    var baseSum: UInt64 = 0
    try compare(
      "value fetch all sorted by start date",
      threadCPU: true,
      ours: {
        let values = try ModelContext(container).fetch(
          FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]), as: TripRecord.self)
        oursSum = checksum(values)
      },
      base: {
        var out = tb_trips()
        check(tbpq_fetch(db, nil, nil, "\"start_date\", \"_pk\"", 0, &out) == 0, "C fetch")
        baseSum = tb_checksum(&out)
        tb_free_trips(&out)
      })
    check(oursSum == baseSum, "value fetch checksums")
    var oursSections = 0
    var baseSections = 0
    try compare(
      "value sectioned fetch by destination",
      threadCPU: true,
      ours: {
        let sections = try ModelContext(container).fetch(
          FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]), as: TripRecord.self,
          sectionBy: \.destination)
        oursSections = sections.count
      },
      base: {
        var out = tb_trips()
        check(
          tbpq_fetch(db, nil, nil, "\"destination\", \"start_date\", \"_pk\"", 1, &out) == 0,
          "C sectioned fetch")
        baseSections = out.sections
        tb_free_trips(&out)
      })
    check(oursSections == baseSections, "value section counts")
  }
  let destinations = Array(Set(records.map(\.destination)).sorted().prefix(100))
  if options.wants("indexed") {
    try compare(
      "indexed predicate (destination ==)", n: destinations.count,
      threadCPU: true,
      ours: {
        let context = ModelContext(container)
        for destination in destinations {
          _ = try context.fetch(
            FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == destination }))
        }
      },
      base: {
        for destination in destinations {
          var out = tb_trips()
          check(tbpq_fetch(db, "\"destination\" = $1", destination, "\"_pk\"", 0, &out) == 0, "C")
          tb_free_trips(&out)
        }
      })
  }
  if options.wants("contains") {
    let text = "Paris"
    var oursCount = 0
    var baseCount = 0
    try compare(
      "contains scan (name contains)",
      threadCPU: true,
      ours: {
        oursCount = try ModelContext(container).fetch(
          FetchDescriptor<Trip>(predicate: #Predicate { $0.name.contains(text) })
        ).count
      },
      base: {
        var out = tb_trips()
        check(tbpq_fetch(db, "(strpos(\"name\", $1) > 0)", text, "\"_pk\"", 0, &out) == 0, "C")
        baseCount = out.count
        tb_free_trips(&out)
      })
    check(oursCount == baseCount, "contains counts")
  }
  if options.wants("count") {
    // Ten passes over the 100 destinations: a round trip each, and a sample of a hundred
    // (4 to 18 ms) moved by a factor of 4 between runs on this machine, on both sides.
    try compare(
      "fetchCount (destination ==) x1000", n: destinations.count,
      threadCPU: true,
      ours: {
        let context = ModelContext(container)
        for _ in 0..<10 {
          for destination in destinations {
            _ = try context.fetchCount(
              FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == destination }))
          }
        }
      },
      base: {
        for _ in 0..<10 {
          for destination in destinations {
            check(tbpq_count(db, "\"destination\" = $1", destination) >= 0, "C count")
          }
        }
      })
  }
  if options.wants("update") {
    // Another container: its own connections, told of commits by NOTIFY as another process is.
    let watcher = try ModelContainer(
      for: Trip.modelTypes, configuration: ModelConfiguration(url: store))
    let controller = try BoundsController(container: watcher)
    // A hundred trips or more, each added, moved and deleted: at least 300 latencies, so that
    // the p99 is the third slowest or further in, not the slowest one.
    let latencies = try boundsLatencies(
      controller: controller, writer: ModelContext(container),
      changes: max(options.rounds * 4, 100))
    let sorted = latencies.sorted()
    // Nearest rank: the smallest latency that at least 99% of them do not exceed.
    let p99 = sorted[Int((Double(sorted.count) * 0.99).rounded(.up)) - 1]
    report(
      Phase(
        phase: "one-trip change -> bounds (NOTIFY)", n: options.size,
        seconds: median(latencies), p99: p99,
        note: String(
          format:
            "median; p99 %.1f ms; a BoundsController of another container, told by NOTIFY; %d changes",
          p99 * 1000, sorted.count)))
  }
}
