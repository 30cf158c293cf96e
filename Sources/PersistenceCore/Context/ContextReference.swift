import Foundation

/// A context as links reach it: one weak reference a context, made once, that the links of
/// its models hold strongly (see ``RelationshipObservation/contextReference``). It reads as nil
/// once the context is gone, as a weak reference of each link's would; a link that must then
/// load a fault traps, naming its model and relationship, rather than read as empty.
///
/// Or, for the snapshots a ``ResultsObserver`` hands out (``snapshots``): the source their
/// relationships are loaded from, kept as long as any of them lives.
final class ContextReference {
  weak var context: ModelContext?
  /// Set for the models of an observer: no context, but a source for their relationships.
  let snapshots: SnapshotSource?
  /// Why a link of this reference cannot load when its context is nil; nil when it need not
  /// (a deleted model's: it answers what is in memory).
  let whyNone: String?
  /// Whether the models that hold the reference were deleted from the store (and saved).
  let isDeletedModel: Bool
  /// The store of the models that hold the reference: what names their rows
  /// (``LinksOnFirstUse/persistentModelID``) after their context is gone.
  let storeIdentifier: UUID

  init(_ context: ModelContext) {
    self.context = context
    snapshots = nil
    isDeletedModel = false
    storeIdentifier = context.container.storeIdentifier
    whyNone =
      "its context is gone. Keep the context for as long as its models' relationships are read, or load them with the fetch (FetchDescriptor.relationshipKeyPathsForPrefetching)"
  }

  init(snapshots: SnapshotSource) {
    context = nil
    self.snapshots = snapshots
    storeIdentifier = snapshots.container.storeIdentifier
    whyNone = "its observer's store is gone"
    isDeletedModel = false
  }

  private init(storeIdentifier: UUID, whyNone: String?, isDeletedModel: Bool = false) {
    context = nil
    snapshots = nil
    self.storeIdentifier = storeIdentifier
    self.whyNone = whyNone
    self.isDeletedModel = isDeletedModel
  }

  /// What the models of a context reset (``ModelContext/reset()``) hold: they are detached
  /// values, whose relationships (made faults again by the reset's rollback) cannot be read.
  static func reset(of storeIdentifier: UUID) -> ContextReference {
    ContextReference(
      storeIdentifier: storeIdentifier,
      whyNone:
        "its context was reset (ModelContext.reset()), which detached the model; fetch it again to read its relationships"
    )
  }

  /// What a model deleted from the store holds: no context; its relationships answer what is
  /// in memory. Such a model is not inserted again (its row is gone, its identity with it).
  static func deleted(from storeIdentifier: UUID) -> ContextReference {
    ContextReference(storeIdentifier: storeIdentifier, whyNone: nil, isDeletedModel: true)
  }
}

/// Where the relationships of an observer's models are loaded from: the container, through a
/// context made for each load (its connection comes from the container's idle ones), under a
/// lock, since those models are read from any thread. The related models loaded become
/// snapshots of the same source: their relationships load the same way. No model is kept
/// here, so nothing keeps a cycle alive.
///
/// Cost: a relationship's first read is one query (as in a context), plus taking the lock;
/// later reads O(1) under the lock. What is read is the store as it is at that first read,
/// not as it was when the observer loaded the model.
final class SnapshotSource: Sendable {
  let container: ModelContainer
  /// Held while a snapshot's link is read or loaded.
  let lock = NSRecursiveLock()

  init(container: ModelContainer) { self.container = container }
}
