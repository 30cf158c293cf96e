import Foundation
import Persistence
import TestSupport
import Testing
import TripPlanner

@testable import PersistenceCore
@testable import PersistenceSQLite

/// Runs `trips` with standard output on `output` (a pipe, `/dev/full`…), standard error
/// collected, and returns the exit status and standard error.
func trips(
  _ arguments: [String], store: URL?, stdout output: FileHandle, closeBeforeRun: FileHandle? = nil
) throws -> (status: Int32, stderr: String) {
  let process = Process()
  process.executableURL = tripsExecutable
  process.arguments = arguments + (store.map { ["--store", $0.path] } ?? [])
  process.environment = childEnvironment([
    "PATH": "/usr/bin:/bin", "HOME": FileManager.default.temporaryDirectory.path,
  ])
  let errors = FileManager.default.temporaryDirectory.appendingPathComponent(
    "trips-err-\(UUID().uuidString)")
  _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
  defer { try? FileManager.default.removeItem(at: errors) }
  let err = try FileHandle(forWritingTo: errors)
  process.standardOutput = output
  process.standardError = err
  process.standardInput = FileHandle.nullDevice
  try process.run()
  try closeBeforeRun?.close()
  process.waitUntilExit()
  try err.close()
  return (process.terminationStatus, String(decoding: try Data(contentsOf: errors), as: UTF8.self))
}

/// Runs `trips` through `/bin/sh` with standard output closed (`>&-`).
func tripsWithClosedOutput(_ arguments: [String], store: URL?) throws -> Run {
  try shell(
    "exec \"$TRIPS\" \"$@\" >&-", arguments: arguments + (store.map { ["--store", $0.path] } ?? []))
}

/// Runs `bash -c script` with `$TRIPS` set and `arguments` as `$@`.
func shell(_ script: String, arguments: [String] = []) throws -> Run {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/bin/bash")
  process.arguments = ["-c", script, "sh"] + arguments
  process.environment = childEnvironment([
    "PATH": "/usr/bin:/bin", "HOME": FileManager.default.temporaryDirectory.path,
    "TRIPS": tripsExecutable.path,
  ])
  let out = Pipe()
  let err = Pipe()
  process.standardOutput = out
  process.standardError = err
  try process.run()
  let outData = out.fileHandleForReading.readDataToEndOfFile()
  let errData = err.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  return Run(
    stdout: String(decoding: outData, as: UTF8.self),
    stderr: String(decoding: errData, as: UTF8.self), status: process.terminationStatus)
}

/// Runs SQL on a store directly, around the library (as an outside writer would).
func rawSQL(_ store: URL, _ sql: String) throws {
  let database = try Database(path: store.path, flags: 2)
  try database.execute(sql)
}

/// Every command that writes data to standard output, on a store of sample trips.
let outputCommands: [[String]] = [
  ["list"], ["list", "--json"], ["list", "--group-by", "destination"],
  ["list", "--group-by", "destination", "--json"], ["export"], ["export", "--format", "json"],
  ["export", "--format", "geojson"], ["export", "--output", "-"], ["history"],
  ["history", "--json"], ["bounds"], ["bounds", "--format", "json"],
  ["bounds", "--format", "geojson"], ["bounds", "--format", "svg"], ["sync", "export"],
  ["sync", "export", "--output", "-"],
  ["destinations"], ["destinations", "--json"], ["check"], ["watch", "--count", "1"],
  ["show", "0378f603"], ["show", "0378f603", "--json"], ["bucket", "list", "0378f603"],
  ["bucket", "list", "0378f603", "--json"], ["completion", "bash"], ["--help"], ["--version"],
]

@Suite("Hardening: output that cannot be written", .serialized)
struct OutputFailureTests {
  /// One store of sample trips for the whole suite (only read here).
  static let store: URL = {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
      "trips-output-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let store = folder.appendingPathComponent("trips.sqlite")
    _ = try? trips(["import", sampleTrips.path], store: store)
    return store
  }()

  /// The store, or nil for commands that take none.
  static func store(for arguments: [String]) -> URL? {
    ["completion", "--help", "--version"].contains(arguments[0]) ? nil : store
  }

  @Test(
    "a reader that went away ends every output command quietly, exit 0", arguments: outputCommands)
  func readerGone(arguments: [String]) throws {
    let pipe = Pipe()
    // The reader is closed before the command writes anything: every write gets EPIPE.
    try pipe.fileHandleForReading.close()
    let run = try trips(
      arguments, store: Self.store(for: arguments), stdout: pipe.fileHandleForWriting)
    #expect(run.status == 0, "\(arguments): \(run.stderr)")
    #expect(run.stderr.isEmpty, "\(arguments): no message when the reader is gone: \(run.stderr)")
  }

