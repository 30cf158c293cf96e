import Synchronization

/// What one committed save changed, as the container tells its observers.
public struct StoreChange: Sendable {
  /// The rows one entity's table gained, changed and lost in a save.
  public struct EntityChanges: Sendable {
    /// Primary keys of inserted rows.
    public var inserted: Set<Int64> = []
    /// Primary keys of updated rows, with the names of the changed attributes.
    public var updated: [Int64: Set<String>] = [:]
    /// Primary keys of deleted rows.
    public var deleted: Set<Int64> = []

    /// Whether nothing changed.
    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
  }
  /// The history token of the save's transaction.
  public var token: DefaultHistoryToken
  /// The author of the context that saved.
  public var author: String?
  /// Changes by entity (table) name.
  public var entities: [String: EntityChanges]
  /// True when the changes are unknown (history was deleted before it could be read):
  /// observers must fetch again.
  public var requiresRefetch = false
  /// Set when following the store failed (another process's changes could not be read): the
  /// observers keep their results and show the error until the store can be read again.
  public var failure: PersistenceError?
  /// True when following the store works again after a ``failure``.
  public var recovered = false
}

/// Delivers ``StoreChange``s to subscribers, synchronously, on the thread that committed.
final class ChangeBroadcaster: Sendable {
  typealias Handler = @Sendable (StoreChange) -> Void
  private let handlers = Mutex<[Int: Handler]>([:])
  private let nextID = Atomic<Int>(0)

  /// Adds a handler; it stays subscribed while the returned subscription lives.
  func subscribe(_ handler: @escaping Handler) -> Subscription {
    let id = nextID.add(1, ordering: .relaxed).newValue
    handlers.withLock { $0[id] = handler }
    return Subscription { [weak self] in self?.handlers.withLock { _ = $0.removeValue(forKey: id) }
    }
  }

  /// Tokens announced by this process while a monitor runs, so the monitor skips them.
  private let announced = Mutex<Set<Int64>>([])
  private let monitorLeases = Mutex(Leases())

  /// The store monitor and its leases.
  private struct Leases {
    var count = 0
    var monitor: StoreMonitor?
    /// Monitors being made (outside the lock): while one is, announced tokens are kept, since
    /// it reads from a token taken before it is installed.
    var starting = 0
  }

  /// Records, before its commit, that this process announces `token` itself, so that a store
  /// monitor never posts it a second time: noted whether or not a monitor runs, since one may
  /// start between this call and the commit and read the commit as another process's.
  func noteAnnounced(_ token: Int64) {
    announced.withLock { _ = $0.insert(token) }
  }

  /// Called once the save has posted `token`: forgotten unless a monitor runs (which forgets
  /// it when it reads the commit, or when it stops).
  func settleAnnounced(_ token: Int64) {
    monitorLeases.withLock { state in
      if state.monitor == nil && state.starting == 0 { announced.withLock { _ = $0.remove(token) } }
    }
  }

  /// Forgets a token noted by ``noteAnnounced(_:)`` whose commit failed.
  func forgetAnnounced(_ token: Int64) {
    announced.withLock { _ = $0.remove(token) }
  }

  /// How many tokens are noted as announced by this process (for tests: none once every save
  /// has posted or failed, while no monitor runs).
  var announcedCount: Int { announced.withLock { $0.count } }

  /// True when `token` came from another process (or before this process's announcement was
  /// noted); false, and forgotten, when this process already announced it.
  func claimForeign(_ token: Int64) -> Bool {
    announced.withLock { $0.remove(token) == nil }
  }

  /// Keeps a store monitor running for `container` while the returned lease lives.
  ///
  /// A monitor is made (a connection, a history read, a thread) outside the lock; when two
  /// first leases make one at once, the first installed is kept and the other stopped.
  func leaseMonitor(for container: ModelContainer) throws -> Subscription {
    let running = monitorLeases.withLock { state in
      guard state.monitor != nil else {
        state.starting += 1
        return false
      }
      state.count += 1
      return true
    }
    if !running {
      let made: StoreMonitor
      do {
        made = try StoreMonitor(container: container)
      } catch {
        monitorLeases.withLock { state in
          state.starting -= 1
          if state.monitor == nil && state.starting == 0 { announced.withLock { $0.removeAll() } }
        }
        throw error
      }
      let surplus = monitorLeases.withLock { state -> StoreMonitor? in
        state.starting -= 1
        state.count += 1
        guard state.monitor == nil else { return made }
        state.monitor = made
        return nil
      }
      surplus?.stop()
    }
    return Subscription { [weak self] in
      self?.monitorLeases.withLock { state in
        state.count -= 1
        if state.count == 0 {
          state.monitor?.stop()
          state.monitor = nil
          // Tokens noted while it ran that it never read (committed before it started),
          // unless another monitor is being made, which may read them.
          if state.starting == 0 { self?.announced.withLock { $0.removeAll() } }
        }
      }
    }
  }

  /// Tells every handler that following the store failed (`error`) or works again (nil).
  func postFailure(_ error: PersistenceError?, token: DefaultHistoryToken) {
    post(
      StoreChange(
        token: token, author: nil, entities: [:], failure: error, recovered: error == nil))
  }

  /// Calls every handler with `change`. O(subscribers).
  func post(_ change: StoreChange) {
    let current = handlers.withLock { Array($0.values) }
    for handler in current { handler(change) }
  }

  /// Ends a subscription when released or cancelled.
  final class Subscription: Sendable {
    private let cancelAction: Mutex<(@Sendable () -> Void)?>
    init(_ cancel: @escaping @Sendable () -> Void) { cancelAction = Mutex(cancel) }
    func cancel() {
      let action = cancelAction.withLock { action in
        defer { action = nil }
        return action
      }
      action?()
    }
    deinit { cancel() }
  }
}
