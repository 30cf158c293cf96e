import Foundation
import Synchronization

/// Notices commits made by other processes (and other connections) to a store file, reads
/// what they changed from persistent history, and posts it to the container's observers.
///
/// It reads its connection's ``StoreConnection/externalChangeCounter()`` (SQLite's
/// `PRAGMA data_version`: a read of shared memory that changes only when another connection
/// commits) after each ``StoreConnection/waitForExternalChange(timeout:)``: every ``interval``
/// for SQLite, which polls; when told of a commit for PostgreSQL, whose writers `NOTIFY` and
/// whose monitor `LISTEN`s (at least once a second). On a change it fetches
/// the history after the last token it saw; transactions this process already announced are
/// skipped. Cost per poll: O(1); per foreign commit: O(changes in it).
///
/// When the store cannot be read (it was damaged, deleted or made unreadable), the monitor
/// tells the observers (their `lastError`), and polls less often, doubling the wait up to
/// ``maximumInterval``; when it can read again it says so and catches up from its last token,
/// missing nothing.
///
/// One monitor runs per container while any observer holds a lease on it.
final class StoreMonitor: Sendable {
  /// How often to poll.
  static let interval: Duration = .milliseconds(5)
  /// The longest wait between polls while the store cannot be read.
  static let maximumInterval: Duration = .seconds(1)

  /// Set to stop the polling thread.
  final class StopFlag: Sendable {
    let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
  }
  private let stopped = StopFlag()

  /// Starts polling on a thread of its own.
  init(container: ModelContainer) throws {
    let context = ModelContext(container)
    let start = try context.currentHistoryToken()
    let box = UncheckedSendable((context, start))
    let thread = Thread { [stopped] in
      let (context, start) = box.value
      Self.run(context: context, from: start, stopped: stopped)
    }
    thread.name = "persistence.store-monitor"
    thread.start()
  }

  /// Stops polling.
  func stop() { stopped.value.store(true, ordering: .sequentiallyConsistent) }

  private static func run(context: ModelContext, from start: DefaultHistoryToken, stopped: StopFlag)
  {
    let container = context.container
    var lastToken = start
    var lastVersion: Int64?
    var failing: PersistenceError?
    var wait = interval
    while !stopped.isSet {
      do {
        let database = try context.connection()
        let version = try database.externalChangeCounter()
        if version != lastVersion || failing != nil {
          lastToken = try deliver(after: lastToken, context: context, container: container)
          lastVersion = version
        }
        if failing != nil {
          failing = nil
          container.broadcaster.postFailure(nil, token: lastToken)
        }
        wait = interval
      } catch let error as PersistenceError where error.code == .historyTokenExpired {
        // History this monitor had not read was deleted: observers must refetch.
        container.broadcaster.post(
          StoreChange(token: lastToken, author: nil, entities: [:], requiresRefetch: true))
        lastToken = (try? context.currentHistoryToken()) ?? lastToken
      } catch {
        // The store cannot be read: say so once per distinct error, and back off.
        let failure =
          error as? PersistenceError
          ?? PersistenceError(code: .engine, message: "\(error)")
        if failing?.description != failure.description {
          container.broadcaster.postFailure(failure, token: lastToken)
        }
        failing = failure
        wait = min(wait * 2, maximumInterval)
      }
      if let database = try? context.connection() {
        database.waitForExternalChange(timeout: wait)
      } else {
        Thread.sleep(
          forTimeInterval: Double(wait.components.attoseconds) / 1e18
            + Double(wait.components.seconds))
      }
    }
  }

  /// Posts the transactions after `token` that this process did not announce itself.
  private static func deliver(
    after token: DefaultHistoryToken, context: ModelContext, container: ModelContainer
  ) throws -> DefaultHistoryToken {
    var last = token
    for transaction in try context.fetchHistory(HistoryDescriptor(after: token)) {
      last = transaction.token
      guard container.broadcaster.claimForeign(transaction.token.value) else { continue }
      var entities: [String: StoreChange.EntityChanges] = [:]
      for change in transaction.changes {
        let key = change.changedPersistentIdentifier.primaryKey
        let name = change.changedPersistentIdentifier.entityName
        switch change.kind {
        case .insert: entities[name, default: .init()].inserted.insert(key)
        case .update: entities[name, default: .init()].updated[key] = change.updatedAttributeNames
        case .delete: entities[name, default: .init()].deleted.insert(key)
        }
      }
      container.broadcaster.post(
        StoreChange(token: transaction.token, author: transaction.author, entities: entities))
    }
    return last
  }
}
