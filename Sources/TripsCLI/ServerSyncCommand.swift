import CommandLineKit
import Dispatch
import Foundation
import Synchronization
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
    struct Status {
      var outputError: (any Error)?
      var failure: String?
      var failingSince: ContinuousClock.Instant?
    }
    let status = Mutex(Status())
    let done = DispatchSemaphore(value: 0)
    @Sendable func say(_ text: String) {
      do {
        try io.out(text)
      } catch {
        status.withLock { $0.outputError = error }
        done.signal()
      }
    }
    @Sendable func describe(_ verb: String, _ result: SyncResult) -> String {
      "\(verb) \(result.applied) change\(result.applied == 1 ? "" : "s"), skipped \(result.skipped).\n"
    }
    let sync: ServerSync
    do {
      sync = try ServerSync(
        local: local, server: server, directions: directions, writer: writer,
        localAuthor: try arguments[SyncWatchCommand.author] ?? "sync",
        state: try arguments[SyncWatchCommand.state].map { URL(fileURLWithPath: $0) }
      ) { event in
        switch event {
        case .pushed(let result):
          status.withLock {
            $0.failure = nil
            $0.failingSince = nil
          }
          say(describe("Pushed", result))
        case .pulled(let result):
          status.withLock {
            $0.failure = nil
            $0.failingSince = nil
          }
          say(describe("Pulled", result))
        case .failed(let error):
          let message = terminalSafeMessage(cliError(SyncCommand.explain(error)).message)
          status.withLock { state in
            if message != state.failure {
              io.err("Error: \(message)\n")
              state.failure = message
            }
            // A server that answered no (a bad token, an expired history token) will not
            // change its mind: that ends the watch. An unreachable one is waited for.
            if (error as? ServerSyncError)?.status != nil, state.failingSince == nil {
              state.failingSince = .now
            }
          }
        }
      }
    } catch let error as TripPlannerError {
      throw CLIError.usage(error.message)
    }
    if arguments[SyncWatchCommand.once] {
      do {
        if directions.contains(.push) { try io.out(describe("Pushed", try sync.pushOnce())) }
        if directions.contains(.pull) { try io.out(describe("Pulled", try sync.pullOnce())) }
      } catch {
        throw SyncCommand.explain(error)
      }
      return
    }
    let stopSignals = onStopSignals { done.signal() }
    let poll = DispatchSource.makeTimerSource(queue: .global())
    poll.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
    poll.setEventHandler {
      let expired = status.withLock { state in
        state.failingSince.map { ContinuousClock.now - $0 > WatchCommand.failureGracePeriod }
          ?? false
      }
      if expired { done.signal() }
    }
    poll.resume()
    sync.start()
    done.wait()
    sync.stop()
    poll.cancel()
    for source in stopSignals { source.cancel() }
    let final = status.withLock { ($0.outputError, $0.failure, $0.failingSince) }
    if let outputError = final.0 { throw outputError }
    if let failure = final.1, let since = final.2,
      ContinuousClock.now - since > WatchCommand.failureGracePeriod
    {
      throw CLIError(
        kind: .failure, message: "Stopped syncing: \(failure) (still failing after 5 seconds)")
    }
  }
}