  @Test(
    "a full disk is one Error line and exit 1 for every output command", arguments: outputCommands)
  func diskFull(arguments: [String]) throws {
    let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
    let run = try trips(arguments, store: Self.store(for: arguments), stdout: full)
    #expect(run.status == 1, "\(arguments): \(run.stderr)")
    #expect(
      run.stderr == "Error: Cannot write to standard output: No space left on device.\n",
      "\(arguments)")
  }

  @Test("a closed standard output is one Error line and exit 1", arguments: outputCommands)
  func closedOutput(arguments: [String]) throws {
    let run = try tripsWithClosedOutput(arguments, store: Self.store(for: arguments))
    #expect(run.status == 1, "\(arguments): \(run.stderr)")
    #expect(
      run.stderr == "Error: Cannot write to standard output: standard output is closed.\n",
      "\(arguments)")
    // The store was not written through descriptor 1 (reopened on /dev/null first).
    #expect(try trips(["check"], store: Self.store).status == 0)
  }

  @Test("list | head -1 on a large store stops early with exit 0")
  func headOfLargeList() throws {
    let scratch = Scratch()
    try generate(["--count", "30000", "--store", scratch.store.path])
    let run = try shell(
      "set -o pipefail; \"$TRIPS\" list --store \"$1\" | head -1; echo \"status=$?\"",
      arguments: [scratch.store.path])
    #expect(run.stdout.hasPrefix("START"))
    #expect(run.stdout.hasSuffix("status=0\n"), "\(run.stdout)")
    #expect(run.stderr.isEmpty, "\(run.stderr)")
  }
}

@Suite("Hardening: --output")
struct OutputTargetTests {
  let scratch = Scratch()

  func storeWithTrips() throws -> URL {
    let store = scratch.store
    #expect(try trips(["import", sampleTrips.path], store: store).status == 0)
    return store
  }

  @Test(
    "an export stopped by a signal while it writes leaves no temporary file, and the target as it was"
  )
  func stoppedExport() throws {
    let store = scratch.store
    try generate(["--count", "20000", "--items", "5", "--stays", "--store", store.path])
    for (signal, target) in [(SIGINT, "new.json"), (SIGTERM, "old.json")] {
      let output = scratch.file(target)
      if target == "old.json" { try Data("old\n".utf8).write(to: output) }
      // Started as a shell starts it: no signal blocked (the test runner's threads block
      // some, and a child inherits its mask).
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
      process.arguments = [
        "-c",
        "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
        tripsExecutable.path, "export", "--store", store.path, "--output", output.path,
      ]
      process.standardError = FileHandle.nullDevice
      try process.run()
      // Stopped once the temporary file beside the target exists.
      func temporaries() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
          .filter { $0.hasPrefix(".\(target).") }
      }
      var seen = false
      for _ in 0..<2000 where process.isRunning {
        if try !temporaries().isEmpty {
          seen = true
          break
        }
        Thread.sleep(forTimeInterval: 0.002)
      }
      kill(process.processIdentifier, signal)
      process.waitUntilExit()
      #expect(seen, "the export ended before its temporary file was seen")
      #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == signal)
      let left = try temporaries()
      #expect(left.isEmpty, "\(left)")
      #expect(
        target == "new.json"
          ? !FileManager.default.fileExists(atPath: output.path)
          : (try String(contentsOf: output, encoding: .utf8)) == "old\n")
    }
  }

  @Test("a signal the moment the temporary file appears still removes it (30 rounds a signal)")
  func signalAsTheTemporaryAppears() throws {
    let store = scratch.store
    try generate(["--count", "200", "--store", store.path])
    // The driver polls without sleeping and signals as soon as the file is listed: a handler
    // installed after the file is made (the file made by mkstemp, its name handed over after)
    // left it in about half of such rounds.
    let driver = """
      import os, signal, subprocess, sys
      signal.pthread_sigmask(signal.SIG_SETMASK, [])
      trips, store, folder = sys.argv[1:4]
      for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
          for _ in range(30):
              target = os.path.join(folder, "out.json")
              child = subprocess.Popen(
                  [trips, "export", "--store", store, "--output", target],
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              while child.poll() is None:
                  if any(name.startswith(".out.json.") for name in os.listdir(folder)):
                      break
              child.send_signal(number)
              status = child.wait()
              left = [name for name in os.listdir(folder) if name.startswith(".out.json.")]
              if left:
                  print(f"signal {number}: left {left}")
                  sys.exit(1)
              if status not in (-number, 0):
                  print(f"signal {number}: ended with {status}")
                  sys.exit(1)
              if os.path.exists(target):
                  os.unlink(target)
      print("clean")
      """
    let folder = scratch.url.appending(path: "exports")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", driver, tripsExecutable.path, store.path, folder.path]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0 && said == "clean\n", "\(said)")
  }

  @Test("a symlink to a regular file updates its target and stays a link")
  func symlinkToFile() throws {
    let store = try storeWithTrips()
    let target = try scratch.write("target.csv", "old\n")
    let link = scratch.file("link.csv")
    try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
    for command in [["export", "--output", link.path], ["sync", "export", "--output", link.path]] {
      let run = try trips(command, store: store)
      #expect(run.status == 0, "\(run.stderr)")
      #expect(
        try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == target.path)
      #expect(try String(contentsOf: target, encoding: .utf8).count > 1000)
    }
  }

  @Test("a regular file is replaced atomically and keeps its permissions")
  func regularFile() throws {
    let store = try storeWithTrips()
    let file = try scratch.write("out.csv", "old\n")
    try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: file.path)
    #expect(try trips(["export", "--output", file.path], store: store).status == 0)
    let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
    #expect((attributes[.posixPermissions] as? Int) == 0o640)
    #expect(try String(contentsOf: file, encoding: .utf8).hasPrefix("id,name"))
    // No temporary file is left beside it.
    let left = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
    #expect(!left.contains { $0.hasPrefix(".out.csv.") })
  }

  @Test("a FIFO's reader gets the data, and the FIFO stays a FIFO")
  func fifo() throws {
    let store = try storeWithTrips()
    let fifo = scratch.file("feed")
    #expect(mkfifo(fifo.path, 0o600) == 0)
    let reader = Process()
    reader.executableURL = URL(fileURLWithPath: "/bin/cat")
    reader.arguments = [fifo.path]
    let out = Pipe()
    reader.standardOutput = out
    try reader.run()
    let run = try trips(["export", "--output", fifo.path], store: store)
    let data = out.fileHandleForReading.readDataToEndOfFile()
    reader.waitUntilExit()
    #expect(run.status == 0, "\(run.stderr)")
    #expect(String(decoding: data, as: UTF8.self).split(separator: "\n").count == 241)
    var info = stat()
    #expect(lstat(fifo.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO)
  }

  @Test("a character device is written through, not replaced by a file")
  func characterDevice() throws {
    let store = try storeWithTrips()
    let device = scratch.file("null")
    // The same device as /dev/null (1, 3), made in the test's own folder.
    #expect(mknod(device.path, S_IFCHR | 0o666, dev_t((1 << 8) | 3)) == 0, "mknod needs root")
    for command in [
      ["export", "--output", device.path], ["sync", "export", "--output", device.path],
    ] {
      let run = try trips(command, store: store)
      #expect(run.status == 0, "\(run.stderr)")
      var info = stat()
      #expect(lstat(device.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFCHR)
    }
    // A symlink to the device writes through too.
    let link = scratch.file("null-link")
    try FileManager.default.createSymbolicLink(at: link, withDestinationURL: device)
    #expect(try trips(["export", "--output", link.path], store: store).status == 0)
    #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == device.path)
  }

  @Test("- is standard output, and creates no file named -")
  func dash() throws {
    let store = try storeWithTrips()
    for command in [["export", "--output", "-"], ["sync", "export", "--output", "-"]] {
      let run = try trips(command, store: store, cwd: scratch.url)
      #expect(run.status == 0)
      #expect(run.stdout.count > 1000)
      #expect(!FileManager.default.fileExists(atPath: scratch.file("-").path))
    }
  }

  @Test("a folder, or a file in a missing folder, is a clear error")
  func folder() throws {
    let store = try storeWithTrips()
    let run = try trips(["export", "--output", scratch.url.path], store: store)
    #expect(run.status == 1)
    #expect(run.stderr == "Error: Cannot write \(scratch.url.path): it is a directory.\n")
    let missing = scratch.file("no/such/folder.csv").path
    let other = try trips(["export", "--output", missing], store: store)
    #expect(other.status == 1)
    #expect(other.stderr == "Error: Cannot write \(missing): No such file or directory.\n")
  }
}

