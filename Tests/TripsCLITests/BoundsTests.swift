import Foundation
import Geo
import Persistence
import Synchronization
import Testing
import TripPlanner

/// Waits up to `seconds` for `condition`.
func eventually(_ seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
  let deadline = Date().addingTimeInterval(seconds)
  while Date() < deadline {
    if try condition() { return true }
    Thread.sleep(forTimeInterval: 0.005)
  }
  return try condition()
}

let addSuva = [
  "add", "--name", "Suva", "--destination", "Suva", "--start", "2027-01-01", "--end", "2027-01-02",
  "--latitude", "-18.1", "--longitude", "178.4",
]
let addApia = [
  "add", "--name", "Apia", "--destination", "Apia", "--start", "2027-01-01", "--end", "2027-01-02",
  "--latitude", "-13.8", "--longitude", "-171.8",
]

@Suite("trips bounds")
struct BoundsCommandTests {
  @Test("reports the box, center and Web Mercator extent, crossing the antimeridian")
  func json() throws {
    let scratch = Scratch()
    #expect(try trips(addSuva, store: scratch.store).status == 0)
    #expect(try trips(addApia, store: scratch.store).status == 0)
    let run = try trips(
      ["bounds", "--format", "json", "--viewport", "800x600"], store: scratch.store)
    #expect(run.status == 0, "\(run.stderr)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
    #expect(object["count"] as? Int == 2)
    let geographic = try #require(object["geographic"] as? [String: Any])
    #expect(geographic["west"] as? Double == 178.4)
    #expect(geographic["east"] as? Double == -171.8)
    #expect(geographic["crossesAntimeridian"] as? Bool == true)
    #expect(object["bbox"] as? [Double] == [178.4, -18.1, -171.8, -13.8])
    let center = try #require(object["center"] as? [String: Double])
    #expect(abs(center["longitude"]! - -176.7) < 1e-9)
    let projected = try #require(object["projected"] as? [String: Any])
    #expect(projected["crs"] as? String == "EPSG:3857")
    let maxX = try #require(projected["maxX"] as? Double)
    #expect(abs(maxX - 6_378_137.0 * 188.2 * .pi / 180) < 1e-6)
    #expect(maxX > 20037508.34)
    let camera = try #require(object["camera"] as? [String: Any])
    #expect((camera["zoom"] as? Double).map { $0 > 3 && $0 < 8 } == true)
  }

  @Test("has null members but count for no trips")
  func empty() throws {
    let scratch = Scratch()
    let run = try trips(
      ["bounds", "--format", "json", "--viewport", "10x10"], store: scratch.store)
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
    #expect(object["count"] as? Int == 0)
    for key in ["geographic", "bbox", "center", "projected", "camera"] {
      #expect(object[key] is NSNull, "\(key)")
    }
    let text = try trips(["bounds"], store: scratch.store)
    #expect(text.stdout == "No trips: no bounds.\n")
  }

  @Test("projects to other CRSs, filters, and writes GeoJSON")
  func crsFiltersGeoJSON() throws {
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let utm = try trips(
      ["bounds", "--crs", "EPSG:32633", "--destination", "Zürich"], store: scratch.store)
    #expect(utm.status == 0)
    #expect(utm.stdout.contains("EPSG:32633:"))
    #expect(utm.stdout.contains("Trips:      "))
    let geojson = try trips(
      ["bounds", "--format", "geojson", "--search", "suva"], store: scratch.store)
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(geojson.stdout.utf8)) as? [String: Any])
    #expect(object["type"] as? String == "FeatureCollection")
    #expect((object["features"] as? [Any])?.count == 5)
    #expect(object["bbox"] as? [Double] == [178.42531, -18.13683, 178.42531, -18.13683])
  }

  @Test(
    "rejects bad CRSs and viewports with exit 64",
    arguments: [
      (["--crs", "EPSG:99999"], "crs not found"),
      (["--crs", "nonsense"], "unrecognized format"),
      (["--viewport", "800"], "expected WIDTHxHEIGHT"),
      (["--viewport", "0x600"], "expected WIDTHxHEIGHT"),
      (["--format", "tiff"], "expected text, json, geojson or svg"),
    ])
  func badOptions(arguments: [String], message: String) throws {
    let scratch = Scratch()
    let run = try trips(["bounds"] + arguments, store: scratch.store)
    #expect(run.status == 64)
    #expect(run.stderr.contains(message), "\(run.stderr)")
  }
}

