import CommandLineKit
import Dispatch
import Foundation
import Persistence
import Synchronization
import TripPlanner

/// `trips sync`: keep two stores in step through persistent history.
enum SyncCommand: Subcommand {
  static var subcommands: [any Subcommand.Type] {
    [SyncExportCommand.self, SyncApplyCommand.self, SyncWatchCommand.self]
  }

  static var spec: CommandSpec {
    CommandSpec(
      name: "sync", abstract: "Exchanges changes with another store through persistent history.",
      discussion:
        "Conflicts: the last change of a trip wins, by the time it was made, deletes included; every store ends the same. Changes applied with --author NAME are left out of feeds exported with --exclude-author NAME, so nothing is echoed back.",
      subcommands: subcommands.map { $0.spec })
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    throw CLIError.usage("Missing subcommand: export, apply or watch.")
  }

  static func token(_ text: String?) throws -> DefaultHistoryToken? {
    guard let text else { return nil }
    guard let token = DefaultHistoryToken(text) else {
      throw CLIError.usage(
        "Invalid value '\(text)' for '--after': expected a history token (<store>:<number>).")
    }
    return token
  }

  /// Turns an expired or foreign token into a clear error with what to do.
  static func explain(_ error: any Error) -> any Error {
    if let cause = error as? PersistenceError {
      switch cause.code {
      case .historyTokenExpired:
        return CLIError(
          kind: .data,
          message:
            "\(cause.message) Take a full copy instead: note this store's current token (the last one 'trips history --json' prints), copy every trip with 'trips export' here and 'trips import' there, then sync after the noted token."
        )
      case .historyTokenForeign, .historyTokenUnknown:
        return CLIError(kind: .data, message: cause.message)
      default: break
      }
    }
    return error
  }
}

/// `trips sync export`.
enum SyncExportCommand: Subcommand {
  static let after = Option<String>(
    name: "after", valueName: "token", help: "Only changes after this token.",
    defaultDescription: "all kept history")
  static let excludeAuthor = Option<String>(
    name: "exclude-author", valueName: "name",
    help: "Leave out changes by this author (those a sync applied).")
  static let output = Option<String>(
    name: "output", valueName: "file",
    help:
      "Write to this file instead of standard output (a regular file is replaced atomically; a FIFO or device is written through; - is standard output)."
  ).completingFiles

  static var spec: CommandSpec {
    CommandSpec(
      name: "export",
      abstract:
        "Writes the changes after a token as JSON lines, ending with the token to resume from.",
      options: [after, excludeAuthor, output, CommonOptions.store])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let after = try SyncCommand.token(try arguments[after])
    let store = try CommonOptions.openForReading(arguments, io)
    let excluded = try arguments[excludeAuthor]
    // Written a thousand lines at a time as the changes are read: the feed is never held
    // whole.
    let output = try arguments[output] ?? "-"
    // A refused token is said before the output is opened: it leaves no file behind.
    do {
      try store.checkFeedToken(after)
    } catch {
      throw SyncCommand.explain(error)
    }
    var written: (count: Int, resumeToken: DefaultHistoryToken)?
    try OutputFile.write(to: output, io: io) { sink in
      do {
        written = try store.writeChangeFeed(after: after, excludingAuthor: excluded, to: sink)
      } catch let error as TripPlannerError {
        throw SyncCommand.explain(error)
      }
    }
    if output != "-", let written {
      io.err(
        "Exported \(written.count) change\(written.count == 1 ? "" : "s"); resume after \(written.resumeToken).\n"
      )
    }
  }
}

/// `trips sync apply`.
enum SyncApplyCommand: Subcommand {
  static let author = Option<String>(
    name: "author", valueName: "name", help: "The author recorded for the applied changes.",
    defaultDescription: "sync")

