import Foundation

// SAFETY: `resource` is only reached inside `use`, under `lock`, so one thread at a time uses
// it; the resource is never handed out of the closure by the types that hold an Exclusive.
/// A resource used by one caller at a time for the whole of its use, I/O included: a store's
/// transaction, a state file's read-modify-write, a push. Callers wait their turn.
///
/// The project keeps two kinds of lock apart, by type:
/// - A `Mutex` (`withLock`) guards state that is read and written in O(1). Nothing under it
///   waits on a store, a file or the network (`Tools/lock-discipline.py` checks every
///   `withLock` closure in `Sources`).
/// - An `Exclusive` (``use(_:)``) serialises work on a resource, I/O included. It may be held
///   while a `Mutex` is taken, never the other way round.
///
/// **Lock order.** Where one piece of work takes several, it takes them in this order and
/// releases them in the reverse:
/// 1. `ServerSync`'s push or pull turn (`pushing`, `pulling`: one push and one pull at a time;
///    a push and a pull may overlap), held across the HTTP calls;
/// 2. the local store (`ServerSync.store`, `StoreSync.stores`), for one read or one apply,
///    never across an HTTP call;
/// 3. the state file (`stateFile`), for one read or one read-modify-write;
/// 4. any `Mutex`.
///
/// Cost: an uncontended `use` is a lock and an unlock (tens of nanoseconds).
final class Exclusive<Resource>: @unchecked Sendable {
  private let lock = NSLock()
  private var resource: Resource

  /// An exclusive over `resource`, which it owns from now on.
  init(_ resource: Resource) { self.resource = resource }

  /// Runs `body` with the resource, after any caller using it now is done.
  func use<Result>(_ body: (inout Resource) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&resource)
  }
}
