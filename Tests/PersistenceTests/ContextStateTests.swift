import Foundation
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import PersistenceCore

// A context's unsaved work as SwiftData reports it: its inserted, changed and deleted models,
// a model's hasChanges and isDeleted, the save notifications, delete(model:) without
// subclasses, and the container's main context.

/// The notifications a context posts, collected from any thread.
final class SaveNotifications: Sendable {
  /// One notification's name and identifiers.
  typealias Received = (name: Notification.Name, info: [String: [PersistentIdentifier]])
  final class List: Sendable {
    let entries = Mutex<[Received]>([])
  }
  private let received = List()
  private let tokens = Mutex<[UncheckedSendable<any NSObjectProtocol>]>([])

  init(of context: ModelContext) {
    let identity = ObjectIdentifier(context)
    for name in [ModelContext.willSave, ModelContext.didSave] {
      let token = NotificationCenter.default.addObserver(
        forName: name, object: nil, queue: nil
      ) { [received] notification in
        guard let object = notification.object as AnyObject?, ObjectIdentifier(object) == identity
        else { return }
        var info: [String: [PersistentIdentifier]] = [:]
        for (key, value) in notification.userInfo ?? [:] {
          if let key = key as? String, let value = value as? [PersistentIdentifier] {
            info[key] = value
          }
        }
        received.entries.withLock { $0.append((notification.name, info)) }
      }
      tokens.withLock { $0.append(UncheckedSendable(token)) }
    }
  }

  /// What was received, emptied.
  func take() -> [Received] {
    received.entries.withLock { list in
      defer { list.removeAll() }
      return list
    }
  }

  deinit {
    for token in tokens.withLock({ $0 }) { NotificationCenter.default.removeObserver(token.value) }
  }
}

@Suite("A context's unsaved work, as SwiftData reports it")
struct ContextStateTests {
  @Test(
    "insertedModelsArray, changedModelsArray, deletedModelsArray, and a model's hasChanges and isDeleted, through a model's life",
    arguments: TestEngine.allCases)
  func unsavedWork(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxTrip.self, HxBusiness.self)
    let context = ModelContext(container)
    let loose = HxTrip(name: "Loose")
    #expect(!loose.hasChanges && !loose.isDeleted)
    let plain = HxTrip(name: "Plain")
    let fair = HxBusiness(name: "Fair", perdiem: 1)
    context.insert(plain)
    context.insert(fair)
    func ids(_ models: [any PersistentModel]) -> [ObjectIdentifier] {
      models.map(ObjectIdentifier.init)
    }
    #expect(ids(context.insertedModelsArray) == [ObjectIdentifier(plain), ObjectIdentifier(fair)])
    #expect(context.changedModelsArray.isEmpty && context.deletedModelsArray.isEmpty)
    #expect(plain.hasChanges && fair.hasChanges && !plain.isDeleted)
    try context.save()
    #expect(context.insertedModelsArray.isEmpty && context.changedModelsArray.isEmpty)
    #expect(!plain.hasChanges && !fair.hasChanges)

    fair.perdiem = 2
    #expect(fair.hasChanges && !plain.hasChanges)
    #expect(ids(context.changedModelsArray) == [ObjectIdentifier(fair)])
    context.delete(plain)
    #expect(plain.isDeleted && plain.hasChanges)
    #expect(ids(context.deletedModelsArray) == [ObjectIdentifier(plain)])
    #expect(ids(context.changedModelsArray) == [ObjectIdentifier(fair)])
    context.rollback()
    #expect(!plain.isDeleted && !fair.hasChanges && fair.perdiem == 1)
    #expect(context.deletedModelsArray.isEmpty && context.changedModelsArray.isEmpty)

