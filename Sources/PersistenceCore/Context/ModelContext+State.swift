import Foundation

// What a context says of its unsaved work, as SwiftData's `ModelContext` says it: the models
// inserted, changed and deleted, the save notifications, and a model's own `hasChanges` and
// `isDeleted`.

extension ModelContext {
  /// Posted on `NotificationCenter.default` when ``save()`` begins, with the context as the
  /// object: SwiftData's `ModelContext.willSave`. An observer runs on the saving thread.
  public static let willSave = Notification.Name("ModelContext.willSave")
  /// Posted on `NotificationCenter.default` when ``save()`` has committed, with the context
  /// as the object and the identifiers of the rows it inserted, updated and deleted in
  /// `userInfo` (``NotificationKey``): SwiftData's `ModelContext.didSave`. Posted by every save that
  /// succeeds, with empty lists when it wrote nothing. Building the lists costs O(changed rows) per save.
  public static let didSave = Notification.Name("ModelContext.didSave")

  /// The keys of ``didSave``'s `userInfo`, by their raw values: SwiftData's
  /// `ModelContext.NotificationKey`. Each value is a `[PersistentIdentifier]`.
  public enum NotificationKey: String, Sendable {
    /// The rows the save inserted (an insert that updated a row by its unique values is
    /// listed as an update).
    case insertedIdentifiers
    /// The rows the save updated, a delete rule's nullified rows among them.
    case updatedIdentifiers
    /// The rows the save deleted, cascades among them.
    case deletedIdentifiers
    /// SwiftData's query generation; never present here (there are no query generations).
    case queryGeneration
    /// SwiftData's "every identifier invalidated"; never present here.
    case invalidatedAllIdentifiers
  }

  /// The models inserted and not yet saved, in insertion order: SwiftData's
  /// `insertedModelsArray`. O(unsaved inserts).
  public var insertedModelsArray: [any PersistentModel] {
    pendingInserts.compactMap { registration in
      registration.isDeleted ? nil : registration.model as? any PersistentModel
    }
  }

  /// The saved models with unsaved changes: SwiftData's `changedModelsArray`. Deleted ones
  /// are not listed (they are in ``deletedModelsArray``).
  ///
  /// Cost: O(registered models × attributes): each registered model is compared with the
  /// values it was loaded with, as ``hasChanges`` and ``save()`` compare them.
  public var changedModelsArray: [any PersistentModel] {
    savedRegistrations.compactMap { registration in
      guard registration.primaryKey != nil, !registration.isDeleted,
        !registration.entity.changedIndexes(registration).isEmpty
      else { return nil }
      return registration.model as? any PersistentModel
    }
  }

  /// The saved models marked for deletion by ``delete(_:)``, or by
  /// ``delete(model:where:includeSubclasses:)`` where the model is registered: SwiftData's
  /// `deletedModelsArray`. Rows that `delete(model:where:)` marked without loading them (a
  /// table without subclasses, models not registered in this context) are deleted by the
  /// save but are not models here, so they are not listed. O(registered models).
  public var deletedModelsArray: [any PersistentModel] {
    savedRegistrations.compactMap { registration in
      registration.isDeleted ? registration.model as? any PersistentModel : nil
    }
  }

  /// SwiftData's `processPendingChanges()`, which groups changes for undo and sends change
  /// notifications. Here a context finds its changes when it saves and keeps no undo groups,
  /// so there is nothing to process: it returns at once.
  public func processPendingChanges() {}

  /// Whether `model` is registered in this context and marked for deletion. O(1) after the
  /// context's first lookup by model (see the type's costs).
  func isMarkedDeleted(_ model: AnyObject) -> Bool {
    registration(for: model)?.isDeleted ?? false
  }
}

extension LinksOnFirstUse {
  /// Whether the model has changes its context has not saved: inserted and not saved,
  /// changed since it was loaded or saved, or marked for deletion. SwiftData's `hasChanges`.
  /// False for a model in no context.
  ///
  /// Cost: O(attributes), to compare with the values it was loaded with; the context's first
  /// lookup by model indexes its registered models once.
  public var hasChanges: Bool {
    guard let context = modelContext else { return false }
    return context.insertedOrChanged(self) || context.isMarkedDeleted(self)
  }

  /// Whether the model is marked for deletion in its context and not yet saved: SwiftData's
  /// `isDeleted`. Once the deletion is saved the model is in no context, and false. O(1)
  /// after the context's first lookup by model.
  public var isDeleted: Bool { modelContext?.isMarkedDeleted(self) ?? false }
}

