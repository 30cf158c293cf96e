import CommandLineKit
import Foundation
import TripPlanner
import TripService

/// `trips sync watch --to URL` / `--from URL`: a store kept in step with a server
/// (``ServerSync``).
enum ServerSyncCommand {
  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let to = try arguments[SyncWatchCommand.to]
    let from = try arguments[SyncWatchCommand.from]
    let toServer = SyncWatchCommand.serverURL(to)
    let fromServer = SyncWatchCommand.serverURL(from)
    if let from, fromServer == nil {
      throw CLIError.usage(
        "Invalid value '\(terminalSafe(from))' for '--from': expected a server address (http:// or https://, as 'trips serve' prints it)."
      )
    }
    if to != nil, toServer == nil {
      throw CLIError.usage(
        "--to names a store and --from a server: sync with one server at a time (to copy between stores, run sync watch --to STORE without --from)."
      )
    }
    if let toServer, let fromServer, toServer.absoluteString != fromServer.absoluteString {
      throw CLIError.usage(
        "--to and --from name different servers; give the same server for both ways, or one of them."
      )
    }
    guard let server = toServer ?? fromServer else {
      throw CLIError.usage("Missing --to or --from: the server to sync with.")
    }
    var directions: ServerSync.Directions = []
    if toServer != nil { directions.insert(.push) }
    if fromServer != nil { directions.insert(.pull) }
    var writer: (name: String, token: String)?
    if let path = try arguments[SyncWatchCommand.tokenFile] {
      try CommonOptions.requireInputFile(path, "--token-file")
      let tokens: TokenFile
      do {
        tokens = try TokenFile(path: path)
      } catch {
        throw CLIError(kind: .data, message: error.message)
      }
      guard let first = tokens.entries.first else {
        throw CLIError(kind: .data, message: "The token file \(path) holds no name:token line.")
      }
      writer = (first.name, first.token)
    } else if directions.contains(.push) {
      throw CLIError.usage(
        "Pushing to a server needs --token-file: a name:token line the server knows (its --token-file)."
      )
    }
    let local = try CommonOptions.storeURL(arguments, io)
    // Pulling writes the store (creating it, as any write does); pushing alone only reads it.
    if !directions.contains(.pull) {
      try CommonOptions.requireExistingStore(
        local, "sync watch --to pushes the changes of a store that exists.")
    }
    let loop = SyncWatchLoop(io: io)
    let sync: ServerSync
    do {
      sync = try ServerSync(
        local: local, server: server, directions: directions, writer: writer,
        localAuthor: try arguments[SyncWatchCommand.author] ?? "sync",
        state: try arguments[SyncWatchCommand.state].map { URL(fileURLWithPath: $0) }
      ) { event in
        switch event {
        case .pushed(let result):
          loop.succeeded()
          loop.say(SyncWatchLoop.describe("Pushed", result))
        case .pulled(let result):
          loop.succeeded()
          loop.say(SyncWatchLoop.describe("Pulled", result))
        case .failed(let error):
          // A server that answered no (a bad token, an expired history token: a 4xx) will
          // not change its mind: that ends the watch. An unreachable or busy one (no answer,
          // 408, 429, 5xx: ServerSyncError's kind is transient) is waited for, and the push
          // tried again.
          let kind = (error as? ServerSyncError)?.kind
          loop.failed(error, lasting: kind.map { $0 != .transient } ?? false)
        }
      }
    } catch let error as TripPlannerError where error.code == .invalidInput {
      // A server address or writer the initializer refuses is the command line's fault; a
      // store that cannot be opened is reported as every other command reports it.
      throw CLIError.usage(error.message)
    }
    if arguments[SyncWatchCommand.once] {
      do {
        if directions.contains(.push) {
          try io.out(SyncWatchLoop.describe("Pushed", try sync.pushOnce()))
        }
        if directions.contains(.pull) {
          try io.out(SyncWatchLoop.describe("Pulled", try sync.pullOnce()))
        }
      } catch {
        throw SyncCommand.explain(error)
      }
      return
    }
    try loop.run(start: { sync.start() }, stop: sync.stop)
  }
}
