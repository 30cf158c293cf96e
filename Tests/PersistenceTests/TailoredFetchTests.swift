import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

/// A model with attributes of several kinds, for fetches of some of them.
@Model final class Voyager {
  #Unique<Voyager>([\.code])
  var code: String
  var name: String
  var home: String
  var age: Int
  var notes: String?
  var stops: [String] = []
  @Attribute(.preserveValueOnDeletion) var badge = ""

  init(code: String, name: String, home: String, age: Int, notes: String? = nil) {
    self.code = code
    self.name = name
    self.home = home
    self.age = age
    self.notes = notes
  }
}

@Suite("Tailored fetches: propertiesToFetch", .serialized)
struct TailoredFetchTests {
  /// A store on `engine` with three voyagers, its container recording every query.
  static func store(_ engine: TestEngine) throws -> (ModelContainer, RecordingEngine, TestStore) {
    let store = try engine.makeStore()
    let configuration = ModelConfiguration(url: store.url)
    let recorder = RecordingEngine(try configuration.defaultEngine())
    let container = try ModelContainer(
      for: [Voyager.self], configuration: configuration, engine: recorder)
    let context = ModelContext(container)
    for (index, name) in ["Ann", "Bo", "Cy"].enumerated() {
      let voyager = Voyager(
        code: "v\(index)", name: name, home: "Home \(index)", age: 30 + index,
        notes: index == 1 ? "note" : nil)
      voyager.stops = ["s\(index)"]
      voyager.badge = "b\(index)"
      context.insert(voyager)
    }
    try context.save()
    return (container, recorder, store)
  }

  static func partial() -> FetchDescriptor<Voyager> {
    var descriptor = FetchDescriptor<Voyager>(sortBy: [SortDescriptor(\.name)])
    descriptor.propertiesToFetch = [\.name, \.code]
    return descriptor
  }

  @Test(
    "the fetch selects what is asked; the first read of another attribute loads the rest for the whole batch, in one query",
    arguments: TestEngine.allCases)
  func loadsOnFirstRead(engine: TestEngine) throws {
    let (container, recorder, store) = try Self.store(engine)
    defer { withExtendedLifetime(store) {} }
    let context = ModelContext(container)
    recorder.clear()
    let voyagers = try context.fetch(Self.partial())
    #expect(Self.partial().propertiesToFetch.count == 2)
    let selects = recorder.queries.map(\.sql).filter { $0.hasPrefix("SELECT") }
    #expect(selects.count == 1, "\(selects)")
    #expect(selects.first?.contains("? AS \"home\"") == true, "\(selects)")
    #expect(selects.first?.contains("\"name\"") == true)
    recorder.clear()
    #expect(voyagers.map(\.name) == ["Ann", "Bo", "Cy"])
    #expect(voyagers.map(\.code) == ["v0", "v1", "v2"])
    #expect(recorder.queries.isEmpty, "the fetched properties need no query")
    #expect(voyagers[1].home == "Home 1")
    #expect(recorder.queries.count == 1, "\(recorder.queries.map(\.sql))")
    #expect(voyagers.map(\.home) == ["Home 0", "Home 1", "Home 2"])
    #expect(voyagers.map(\.age) == [30, 31, 32])
    #expect(voyagers.map(\.notes) == [nil, "note", nil])
    #expect(voyagers.map(\.stops) == [["s0"], ["s1"], ["s2"]])
    #expect(recorder.queries.count == 1, "one query for the batch, not one per model")
    #expect(!context.hasChanges, "a load is not a change")
  }