@Suite("Hardening: text limits and control characters")
struct TextLimitTests {
  let scratch = Scratch()
  static let tooLong = String(repeating: "é", count: TripRecord.maximumTextLength + 1)
  static let longest = String(repeating: "é", count: TripRecord.maximumTextLength)
  static let reason = "name is 257 characters long; at most 256 are allowed"

  @Test("the longest name is accepted, one more scalar is refused on every write path")
  func everyWritePath() throws {
    let store = scratch.store
    // CLI add and update.
    let added = try trips(
      [
        "add", "--name", Self.longest, "--destination", "Oslo", "--start", "2027-01-01", "--end",
        "2027-01-02", "--latitude", "1", "--longitude", "2",
      ], store: store)
    #expect(added.status == 0)
    let id = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    let add = try trips(
      [
        "add", "--name", Self.tooLong, "--destination", "Oslo", "--start", "2027-01-01", "--end",
        "2027-01-02", "--latitude", "1", "--longitude", "2",
      ], store: store)
    #expect(add.status == 65 && add.stderr == "Error: \(Self.reason)\n")
    let update = try trips(["update", id, "--name", Self.tooLong], store: store)
    #expect(update.status == 65 && update.stderr == "Error: \(Self.reason)\n")
    // Import, in each format: FILE:LINE: error.
    let record = TripRecord(
      name: Self.tooLong, destination: "Oslo", startDate: TripDates.parse("2027-01-01")!,
      endDate: TripDates.parse("2027-01-02")!, latitude: 1, longitude: 2)
    for format in TripFileFormat.allCases {
      let file = scratch.file("long.\(format.rawValue)")
      try format.encode([record]).write(to: file)
      let run = try trips(["import", file.path], store: store)
      #expect(run.status == 65, "\(format)")
      #expect(run.stderr.hasPrefix("Error: \(file.path):"), "\(format): \(run.stderr)")
      #expect(run.stderr.hasSuffix(": error: \(Self.reason)\n"), "\(format): \(run.stderr)")
    }
    // Sync apply: a feed from another store, its name made too long.
    let other = scratch.file("other.sqlite")
    #expect(try trips(addSuva, store: other).status == 0)
    let feed = try trips(["sync", "export"], store: other).stdout.replacingOccurrences(
      of: "\"name\":\"Suva\"", with: "\"name\":\"\(Self.tooLong)\"")
    let apply = try trips(["sync", "apply", "-"], store: store, stdin: Data(feed.utf8))
    #expect(apply.status == 65, "\(apply.stderr)")
    #expect(apply.stderr.contains(Self.reason), "\(apply.stderr)")
    // The library, past TripStore: a save of the model itself.
    let library = try TripStore(url: store)
    let trip = Trip(record)
    library.context.insert(trip)
    #expect(throws: (any Error).self) { try library.context.save() }
    library.context.rollback()
    #expect(try library.count() == 1)
  }

