internal import CLibPQ
import Foundation
import PersistenceCore
import Synchronization

/// Idle libpq sessions of one store, kept for the next connection: a new PostgreSQL session
/// costs a server process and milliseconds, while contexts come and go (one per request in a
/// server). At most ``limit`` are kept. A session given back is reset at once, without waiting
/// (as `DISCARD ALL`: settings, prepared statements, `LISTEN`s, then the session's settings again,
/// sent with `PQsendQuery`), and the answer is read when it is taken: the round trip is not on
/// anyone's path.
///
/// The pool owns the sessions it holds and finishes them (`PQfinish`) when full or when it
/// goes; a session taken belongs to its `Connection` until given back.
final class ConnectionPool: Sendable {
  // SAFETY: a session moves between threads only while idle, inside `idle`'s mutex; one
  // `Connection` uses it at a time.
  /// A libpq session handle, moved between threads only while idle (not in use by anyone).
  private struct Handle: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The settings its reset restores.
    let setup: String
  }
  private let idle = Mutex<[Handle]>([])
  /// The most idle sessions kept.
  let limit: Int
  /// What `DISCARD ALL` does, in commands that may share a query string (`DISCARD ALL` itself
  /// may not: a string of several commands runs as one transaction block).
  static let reset =
    "CLOSE ALL; RESET ALL; DEALLOCATE ALL; UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD SEQUENCES; DISCARD TEMP; "

  init(limit: Int = 8) { self.limit = limit }

  deinit {
    for handle in idle.withLock({ $0 }) { PQfinish(handle.pointer) }
  }

  /// An idle session reset with `setup`, or nil (a session whose reset failed is finished).
  func take(setup: String) -> OpaquePointer? {
    while let handle = idle.withLock({ $0.popLast() }) {
      if handle.setup == setup, finishReset(handle.pointer) { return handle.pointer }
      PQfinish(handle.pointer)
    }
    return nil
  }

  /// Keeps `handle` for the next connection, its reset to `setup` sent now, or finishes it when
  /// the pool is full.
  func give(_ handle: OpaquePointer, setup: String) {
    // Sent before the session is in the pool, where another thread may take it.
    guard PQsendQuery(handle, ConnectionPool.reset + setup) == 1 else { return PQfinish(handle) }
    let kept = idle.withLock { sessions in
      guard sessions.count < limit else { return false }
      sessions.append(Handle(pointer: handle, setup: setup))
      return true
    }
    if !kept { PQfinish(handle) }
  }

  /// Reads the answers to the reset sent by ``give(_:setup:)``; true when every part succeeded.
  private func finishReset(_ handle: OpaquePointer) -> Bool {
    var ok = true
    while let result = PQgetResult(handle) {
      let status = PQresultStatus(result)
      if status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK { ok = false }
      PQclear(result)
    }
    return ok && PQstatus(handle) == CONNECTION_OK
  }
}
