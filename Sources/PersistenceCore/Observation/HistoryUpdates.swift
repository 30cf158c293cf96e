import Dispatch
import Foundation
import Synchronization

extension ModelContainer {
  /// The transactions after `descriptor.token` that match it (predicate, authors, excluded
  /// authors, model types), as an asynchronous sequence: first those already in history, then each new one as
  /// it is committed, from this process or another one writing the same file. The Swift 6 way
  /// to follow history from a task or an actor: no context crosses a concurrency boundary.
  ///
  /// ```swift
  /// for try await transaction in container.historyUpdates(HistoryDescriptor(after: last)) {
  ///   last = transaction.token   // apply it, remember the token
  /// }
  /// ```
  ///
  /// The sequence ends with ``PersistenceError/Code/historyTokenExpired`` when the token's
  /// history was deleted (take a full copy, then follow from ``ModelContext/currentHistoryToken()``),
  /// and when the store cannot be read. It stops following when the task iterating it is
  /// cancelled or the sequence is released.
  ///
  /// A `fetchLimit` is the size of a page: each commit delivers everything new, a page at a
  /// time. A negative one ends the sequence with ``PersistenceError/Code/invalidValue``.
  ///
  /// Cost: after each commit, one history query after the last token read (delivered or
  /// left out by the descriptor), O(new transactions + their changes), and one read of the
  /// newest token; nothing per transaction already read.
  public func historyUpdates(
    _ descriptor: HistoryDescriptor<DefaultHistoryTransaction> = HistoryDescriptor()
  )
    -> AsyncThrowingStream<DefaultHistoryTransaction, any Error>
  {
    AsyncThrowingStream { continuation in
      let plan = HistoryQueryPlan(descriptor)
      guard plan.sortInSQL, !plan.newestFirst else {
        continuation.finish(
          throwing: PersistenceError(
            code: .unsupportedPredicate,
            message:
              "historyUpdates delivers transactions as they commit, oldest first: its descriptor cannot sort otherwise."
          ))
        return
      }
      let queue = DispatchQueue(label: "persistence.history-updates")
      let context = UncheckedSendable(ModelContext(self))
      let last = Mutex<DefaultHistoryToken?>(descriptor.token)
      let finished = Atomic<Bool>(false)
      /// Delivers what is new, on the queue (one reader at a time, in token order).
      let drain: @Sendable () -> Void = {
        queue.async {
          guard !finished.load(ordering: .relaxed) else { return }
          do {
            while true {
              var query = descriptor
              query.token = last.withLock { $0 }
              // The matches and the newest token read in one snapshot: every transaction up
              // to that token was scanned, so a filter's misses are not read again.
              let (transactions, scanned) = try context.value.withSnapshot {
                (
                  try context.value.fetchHistory(query),
                  try context.value.currentHistoryToken()
                )
              }
              for transaction in transactions {
                continuation.yield(transaction)
                last.withLock { $0 = transaction.token }
              }
              // A full page (`fetchLimit`): more may be waiting; read on.
              if let limit = descriptor.fetchLimit, limit > 0, transactions.count == limit {
                continue
              }
              last.withLock { token in
                if (token?.value ?? 0) < scanned.value { token = scanned }
              }
              break
            }
          } catch {
            finished.store(true, ordering: .relaxed)
            continuation.finish(throwing: error)
          }
        }
      }
      let subscription = broadcaster.subscribe { change in
        // A failure of the monitor is reported by the next read; everything else may be new.
        if change.failure == nil { drain() }
      }
      var lease: ChangeBroadcaster.Subscription?
      if configuration.storeURL != nil {
        do {
          lease = try broadcaster.leaseMonitor(for: self)
        } catch {
          subscription.cancel()
          continuation.finish(throwing: error)
          return
        }
      }
      continuation.onTermination = { [lease] _ in
        finished.store(true, ordering: .relaxed)
        subscription.cancel()
        lease?.cancel()
      }
      drain()
    }
  }
}
