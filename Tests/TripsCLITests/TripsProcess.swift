import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The result of running the built `trips` binary.
struct Run {
  var stdout: String
  var stderr: String
  var status: Int32
}

/// Runs the `trips` executable built next to the test bundle, as a real process.
///
/// `asUser` runs it under that user id (and the same group id) through `setpriv`, when the
/// tests run as root: permission bits do not stop root, so read-only tests need another user.
func trips(
  _ arguments: [String], store: URL? = nil, stdin: Data? = nil,
  environment: [String: String] = [:], cwd: URL? = nil, asUser user: UInt32? = nil
) throws -> Run {
  let process = Process()
  if let cwd { process.currentDirectoryURL = cwd }
  process.executableURL = tripsExecutable
  process.arguments =
    (store.map { ["--store", $0.path] } ?? []).isEmpty
    ? arguments : insertStore(arguments, store!)
  if let user, getuid() == 0 {
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments =
      ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", tripsExecutable.path]
      + (process.arguments ?? [])
  }
  var env = childEnvironment([
    "PATH": "/usr/bin:/bin", "HOME": FileManager.default.temporaryDirectory.path,
  ])
  env.merge(environment) { $1 }
  process.environment = env
  // Output goes to files, so that neither stream can fill a pipe and block the child.
  let directory = FileManager.default.temporaryDirectory
  let outURL = directory.appendingPathComponent("trips-out-\(UUID().uuidString)")
  let errURL = directory.appendingPathComponent("trips-err-\(UUID().uuidString)")
  _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
  _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
  defer {
    try? FileManager.default.removeItem(at: outURL)
    try? FileManager.default.removeItem(at: errURL)
  }
  let out = try FileHandle(forWritingTo: outURL)
  let err = try FileHandle(forWritingTo: errURL)
  let input = Pipe()
  process.standardOutput = out
  process.standardError = err
  process.standardInput = input
  try process.run()
  if let stdin { input.fileHandleForWriting.write(stdin) }
  try input.fileHandleForWriting.close()
  process.waitUntilExit()
  try out.close()
  try err.close()
  return Run(
    stdout: String(decoding: try Data(contentsOf: outURL), as: UTF8.self),
    stderr: String(decoding: try Data(contentsOf: errURL), as: UTF8.self),
    status: process.terminationStatus)
}

/// Puts `--store PATH` last, where every subcommand (nested ones included) accepts it.
private func insertStore(_ arguments: [String], _ store: URL) -> [String] {
  arguments + ["--store", store.path]
}

let tripsExecutable: URL = {
  let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  for candidate in [bundle, bundle.deletingLastPathComponent()] {
    let url = candidate.appendingPathComponent("trips")
    if FileManager.default.isExecutableFile(atPath: url.path) { return url }
  }
  let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
  return root.appendingPathComponent(".build/debug/trips")
}()

let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  .deletingLastPathComponent().deletingLastPathComponent()
let sampleTrips = repositoryRoot.appendingPathComponent("Data/sample-trips.csv")
/// The plans of a third of the sample trips (JSON import format), imported after them.
let samplePlans = repositoryRoot.appendingPathComponent("Data/sample-plans.json")

/// A temporary folder removed when the value is released.
final class Scratch {
  let url: URL
  init() {
    url = FileManager.default.temporaryDirectory.appendingPathComponent(
      "trips-cli-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }
  func file(_ name: String) -> URL { url.appendingPathComponent(name) }
  var store: URL { file("trips.sqlite") }
  func write(_ name: String, _ text: String) throws -> URL {
    let target = file(name)
    try Data(text.utf8).write(to: target)
    return target
  }
  deinit { try? FileManager.default.removeItem(at: url) }
}

/// A JSON array of objects from stdout.
func jsonArray(_ text: String) throws -> [[String: Any]] {
  try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
}

/// Starts one `/bin/sh -c script` process per author, all at once, writing to `store`: the
/// script sees `$TRIPS` (the executable), `$STORE` and `$WHO` (the author).
func startWriters(_ authors: [String], script: String, store: URL) throws -> [Process] {
  try authors.map { who in
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script]
    process.environment = childEnvironment([
      "TRIPS": tripsExecutable.path, "STORE": store.path, "WHO": who, "PATH": "/usr/bin:/bin",
    ])
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    return process
  }
}

/// `base` with this process's sanitizer settings, for every child the tests start: under
/// `Tools/sanitize.sh` the child is instrumented too, and without `detect_leaks=0` its exit
/// status would report the process-lifetime caches as leaks.
func childEnvironment(_ base: [String: String]) -> [String: String] {
  var environment = base
  for key in ["ASAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS"] {
    if let value = ProcessInfo.processInfo.environment[key] { environment[key] = value }
  }
  return environment
}

/// Creates an empty store at `url` (an import of no trips), for a server that takes no writes
/// (which never creates its store).
func makeEmptyStore(_ url: URL) throws {
  let run = try trips(
    ["import", "-", "--format", "csv"], store: url,
    stdin: Data("name,destination,start_date,end_date,latitude,longitude\n".utf8))
  guard run.status == 0 else { throw CocoaError(.fileWriteUnknown) }
}

/// Ends a client process (curl) at once and waits for it: SIGKILL, as the test runner's
/// threads block SIGTERM and its children inherit that mask (a SIGTERM waits for curl's own
/// `--max-time`).
func endClient(_ process: Process) {
  if process.isRunning { kill(process.processIdentifier, SIGKILL) }
  process.waitUntilExit()
}