  /// Every C0 control, DEL and every C1 control, and escape sequences that would colour the
  /// terminal, set its title or move the cursor.
  static let controls: [String] =
    (0x00...0x1F).map { String(UnicodeScalar(UInt8($0))) } + ["\u{7F}"]
    + (0x80...0x9F).map { String(UnicodeScalar(UInt32($0))!) }
    + ["\u{1B}[31mred\u{1B}[0m", "\u{1B}]0;title\u{07}", "\u{9B}2J", "\u{1B}[2K\r"]

  @Test("validation refuses every control character in names, destinations and place ids")
  func validationRefusesControls() throws {
    for control in Self.controls {
      for field in ["name", "destination", "placeIdentifier"] {
        var record = TripRecord(
          name: "Trip", destination: "Oslo", startDate: TripDates.parse("2027-01-01")!,
          endDate: TripDates.parse("2027-01-02")!, latitude: 1, longitude: 2, placeIdentifier: "p")
        switch field {
        case "name": record.name = "A\(control)B"
        case "destination": record.destination = "A\(control)B"
        default: record.placeIdentifier = PlaceIdentifier(rawValue: "A\(control)B")
        }
        #expect(
          record.violations.contains { $0.field == field },
          "\(field) \(control.unicodeScalars.map(\.value))")
      }
    }
  }

  /// Whether `text` holds a raw control character other than a line feed.
  static func hasRawControl(_ text: String) -> Bool {
    text.unicodeScalars.contains {
      ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value)
    }
  }

  @Test("no raw control character from data reaches human-readable output")
  func humanOutputEscapes() throws {
    let store = scratch.store
    #expect(try trips(["import", sampleTrips.path], store: store).status == 0)
    // An outside writer (or an older version) stored control characters: one trip per
    // character, in name, destination and place id.
    var statements: [String] = []
    for (index, control) in Self.controls.enumerated() {
      let hex = control.utf8.map { String(format: "%02X", $0) }.joined()
      statements.append(
        "UPDATE trips SET name = 'ǂ' || CAST(X'\(hex)' AS TEXT) || 'ǂ', destination = 'D' || CAST(X'\(hex)' AS TEXT), place_id = CAST(json_object('rawValue', 'P' || CAST(X'\(hex)' AS TEXT)) AS BLOB) WHERE _pk = \(index + 1);"
      )
    }
    statements.append(
      "UPDATE _history_transactions SET author = 'evil' || char(27) || '[31m' || char(10) || 'x';")
    try rawSQL(store, statements.joined(separator: "\n"))
    var outputs: [(String, Run)] = []
    for command in [
      ["list"], ["list", "--group-by", "destination"], ["history"], ["destinations"], ["bounds"],
      ["check"],
    ] {
      outputs.append((command.joined(separator: " "), try trips(command, store: store)))
    }
    let ids = try jsonArray(try trips(["list", "--json"], store: store).stdout).compactMap {
      $0["id"] as? String
    }
    #expect(ids.count == 240)
    let listing = try trips(["list", "--json", "--sort", "name"], store: store)
    let damaged = try jsonArray(listing.stdout).filter {
      ($0["name"] as? String)?.hasPrefix("ǂ") == true
    }
    #expect(damaged.count == Self.controls.count)
    for trip in damaged {
      let id = try #require(trip["id"] as? String)
      outputs.append(("show \(id)", try trips(["show", id], store: store)))
    }
    // Errors that quote a value.
    outputs.append(("show ESC", try trips(["show", "\u{1B}[31mabcd"], store: store)))
    outputs.append(
      ("list --sort", try trips(["list", "--sort", "x\u{1B}]0;t\u{07}"], store: store)))
    for (label, run) in outputs {
      #expect(!Self.hasRawControl(run.stdout), "\(label) stdout")
      #expect(!Self.hasRawControl(run.stderr), "\(label) stderr")
    }
    // JSON keeps the values exactly (its own escaping), so nothing is lost.
    let names = Set(damaged.compactMap { $0["name"] as? String })
    #expect(names == Set(Self.controls.map { "ǂ\($0)ǂ" }))
    // Grouped output keeps every row in its section: one line per trip, one header per section,
    // a blank line between sections.
    let grouped = try trips(["list", "--group-by", "destination"], store: store).stdout
    let sections = try jsonArray(
      try trips(["list", "--group-by", "destination", "--json"], store: store).stdout)
    let lines = grouped.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
    #expect(lines.count == 240 + sections.count + (sections.count - 1))
    // The escaped form is readable: a line feed shows as \n.
    #expect(grouped.contains("ǂ\\nǂ"))
    #expect(outputs.first { $0.0 == "history" }!.1.stdout.contains("evil\\u{1B}[31m\\nx"))
  }

  @Test("a huge name already in a store does not blow up the table")
  func hugeNameInStore() throws {
    let store = scratch.store
    #expect(try trips(["import", sampleTrips.path], store: store).status == 0)
    try rawSQL(store, "UPDATE trips SET name = printf('%.*c', 1000000, 'x') WHERE _pk = 1;")
    let run = try trips(["list"], store: store)
    #expect(run.status == 0)
    // One row holds the million characters; the others are padded to at most 40 cells.
    #expect(run.stdout.utf8.count < 1_000_000 + 241 * 120, "\(run.stdout.utf8.count) bytes")
    let grouped = try trips(["list", "--group-by", "destination"], store: store)
    #expect(grouped.stdout.utf8.count < 1_000_000 + 400 * 120)
  }
}

