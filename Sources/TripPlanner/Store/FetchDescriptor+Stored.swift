import Persistence

extension FetchDescriptor {
  /// The descriptor, reading stored models only (`includePendingChanges` false): what the
  /// store's reads and a sync's lookups want, since the store saves each change at once and a
  /// feed applied in one transaction tracks its own unsaved inserts (a fetch that included
  /// them would evaluate its predicate on each of them in Swift).
  var storedOnly: Self {
    var stored = self
    stored.includePendingChanges = false
    return stored
  }
}
