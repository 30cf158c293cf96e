import Observation
import Synchronization

/// Follows a store's persistent history: ``eventCounter`` goes up when new transactions
/// arrive, from this process or another one writing the same file, filtered by authors and
/// model types. SwiftData's `HistoryObserver`.
///
/// Observe the counter, then fetch history after the last token you processed:
///
/// ```swift
/// let observer = try HistoryObserver(container: container, authors: ["app"])
/// token = withContinuousObservation { [weak self] in
///   _ = observer.eventCounter
///   self?.processChanges()   // context.fetchHistory(HistoryDescriptor(after: lastToken)) …
/// }
/// ```
///
/// Cost: O(1) per transaction (the filter checks author and entity names).
public final class HistoryObserver: Observable, Sendable {
  private let registrar = ObservationRegistrar()
  private let counter = Mutex(0)
  private let authors: Set<String>?
  private let excludedAuthors: Set<String>
  private let entityNames: Set<String>?
  private let subscription = Mutex<ChangeBroadcaster.Subscription?>(nil)
  private let monitorLease = Mutex<ChangeBroadcaster.Subscription?>(nil)
  /// The container whose store the observer follows.
  public let modelContainer: ModelContainer
  /// The models whose changes are counted; empty for all.
  public let observedModels: [any PersistentModel.Type]

  /// Starts following `container`'s store.
  ///
  /// - Parameters:
  ///   - container: The store to follow.
  ///   - authors: Count only transactions by these authors; nil for all.
  ///   - excludedAuthors: Do not count transactions by these authors.
  ///   - modelTypes: Count only transactions that change these models; nil for all.
  public init(
    container: ModelContainer, authors: Set<String>? = nil, excludedAuthors: Set<String> = [],
    modelTypes: [any PersistentModel.Type]? = nil
  ) throws {
    self.authors = authors
    self.excludedAuthors = excludedAuthors
    self.modelContainer = container
    self.observedModels = modelTypes ?? []
    self.entityNames = modelTypes.map { Set($0.map { $0.entityName }) }
    let subscription = container.broadcaster.subscribe { [weak self] change in
      self?.receive(change)
    }
    self.subscription.withLock { $0 = subscription }
    if container.configuration.storeURL != nil {
      let lease = try container.broadcaster.leaseMonitor(for: container)
      monitorLease.withLock { $0 = lease }
    }
  }

  /// Starts following `modelContainer`'s store, as SwiftData's `HistoryObserver`.
  ///
  /// - Parameters:
  ///   - historyTokens: Where each store's history was last read, by store identifier
  ///     (``DefaultHistoryTransaction/storeIdentifier``, in any case). When this store's is given, the
  ///     matching transactions already after it are counted at once; nil or no entry for this
  ///     store counts only what commits from now on.
  ///   - observedModels: Count only transactions that change these models; empty for all.
  ///   - authors: Count only transactions by these authors; empty for all.
  ///   - modelContainer: The store to follow.
  ///   - isolation: Accepted as SwiftData's; the counter is safe to read from any isolation.
  ///
  /// Cost: with a token, one history read after it (O(transactions after it)); then as
  /// ``init(container:authors:excludedAuthors:modelTypes:)``.
  ///
  /// - Throws: a token of another store, expired or unknown: as ``ModelContext/fetchHistory(_:)``.
  public convenience init(
    historyTokens: [String: any HistoryToken]? = nil,
    observedModels: [any PersistentModel.Type] = [], authors: Set<String> = [],
    modelContainer: ModelContainer, isolation: isolated (any Actor)? = #isolation
  ) throws {
    let modelTypes = observedModels.isEmpty ? nil : observedModels
    try self.init(
      container: modelContainer, authors: authors.isEmpty ? nil : authors, modelTypes: modelTypes)
    let store = modelContainer.storeIdentifier.uuidString
    guard
      let given = historyTokens?.first(where: {
        $0.key.caseInsensitiveCompare(store) == .orderedSame
      })?.value
    else { return }
    guard let token = given as? DefaultHistoryToken else {
      throw PersistenceError(
        code: .historyTokenForeign,
        message:
          "The history token \(given) is not one of this store's (a DefaultHistoryToken); this store is \(modelContainer.storeIdentifier)."
      )
    }
    let waiting = try ModelContext(modelContainer).fetchHistory(
      HistoryDescriptor(
        after: token, authors: authors.isEmpty ? nil : authors, modelTypes: modelTypes)
    ).count
    counter.withLock { $0 += waiting }
  }

  /// How many matching transactions have arrived since the observer was made (with those
  /// waiting after the token it was given, if any).
  public var eventCounter: Int {
    registrar.access(self, keyPath: \.eventCounter)
    return counter.withLock { $0 }
  }

  private func receive(_ change: StoreChange) {
    if !change.requiresRefetch {
      if let authors, !authors.contains(change.author ?? "") { return }
      if let author = change.author, excludedAuthors.contains(author) { return }
      if let entityNames, !change.entities.keys.contains(where: entityNames.contains) { return }
    }
    // Counted before observers hear of it, so they read the new value even at willSet.
    counter.withLock { $0 += 1 }
    registrar.withMutation(of: self, keyPath: \.eventCounter) {}
  }
}