@Suite("Hardening: damage, duplicates and errors")
struct DamageTests {
  let scratch = Scratch()

  /// A store of the sample trips, folded into one file (no write-ahead log beside it).
  func sampleStore() throws -> URL {
    let store = scratch.file("sample.sqlite")
    #expect(try trips(["import", sampleTrips.path], store: store).status == 0)
    try rawSQL(store, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;")
    return store
  }

  @Test("check fails whenever a full read fails, on stores damaged at random offsets")
  func randomDamage() throws {
    let original = try Data(contentsOf: try sampleStore())
    var generator = SeededGenerator(seed: 46)
    var readFailures = 0
    for round in 0..<46 {
      var bytes = original
      let offset = Int.random(in: 0..<(bytes.count - 4), using: &generator)
      for index in offset..<(offset + 4) {
        bytes[index] = UInt8.random(in: 0...255, using: &generator)
      }
      let copy = scratch.file("damaged-\(round).sqlite")
      try bytes.write(to: copy)
      let export = try trips(["export", "--format", "json"], store: copy)
      let list = try trips(["list", "--json"], store: copy)
      let check = try trips(["check"], store: copy)
      #expect([0, 65].contains(check.status), "round \(round): \(check.stderr)")
      for run in [export, list, check] {
        #expect(!run.stderr.contains("Fatal error"), "round \(round)")
      }
      if export.status != 0 || list.status != 0 {
        readFailures += 1
        #expect(
          check.status == 65,
          "round \(round) at \(offset): reads failed, check said \(check.stdout)")
      }
    }
    #expect(readFailures > 0, "the damage must break some reads for this test to mean anything")
  }

