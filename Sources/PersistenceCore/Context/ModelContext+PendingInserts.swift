import Foundation

// Fetches that include the models inserted and not yet saved (FetchDescriptor's
// `includePendingChanges`, as SwiftData's).

extension ModelContext {
  /// The models of `Model` inserted in this context and not saved that match `descriptor`'s
  /// predicates (evaluated in Swift; one whose evaluation throws is no match, as SQL's `NULL`
  /// is), in the descriptor's order (insertion order among ties); empty when the descriptor
  /// leaves them out.
  ///
  /// Cost: O(unsaved inserts), plus a predicate evaluation per inserted `Model`.
  ///
  /// - Throws: ``PersistenceError/Code/unsupportedPredicate`` for a predicate with integer
  ///   arithmetic, which Swift cannot evaluate without the risk of a trap (an overflow, a
  ///   division by zero) where SQL answers: save first, or leave unsaved inserts out.
  func pendingInserts<Model: PersistentModel>(matching descriptor: FetchDescriptor<Model>)
    throws -> [Model]
  {
    guard descriptor.includePendingChanges, !pendingInserts.isEmpty else { return [] }
    var candidates: [Model] = []
    for registration in pendingInserts where !registration.isDeleted {
      if let model = registration.model as? Model { candidates.append(model) }
    }
    guard !candidates.isEmpty else { return [] }
    let predicates = (descriptor.predicate.map { [$0] } ?? []) + descriptor.conditions
    if predicates.contains(where: { ArithmeticWalk.finds(in: $0.expression) }) {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "The predicate on \(Model.self) computes with numbers, which Swift cannot evaluate on the context's unsaved inserts without the risk of stopping the program (an overflow, a division by zero) where SQL answers. Save first, or set includePendingChanges to false."
      )
    }
    let matching = candidates.filter { (try? descriptor.matches($0)) == true }
    guard !descriptor.sortBy.isEmpty, matching.count > 1 else { return matching }
    // Insertion order breaks ties.
    return matching.enumerated().sorted { a, b in
      descriptor.precedes(a.element, Int64(a.offset), b.element, Int64(b.offset))
    }.map(\.element)
  }

  /// `stored`, the window's stored models in the store's order, merged with the unsaved
  /// `inserted` ones (already in the descriptor's order): an inserted model goes before the
  /// first stored one it precedes by the descriptor's sorts (after every one it ties with;
  /// after them all without a sort). The stored ones keep their order, whatever unsaved
  /// changes they have. Then the descriptor's window.
  ///
  /// Cost: O(stored + inserted) comparisons by the descriptor's sorts.
  func merged<Model: PersistentModel, Element>(
    _ stored: [(element: Element, model: Model?)], _ inserted: [(element: Element, model: Model)],
    _ descriptor: FetchDescriptor<Model>
  ) -> [Element] {
    var merged: [Element] = []
    merged.reserveCapacity(stored.count + inserted.count)
    var next = 0
    for entry in stored {
      if let model = entry.model, !descriptor.sortBy.isEmpty {
        while next < inserted.count,
          descriptor.precedes(inserted[next].model, 0, model, 1)
        {
          merged.append(inserted[next].element)
          next += 1
        }
      }
      merged.append(entry.element)
    }
    merged += inserted[next...].map(\.element)
    let offset = min(max(descriptor.fetchOffset ?? 0, 0), merged.count)
    var window = Array(merged[offset...])
    if let limit = descriptor.fetchLimit, limit >= 0, window.count > limit {
      window.removeLast(window.count - limit)
    }
    return window
  }

  /// The descriptor of the stored models a merge needs: unsaved inserts left out, the window
  /// widened to its end (none past it can be inside it).
  func widenedForMerge<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>)
    -> FetchDescriptor<Model>
  {
    var widened = descriptor
    widened.includePendingChanges = false
    widened.fetchOffset = nil
    if let limit = descriptor.fetchLimit, limit >= 0 {
      let (end, overflow) = max(descriptor.fetchOffset ?? 0, 0).addingReportingOverflow(limit)
      widened.fetchLimit = overflow ? nil : end
    } else {
      widened.fetchLimit = nil
    }
    return widened
  }

  /// `descriptor`'s stored models merged with the unsaved `inserted` ones (see
  /// ``merged(_:_:_:)``).
  ///
  /// Cost: the fetch of the stored models up to the window's end, then the merge.
  func merging<Model: PersistentModel>(
    _ inserted: [Model], into descriptor: FetchDescriptor<Model>
  ) throws -> [Model] {
    let stored = try fetch(widenedForMerge(descriptor))
    return merged(
      stored.map { ($0, $0) }, inserted.map { ($0, $0) }, descriptor)
  }
}

/// Whether a predicate computes with integers (`+`, `-`, `*`, `/`, `%`, unary minus), which
/// Swift's evaluation traps on where it overflows or divides by zero. O(nodes), by reflection.
enum ArithmeticWalk {
  static func finds(in node: Any) -> Bool {
    if node is any TrappingArithmetic { return true }
    return Mirror(reflecting: node).children.contains { finds(in: $0.value) }
  }
}

/// A predicate node whose evaluation may trap.
protocol TrappingArithmetic {}
extension PredicateExpressions.Arithmetic: TrappingArithmetic {}
extension PredicateExpressions.IntDivision: TrappingArithmetic {}
extension PredicateExpressions.IntRemainder: TrappingArithmetic {}
extension PredicateExpressions.UnaryMinus: TrappingArithmetic {}
