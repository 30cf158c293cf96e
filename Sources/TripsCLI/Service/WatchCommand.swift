import CommandLineKit
import Dispatch
import Foundation
import Persistence
import Synchronization
import TripPlanner

/// `trips watch`: a bounds report now, then after every change from any process.
enum WatchCommand: Subcommand {
  static let count = Option<Int>(
    name: "count", valueName: "n", help: "Stop after n reports (the first one included).",
    parse: { try CommonOptions.count($0, option: "count") })

  static var spec: CommandSpec {
    CommandSpec(
      name: "watch",
      abstract:
        "Prints the bounds report as a JSON line now, then after every change to the trips.",
      discussion:
        "Changes from any process writing the store are seen. Stops with exit 0 on Ctrl-C (SIGINT), SIGTERM, or after --count reports.",
      options: CommonOptions.filters + [
        BoundsCommand.crs, BoundsCommand.viewport, count, CommonOptions.store,
      ])
  }

  /// How long a failure to follow the store may last before `watch` gives up (exit 1).
  static let failureGracePeriod: Duration = .seconds(5)

  /// What `watch` printed so far, and how following the store goes.
  struct Printed {
    var count = 0
    var last: BoundsReport?
    var outputError: (any Error)?
    var failure: String?
    var failingSince: ContinuousClock.Instant?
  }

  /// Whether a store file exists and is not empty (SQLite takes an empty file for a new one).
  static func existsWithContent(_ url: URL) -> Bool {
    ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0) > 0
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let query = try CommonOptions.query(arguments, io)
    let limit = try arguments[count]
    if limit == 0 { return }
    let (projection, viewport) = try BoundsCommand.options(arguments)
    // Read like `list` (a read-only store works). A store that does not exist yet is reported
    // as empty, never created: `watch` waits for a writer to create it, then follows it.
    let url = try CommonOptions.storeURL(arguments, io)
    let done = DispatchSemaphore(value: 0)
    let stopSignals = StopSignals { done.signal() }
    defer { stopSignals.cancel() }
    var first = Printed()
    if url.isFileURL, !existsWithContent(url) {
      io.err(
        "Note: the store \(terminalSafe(url.path)) does not exist yet; reporting it as empty until a writer creates it.\n"
      )
      let empty = try TripStore(inMemoryWithAuthor: "cli")
      let report = try BoundsController(
        container: empty.container, query: query, crs: projection.crs, viewport: viewport
      ).report
      try io.out(report.json.rendered() + "\n")
      first.count = 1
      first.last = report
      if limit == 1 { return }
      // Until it exists, or a stop signal.
      while !existsWithContent(url) {
        if done.wait(timeout: .now() + .milliseconds(250)) == .success { return }
      }
      // Until its creator has committed it: a store whose tables are not all there yet reads
      // as one that needs migrating (or, half written, as no store), and migrating it beside
      // its creator would meet a busy store. Up to 30 s, then it is opened as any store is
      // (migrated if it must be, its error reported if it has one).
      let created = ContinuousClock.now + .seconds(30)
      while ContinuousClock.now < created, (try? TripStore(url: url, readOnly: true)) == nil {
        if done.wait(timeout: .now() + .milliseconds(100)) == .success { return }
      }
    }
    let store = try CommonOptions.openForReading(arguments, io)
    let controller = try BoundsController(
      container: store.container, query: query, crs: projection.crs, viewport: viewport)
    if store.container.isImmutable {
      io.err(
        "Note: \(CommonOptions.storeName(url)) is in a folder this user cannot write, so changes to it cannot be followed; printing the current report only.\n"
      )
    }

    let printed = Mutex(first)
    let immutable = store.container.isImmutable
    let token = withContinuousObservation {
      let report = controller.report
      let failure = controller.lastError.map { terminalSafeMessage(cliError($0).message) }
      let finished = printed.withLock { state -> Bool in
        if failure != state.failure {
          state.failure = failure
          state.failingSince = failure == nil ? nil : .now
          if let failure { io.err("Error: \(failure)\n") }
        }
        guard state.last != report, limit.map({ state.count < $0 }) ?? true else { return false }
        state.last = report
        state.count += 1
        do {
          try io.out(report.json.rendered() + "\n")
        } catch {
          state.outputError = error
          return true
        }
        return immutable || (limit.map { state.count >= $0 } ?? false)
      }
      if finished { done.signal() }
    }
    // A failure that lasts ends the command; a passing one (the store briefly unreadable) only
    // prints its error.
    let poll = DispatchSource.makeTimerSource(queue: .global())
    poll.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
    poll.setEventHandler {
      let expired = printed.withLock { state in
        state.failingSince.map { ContinuousClock.now - $0 > failureGracePeriod } ?? false
      }
      if expired { done.signal() }
    }
    poll.resume()
    withExtendedLifetime(controller) { done.wait() }
    token.cancel()
    poll.cancel()
    let final = printed.withLock { ($0.outputError, $0.failure, $0.failingSince) }
    if let outputError = final.0 { throw outputError }
    if let failure = final.1, let since = final.2, ContinuousClock.now - since > failureGracePeriod
    {
      throw CLIError(
        kind: .failure,
        message: "Stopped following the store: \(failure) (still failing after 5 seconds)")
    }
  }
}