  @Test("check names the trip whose place id no longer decodes, and reads name it too")
  func damagedPlaceID() throws {
    let store = try sampleStore()
    var bytes = try Data(contentsOf: store)
    let needle = Data("\"geonames:".utf8)
    let range = try #require(bytes.range(of: needle))
    bytes.replaceSubrange(
      range.lowerBound..<(range.lowerBound + 4), with: Data("\u{1}\u{2}{[".utf8))
    try bytes.write(to: store)
    let check = try trips(["check"], store: store)
    #expect(check.status == 65)
    #expect(check.stderr.contains("the stored place_id value cannot be decoded"))
    let id = try #require(
      check.stderr.range(of: "trips id ").map { String(check.stderr[$0.upperBound...].prefix(36)) })
    #expect(UUID(uuidString: id) != nil, "\(check.stderr)")
    let list = try trips(["export"], store: store)
    #expect(list.status == 65)
    #expect(list.stderr.contains(id) && list.stderr.contains("trips check"), "\(list.stderr)")
  }

  @Test(
    "serve on a store with an unreadable coordinate: the log says why, and bbox pages still answer from the store; --no-box-index does not try"
  )
  func serveUnreadableRow() throws {
    let store = try sampleStore()
    try rawSQL(store, "UPDATE trips SET longitude = 'east' WHERE _pk = 7;")
    let server = try ServerProcess(store: store)
    let page = try server.request("/collections/trips/items?bbox=-180,-90,180,90&limit=3")
    #expect(page.status == 200, "\(page.text)")
    let matched = try page.json()["numberMatched"] as? Int
    #expect(matched != nil && matched! > 0)
    #expect(server.stop() == 0)
    let log = server.log
    #expect(
      log.contains("bbox pages are answered by the store: the trips could not be indexed"),
      "\(log)")
    #expect(log.contains("longitude"), "\(log)")
    // With --no-box-index nothing is indexed, so there is nothing to log; pages are the same.
    let plain = try ServerProcess(store: store, ["--no-box-index"])
    let plainPage = try plain.request("/collections/trips/items?bbox=-180,-90,180,90&limit=3")
    #expect(try plainPage.json()["numberMatched"] as? Int == matched)
    #expect(plain.stop() == 0)
    #expect(!plain.log.contains("could not be indexed"), "\(plain.log)")
  }

  @Test("check reports a trip an outside writer made invalid")
  func invalidRow() throws {
    let store = try sampleStore()
    try rawSQL(store, "UPDATE trips SET latitude = 123 WHERE _pk = 7;")
    let check = try trips(["check"], store: store)
    #expect(check.status == 65)
    #expect(check.stderr.contains("latitude 123.0 is not a number between -90 and 90"))
    #expect(check.stderr.contains("row 7"))
  }

  @Test(
    "a value of the wrong storage class (text in a number column, bytes in a text one) is an error naming the row and column, never a silent 0",
    arguments: [
      ("latitude = 'abc'", "latitude"), ("longitude = x'00'", "longitude"),
      ("start_date = 'soon'", "start_date"), ("name = x'00ff'", "name"),
      ("id = 'not a uuid'", "id"),
    ])
  func wrongStorageClass(assignment: String, column: String) throws {
    let store = try sampleStore()
    try rawSQL(store, "UPDATE trips SET \(assignment) WHERE _pk = 7;")
    let check = try trips(["check"], store: store)
    #expect(check.status == 65, "\(check.stderr)")
    #expect(check.stderr.contains("row 7") && check.stderr.contains(column), "\(check.stderr)")
    let list = try trips(["list"], store: store)
    #expect(list.status == 65, "\(list.stderr)")
    #expect(list.stderr.contains(column) && list.stderr.contains("trips check"), "\(list.stderr)")
  }

  @Test("enum-valued options take any case, and refuse other words naming the values")
  func enumOptions() throws {
    let store = try sampleStore()
    let upper = try trips(["export", "--format", "JSON"], store: store)
    let lower = try trips(["export", "--format", "json"], store: store)
    #expect(upper.status == 0 && upper.stdout == lower.stdout)
    #expect(try trips(["list", "--sort", "NAME", "--limit", "1"], store: store).status == 0)
    let wrong = try trips(["list", "--format", "csv"], store: store)
    #expect(wrong.status == 64)
    #expect(
      wrong.stderr.hasPrefix("Error: Invalid value 'csv' for '--format': expected text or json."),
      "\(wrong.stderr)")
  }

  @Test(
    "list --sort name orders names as people read them: case and accents aside, numbers by value")
  func sortByName() throws {
    let scratch = Scratch()
    let names = ["zebra", "Zürich trip", "Zurich walk", "apple", "Ábaco", "Zoo 10", "Zoo 9"]
    for name in names {
      let run = try trips(
        [
          "add", "--name", name, "--destination", "D", "--start", "2027-01-01", "--end",
          "2027-01-02", "--latitude", "1", "--longitude", "1",
        ], store: scratch.store)
      #expect(run.status == 0)
    }
    let listed = try jsonArray(
      try trips(["list", "--sort", "name", "--json"], store: scratch.store).stdout)
    #expect(
      listed.map { $0["name"] as? String } == [
        "Ábaco", "apple", "zebra", "Zoo 9", "Zoo 10", "Zürich trip", "Zurich walk",
      ])
    let reversed = try jsonArray(
      try trips(["list", "--sort", "name", "--reverse", "--json"], store: scratch.store).stdout)
    #expect(
      reversed.map { $0["name"] as? String } == listed.reversed().map { $0["name"] as? String })
  }

  @Test(
    "duplicate ids in one file are refused, naming both lines", arguments: TripFileFormat.allCases)
  func duplicateIDs(format: TripFileFormat) throws {
    let id = UUID()
    let records = [
      TripRecord(
        id: id, name: "One", destination: "Oslo", startDate: TripDates.parse("2027-01-01")!,
        endDate: TripDates.parse("2027-01-02")!, latitude: 1, longitude: 2),
      TripRecord(
        id: UUID(), name: "Two", destination: "Oslo", startDate: TripDates.parse("2027-01-01")!,
        endDate: TripDates.parse("2027-01-02")!, latitude: 1, longitude: 2),
      TripRecord(
        id: id, name: "Three", destination: "Oslo", startDate: TripDates.parse("2027-01-01")!,
        endDate: TripDates.parse("2027-01-02")!, latitude: 1, longitude: 2),
    ]
    var text = String(decoding: format.encode(records), as: UTF8.self)
    // The same id, differing only in case.
    if let last = text.range(of: id.uuidString.lowercased(), options: .backwards) {
      text.replaceSubrange(last, with: id.uuidString.uppercased())
    }
    let file = try scratch.write("dup.\(format.rawValue)", text)
    let run = try trips(["import", file.path], store: scratch.store)
    #expect(run.status == 65)
    let error = try #require(throws: TripPlannerError.self) {
      try format.decode(Data(text.utf8), file: file.path)
    }
    #expect(run.stderr == "Error: \(error.description)\n")
    let problem = try #require(error.problems.first)
    #expect(error.problems.count == 1)
    let firstLine = try #require(
      problem.reason.range(of: "is also on line ").flatMap {
        Int(problem.reason[$0.upperBound...].prefix { $0.isNumber })
      })
    #expect(firstLine < (problem.line ?? 0), "the second line is the problem's, the first named")
    #expect(problem.reason.contains(id.uuidString.lowercased()))
    #expect(!FileManager.default.fileExists(atPath: scratch.store.path), "nothing imported")
  }

  @Test("delete counts a trip named twice once")
  func deleteTwice() throws {
    let added = try trips(addSuva, store: scratch.store)
    let id = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    let run = try trips(
      ["delete", id, String(id.prefix(8)), id.uppercased()], store: scratch.store)
    #expect(run.status == 0)
    #expect(run.stderr == "Deleted 1 trip.\n")
    #expect(run.stdout == id + "\n")
  }

  /// Words that must never reach a user: Swift type names, debug descriptions, backtraces.
  static let leaks = [
    "DecodingError", "Swift.", "Foundation.", "NSError", "Optional(", "Error Domain", "Fatal error",
    "typeMismatch", "CodingKeys", "Persistence.", "TripPlanner.", "Stack dump",
  ]

  @Test("bad input anywhere gets a message in words, with the right exit code")
  func messagesInWords() throws {
    let store = try sampleStore()
    let tokens = try jsonArray(try trips(["history", "--json"], store: store).stdout)
    let storeID = try #require((tokens.first?["token"] as? String)?.split(separator: ":").first)
    let zero = scratch.file("zero.sqlite")
    _ = FileManager.default.createFile(atPath: zero.path, contents: Data())
    let json =
      "[{\"name\":\"a\",\"destination\":\"b\",\"startDate\":\"2027-01-01T00:00:00Z\",\"endDate\":\"2027-01-01T00:00:00Z\",\"latitude\":1e999,\"longitude\":0}]"
    let cases: [(label: String, run: Run, status: Int32, says: String)] = [
      (
        "1e999",
        try trips(["import", "-", "--format", "json"], store: store, stdin: Data(json.utf8)),
        65, "a number out of range"
      ),
      (
        "a string for a number",
        try trips(
          ["import", "-", "--format", "json"], store: store,
          stdin: Data(json.replacingOccurrences(of: "1e999", with: "\"north\"").utf8)), 65,
        "latitude must be a number"
      ),
      ("/dev/null", try trips(["import", "/dev/null"], store: store), 65, "the file is empty"),
      (
        "a folder", try trips(["import", scratch.url.path], store: store), 66,
        "is a directory"
      ),
      (
        "a token from the future",
        try trips(["sync", "export", "--after", "\(storeID):99"], store: store),
        65, "newer than this store's history"
      ),
      (
        "history after a token from the future",
        try trips(["history", "--after", "\(storeID):99"], store: store), 65,
        "newer than this store's history"
      ),
      (
        "a zero-byte store is read as empty", try trips(["list"], store: zero), 0,
        "Note: the store \(zero.path) is empty yet; reading it as empty."
      ),
      (
        "a missing store is named", try trips(["list"], store: scratch.file("none.sqlite")), 0,
        "Note: the store \(scratch.file("none.sqlite").path) does not exist yet"
      ),
      (
        "hex latitude in CSV",
        try trips(
          ["import", "-"], store: store,
          stdin: Data(
            "name,destination,start_date,end_date,latitude,longitude\na,b,2027-01-01,2027-01-02,0x10,1\n"
              .utf8)),
        65, "<stdin>:2: error: latitude '0x10' is not a decimal number"
      ),
      (
        "garbage flags", try trips(["list", "--limit", "\u{1B}[31m"], store: store), 64,
        "Invalid value '\\u{1B}[31m' for '--limit'"
      ),
    ]
    for (label, run, status, says) in cases {
      #expect(run.status == status, "\(label): \(run.stderr)")
      #expect(run.stderr.contains(says), "\(label): \(run.stderr)")
      for leak in Self.leaks {
        #expect(!run.stderr.contains(leak), "\(label) leaks \(leak): \(run.stderr)")
      }
    }
    // A zero-byte store is written like a new one, and then read like any other.
    #expect(try trips(addSuva, store: zero).status == 0)
    #expect(try jsonArray(try trips(["list", "--json"], store: zero).stdout).count == 1)
  }

  @Test("JSON on standard input is recognised without --format")
  func sniffedFormats() throws {
    let export = try trips(["export", "--format", "json"], store: try sampleStore())
    let run = try trips(["import", "-"], store: scratch.store, stdin: Data(export.stdout.utf8))
    #expect(run.status == 0, "\(run.stderr)")
    #expect(run.stdout == "Imported 240 trips.\n")
    let geojson = try trips(["export", "--format", "geojson"], store: scratch.store)
    let other = scratch.file("other.sqlite")
    let again = try trips(["import", "-"], store: other, stdin: Data(geojson.stdout.utf8))
    #expect(again.status == 0, "\(again.stderr)")
  }
}

