import Dispatch
import Foundation
import Persistence
import Synchronization
import TripPlanner

/// `trips watch`: a bounds report now, then after every change from any process.
enum WatchCommand: Subcommand {
  static var spec: CommandSpec {
    CommandSpec(
      name: "watch",
      abstract:
        "Prints the bounds report as a JSON line now, then after every change to the trips.",
      discussion:
        "Changes from any process writing the store are seen. Stops with exit 0 on Ctrl-C (SIGINT) or after --count reports.",
      options: CommonOptions.filters + [
        BoundsCommand.crs, BoundsCommand.viewport,
        OptionSpec(
          name: "count", valueName: "n", help: "Stop after n reports (the first one included)."),
        CommonOptions.store,
      ])
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let query = try CommonOptions.query(arguments)
    let limit = try arguments.value("count").map { try CommonOptions.count($0, option: "count") }
    if limit == 0 { return }
    let (projection, viewport) = try BoundsCommand.options(arguments)
    let store = try CommonOptions.openForWriting(arguments, io)
    let controller = try BoundsController(
      container: store.container, query: query, crs: projection.crs, viewport: viewport)

    let done = DispatchSemaphore(value: 0)
    signal(SIGINT, SIG_IGN)
    let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    interrupt.setEventHandler { done.signal() }
    interrupt.resume()

    let printed = Mutex<(count: Int, last: BoundsReport?)>((0, nil))
    let output = io.out
    let token = withContinuousObservation {
      let report = controller.report
      let finished = printed.withLock { state -> Bool in
        guard state.last != report, limit.map({ state.count < $0 }) ?? true else { return false }
        state.last = report
        state.count += 1
        output(report.json.rendered() + "\n")
        return limit.map { state.count >= $0 } ?? false
      }
      if finished { done.signal() }
    }
    withExtendedLifetime(controller) { done.wait() }
    token.cancel()
    interrupt.cancel()
  }
}