  static var spec: CommandSpec {
    CommandSpec(
      name: "apply",
      abstract: "Applies a change feed in one transaction; applying it twice changes nothing.",
      options: [author, CommonOptions.store],
      arguments: [
        ArgumentSpec(name: "file", help: "The feed (JSON lines), or - for standard input.")
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let path = arguments.positionals[0]
    let data = try readInput(path, io)
    let feed = try SyncFeed.parse(data, file: path == "-" ? "<stdin>" : path)
    let url = try CommonOptions.storeURL(arguments, io)
    io.creation.noteCreating(url)
    let store = try TripStore(url: url, author: try arguments[author] ?? "sync")
    let result = try store.apply(feed)
    try io.out(
      "Applied \(result.applied) change\(result.applied == 1 ? "" : "s"), skipped \(result.skipped).\n"
    )
  }
}

/// `trips sync watch`.
enum SyncWatchCommand: Subcommand {
  static let to = Option<String>(
    name: "to", valueName: "store|url", help: "The store or server to push to."
  ).completingFiles
  static let from = Option<String>(
    name: "from", valueName: "url", help: "The server to pull from (http:// or https://).")
  static let tokenFile = Option<String>(
    name: "token-file", valueName: "file",
    help:
      "The writer's token for the server, as a name:token line (the server's own token file format; the first entry is used). Needed to push to a server."
  ).completingFiles
  static let author = Option<String>(
    name: "author", valueName: "name",
    help:
      "Who the changes this sync applies are recorded as, here and in another store; changes by it are not pushed.",
    defaultDescription: "sync")
  static let state = Option<String>(
    name: "state", valueName: "file", help: "Where the last token of each way is kept.",
    defaultDescription:
      "<to>.sync-state.json, or <store>.sync-state.json with a server ($XDG_DATA_HOME/trips/sync-state/ for a database)"
  ).completingFiles
  static let once = Flag(name: "once", help: "Push (and pull) once and exit.")

  static var spec: CommandSpec {
    CommandSpec(
      name: "watch",
      abstract:
        "Pushes this store's changes to another store or a server, and pulls a server's, now and after every change.",
      discussion:
        "With a server (http:// or https://, as 'trips serve' prints it), --to pushes with the writer's token from --token-file and --from pulls, following the server's items stream; give both for both ways. The last token each way is kept in a state file, so a restart or a dropped connection resumes where it stopped, and nothing is applied twice. Stops with exit 0 on Ctrl-C (SIGINT) or SIGTERM.",
      options: [to, from, tokenFile, author, state, once, CommonOptions.store])
  }

  /// A server address (`http://` or `https://`), or nil for anything else (a store path).
  static func serverURL(_ text: String?) -> URL? {
    guard let text, let url = URL(string: text),
      ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
    else { return nil }
    return url
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let to = try arguments[to]
    let from = try arguments[from]
    if serverURL(to) != nil || from != nil {
      return try ServerSyncCommand.run(arguments, io)
    }
    guard let to else {
      throw CLIError.usage(
        "Missing --to: the store or server (http:// or https://) to push to, or --from a server.")
    }
    let source = try CommonOptions.storeURL(arguments, io)
    let target = try CommonOptions.storeURL(to, option: "--to")
    guard source.standardizedFileURL != target.standardizedFileURL else {
      throw CLIError.usage("--to names the store itself; give another store.")
    }
    try CommonOptions.requireExistingStore(
      source, "sync watch pushes the changes of a store that exists.")
    let loop = SyncWatchLoop(io: io)
    let sync = try StoreSync(
      from: source, to: target, author: try arguments[author] ?? "sync",
      state: try arguments[state].map { URL(fileURLWithPath: $0) }
    ) { result in
      switch result {
      case .success(let pushed):
        loop.succeeded()
        guard pushed.applied + pushed.skipped > 0 else { return }
        loop.say(SyncWatchLoop.describe("Pushed", pushed))
      case .failure(let error):
        loop.failed(error, lasting: true)
      }
    }
    if arguments[once] {
      do {
        try io.out(SyncWatchLoop.describe("Pushed", try sync.pushOnce()))
      } catch {
        throw SyncCommand.explain(error)
      }
      return
    }
    try loop.run(start: { sync.start() }, stop: sync.stop)
  }
}

/// The live part of `sync watch`, with a store or a server: prints what moved, prints each
/// failure once, and runs until Ctrl-C or SIGTERM (exit 0), an output failure, or a failure
/// that lasted past ``WatchCommand/failureGracePeriod`` (exit 1).
final class SyncWatchLoop: Sendable {
  private struct Status {
    var outputError: (any Error)?
    var failure: String?
    var failingSince: ContinuousClock.Instant?
  }
  private let status = Mutex(Status())
  private let done = DispatchSemaphore(value: 0)
  private let io: TerminalIO

  init(io: TerminalIO) { self.io = io }

  /// `Pushed 3 changes, skipped 0.`
  static func describe(_ verb: String, _ result: SyncResult) -> String {
    "\(verb) \(result.applied) change\(result.applied == 1 ? "" : "s"), skipped \(result.skipped).\n"
  }

  /// Prints a line; an output that fails ends the loop.
  func say(_ text: String) {
    do {
      try io.out(text)
    } catch {
      status.withLock { $0.outputError = error }
      done.signal()
    }
  }

  /// Something worked: a failure before it is over.
  func succeeded() {
    status.withLock {
      $0.failure = nil
      $0.failingSince = nil
    }
  }

  /// Something failed: printed once per message; when `lasting` says it will not fix itself,
  /// its clock starts.
  func failed(_ error: any Error, lasting: Bool) {
    let message = terminalSafeMessage(cliError(SyncCommand.explain(error)).message)
    status.withLock { state in
      if message != state.failure {
        io.err("Error: \(message)\n")
        state.failure = message
      }
      if lasting, state.failingSince == nil { state.failingSince = .now }
    }
  }

  /// Calls `start`, waits for the end, calls `stop`, and throws what ended it, if anything.
  func run(start: () -> Void, stop: () -> Void) throws {
    let stopSignals = StopSignals { [done] in done.signal() }
    let poll = DispatchSource.makeTimerSource(queue: .global())
    poll.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
    poll.setEventHandler { [weak self] in
      guard let self else { return }
      let expired = self.status.withLock { state in
        state.failingSince.map { ContinuousClock.now - $0 > WatchCommand.failureGracePeriod }
          ?? false
      }
      if expired { self.done.signal() }
    }
    poll.resume()
    start()
    done.wait()
    stop()
    poll.cancel()
    stopSignals.cancel()
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