@Suite("Hardening: days, zones and destinations", .serialized)
struct DayTests {
  let scratch = Scratch()

  func storeWithEveningTrip() throws -> URL {
    let run = try trips(
      [
        "add", "--name", "Evening", "--destination", "Zürich", "--start", "2027-04-01T22:00-05:00",
        "--end", "2027-04-03", "--latitude", "47.37", "--longitude", "8.55",
      ], store: scratch.store)
    #expect(run.status == 0, "\(run.stderr)")
    return scratch.store
  }

  @Test("instants are kept; display and day filters follow UTC, --time-zone or TZ")
  func zones() throws {
    let store = try storeWithEveningTrip()
    let utc = try trips(["list"], store: store)
    #expect(utc.stdout.contains("2027-04-02 03:00Z"), "\(utc.stdout)")
    let inUTC = try trips(["list", "--from", "2027-04-01", "--to", "2027-04-01"], store: store)
    #expect(inUTC.stderr == "No trips.\n", "the trip starts on 2 April in UTC")
    for run in [
      try trips(
        ["list", "--time-zone", "America/New_York", "--from", "2027-04-01", "--to", "2027-04-01"],
        store: store),
      try trips(
        ["list", "--from", "2027-04-01", "--to", "2027-04-01"], store: store,
        environment: ["TZ": "America/New_York"]),
    ] {
      #expect(run.stdout.contains("2027-04-01 23:00-04:00"), "\(run.stdout) \(run.stderr)")
    }
    let show = try trips(["show", "--time-zone", "Asia/Tokyo", "--json"], store: store)
    #expect(show.status == 64, "show needs an id")
    let json = try jsonArray(
      try trips(["list", "--json", "--time-zone", "Asia/Tokyo"], store: store).stdout)
    #expect(
      json.first?["startDate"] as? String == "2027-04-02T03:00:00Z", "JSON keeps UTC instants")
    let today = try trips(["list", "--from", "today"], store: store)
    #expect(today.status == 0)
  }

  @Test("--destination matches as typed, ignoring case and accents, but whole")
  func destinationMatch() throws {
    let store = try storeWithEveningTrip()
    for typed in ["zurich", "ZÜRICH", "Zu\u{308}rich", "Zürich"] {
      let run = try trips(["list", "--json", "--destination", typed], store: store)
      #expect(try jsonArray(run.stdout).count == 1, "\(typed)")
    }
    let part = try trips(["list", "--destination", "zur"], store: store)
    #expect(part.stderr == "No trips.\n")
  }

  @Test("destinations lists each with its count, in code-point order")
  func destinations() throws {
    let store = scratch.store
    #expect(try trips(["import", sampleTrips.path], store: store).status == 0)
    let run = try trips(["destinations", "--json"], store: store)
    let listed = try jsonArray(run.stdout)
    let sections = try jsonArray(
      try trips(["list", "--group-by", "destination", "--json"], store: store).stdout)
    #expect(listed.map { $0["destination"] as? String } == sections.map { $0["id"] as? String })
    #expect(
      listed.map { $0["count"] as? Int } == sections.map { ($0["trips"] as? [Any])?.count })
    let text = try trips(["destinations"], store: store)
    #expect(text.stdout.hasPrefix("DESTINATION"))
    #expect(text.stdout.split(separator: "\n").count == listed.count + 1)
  }

  @Test("completion scripts cover every subcommand and pass the shells' syntax checks")
  func completion() throws {
    let bash = try trips(["completion", "bash"])
    let zsh = try trips(["completion", "zsh"])
    for command in ["list", "destinations", "export", "sync", "history", "completion"] {
      #expect(bash.stdout.contains(command) && zsh.stdout.contains(command))
    }
    let scripts = Scratch()
    let bashFile = try scripts.write("trips.bash", bash.stdout)
    let zshFile = try scripts.write("_trips", zsh.stdout)
    #expect(try shell("bash -n \"$1\"", arguments: [bashFile.path]).status == 0)
    #expect(try shell("zsh -n \"$1\"", arguments: [zshFile.path]).status == 0)
    // bash completes subcommands and option values, each command's own (from its typed
    // options: `--format` offers what that command prints).
    let completed = try shell(
      """
      . "$1"
      for words in "list --sort ''" "des" "list --format ''" "bounds --format ''" "export --format ''" "sync watch --state ''"; do
        eval "COMP_WORDS=(trips $words)"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _trips; echo "${COMPREPLY[*]}"
      done
      """,
      arguments: [bashFile.path])
    let lines = completed.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    // File-valued options complete file names, per command.
    for line in [
      "\"export --output\") COMPREPLY=($(compgen -f",
      "\"sync watch --state\") COMPREPLY=($(compgen -f",
      "\"serve --tls-cert\") COMPREPLY=($(compgen -f", "\"list --store\") COMPREPLY=($(compgen -f",
    ] {
      #expect(bash.stdout.contains(line), "\(line)")
    }
    #expect(!bash.stdout.contains("\"list --search\") COMPREPLY=($(compgen -f"))
    #expect(
      Array(lines.prefix(5)) == [
        "start end name destination", "destinations", "text json", "text json geojson svg",
        "csv json geojson",
      ], "\(completed.stderr)")
    #expect(try trips(["completion", "fish"]).status == 64)
  }

  @Test("trips-generate finds Data/cities.csv from any working directory")
  func generatorFromAnywhere() throws {
    let process = Process()
    process.executableURL = tripsExecutable.deletingLastPathComponent().appendingPathComponent(
      "trips-generate")
    process.arguments = ["--count", "3"]
    process.currentDirectoryURL = scratch.url
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    #expect(String(decoding: data, as: UTF8.self).split(separator: "\n").count == 4)
  }
}

