import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A throwaway PostgreSQL cluster for the tests: made with Debian's `initdb` in a temporary
/// folder, started with `pg_ctl` on a free loopback port (as the `postgres` user when the tests
/// run as root, since PostgreSQL refuses to run as root), trusted without a password, and
/// stopped and removed when the test process exits, or, should it be killed, by a watchdog
/// that outlives it.
///
/// One cluster per test process (``shared``), started on first use; each test makes its own
/// database (``makeDatabase(_:)``), so tests run in parallel without seeing each other.
public final class PostgreSQLCluster: Sendable {
  /// The folder of the cluster's files.
  public let directory: URL
  /// The port it listens on, at 127.0.0.1.
  public let port: Int
  /// Where `initdb`, `pg_ctl` and `createdb` are.
  public let binaries: URL
  private let runsAsPostgresUser: Bool

  /// The cluster of this test process, started on first use; the error says why it could not
  /// start (no PostgreSQL server installed, for example).
  public static let shared: Result<PostgreSQLCluster, ClusterError> = Result {
    try PostgreSQLCluster()
  }.mapError { $0 as? ClusterError ?? ClusterError(message: "\($0)") }

  /// A cluster of the caller's own, for a test that restarts or stops its server (which the
  /// shared one, used by tests running at the same time, must never be). Stopped when the test
  /// process ends.
  /// With `tls`, the server also takes TLS connections (`sslmode=require`), with a throwaway
  /// self-signed certificate made by `openssl`.
  public static func makePrivate(tls: Bool = false) throws -> PostgreSQLCluster {
    try PostgreSQLCluster(tls: tls)
  }

  /// Restarts the server (`pg_ctl restart -m fast`: connections are cut), on the same port.
  public func restart() throws {
    try PostgreSQLCluster.run(
      binaries.appendingPathComponent("pg_ctl").path,
      ["-D", directory.appendingPathComponent("data").path, "-m", "fast", "-w", "restart"],
      asPostgres: runsAsPostgresUser)
  }

  /// Why a cluster could not be made or used.
  public struct ClusterError: Error, CustomStringConvertible {
    /// What went wrong, with the tool's output.
    public var message: String
    /// The message.
    public var description: String { message }
  }

  private init(tls: Bool = false) throws {
    guard let binaries = PostgreSQLCluster.findBinaries() else {
      throw ClusterError(
        message:
          "No PostgreSQL server found under /usr/lib/postgresql/*/bin: Tools/install-dependencies.sh --tests installs Debian's postgresql."
      )
    }
    self.binaries = binaries
    runsAsPostgresUser = geteuid() == 0
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "trips-pg-\(getpid())-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    if runsAsPostgresUser {
      try FileManager.default.setAttributes(
        [.ownerAccountName: "postgres", .groupOwnerAccountName: "postgres"],
        ofItemAtPath: directory.path)
    }
    self.directory = directory
    let data = directory.appendingPathComponent("data").path
    try PostgreSQLCluster.run(
      binaries.appendingPathComponent("initdb").path,
      ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"],
      asPostgres: runsAsPostgresUser)
    if tls {
      // The server reads server.crt and server.key from its data folder; the key must be
      // private to the server's user.
      try PostgreSQLCluster.run(
        "/usr/bin/openssl",
        [
          "req", "-new", "-x509", "-days", "2", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
          data + "/server.key", "-out", data + "/server.crt",
        ], asPostgres: runsAsPostgresUser)
      try PostgreSQLCluster.run(
        "/bin/chmod", ["600", data + "/server.key"], asPostgres: runsAsPostgresUser)
    }
    var lastError: ClusterError?
    for _ in 0..<5 {
      let port = PostgreSQLCluster.freePort()
      do {
        try PostgreSQLCluster.run(
          binaries.appendingPathComponent("pg_ctl").path,
          [
            "-D", data, "-l", directory.appendingPathComponent("server.log").path, "-w", "-t",
            "60", "-o",
            "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
              + (tls ? " -c ssl=on" : ""),
            "start",
          ], asPostgres: runsAsPostgresUser)
        self.port = port
        PostgreSQLCluster.startWatchdog(
          pgCtl: binaries.appendingPathComponent("pg_ctl").path, data: data,
          directory: directory.path, asPostgres: runsAsPostgresUser)
        return
      } catch let error as ClusterError {
        lastError = error
      }
    }
    throw lastError ?? ClusterError(message: "pg_ctl could not start the cluster")
  }

  /// A `postgresql://` URL for `database` on this cluster.
  public func url(database: String) -> String {
    "postgresql://postgres@127.0.0.1:\(port)/\(database)"
  }

  /// Makes a new empty database and returns its URL. `name` is a prefix; a unique suffix is
  /// added.
  public func makeDatabase(_ name: String = "test") throws -> String {
    let database =
      "\(name.lowercased().filter { $0.isLetter || $0.isNumber })_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
    try PostgreSQLCluster.run(
      binaries.appendingPathComponent("createdb").path,
      ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", database], asPostgres: false)
    return url(database: database)
  }

  private static func findBinaries() -> URL? {
    let root = URL(fileURLWithPath: "/usr/lib/postgresql")
    let versions =
      (try? FileManager.default.contentsOfDirectory(atPath: root.path))?
      .compactMap(Int.init).sorted() ?? []
    for version in versions.reversed() {
      let bin = root.appendingPathComponent("\(version)/bin")
      if FileManager.default.isExecutableFile(atPath: bin.appendingPathComponent("pg_ctl").path) {
        return bin
      }
    }
    return nil
  }

  /// A port nothing listens on now (the kernel's choice for port 0).
  private static func freePort() -> Int {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
    }
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
  }

  /// Runs a tool to completion, as the `postgres` user if asked; throws with its output when
  /// it fails. Spawned and waited for with `posix_spawn` and `waitpid` (no run loop needed:
  /// this runs inside the lazy initializer of ``shared``, where Foundation's `Process` did not
  /// see its child exit).
  @discardableResult
  static func run(_ tool: String, _ arguments: [String], asPostgres: Bool) throws -> String {
    let argv =
      asPostgres
      ? ["/usr/sbin/runuser", "-u", "postgres", "--", tool] + arguments : [tool] + arguments
    // Output goes to a file, not a pipe: the server `pg_ctl` starts would keep a pipe open.
    let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent(
      "trips-pg-tool-\(UUID().uuidString)"
    ).path
    defer { unlink(outputPath) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let cArguments = argv.map { strdup($0) } + [nil]
    defer { for argument in cArguments { free(argument) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ)
    guard spawned == 0 else {
      throw ClusterError(message: "Cannot run \(argv[0]): \(String(cString: strerror(spawned)))")
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    // Exited normally with status 0 (the low 7 bits hold a signal, the next 8 the status).
    guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
      throw ClusterError(
        message: "\(argv.joined(separator: " ")) failed (wait status \(status)): \(text)")
    }
    return text
  }

  /// A shell that waits for this process to end, however it ends, then stops the cluster
  /// (`immediate`: nothing in it needs keeping) and removes its folder.
  private static func startWatchdog(
    pgCtl: String, data: String, directory: String, asPostgres: Bool
  ) {
    let stop =
      asPostgres
      ? "/usr/sbin/runuser -u postgres -- \"$1\" -D \"$2\" -m immediate stop"
      : "\"$1\" -D \"$2\" -m immediate stop"
    let script =
      "while kill -0 \(getpid()) 2>/dev/null; do sleep 0.5; done; \(stop) >/dev/null 2>&1; rm -rf \"$3\""
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script, "watchdog", pgCtl, data, directory]
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try? process.run()
  }
}