@Suite("Observers across processes", .serialized)
struct CrossProcessTests {
  @Test("a ResultsObserver and a HistoryObserver see trips added by another process")
  func resultsObserverSeesOtherProcess() throws {
    let scratch = Scratch()
    let store = try TripStore(url: scratch.store)
    let observer = try ResultsObserver(
      FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]), sectionBy: \Trip.destination,
      container: store.container)
    let history = try HistoryObserver(container: store.container, authors: ["other"])
    #expect(observer.results.isEmpty)
    let read = try trips(["list"], store: scratch.store)
    #expect(read.status == 0)
    #expect(try trips(addSuva + ["--author", "other"], store: scratch.store).status == 0)
    #expect(eventually { observer.results.count == 1 })
    #expect(observer.version == 1, "a read by another process publishes nothing")
    #expect(eventually { history.eventCounter == 1 })
    #expect(try trips(addApia, store: scratch.store).status == 0)
    #expect(eventually { observer.results.count == 2 })
    #expect(observer.sections.map(\.id) == ["Apia", "Suva"])
    #expect(history.eventCounter == 1, "the second add is by 'cli', filtered out")
  }

  @Test("a BoundsController follows adds, moves and deletes from this and other processes")
  func boundsController() throws {
    let scratch = Scratch()
    let store = try TripStore(url: scratch.store)
    let controller = try BoundsController(
      container: store.container, viewport: Viewport(width: 800, height: 600))
    #expect(controller.report.count == 0 && controller.report.geographic == nil)
    let suva = try store.add(
      TripRecord(
        name: "Suva", destination: "Suva", startDate: .now, endDate: .now, latitude: -18.1,
        longitude: 178.4))
    controller.waitForPendingUpdates()
    #expect(
      controller.report.geographic
        == GeographicBox(west: 178.4, south: -18.1, east: 178.4, north: -18.1))
    #expect(try trips(addApia, store: scratch.store).status == 0)
    #expect(eventually { controller.report.count == 2 })
    #expect(
      controller.report.geographic
        == GeographicBox(west: 178.4, south: -18.1, east: -171.8, north: -13.8))
    try store.update(suva.id.uuidString) { $0.longitude = 170 }
    controller.waitForPendingUpdates()
    #expect(controller.report.geographic?.west == 170)
    #expect(
      try trips(["delete", String(suva.id.uuidString.prefix(8))], store: scratch.store).status == 0)
    #expect(eventually { controller.report.count == 1 })
    #expect(
      controller.report.geographic
        == GeographicBox(west: -171.8, south: -13.8, east: -171.8, north: -13.8))
  }
}

/// Lines collected from a child's output.
final class LineBuffer: Sendable {
  let value = Mutex<[String]>([])
  private let partial = Mutex("")

  /// Adds output; complete lines become visible, a partial one waits for its end.
  func append(_ text: String) {
    let complete: [String] = partial.withLock { partial in
      partial += text
      var lines = partial.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
      partial = lines.removeLast()
      return lines
    }
    value.withLock { $0.append(contentsOf: complete) }
  }
}

/// Starts `trips watch` and collects its output lines.
final class Watcher: @unchecked Sendable {
  let process = Process()
  private let lines = LineBuffer()
  private let pipe = Pipe()
  private let errors = Pipe()

  /// What the process wrote to standard error so far (after ``stop()``).
  var errorOutput: String {
    String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self)
  }

  /// Runs `trips` with `arguments`; with `viaEnv`, runs `arguments` as a whole command line
  /// (`setpriv … trips watch …`).
  init(_ arguments: [String], viaEnv: Bool = false) throws {
    process.executableURL = viaEnv ? URL(fileURLWithPath: "/usr/bin/env") : tripsExecutable
    process.arguments = arguments
    process.standardOutput = pipe
    process.standardError = errors
    let lines = self.lines
    pipe.fileHandleForReading.readabilityHandler = { handle in
      let data = handle.availableData
      guard !data.isEmpty else { return }
      let text = String(decoding: data, as: UTF8.self)
      lines.append(text)
    }
    try process.run()
  }

  var output: [String] { lines.value.withLock { $0 } }

  func reports() throws -> [[String: Any]] {
    try output.map {
      try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
    }
  }

  func stop() -> Int32 {
    if process.isRunning { process.interrupt() }
    process.waitUntilExit()
    pipe.fileHandleForReading.readabilityHandler = nil
    return process.terminationStatus
  }
}

