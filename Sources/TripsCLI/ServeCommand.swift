import Dispatch
import Foundation
import TripPlanner
import TripService

/// `trips serve`: the store as an OGC API – Features service (a thin wrapper around
/// `TripService`).
enum ServeCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "serve",
      abstract: "Serves the trips over HTTP as OGC API – Features, with bounds for map tools.",
      discussion:
        "Prints 'Listening on URL' when ready and one line per request on standard error. SIGINT or SIGTERM stops accepting, finishes the requests in flight, and exits 0.",
      options: [
        OptionSpec(
          name: "host", valueName: "address", help: "The address to listen on.",
          defaultDescription: "127.0.0.1"),
        OptionSpec(
          name: "port", valueName: "port", help: "The port; 0 picks a free one.",
          defaultDescription: "8080"),
        OptionSpec(
          name: "token-file", valueName: "file",
          help:
            "name:token lines (not readable by other users) that may write; the name is the author in history."
        ),
        OptionSpec(name: "tls-cert", valueName: "file", help: "PEM certificate: serve HTTPS."),
        OptionSpec(name: "tls-key", valueName: "file", help: "PEM private key of --tls-cert."),
        OptionSpec(
          name: "cors", valueName: "origin", help: "Let browsers on this origin call the service."),
        OptionSpec(name: "read-only", valueName: nil, help: "Refuse every write (405)."),
        OptionSpec(
          name: "insecure-http", valueName: nil,
          help: "Allow --token-file over plain HTTP off loopback (behind an HTTPS proxy)."),
        OptionSpec(
          name: "keep-alive", valueName: "seconds",
          help:
            "Send a comment on every stream this often (a stream client that has read nothing for 5 s with over 256 KiB waiting is dropped then).",
          defaultDescription: "15"),
        CommonOptions.store,
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    var configuration = ServiceConfiguration()
    if let host = arguments.value("host") { configuration.host = host }
    if let text = arguments.value("port") {
      guard let port = UInt16(text) else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--port': expected a port from 0 to 65535.")
      }
      configuration.port = port
    }
    if let text = arguments.value("keep-alive") {
      guard let seconds = Int(text), (1...3600).contains(seconds) else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--keep-alive': expected whole seconds from 1 to 3600."
        )
      }
      configuration.streams.keepAlive = .seconds(seconds)
    }
    configuration.readOnly = arguments.has("read-only")
    configuration.allowsInsecureHTTP = arguments.has("insecure-http")
    configuration.corsOrigin = arguments.value("cors")
    do {
      if let path = arguments.value("token-file") {
        configuration.tokens = try TokenFile(path: path)
      }
      switch (arguments.value("tls-cert"), arguments.value("tls-key")) {
      case (let certificate?, let key?):
        guard let certificateText = try? String(contentsOfFile: certificate, encoding: .utf8),
          let keyText = try? String(contentsOfFile: key, encoding: .utf8)
        else {
          throw CLIError(
            kind: .noInput,
            message: "Cannot read the TLS certificate or key (\(certificate), \(key)).")
        }
        configuration.tls = (certificateText, keyText)
      case (nil, nil): break
      default:
        throw CLIError.usage("--tls-cert and --tls-key go together.")
      }
      let url = try CommonOptions.storeURL(arguments, io)
      let store =
        configuration.readOnly && FileManager.default.fileExists(atPath: url.path)
        ? try CommonOptions.openForReading(arguments, io)
        : try CommonOptions.openForWriting(arguments, io)
      let service = try TripService(container: store.container, configuration: configuration)
      try io.out("Listening on \(service.url)\n")
      let done = DispatchSemaphore(value: 0)
      let sources = onStopSignals { done.signal() }
      done.wait()
      service.stop()
      for source in sources { source.cancel() }
      withExtendedLifetime(store) {}
    } catch let error as ServiceError {
      let kind: CLIError.Kind =
        [ServiceError.Code.badTokenFile, .unsafeConfiguration].contains(error.code)
        ? .usage : .failure
      throw CLIError(kind: kind, message: error.message)
    }
  }
}
