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
  public var token: HistoryToken
  /// The author of the context that saved.
  public var author: String?
  /// Changes by entity (table) name.
  public var entities: [String: EntityChanges]
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
