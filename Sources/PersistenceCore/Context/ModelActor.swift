import Dispatch
import Foundation

/// What runs a ``ModelActor``'s code: it owns the actor's context and runs the actor's jobs
/// one at a time, so that the context, which is not `Sendable`, is only ever used by one job.
/// SwiftData's `ModelExecutor`.
public protocol ModelExecutor: AnyObject, Sendable {
  /// The context the actor's code uses.
  var modelContext: ModelContext { get }
}

/// The executor ``ModelActor()`` gives an actor: a serial queue of its own, and the context
/// made for the actor. SwiftData's `DefaultSerialModelExecutor`.
///
/// Cost: a call into the actor from outside it is one enqueue on a dispatch queue and a switch
/// to the queue's thread; calls within the actor run at once. The context's connection to the
/// store is taken on its first query, as any context's.
public final class DefaultSerialModelExecutor: ModelExecutor, SerialExecutor, @unchecked Sendable {
  // Sendable by confinement: the context is used only by jobs this executor runs, one at a
  // time, on its queue.
  /// The context the actor's code uses; read it only from the actor.
  public let modelContext: ModelContext
  private let queue: DispatchQueue

  /// An executor for `modelContext`, with a serial queue of its own.
  public init(modelContext: ModelContext) {
    self.modelContext = modelContext
    queue = DispatchQueue(label: "ModelActor")
  }

  /// Runs `job` on the executor's queue, after the jobs enqueued before it.
  public func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    let executor = asUnownedSerialExecutor()
    queue.async { unowned.runSynchronously(on: executor) }
  }

  /// This executor, as the actor's.
  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  /// Traps unless called from a job of this executor (what `assumeIsolated` asks).
  public func checkIsolated() {
    dispatchPrecondition(condition: .onQueue(queue))
  }
}

/// An actor that works with models off the main actor, on a context of its own: SwiftData's
/// `ModelActor`, which ``ModelActor()`` declares for an actor.
///
/// Models are not `Sendable` and stay in the actor; what crosses in and out is
/// `PersistentIdentifier`s and values. Inside, ``modelContext`` fetches, inserts and saves as
/// any context, and `self[id, as: Trip.self]` finds a model by its identifier.
///
/// ```swift
/// @ModelActor actor Importer {
///   func add(_ names: [String]) throws -> [PersistentIdentifier] {
///     let trips = names.map { Trip(name: $0) }
///     for trip in trips { modelContext.insert(trip) }
///     try modelContext.save()
///     return trips.map(\.persistentModelID)
///   }
/// }
/// ```
public protocol ModelActor: Actor {
  /// The container of the actor's context.
  nonisolated var modelContainer: ModelContainer { get }
  /// What runs the actor's code, and holds its context.
  nonisolated var modelExecutor: any ModelExecutor { get }
}

extension ModelActor {
  /// The actor's executor: its ``modelExecutor``, which must be a `SerialExecutor` (as
  /// ``DefaultSerialModelExecutor`` is).
  public nonisolated var unownedExecutor: UnownedSerialExecutor {
    guard let serial = modelExecutor as? any SerialExecutor else {
      preconditionFailure(
        "The modelExecutor of \(Self.self) is not a SerialExecutor; an actor runs on a serial executor (DefaultSerialModelExecutor)."
      )
    }
    return serial.asUnownedSerialExecutor()
  }

  /// The actor's context, made with the actor: use it only inside the actor.
  public var modelContext: ModelContext { modelExecutor.modelContext }

  /// The model with `id` in the actor's context: the registered instance, or loaded from the
  /// store; nil when no such row exists, when `id` names another model type or another store,
  /// or when the store cannot be read (``ModelContext/model(for:as:)`` says why).
  ///
  /// Cost: O(1) for a registered model; else one query by primary key.
  public subscript<T: PersistentModel>(id: PersistentIdentifier, as _: T.Type) -> T? {
    try? modelContext.model(for: id, as: T.self)
  }
}
