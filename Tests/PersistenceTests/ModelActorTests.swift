import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// SwiftData's @ModelActor: an actor with its own context, on its own executor; identifiers
// cross actors, models stay inside.

@Model final class MaTrip {
  @Attribute(.unique) var name: String
  var days: Int
  init(name: String, days: Int) {
    self.name = name
    self.days = days
  }
}

@ModelActor actor MaImporter {
  /// Inserts trips and returns their identifiers (Sendable), as an importer does.
  func add(_ names: [String]) throws -> [PersistentIdentifier] {
    let trips = names.map { MaTrip(name: $0, days: 1) }
    for trip in trips { modelContext.insert(trip) }
    try modelContext.save()
    return trips.map(\.persistentModelID)
  }

  /// The days of the trip `id`, changed by `delta`, found as SwiftData's users find it.
  func lengthen(_ id: PersistentIdentifier, by delta: Int) throws -> Int? {
    guard let trip = self[id, as: MaTrip.self] else { return nil }
    trip.days += delta
    try modelContext.save()
    return trip.days
  }

  /// Whether the actor's code runs on its model executor (what the actor's isolation means).
  func runsOnItsExecutor() -> Bool {
    (modelExecutor as? DefaultSerialModelExecutor).map {
      $0.checkIsolated()
      return true
    } ?? false
  }

  func names() throws -> [String] {
    try modelContext.fetch(FetchDescriptor<MaTrip>(sortBy: [SortDescriptor(\.name)])).map(\.name)
  }
}

@Suite("@ModelActor, as SwiftData's users write it")
struct ModelActorTests {
  @Test(
    "an actor inserts and saves on its own context; identifiers cross, a model is found by id with self[id, as:]",
    arguments: TestEngine.allCases)
  func importerActor(engine: TestEngine) async throws {
    let container = try engineContainer(engine, MaTrip.self)
    let importer = MaImporter(modelContainer: container)
    #expect(importer.modelContainer === container)
    let ids = try await importer.add(["Kyoto", "Nara"])
    #expect(ids.count == 2 && ids.allSatisfy { !$0.isTemporary })
    #expect(try await importer.lengthen(ids[0], by: 2) == 3)
    #expect(await importer.runsOnItsExecutor())
    // Another context (here, the test's) reads what the actor saved.
    let context = ModelContext(container)
    let kyoto = try #require(try context.model(for: ids[0], as: MaTrip.self))
    #expect(kyoto.days == 3)
    // Deleted by another context: the actor's registered model is stale, and its change is
    // refused (not written to no row); a new actor finds no model.
    context.delete(kyoto)
    try context.save()
    await #expect {
      try await importer.lengthen(ids[0], by: 1)
    } throws: { ($0 as? PersistenceError)?.code == .rowDeleted }
    #expect(try await MaImporter(modelContainer: container).lengthen(ids[0], by: 1) == nil)
    #expect(try await importer.names() == ["Nara"])
  }

  @Test(
    "several actors on one container work at once, each on its own context",
    arguments: TestEngine.allCases)
  func concurrentActors(engine: TestEngine) async throws {
    let container = try engineContainer(engine, MaTrip.self)
    let importers = (0..<4).map { _ in MaImporter(modelContainer: container) }
    try await withThrowingTaskGroup(of: Int.self) { group in
      for (index, importer) in importers.enumerated() {
        group.addTask {
          try await importer.add((0..<25).map { "trip \(index)-\($0)" }).count
        }
      }
      var total = 0
      for try await count in group { total += count }
      #expect(total == 100)
    }
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MaTrip>()) == 100)
  }

  @Test(
    "a temporary identifier goes on naming its model after the save, in the context that holds it",
    arguments: TestEngine.allCases)
  func temporaryIdentifierFollowsModel(engine: TestEngine) throws {
    let container = try engineContainer(engine, MaTrip.self)
    let context = ModelContext(container)
    let trip = MaTrip(name: "Kyoto", days: 3)
    let temporary = trip.persistentModelID
    #expect(temporary.isTemporary)
    #expect(try context.model(for: temporary, as: MaTrip.self) == nil)
    context.insert(trip)
    #expect(try context.model(for: temporary, as: MaTrip.self) === trip)
    try context.save()
    #expect(!trip.persistentModelID.isTemporary)
    #expect(try context.model(for: temporary, as: MaTrip.self) === trip)
    #expect(context.model(for: temporary) as? MaTrip === trip)
    #expect(context.registeredModel(for: temporary) as MaTrip? === trip)
    // Another context does not hold the model: nothing for its temporary identifier.
    #expect(try ModelContext(container).model(for: temporary, as: MaTrip.self) == nil)
    // Deleted and saved, the model is in no context.
    context.delete(trip)
    try context.save()
    #expect(try context.model(for: temporary, as: MaTrip.self) == nil)
  }
}
