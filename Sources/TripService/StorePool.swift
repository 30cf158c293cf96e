import Foundation
import Persistence
import Synchronization
import TripPlanner

/// Trip stores for the server's threads: each request borrows one (its own context and
/// connection), and gives it back reset, so that no context's identity map grows with the
/// rows it has served. At most one store per thread that ever ran at once is kept.
final class StorePool: Sendable {
  let container: ModelContainer
  private let idle = Mutex<[StoreBox]>([])

  // SAFETY: a box is in the pool (behind `idle`'s mutex) or taken by exactly one request, which
  // alone uses its store until it gives the box back.
  /// A store is used by one thread at a time (it is taken from the pool, then put back).
  final class StoreBox: @unchecked Sendable {
    let store: TripStore
    init(_ store: TripStore) { self.store = store }
  }

  init(container: ModelContainer) { self.container = container }

  /// Runs `body` with a store whose saves are recorded under `author`. Cost: O(1) to borrow;
  /// the reset afterwards is O(models the request touched).
  func withStore<T>(author: String, _ body: (TripStore) throws -> T) throws -> T {
    let box = idle.withLock { $0.popLast() } ?? StoreBox(TripStore(container: container))
    defer {
      box.store.context.reset()
      idle.withLock { $0.append(box) }
    }
    box.store.context.author = author
    return try body(box.store)
  }
}