@Suite("Hardening: failures in background work")
struct BackgroundFailureTests {
  let scratch = Scratch()

  @Test("a damaged sync state file is an error naming it, never a silent restart")
  func damagedState() throws {
    let source = scratch.file("a.sqlite")
    let target = scratch.file("b.sqlite")
    #expect(try trips(addSuva, store: source).status == 0)
    let state = try scratch.write("b.sqlite.sync-state.json", "garbage{")
    let once = try trips(["sync", "watch", "--once", "--to", target.path], store: source)
    #expect(once.status == 65)
    #expect(once.stderr.hasPrefix("Error: The sync state file \(state.path) is damaged"))
    #expect(
      try jsonArray(try trips(["list", "--json"], store: target).stdout).isEmpty,
      "nothing was pushed")
    // Live: the error once, then exit 1 as it lasts.
    let live = try trips(["sync", "watch", "--to", target.path], store: source)
    #expect(live.status == 1)
    #expect(live.stderr.components(separatedBy: "is damaged").count == 3, "\(live.stderr)")
    #expect(live.stderr.contains("Error: Stopped syncing:"))
  }

  @Test("watch prints a lasting failure to follow the store once, then exits 1")
  func watchFailure() throws {
    let store = scratch.store
    #expect(try trips(addSuva, store: store).status == 0)
    let watcher = try Watcher(["watch", "--store", store.path])
    #expect(eventually { watcher.output.count == 1 })
    try rawSQL(
      store,
      "ALTER TABLE _history_transactions RENAME TO _history_away; UPDATE trips SET name = 'x';")
    #expect(eventually(15) { !watcher.process.isRunning }, "watch gave up")
    #expect(watcher.stop() == 1)
    let errors = watcher.errorOutput
    #expect(errors.hasPrefix("Error: "), "\(errors)")
    #expect(errors.contains("Error: Stopped following the store:"), "\(errors)")
    #expect(
      errors.split(separator: "\n").count == 2, "printed once, then the final error: \(errors)")
  }
}