  @Test(
    "a save writes only what changed: an attribute set without being read, or one fetched; the others keep their stored values",
    arguments: TestEngine.allCases)
  func savesOnlyChanges(engine: TestEngine) throws {
    let (container, _, store) = try Self.store(engine)
    defer { withExtendedLifetime(store) {} }
    let context = ModelContext(container)
    let voyagers = try context.fetch(Self.partial())
    voyagers[0].age = 99  // set before any read of it
    voyagers[2].name = "Cyd"  // a fetched property
    try context.save()
    let check = try ModelContext(container).fetch(
      FetchDescriptor<Voyager>(sortBy: [SortDescriptor(\.code)]))
    #expect(check.map(\.age) == [99, 31, 32])
    #expect(check.map(\.name) == ["Ann", "Bo", "Cyd"])
    #expect(check.map(\.home) == ["Home 0", "Home 1", "Home 2"])
    #expect(check.map(\.badge) == ["b0", "b1", "b2"])
    #expect(check.map(\.stops) == [["s0"], ["s1"], ["s2"]])

    // A model never read but saved with another change, then deleted: its tombstone keeps
    // the stored preserved value, not the empty one it held.
    let fresh = ModelContext(container)
    let again = try fresh.fetch(Self.partial())
    again[1].name = "Bob"
    try fresh.save()
    fresh.delete(again[1])
    try fresh.save()
    let tombstone = try #require(
      fresh.fetchHistory().last?.changes.first?.tombstone(as: Voyager.self))
    #expect(tombstone[\.badge] as? String == "b1")
  }

  @Test(
    "a model already in the context is returned as it is; a full fetch after a partial one completes it",
    arguments: TestEngine.allCases)
  func registeredModels(engine: TestEngine) throws {
    let (container, _, store) = try Self.store(engine)
    defer { withExtendedLifetime(store) {} }
    let context = ModelContext(container)
    let full = try context.fetch(FetchDescriptor<Voyager>(sortBy: [SortDescriptor(\.name)]))
    full[0].home = "Changed"
    let partial = try context.fetch(Self.partial())
    #expect(partial[0] === full[0])
    #expect(partial.map(\.home) == ["Changed", "Home 1", "Home 2"])
    #expect(partial.map(\.age) == [30, 31, 32])

    let other = ModelContext(container)
    let thin = try other.fetch(Self.partial())
    let whole = try other.fetch(FetchDescriptor<Voyager>(sortBy: [SortDescriptor(\.name)]))
    #expect(thin[2] === whole[2])
    #expect(whole.map(\.home) == ["Home 0", "Home 1", "Home 2"])
    #expect(thin.map(\.age) == [30, 31, 32])
  }

  @Test(
    "a model whose context is gone (a context made for the fetch) loads its own attributes from the container",
    arguments: TestEngine.allCases)
  func detached(engine: TestEngine) throws {
    let (container, recorder, store) = try Self.store(engine)
    defer { withExtendedLifetime(store) {} }
    let voyagers = try ModelContext(container).fetch(Self.partial())
    #expect(voyagers.allSatisfy { $0.modelContext == nil })
    recorder.clear()
    #expect(voyagers[2].home == "Home 2")
    #expect(voyagers[2].age == 32)
    #expect(recorder.queries.count == 1, "one query for that model")
    #expect(voyagers.map(\.notes) == [nil, "note", nil])
  }

  @Test("a key path that is not a stored attribute is refused, naming it")
  func refused() throws {
    let (container, _, store) = try Self.store(.sqlite)
    defer { withExtendedLifetime(store) {} }
    var descriptor = FetchDescriptor<Voyager>()
    descriptor.propertiesToFetch = [\.name, \.stops.count]
    let error = #expect(throws: PersistenceError.self) {
      try ModelContext(container).fetch(descriptor)
    }
    #expect(error?.code == .unsupportedPredicate)
    #expect(error?.message.contains("not a stored attribute of Voyager") == true)
    // A hand-written model loads every attribute, and is refused the same key path alike.
    var notes = FetchDescriptor<Note>()
    notes.propertiesToFetch = [\.key, \.key.count]
    let hand = try ModelContainer(
      for: [Note.self], configuration: ModelConfiguration(isStoredInMemoryOnly: true))
    let handError = #expect(throws: PersistenceError.self) {
      try ModelContext(hand).fetch(notes)
    }
    #expect(handError?.message.contains("not a stored attribute of Note") == true)
    notes.propertiesToFetch = [\.key]
    #expect(try ModelContext(hand).fetch(notes).isEmpty)
    // Every attribute asked for: a plain fetch.
    descriptor.propertiesToFetch = [\.code, \.name, \.home, \.age, \.notes, \.stops, \.badge]
    #expect(try ModelContext(container).fetch(descriptor).count == 3)
  }
}
