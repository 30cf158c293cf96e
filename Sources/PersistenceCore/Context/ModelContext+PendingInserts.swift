import Foundation

// Fetches that include the models inserted and not yet saved (FetchDescriptor's
// `includePendingChanges`, as SwiftData's).

extension ModelContext {
  /// The models of `Model` inserted in this context and not saved that match `descriptor`'s
  /// predicates (evaluated in Swift), in insertion order; empty when the descriptor leaves
  /// them out. Cost: O(unsaved inserts), plus a predicate evaluation per inserted `Model`.
  func pendingInserts<Model: PersistentModel>(matching descriptor: FetchDescriptor<Model>)
    throws -> [Model]
  {
    guard descriptor.includePendingChanges, !pendingInserts.isEmpty else { return [] }
    var matching: [Model] = []
    for registration in pendingInserts where !registration.isDeleted {
      guard let model = registration.model as? Model else { continue }
      if try descriptor.matches(model) { matching.append(model) }
    }
    return matching
  }

  /// `descriptor`'s stored models merged with the unsaved `inserted` ones in the descriptor's
  /// order (an inserted model after the stored ones it ties with, inserted ones in insertion
  /// order), then its window applied. The stored ones are fetched with the window widened to
  /// its end: none past it can be inside it.
  ///
  /// Cost: the fetch of the stored models up to the window's end, then a sort of them with
  /// the inserted ones in Swift (O((n + k) log(n + k)) comparisons by the descriptor's sorts).
  func merging<Model: PersistentModel>(
    _ inserted: [Model], into descriptor: FetchDescriptor<Model>
  ) throws -> [Model] {
    var widened = descriptor
    widened.includePendingChanges = false
    widened.fetchOffset = nil
    if let limit = descriptor.fetchLimit {
      let (end, overflow) = (descriptor.fetchOffset ?? 0).addingReportingOverflow(limit)
      widened.fetchLimit = overflow ? nil : end
    }
    let stored = try fetch(widened)
    var entries: [(model: Model, order: Int64)] = []
    entries.reserveCapacity(stored.count + inserted.count)
    for model in stored {
      entries.append((model, registration(for: model)?.primaryKey ?? 0))
    }
    // After every stored row in a tie, in insertion order.
    for (index, model) in inserted.enumerated() {
      entries.append((model, Int64.max - Int64(inserted.count - index)))
    }
    if !descriptor.sortBy.isEmpty {
      entries.sort { a, b in descriptor.precedes(a.model, a.order, b.model, b.order) }
    }
    let offset = min(descriptor.fetchOffset ?? 0, entries.count)
    var window = entries[offset...].map(\.model)
    if let limit = descriptor.fetchLimit, window.count > limit {
      window.removeLast(window.count - limit)
    }
    return window
  }
}