    context.delete(plain)
    try context.save()
    #expect(!plain.isDeleted && !plain.hasChanges && context.deletedModelsArray.isEmpty)
    // A model inserted, then deleted before any save, is simply forgotten.
    let brief = HxTrip(name: "Brief")
    context.insert(brief)
    context.delete(brief)
    #expect(context.insertedModelsArray.isEmpty && !brief.hasChanges && !brief.isDeleted)
    context.processPendingChanges()
    #expect(!context.hasChanges)
  }

  @Test(
    "willSave and didSave are posted with the identifiers of the rows inserted, updated and deleted; a save that writes nothing posts an empty didSave",
    arguments: TestEngine.allCases)
  func saveNotifications(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxTrip.self, HxBusiness.self)
    let context = ModelContext(container)
    let notifications = SaveNotifications(of: context)
    let plain = HxTrip(name: "Plain")
    let fair = HxBusiness(name: "Fair", perdiem: 1)
    context.insert(plain)
    context.insert(fair)
    try context.save()
    var received = notifications.take()
    #expect(received.map(\.name) == [ModelContext.willSave, ModelContext.didSave])
    let inserted = received.last?.info[ModelContext.NotificationKey.insertedIdentifiers.rawValue]
    #expect(Set(inserted ?? []) == [plain.persistentModelID, fair.persistentModelID])
    #expect(received.last?.info[ModelContext.NotificationKey.updatedIdentifiers.rawValue] == [])

    fair.perdiem = 5
    context.delete(plain)
    try context.save()
    received = notifications.take()
    #expect(received.map(\.name) == [ModelContext.willSave, ModelContext.didSave])
    let info = try #require(received.last?.info)
    #expect(info[ModelContext.NotificationKey.insertedIdentifiers.rawValue] == [])
    #expect(
      info[ModelContext.NotificationKey.updatedIdentifiers.rawValue] == [fair.persistentModelID])
    #expect(
      info[ModelContext.NotificationKey.deletedIdentifiers.rawValue] == [plain.persistentModelID])

    // Nothing to write: both, empty.
    try context.save()
    received = notifications.take()
    #expect(received.map(\.name) == [ModelContext.willSave, ModelContext.didSave])
    #expect(received.last?.info.values.allSatisfy(\.isEmpty) == true)
    // An upsert that changes nothing: willSave, then didSave with empty lists.
    context.insert(HxBusiness(name: "Fair", perdiem: 5))
    try context.save()
    received = notifications.take()
    #expect(received.map(\.name) == [ModelContext.willSave, ModelContext.didSave])
    #expect(received.last?.info.values.allSatisfy(\.isEmpty) == true)
    // Another context's saves are its own.
    let other = ModelContext(container)
    other.insert(HxTrip(name: "Elsewhere"))
    try other.save()
    #expect(notifications.take().isEmpty)
  }

  @Test(
    "delete(model:where:includeSubclasses: false) deletes the class's own rows and unsaved inserts, not its subclasses'",
    arguments: TestEngine.allCases)
  func deleteWithoutSubclasses(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxTrip.self, HxBusiness.self, HxPersonal.self)
    let context = ModelContext(container)
    context.insert(HxTrip(name: "Plain"))
    context.insert(HxBusiness(name: "Fair", perdiem: 1))
    context.insert(HxPersonal(name: "Family", reason: "x"))
    try context.save()
    context.insert(HxTrip(name: "Unsaved"))
    context.insert(HxBusiness(name: "Unsaved fair", perdiem: 1))
    try context.delete(model: HxTrip.self, includeSubclasses: false)
    try context.save()
    let names = try ModelContext(container).fetch(
      FetchDescriptor<HxTrip>(sortBy: [SortDescriptor(\.name)])
    ).map(\.name)
    #expect(names == ["Fair", "Family", "Unsaved fair"])
    // With subclasses (the default), every one matching.
    try context.delete(model: HxTrip.self, where: #Predicate { $0.name.starts(with: "F") })
    try context.save()
    #expect(
      try ModelContext(container).fetch(FetchDescriptor<HxTrip>()).map(\.name) == ["Unsaved fair"])
  }

  @Test("mainContext: one context on the main actor, autosaving, the container's for its life")
  @MainActor func mainContext() throws {
    let container = try engineContainer(.sqlite, HxTrip.self)
    let context = container.mainContext
    #expect(context === container.mainContext)
    #expect(context.autosaveEnabled && context.container === container)
    context.insert(HxTrip(name: "Main"))
    // Autosave: the fetch saves first, so another context sees the row.
    #expect(try container.mainContext.fetch(FetchDescriptor<HxTrip>()).map(\.name) == ["Main"])
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<HxTrip>()) == 1)
  }

  @Test(
    "a change to a model whose row another context deleted is refused, naming it, and nothing of the save is written; deleting it too goes on",
    arguments: TestEngine.allCases)
  func staleModelRefused(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxTrip.self, HxBusiness.self)
    let writer = ModelContext(container)
    for name in ["A", "B", "C"] { writer.insert(HxTrip(name: name)) }
    try writer.save()
    let context = ModelContext(container)
    let trips = try context.fetch(FetchDescriptor<HxTrip>(sortBy: [SortDescriptor(\.name)]))
    let other = ModelContext(container)
    let gone = try #require(
      try other.fetch(FetchDescriptor<HxTrip>(predicate: #Predicate { $0.name == "B" })).first)
    other.delete(gone)
    try other.save()
    // The same change to each: one batch on PostgreSQL, one row at a time on SQLite.
    for trip in trips { trip.days = 9 }
    #expect {
      try context.save()
    } throws: { error in
      let error = error as? PersistenceError
      return error?.code == .rowDeleted && error?.message.contains("HxTrip name B") == true
    }
    let days = try ModelContext(container).fetch(FetchDescriptor<HxTrip>()).map(\.days)
    #expect(days == [1, 1])
    context.delete(trips[1])
    try context.save()
    #expect(
      try ModelContext(container).fetch(FetchDescriptor<HxTrip>()).map(\.days) == [9, 9])
  }

  @Test(
    "what a willSave observer changes or inserts is saved with the rest",
    arguments: TestEngine.allCases)
  func willSaveObserverChanges(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxTrip.self, HxBusiness.self)
    let context = ModelContext(container)
    let trip = HxTrip(name: "Plain")
    context.insert(trip)
    try context.save()
    let audited = UncheckedSendable(context)
    let token = NotificationCenter.default.addObserver(
      forName: ModelContext.willSave, object: context, queue: nil
    ) { _ in
      for case let model as HxTrip in audited.value.changedModelsArray { model.days += 100 }
      audited.value.insert(HxTrip(name: "Audit"))
    }
    defer { NotificationCenter.default.removeObserver(token) }
    trip.days = 2
    try context.save()
    let read = try ModelContext(container).fetch(
      FetchDescriptor<HxTrip>(sortBy: [SortDescriptor(\.name)]))
    #expect(read.map(\.name) == ["Audit", "Plain"])
    #expect(read.last?.days == 102)
    #expect(!context.hasChanges)
  }
}
