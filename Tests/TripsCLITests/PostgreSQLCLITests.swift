import Foundation
import TestSupport
import Testing

/// `trips` on a PostgreSQL store (a database of the test process's throwaway cluster), beside
/// the same commands on a SQLite file.
@Suite("trips on PostgreSQL")
struct PostgreSQLCLITests {
  /// The output of `arguments` on a store given by `TRIPS_STORE`.
  func run(_ arguments: [String], store: String) throws -> Run {
    try trips(arguments, environment: ["TRIPS_STORE": store])
  }

  @Test("every read command prints the same on a PostgreSQL store as on a SQLite file")
  func sameOutput() throws {
    let scratch = Scratch()
    let sqlite = scratch.store.path
    let postgreSQL = try PostgreSQLCluster.shared.get().makeDatabase("cli")
    for store in [sqlite, postgreSQL] {
      let imported = try run(["import", sampleTrips.path], store: store)
      #expect(imported.status == 0 && imported.stdout == "Imported 240 trips.\n", "\(imported)")
    }
    let id = try #require(
      try run(["list", "--format", "json"], store: sqlite).stdout.split(separator: "\"")
        .first { $0.count == 36 }
    )
    let commands: [[String]] = [
      ["list"],
      ["list", "--search", "zur"],
      ["list", "--destination", "zurich"],
      ["list", "--sort", "destination", "--limit", "12"],
      ["list", "--from", "2027-06-01", "--to", "2027-09-01", "--format", "json"],
      ["destinations"],
      ["bounds"],
      ["bounds", "--format", "json", "--viewport", "800x600"],
      ["bounds", "--search", "a", "--crs", "EPSG:3035"],
      ["show", String(id)],
      ["export", "--format", "csv"],
      ["export", "--format", "geojson"],
      ["check"],
    ]
    for command in commands {
      let expected = try run(command, store: sqlite)
      let actual = try run(command, store: postgreSQL)
      #expect(expected.status == 0, "\(command): \(expected.stderr)")
      #expect(actual.status == expected.status, "\(command): \(actual.stderr)")
      #expect(actual.stdout == expected.stdout, "\(command) differs on PostgreSQL")
    }
    // A write through one store's URL is seen by the next command, and recorded with its author.
    let added = try run(
      [
        "add", "--name", "Onsen weekend", "--destination", "Hakone", "--start", "2027-03-01",
        "--end", "2027-03-03", "--latitude", "35.23", "--longitude", "139.1", "--author", "mia",
      ], store: postgreSQL)
    #expect(added.status == 0, "\(added.stderr)")
    #expect(try run(["list", "--search", "hakone"], store: postgreSQL).stdout.contains("Onsen"))
    #expect(try run(["history"], store: postgreSQL).stdout.contains("mia"))
  }

  @Test("a server that cannot be reached, and a database of something else, are clear errors")
  func badStores() throws {
    let cluster = try PostgreSQLCluster.shared.get()
    let unreachable = "postgresql://postgres@127.0.0.1:1/trips"
    let refused = try run(["list"], store: unreachable)
    #expect(refused.status != 0 && refused.status < 128, "\(refused)")
    #expect(refused.stderr.contains("Cannot connect to the PostgreSQL store \(unreachable)"))
    #expect(refused.stdout.isEmpty)

    let missing = try run(["list"], store: cluster.url(database: "no_such_database"))
    #expect(missing.status != 0 && missing.status < 128)
    #expect(missing.stderr.contains("no_such_database"), "\(missing.stderr)")

    // A database another program made: refused, and left as it was.
    let foreign = try cluster.makeDatabase("foreign")
    let made = try shell(
      "psql -q -X -d \"$1\" -c 'CREATE TABLE invoices (id int)' -c 'INSERT INTO invoices VALUES (7)'",
      arguments: [foreign])
    #expect(made.status == 0, "\(made.stderr)")
    for command in [
      ["list"],
      [
        "add", "--name", "x", "--destination", "y", "--start", "2027-01-01", "--end", "2027-01-02",
        "--latitude", "1", "--longitude", "2",
      ],
    ] {
      let refusedForeign = try run(command, store: foreign)
      #expect(refusedForeign.status != 0 && refusedForeign.status < 128)
      #expect(
        refusedForeign.stderr.contains("not a store of this library"), "\(refusedForeign.stderr)")
    }
    let tables = try shell(
      "psql -q -X -A -t -d \"$1\" -c \"SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'public'\" -c 'SELECT id FROM invoices'",
      arguments: [foreign])
    #expect(tables.stdout == "invoices\n7\n", "\(tables)")

    // A password in the URL never reaches a message.
    let secret = try run(["list"], store: "postgresql://postgres:hunter2@127.0.0.1:1/trips")
    #expect(!secret.stderr.contains("hunter2"), "\(secret.stderr)")
  }

  @Test(
    "a libpq service name (postgresql:///?service=name, from PGSERVICEFILE) opens the store; an unknown one is a clear error"
  )
  func serviceNames() throws {
    let cluster = try PostgreSQLCluster.shared.get()
    let url = try cluster.makeDatabase("service")
    let database = try #require(URL(string: url)?.lastPathComponent)
    let scratch = Scratch()
    let services = scratch.file("pg_service.conf")
    try "[planner]\nhost=127.0.0.1\nport=\(cluster.port)\ndbname=\(database)\nuser=postgres\n"
      .write(to: services, atomically: true, encoding: .utf8)
    let environment = ["PGSERVICEFILE": services.path]
    let store = "postgresql:///?service=planner"
    let added = try trips(
      [
        "add", "--store", store, "--name", "By service", "--destination", "Nikko", "--start",
        "2027-05-01", "--end", "2027-05-03", "--latitude", "36.75", "--longitude", "139.6",
      ], environment: environment)
    #expect(added.status == 0, "\(added.stderr)")
    // The trip is in the database the service names, as its URL reads it.
    let listed = try run(["list"], store: url)
    #expect(listed.stdout.contains("By service"), "\(listed.stderr)")
    let viaEnvironment = try trips(
      ["list"], environment: environment.merging(["TRIPS_STORE": store]) { $1 })
    #expect(viaEnvironment.stdout == listed.stdout, "\(viaEnvironment.stderr)")

    let unknown = try trips(
      ["list", "--store", "postgresql:///?service=nowhere"], environment: environment)
    #expect(unknown.status != 0 && unknown.status < 128, "\(unknown.stderr)")
    #expect(unknown.stderr.contains("service \"nowhere\" not found"), "\(unknown.stderr)")
    #expect(unknown.stdout.isEmpty)
  }

  @Test("libpq's paths under valgrind: connecting, failing and querying free what they made, once")
  func memcheck() throws {
    let store = try PostgreSQLCluster.shared.get().makeDatabase("memcheck")
    #expect(try run(["import", sampleTrips.path], store: store).status == 0)
    let scratch = Scratch()
    let log = scratch.file("valgrind.log")
    let result = try shell(
      """
      for arguments in "list --search zur --store $1" "bounds --store $1" \
        "list --store postgresql://postgres@127.0.0.1:1/x" "list --store $2"; do
        valgrind --quiet --leak-check=no --log-file="$3.%p" "$TRIPS" $arguments > /dev/null 2>&1
        printf '%s ' $?
      done
      cat "$3".* > "$3"
      """,
      arguments: [
        store, try PostgreSQLCluster.shared.get().url(database: "no_such_database"), log.path,
      ])
    #expect(result.stdout == "0 0 1 1 ", "\(result)")
    let report = try String(contentsOf: log, encoding: .utf8)
    for error in ["Invalid read", "Invalid write", "Invalid free", "freed", "Mismatched free"] {
      #expect(!report.contains(error), "\(report.prefix(3000))")
    }
  }

  @Test(
    "sync between a SQLite file and a PostgreSQL database, both ways; the state file goes to the data folder"
  )
  func syncBothWays() throws {
    let scratch = Scratch()
    let sqlite = scratch.store.path
    let postgreSQL = try PostgreSQLCluster.shared.get().makeDatabase("sync")
    let environment = ["XDG_DATA_HOME": scratch.file("data").path]
    #expect(try run(["import", sampleTrips.path], store: sqlite).status == 0)
    let push = try trips(
      ["sync", "watch", "--once", "--store", sqlite, "--to", postgreSQL], environment: environment)
    #expect(push.status == 0, "\(push.stderr)")
    #expect(
      try run(["list"], store: postgreSQL).stdout == (try run(["list"], store: sqlite).stdout))
    #expect(FileManager.default.fileExists(atPath: sqlite + ".sync-state.json") == false)
    let states = try FileManager.default.contentsOfDirectory(
      atPath: scratch.file("data/trips/sync-state").path)
    #expect(states.count == 1 && states[0].hasPrefix("127.0.0.1_"), "\(states)")

    // A change made in the database goes back to the file.
    #expect(
      try run(
        [
          "add", "--name", "Back the other way", "--destination", "Reykjavík", "--start",
          "2027-02-01", "--end", "2027-02-05", "--latitude", "64.14", "--longitude", "-21.94",
        ], store: postgreSQL
      ).status == 0)
    let pull = try trips(
      [
        "sync", "watch", "--once", "--store", postgreSQL, "--to", sqlite, "--state",
        scratch.file("back.json").path,
      ], environment: environment)
    #expect(pull.status == 0, "\(pull.stderr)")
    #expect(try run(["list", "--search", "other way"], store: sqlite).stdout.contains("Reykjavík"))
    #expect(
      try run(["list"], store: postgreSQL).stdout == (try run(["list"], store: sqlite).stdout))
  }

  @Test("an import killed with SIGKILL leaves nothing partial, and the next writer is not blocked")
  func killedImport() throws {
    let scratch = Scratch()
    let file = scratch.file("big.csv")
    try generate(["--count", "20000", "--output", file.path])
    var outcomes: Set<Int> = []
    for delay in [0.1, 0.6, 1.5] {
      let store = try PostgreSQLCluster.shared.get().makeDatabase("killed")
      #expect(try run(addSuva, store: store).status == 0)
      let process = Process()
      process.executableURL = tripsExecutable
      process.arguments = ["import", file.path, "--store", store]
      process.standardOutput = FileHandle.nullDevice
      try process.run()
      Thread.sleep(forTimeInterval: delay)
      kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
      let count = try jsonArray(try run(["list", "--format", "json"], store: store).stdout).count
      #expect(count == 1 || count == 20_001, "killed after \(delay) s: \(count) trips")
      outcomes.insert(count)
      let inserts = try jsonArray(try run(["history", "--format", "json"], store: store).stdout)
        .flatMap { $0["changes"] as! [[String: Any]] }.filter { $0["kind"] as? String == "insert" }
        .count
      #expect(inserts == count, "history matches the data")
      // The killed writer's lock went with its connection.
      let started = Date()
      #expect(try run(addApia, store: store).status == 0)
      #expect(Date().timeIntervalSince(started) < 10)
    }
    #expect(outcomes.contains(1), "at least one kill landed before the commit")
  }

  @Test("trips watch on a PostgreSQL store reports a change another process makes")
  func watchAcrossProcesses() throws {
    let store = try PostgreSQLCluster.shared.get().makeDatabase("watch")
    #expect(try run(["import", sampleTrips.path], store: store).status == 0)
    let result = try shell(
      """
      export TRIPS_STORE="$1"
      "$TRIPS" watch --count 2 > "$2" &
      watcher=$!
      sleep 1
      "$TRIPS" add --name McMurdo --destination "McMurdo Station" --start 2027-12-01 \
        --end 2027-12-20 --latitude -77.85 --longitude 166.67 > /dev/null
      for i in $(seq 1 100); do kill -0 $watcher 2>/dev/null || break; sleep 0.1; done
      wait $watcher
      echo "exit=$?"
      grep -o '"count":[0-9]*' "$2"
      rm -f "$2"
      """,
      arguments: [
        store,
        FileManager.default.temporaryDirectory.appendingPathComponent(
          "watch-\(UUID().uuidString).json"
        ).path,
      ])
    #expect(result.stdout == "exit=0\n\"count\":240\n\"count\":241\n", "\(result)")
  }
}
