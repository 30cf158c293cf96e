import CommandLineKit
import Dispatch
import Foundation
import TripPlanner
import TripService

/// `trips serve`: the store as an OGC API – Features service (a thin wrapper around
/// `TripService`).
enum ServeCommand: Subcommand {
  static let host = Option<String>(
    name: "host", valueName: "address", help: "The address to listen on.",
    defaultDescription: "127.0.0.1")
  static let port = Option<UInt16>(
    name: "port", valueName: "port", help: "The port; 0 picks a free one.",
    defaultDescription: "8080",
    parse: { text in
      guard let port = UInt16(text) else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--port': expected a port from 0 to 65535.")
      }
      return port
    })
  static let tokenFile = Option<String>(
    name: "token-file", valueName: "file",
    help:
      "name:token lines (not readable by other users) that may write; the name is the author in history."
  ).completingFiles
  static let tlsCert = Option<String>(
    name: "tls-cert", valueName: "file", help: "PEM certificate: serve HTTPS."
  ).completingFiles
  static let tlsKey = Option<String>(
    name: "tls-key", valueName: "file", help: "PEM private key of --tls-cert."
  ).completingFiles
  static let cors = Option<String>(
    name: "cors", valueName: "origin", help: "Let browsers on this origin call the service.")
  static let readOnly = Flag(name: "read-only", help: "Refuse every write (405).")
  static let noBoxIndex = Flag(
    name: "no-box-index",
    help:
      "Answer bbox pages from the store alone, without the index in memory (about 140 bytes a trip, built at start)."
  )
  static let insecureHTTP = Flag(
    name: "insecure-http",
    help: "Allow --token-file over plain HTTP off loopback (behind an HTTPS proxy).")
  static let keepAlive = Option<Int>(
    name: "keep-alive", valueName: "seconds",
    help:
      "Send a comment on every stream this often (a stream client that has read nothing for 5 s with over 256 KiB waiting is dropped then).",
    defaultDescription: "15",
    parse: {
      try CommonOptions.wholeNumber($0, option: "keep-alive", in: 1...3600, unit: "seconds")
    })

  static let liveQueries = Option<Int>(
    name: "live-queries", valueName: "n",
    help:
      "Distinct live queries followed at once, of each kind (bounds streams, items streams); a new one past it gets 503. Each costs about 60 bytes a matching trip.",
    defaultDescription: "16",
    parse: { try CommonOptions.wholeNumber($0, option: "live-queries", in: 1...10_000) })

  static let threads = Option<UInt32>(
    name: "threads", valueName: "n",
    help:
      "Threads that answer requests (a request waiting on a PostgreSQL server holds one: give more for a remote store).",
    defaultDescription: "the number of processors, at least 2",
    parse: { UInt32(try CommonOptions.wholeNumber($0, option: "threads", in: 1...256)) })

  static let requestTimeout = Option<Int>(
    name: "request-timeout", valueName: "seconds",
    help:
      "Stop a request that works longer than this (its queries included) and answer 503; a request whose client hung up stops too. 0: no limit.",
    defaultDescription: "30",
    parse: {
      try CommonOptions.wholeNumber($0, option: "request-timeout", in: 0...86_400, unit: "seconds")
    })

  static let workers = Option<Int>(
    name: "workers", valueName: "n",
    help:
      "Threads for requests that may be slow (a filter, q, destination, sections, writes), apart from --threads; 0 runs them on those.",
    defaultDescription: "the number of processors, at least 2",
    parse: { try CommonOptions.wholeNumber($0, option: "workers", in: 0...256) })
  static let workerQueue = Option<Int>(
    name: "worker-queue", valueName: "n",
    help: "Slow requests that may wait for a --workers thread; past them, 503 at once.",
    defaultDescription: "64",
    parse: { try CommonOptions.wholeNumber($0, option: "worker-queue", in: 0...100_000) })

  static var spec: CommandSpec {
    CommandSpec(
      name: "serve",
      abstract: "Serves the trips over HTTP as OGC API – Features, with bounds for map tools.",
      discussion:
        "Prints 'Listening on URL' when ready and one line per request on standard error. SIGINT or SIGTERM stops accepting, finishes the requests in flight, and exits 0.",
      options: [
        host, port, tokenFile, tlsCert, tlsKey, cors, readOnly, insecureHTTP, keepAlive,
        liveQueries, threads, workers, workerQueue, requestTimeout, noBoxIndex,
        CommonOptions.store,
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    var configuration = ServiceConfiguration()
    if let host = try arguments[host] {
      // `[::1]`, as in a URL, is the address `::1` (printed once bracketed).
      configuration.host =
        host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2
        ? String(host.dropFirst().dropLast()) : host
    }
    if let port = try arguments[port] { configuration.port = port }
    if let seconds = try arguments[keepAlive] {
      configuration.streams.keepAlive = .seconds(seconds)
    }
    if let count = try arguments[liveQueries] { configuration.streams.maximumFeeds = count }
    if let count = try arguments[threads] { configuration.limits.threads = count }
    if let count = try arguments[workers] { configuration.limits.slowRequestThreads = count }
    if let count = try arguments[workerQueue] { configuration.limits.slowRequestQueue = count }
    if let seconds = try arguments[requestTimeout] {
      configuration.limits.requestSeconds = Double(seconds)
    }
    configuration.readOnly = arguments[readOnly]
    configuration.indexesBoxesInMemory = !arguments[noBoxIndex]
    configuration.allowsInsecureHTTP = arguments[insecureHTTP]
    configuration.corsOrigin = try arguments[cors]
    do {
      if let path = try arguments[tokenFile] {
        try CommonOptions.requireInputFile(path, "--token-file")
        configuration.tokens = try TokenFile(path: path)
      }
      switch (try arguments[tlsCert], try arguments[tlsKey]) {
      case (let certificate?, let key?):
        guard let certificateText = try? String(contentsOfFile: certificate, encoding: .utf8),
          let keyText = try? String(contentsOfFile: key, encoding: .utf8)
        else {
          throw CLIError(
            kind: .noInput,
            message: "Cannot read the TLS certificate or key (\(certificate), \(key)).")
        }
        guard certificateText.contains("-----BEGIN CERTIFICATE-----") else {
          throw CLIError(
            kind: .data,
            message: "\(certificate) is not a PEM certificate (no BEGIN CERTIFICATE line).")
        }
        guard keyText.contains("PRIVATE KEY-----") else {
          throw CLIError(
            kind: .data, message: "\(key) is not a PEM private key (no BEGIN … PRIVATE KEY line).")
        }
        configuration.tls = (certificateText, keyText)
      case (nil, nil): break
      default:
        throw CLIError.usage("--tls-cert and --tls-key go together.")
      }
      let url = try CommonOptions.storeURL(arguments, io)
      // Only a server that takes writes may create its store; one that cannot write would
      // serve an empty stand-in for a mistyped path.
      let writes = !configuration.readOnly && configuration.tokens != nil
      if !writes {
        try CommonOptions.requireExistingStore(
          url,
          "a server that takes no writes (--read-only, or no --token-file) serves a store that exists."
        )
      } else {
        CommonOptions.noteCreation(
          url, io, "it is created, empty, for the writes this server takes.")
      }
      let store =
        configuration.readOnly
        ? try CommonOptions.openForReading(arguments, io)
        : try CommonOptions.openForWriting(arguments, io)
      let service = try TripService(container: store.container, configuration: configuration)
      // The signals are caught before the line that tells a supervisor it may send them.
      let done = DispatchSemaphore(value: 0)
      let stopSignals = StopSignals { done.signal() }
      try io.out("Listening on \(service.url)\n")
      done.wait()
      // The drain is bounded: a request that does not finish in time (a worker stuck in a
      // call that never returns) does not keep the process alive.
      let limit = configuration.drainSeconds + 2
      Thread.detachNewThread {
        Thread.sleep(forTimeInterval: limit)
        TripService.standardErrorLog(
          "Error: requests were still running \(Int(limit)) s after the stop signal; exiting without them."
        )
        _exit(1)
      }
      service.stop()
      stopSignals.cancel()
      withExtendedLifetime(store) {}
    } catch let error as ServiceError {
      let kind: CLIError.Kind =
        [ServiceError.Code.badTokenFile, .unsafeConfiguration].contains(error.code)
        ? .usage : .failure
      throw CLIError(kind: kind, message: error.message)
    }
  }
}
