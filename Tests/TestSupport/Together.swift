import Foundation

/// Runs `body(0)` … `body(count - 1)`, each on a thread of its own, and returns when all are
/// done.
///
/// For tests that start threads together (a spin until every one has arrived):
/// `DispatchQueue.concurrentPerform` may run several iterations on one worker thread when the
/// machine is busy (the suite runs tests in parallel), and an iteration spinning for another
/// on its own thread then never ends. Threads of their own always run.
public func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
  let group = DispatchGroup()
  for index in 0..<count {
    group.enter()
    let thread = Thread {
      body(index)
      group.leave()
    }
    thread.start()
  }
  group.wait()
}