extension ModelContainer {
  /// The container's context for the main actor: SwiftData's `mainContext`. Made on first
  /// use, then the same context on every call, with ``ModelContext/autosaveEnabled`` on, as
  /// SwiftData's is (here that saves before each of its fetches; call ``ModelContext/save()``
  /// where the outcome matters).
  ///
  /// The container keeps its main context, and the context its container: once used, both
  /// live as long as the program, as an app's container does. A server, or anything that
  /// opens containers and lets them go, makes a ``ModelContext`` per task instead.
  @MainActor public var mainContext: ModelContext {
    if let context = mainContextStorage.context { return context }
    let context = ModelContext(self)
    context.autosaveEnabled = true
    mainContextStorage.context = context
    return context
  }
}

/// Where a container keeps its ``ModelContainer/mainContext``, on the main actor.
@MainActor final class MainContextStorage {
  var context: ModelContext?
  nonisolated init() {}
}

extension PersistentModel {
  /// The identifier of the model's row, as SwiftData's `persistentModelID` reads on any model,
  /// `any PersistentModel` included (`context.insertedModelsArray.map(\.persistentModelID)`):
  /// the ``LinksOnFirstUse/persistentModelID`` of a model whose class is ``LinksOnFirstUse``
  /// (every `@Model`). A hand-written model without a ``LinkOrigin`` cannot say where it is:
  /// it gets a temporary identifier; ask its context
  /// (``ModelContext/persistentIdentifier(for:)``). O(1), one dynamic cast.
  public var persistentModelID: PersistentIdentifier {
    if let linked = self as? any LinksOnFirstUse { return linked.persistentModelID }
    return PersistentIdentifier(temporaryFor: self, entityName: Self.schema.name)
  }

  /// The model's context, as SwiftData's `modelContext` reads on any model: the
  /// ``LinksOnFirstUse/modelContext`` of a ``LinksOnFirstUse`` model (every `@Model`); nil for
  /// a hand-written model without a ``LinkOrigin``. O(1), one dynamic cast.
  public var modelContext: ModelContext? { (self as? any LinksOnFirstUse)?.modelContext }

  /// Whether the model has unsaved changes, as ``LinksOnFirstUse/hasChanges`` says (false for
  /// a hand-written model without a ``LinkOrigin``). O(attributes).
  public var hasChanges: Bool { (self as? any LinksOnFirstUse)?.hasChanges ?? false }

  /// Whether the model is marked for deletion, as ``LinksOnFirstUse/isDeleted`` says (false
  /// for a hand-written model without a ``LinkOrigin``). O(1).
  public var isDeleted: Bool { (self as? any LinksOnFirstUse)?.isDeleted ?? false }
}

extension ModelContext {
  /// The model with `persistentModelID`, as SwiftData's `model(for:)` spells it: the
  /// registered instance (an inserted model's by its temporary identifier too), or loaded from
  /// the store, of whatever model type the identifier names.
  ///
  /// SwiftData's answer cannot be nil: for an identifier of another store, of a table this
  /// container does not keep, or of a row that is not there (deleted, or never saved), or
  /// when the store cannot be read, this traps, saying which. Where the identifier comes from
  /// outside (a request, a file), use ``model(for:as:)``, which answers nil for a missing row
  /// and throws for the rest.
  ///
  /// Cost: O(1) for a registered model; else one query by primary key.
  public func model(for persistentModelID: PersistentIdentifier) -> any PersistentModel {
    if persistentModelID.isTemporary {
      guard let model = registeredModel(forTemporary: persistentModelID) as? any PersistentModel
      else {
        preconditionFailure(
          "model(for:): \(persistentModelID) is the temporary identifier of a model this context does not hold; use model(for:as:), which answers nil."
        )
      }
      return model
    }
    guard persistentModelID.storeIdentifier == container.storeIdentifier else {
      preconditionFailure(
        "model(for:): \(persistentModelID) names a row of another store than this context's.")
    }
    guard let type = container.modelTypesByEntity[persistentModelID.entityName] else {
      preconditionFailure(
        "model(for:): \(persistentModelID) names the table '\(persistentModelID.entityName)', which this container does not keep."
      )
    }
    func load<Model: PersistentModel>(_: Model.Type) -> any PersistentModel {
      let found: Model?
      do {
        found = try model(for: persistentModelID, as: Model.self)
      } catch {
        preconditionFailure("model(for:): \(persistentModelID) could not be read: \(error)")
      }
      guard let found else {
        preconditionFailure(
          "model(for:): there is no row for \(persistentModelID) (deleted, or never saved); use model(for:as:), which answers nil."
        )
      }
      return found
    }
    return load(type)
  }
}
