internal import CMicroHTTPD
import Foundation

// SAFETY: every mutable property is read and written only while `condition` is locked.
/// Threads of their own for requests that may be slow (a filter, a search, a write), apart from
/// the threads that accept and answer connections, so that a slow request never holds up a
/// fast one: a fixed number of threads, at a lower scheduling priority than those (nice 5: on
/// a busy machine the fast requests get the processors first), and a bounded queue. A job the
/// pool has no room for is refused at once (the server answers 503 with `Retry-After`).
///
/// Cost: O(1) to submit or refuse; memory for `threads` stacks and `queue` waiting jobs.
final class WorkerPool: @unchecked Sendable {
  typealias Job = @Sendable () -> Void
  private let condition = NSCondition()
  /// Guarded by `condition`.
  private var jobs: [Job] = []
  private var running = 0
  private var stopping = false
  private var alive = 0
  let threads: Int
  let queue: Int

  init(threads: Int, queue: Int) {
    self.threads = max(1, threads)
    self.queue = max(0, queue)
    for index in 0..<self.threads {
      let thread = Thread { [self] in work() }
      thread.name = "trips-worker-\(index)"
      thread.stackSize = 8 << 20
      thread.start()
    }
  }

  /// Jobs promised a place (``reserve()``) and not yet submitted. Guarded by `condition`.
  private var reserved = 0

  /// Promises a place to one job, to be given with ``submit(_:)``; false at once when every
  /// thread is busy and the queue is full (or the pool is stopping).
  func reserve() -> Bool {
    condition.lock()
    defer { condition.unlock() }
    guard !stopping, running + jobs.count + reserved < threads + queue else { return false }
    reserved += 1
    return true
  }

  /// Runs `job`, given the place ``reserve()`` promised, on a thread of the pool.
  func submit(_ job: @escaping Job) {
    condition.lock()
    defer { condition.unlock() }
    reserved -= 1
    jobs.append(job)
    condition.signal()
  }

  /// Lets the threads end once the queue is empty (they run what was submitted).
  func stop() {
    condition.lock()
    stopping = true
    condition.broadcast()
    condition.unlock()
  }

  private func work() {
    trips_thread_nice(5)
    condition.lock()
    alive += 1
    while true {
      while jobs.isEmpty && !stopping { condition.wait() }
      if jobs.isEmpty && stopping { break }
      let job = jobs.removeFirst()
      running += 1
      condition.unlock()
      job()
      condition.lock()
      running -= 1
    }
    alive -= 1
    condition.unlock()
  }
}
