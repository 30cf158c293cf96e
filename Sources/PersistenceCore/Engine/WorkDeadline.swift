import Foundation
import Synchronization

/// A time limit for one piece of work (a server's request), and a way to tell it that no one
/// waits for its answer any more: the store checks both while it works and stops with
/// ``PersistenceError/Code/timedOut`` or ``PersistenceError/Code/abandoned``.
///
/// Where it is checked: SQLite's progress handler (every 1,000 virtual-machine steps, so a
/// query stops inside one long step, Swift functions of a predicate included); PostgreSQL's
/// `statement_timeout` (each statement, set to the limit on a connection that works under a
/// deadline) and between statements; the rows a query finishes in Swift. Code of one's own
/// calls ``checkCurrent()`` in its loops.
///
/// Put in force for the work on this thread (and the tasks it starts) with ``run(_:)``.
/// Cost: a check is one clock read; the `abandoned` probe runs at most every 100 ms.
public final class WorkDeadline: Sendable {
  /// The time the work was given.
  public let limit: Duration
  private let end: UInt64
  private let abandoned: (@Sendable () -> Bool)?
  private let nextProbe = Atomic<UInt64>(0)
  /// 0 while the work may go on, 1 past the limit, 2 abandoned.
  private let stopped = Atomic<Int>(0)

  /// A deadline `limit` from now; `abandoned` tells whether the work's client went away.
  public init(limit: Duration, abandoned: (@Sendable () -> Bool)? = nil) {
    self.limit = limit
    let (seconds, attoseconds) = limit.components
    let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds / 1_000_000_000)
    end = DispatchTime.now().uptimeNanoseconds &+ UInt64(nanoseconds)
    self.abandoned = abandoned
  }

  /// The deadline in force for the work on this thread, if any.
  @TaskLocal public static var current: WorkDeadline?

  /// Runs `body` with this deadline in force.
  public func run<T>(_ body: () throws -> T) rethrows -> T {
    try Self.$current.withValue(self, operation: body)
  }

  /// Whether the work should stop: past its limit, or abandoned by its client.
  public var shouldStop: Bool {
    if stopped.load(ordering: .relaxed) != 0 { return true }
    let now = DispatchTime.now().uptimeNanoseconds
    if now >= end {
      stopped.store(1, ordering: .relaxed)
      return true
    }
    if let abandoned, now >= nextProbe.load(ordering: .relaxed) {
      nextProbe.store(now + 100_000_000, ordering: .relaxed)
      if abandoned() {
        stopped.store(2, ordering: .relaxed)
        return true
      }
    }
    return false
  }

  /// Whether the work stopped because its client went away (not its limit).
  public var wasAbandoned: Bool { stopped.load(ordering: .relaxed) == 2 }

  /// Throws the reason to stop, if there is one.
  public func check() throws(PersistenceError) {
    if shouldStop { throw error }
  }

  /// Why the work stopped.
  public var error: PersistenceError {
    if wasAbandoned {
      return PersistenceError(
        code: .abandoned, message: "The work was stopped: no one waits for its answer any more.")
    }
    let (seconds, attoseconds) = limit.components
    let shown = Double(seconds) + Double(attoseconds) / 1e18
    return PersistenceError(
      code: .timedOut,
      message:
        "The work took longer than its limit of \(shown.formatted(.number.precision(.fractionLength(0...3)))) seconds and was stopped."
    )
  }

  /// Throws when the deadline in force says to stop (nothing without one).
  public static func checkCurrent() throws(PersistenceError) {
    try current?.check()
  }
}