@Suite("trips watch", .serialized)
struct WatchTests {
  @Test("prints a report now and after a trip is added from another process; SIGINT exits 0")
  func watchesOtherProcess() throws {
    let scratch = Scratch()
    #expect(try trips(addSuva, store: scratch.store).status == 0)
    let watcher = try Watcher(["watch", "--store", scratch.store.path])
    #expect(eventually { watcher.output.count == 1 })
    #expect(try watcher.reports().first?["count"] as? Int == 1)
    #expect(try trips(addApia, store: scratch.store).status == 0)
    #expect(eventually { watcher.output.count == 2 })
    let second = try #require(try watcher.reports().last)
    #expect(second["count"] as? Int == 2)
    #expect(second["bbox"] as? [Double] == [178.4, -18.1, -171.8, -13.8])
    // A commit that leaves the report as it is (a rename) prints nothing: shown
    // deterministically by the next report being the one for the commit after it.
    let id = try #require(
      try jsonArray(try trips(["list", "--json"], store: scratch.store).stdout).first?["id"]
        as? String)
    #expect(try trips(["update", id, "--name", "Renamed"], store: scratch.store).status == 0)
    #expect(
      try trips(
        [
          "add", "--name", "Far", "--destination", "Far", "--start", "2027-01-01", "--end",
          "2027-01-02", "--latitude", "60", "--longitude", "10",
        ], store: scratch.store
      ).status == 0)
    #expect(eventually { watcher.output.count >= 3 })
    let reports = try watcher.reports()
    #expect(reports.count == 3, "no report for the rename")
    #expect(reports.last?["count"] as? Int == 3)
    #expect(watcher.stop() == 0)
  }

  @Test("stops after --count reports")
  func count() throws {
    let scratch = Scratch()
    let watcher = try Watcher([
      "watch", "--store", scratch.store.path, "--count", "2", "--crs", "EPSG:32633",
    ])
    #expect(eventually { watcher.output.count == 1 })
    #expect(try trips(addSuva, store: scratch.store).status == 0)
    watcher.process.waitUntilExit()
    #expect(watcher.process.terminationStatus == 0)
    #expect(eventually { watcher.output.count == 2 })
    let last = try #require(try watcher.reports().last)
    #expect((last["projected"] as? [String: Any])?["crs"] as? String == "EPSG:32633")
  }

  @Test("reads a read-only store as another user; follows it where SQLite can, says so where not")
  func readOnlyStore() throws {
    let nobody: UInt32 = 65534
    let scratch = Scratch()
    try FileManager.default.setAttributes(
      [.posixPermissions: 0o755], ofItemAtPath: scratch.url.path)
    let folder = scratch.file("locked")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let store = folder.appendingPathComponent("trips.sqlite")
    #expect(try trips(addSuva, store: store).status == 0)
    try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: store.path)
    // A read-only file in a folder anyone may write: watched live.
    try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: folder.path)
    let watcher = try Watcher(
      [
        "setpriv", "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", tripsExecutable.path,
        "watch", "--count", "2", "--store", store.path,
      ], viaEnv: true)
    #expect(eventually { watcher.output.count == 1 })
    try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: store.path)
    #expect(try trips(addApia, store: store).status == 0)
    #expect(eventually { !watcher.process.isRunning }, "the change was seen")
    #expect(watcher.stop() == 0)
    #expect(try watcher.reports().last?["count"] as? Int == 2)
    // A read-only folder: SQLite cannot make its shared memory there; one report and a note.
    let lockedFolder = scratch.file("read-only")
    try FileManager.default.createDirectory(at: lockedFolder, withIntermediateDirectories: true)
    let lockedStore = lockedFolder.appendingPathComponent("trips.sqlite")
    #expect(try trips(addSuva, store: lockedStore).status == 0)
    try FileManager.default.setAttributes(
      [.posixPermissions: 0o444], ofItemAtPath: lockedStore.path)
    try FileManager.default.setAttributes(
      [.posixPermissions: 0o555], ofItemAtPath: lockedFolder.path)
    let once = try Watcher(
      [
        "setpriv", "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", tripsExecutable.path,
        "watch", "--count", "3", "--store", lockedStore.path,
      ], viaEnv: true)
    #expect(eventually { !once.process.isRunning }, "watch ends after its one report")
    if once.process.isRunning { _ = once.stop() }
    #expect(once.process.terminationStatus == 0)
    #expect(once.output.joined().split(separator: "\n").count == 1)
    #expect(once.errorOutput.contains("changes to it cannot be followed"), "\(once.errorOutput)")
    try FileManager.default.setAttributes(
      [.posixPermissions: 0o755], ofItemAtPath: lockedFolder.path)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
  }
}

@Suite("PROJ under valgrind")
struct ProjMemoryTests {
  @Test(
    "creating and failing projections reads and frees no memory it does not own",
    arguments: ["urn:ogc:def:coordinateOperation:EPSG::1671", "EPSG:99999", "", "EPSG:3035"])
  func memcheck(crs: String) throws {
    let scratch = Scratch()
    #expect(try trips(addSuva, store: scratch.store).status == 0)
    #expect(try trips(addApia, store: scratch.store).status == 0)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/valgrind")
    process.arguments = [
      "--quiet", "--leak-check=no", tripsExecutable.path, "bounds", "--crs",
      crs, "--store", scratch.store.path,
    ]
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let report = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == (crs == "EPSG:3035" ? 0 : 64), "\(report)")
    for error in ["Invalid read", "Invalid write", "Invalid free", "freed"] {
      #expect(!report.contains(error), "\(report)")
    }
  }
}
