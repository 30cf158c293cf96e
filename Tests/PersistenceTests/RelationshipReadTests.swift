import Foundation
import Observation
import Persistence
import Testing

@testable import PersistenceCore

/// A relationship read answers right or fails loudly: never an empty answer for rows the store
/// has.
@Suite("Relationship reads: answered, or a trap naming them")
struct RelationshipReadTests {
  /// A store with a hotel of three rooms and a manager (and the store, kept while it is used).
  func seeded(_ engine: TestEngine) throws -> (TestStore, ModelContainer) {
    let store = try engine.makeStore()
    let container = try store.hotels()
    let context = ModelContext(container)
    let hotel = Hotel("Kyoto Inn")
    context.insert(hotel)
    hotel.rooms = [Room(3), Room(1), Room(2)]
    hotel.manager = Manager("Aiko")
    try context.save()
    return (store, container)
  }

  @Test(
    "an observer's models read their relationships (to-many, to-one kept on either side), and the related models theirs, from any thread",
    arguments: TestEngine.allCases)
  func observerModelsReadRelationships(engine: TestEngine) async throws {
    let (store, container) = try seeded(engine)
    defer { withExtendedLifetime(store) {} }
    let hotels = try ResultsObserver(FetchDescriptor<Hotel>(), container: container)
    let hotel = try #require(hotels.results.first)
    #expect(hotel.rooms.map(\.number) == [1, 2, 3])
    #expect(hotel.manager?.name == "Aiko")
    #expect(hotel.rooms.first?.hotel?.name == "Kyoto Inn")
    #expect(hotel.manager?.hotel?.rooms.count == 3)
    let rooms = try ResultsObserver(
      FetchDescriptor<Room>(sortBy: [SortDescriptor(\.number)]), container: container)
    // Read at once from several tasks: one load, the same answer for each.
    let names = await withTaskGroup(of: String?.self) { group in
      for room in rooms.results {
        for _ in 0..<4 {
          let room = UncheckedBox(room)
          group.addTask { room.value.hotel?.manager?.name }
        }
      }
      var names: [String?] = []
      for await name in group { names.append(name) }
      return names
    }
    #expect(names.count == 12 && names.allSatisfy { $0 == "Aiko" })
  }

  @Test(
    "prefetch(_:of:) loads relationships of models already fetched, in one query each; reads then run none",
    arguments: TestEngine.allCases)
  func prefetchOfModels(engine: TestEngine) throws {
    let (store, container) = try seeded(engine)
    defer { withExtendedLifetime(store) {} }
    let context = ModelContext(container)
    let hotels = try context.fetch(FetchDescriptor<Hotel>())
    let before = context.relationshipQueryCount
    try context.prefetch([\.rooms, \.manager], of: hotels)
    #expect(context.relationshipQueryCount == before + 2)
    #expect(hotels.first?.rooms.map(\.number) == [1, 2, 3])
    #expect(hotels.first?.manager?.name == "Aiko")
    #expect(context.relationshipQueryCount == before + 2)
    for models in [hotels, []] {
      #expect {
        try context.prefetch([\Hotel.name], of: models)
      } throws: { error in
        (error as? PersistenceError)?.code == .unsupportedPredicate
          && "\(error)".contains("\\Hotel.name")
      }
    }
  }

  @Test("a model whose context is gone traps when it must load a relationship, naming both")
  func contextGoneTraps() async {
    await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let store = try TestEngine.sqlite.makeStore()
      let container = try store.hotels()
      let seed = ModelContext(container)
      let hotel = Hotel("Kyoto Inn")
      seed.insert(hotel)
      hotel.rooms = [Room(1)]
      try seed.save()
      let fetched = try ModelContext(container).fetch(FetchDescriptor<Hotel>())
      _ = fetched[0].rooms
      withExtendedLifetime(store) {}
    }.map { result in
      let message = String(decoding: result.standardErrorContent, as: UTF8.self)
      #expect(
        message.contains(
          "The relationship 'rooms' of Hotel cannot be read: its context is gone"
        ), "\(message)")
    }
  }

  @Test("a model of a context that was reset traps when it must load a relationship, saying so")
  func resetContextTraps() async {
    await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let store = try TestEngine.sqlite.makeStore()
      let container = try store.hotels()
      let seed = ModelContext(container)
      let hotel = Hotel("Kyoto Inn")
      seed.insert(hotel)
      hotel.rooms = [Room(1)]
      hotel.manager = Manager("Aiko")
      try seed.save()
      let context = ModelContext(container)
      let fetched = try context.fetch(FetchDescriptor<Hotel>())
      context.reset()
      _ = fetched[0].rooms
      withExtendedLifetime(store) {}
    }.map { result in
      let message = String(decoding: result.standardErrorContent, as: UTF8.self)
      #expect(
        message.contains(
          "The relationship 'rooms' of Hotel cannot be read: its context was reset"),
        "\(message)")
    }
  }

  @Test("a model whose context is gone answers what it loaded while it had one")
  func loadedBeforeTheContextWent() throws {
    let (store, container) = try seeded(.sqlite)
    defer { withExtendedLifetime(store) {} }
    var context: ModelContext? = ModelContext(container)
    let hotel = try #require(try context?.fetch(FetchDescriptor<Hotel>()).first)
    #expect(hotel.rooms.count == 3)
    context = nil
    #expect(hotel.rooms.map(\.number) == [1, 2, 3])
  }
}

/// Hands a model to another task in a test (an observer's models are read-only snapshots).
private struct UncheckedBox<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}
