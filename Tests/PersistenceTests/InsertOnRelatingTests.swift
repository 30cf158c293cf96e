import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// SwiftData inserts a model into a context as soon as it is related to a model of that
// context, and a model's related models with it: their modelContext is set at once, and
// fetches that include pending changes see them before any save.

@Model final class IrTrip {
  var name: String
  @Relationship(deleteRule: .cascade, inverse: \IrItem.trip) var items: [IrItem] = []
  init(name: String, items: [IrItem] = []) {
    self.name = name
    self.items = items
  }
}

@Model final class IrItem {
  var title: String
  var trip: IrTrip?
  init(title: String) { self.title = title }
}

@Suite("Related models inserted as they are related")
struct InsertOnRelatingTests {
  func titles(_ context: ModelContext) throws -> [String] {
    try context.fetch(FetchDescriptor<IrItem>(sortBy: [SortDescriptor(\.title)])).map(\.title)
  }

  @Test(
    "insert(trip) inserts the items it holds: their modelContext is set, a fetch sees them before the save",
    arguments: TestEngine.allCases)
  func insertTakesTheGraph(engine: TestEngine) throws {
    let container = try engineContainer(engine, IrTrip.self, IrItem.self)
    let context = ModelContext(container)
    let trip = IrTrip(name: "Kyoto", items: [IrItem(title: "Temple"), IrItem(title: "Garden")])
    #expect(trip.items.allSatisfy { $0.modelContext == nil })
    context.insert(trip)
    #expect(trip.items.allSatisfy { $0.modelContext === context })
    #expect(context.insertedModelsArray.count == 3)
    #expect(try titles(context) == ["Garden", "Temple"])
    try context.save()
    #expect(try titles(ModelContext(container)) == ["Garden", "Temple"])
  }

  @Test(
    "appending a new item to a saved trip inserts it at once; so does setting a new item's to-one to the trip, and a new trip as a saved item's to-one",
    arguments: TestEngine.allCases)
  func relatingInserts(engine: TestEngine) throws {
    let container = try engineContainer(engine, IrTrip.self, IrItem.self)
    do {
      let context = ModelContext(container)
      context.insert(IrTrip(name: "Kyoto", items: [IrItem(title: "Temple")]))
      try context.save()
    }
    let context = ModelContext(container)
    let trip = try #require(try context.fetch(FetchDescriptor<IrTrip>()).first)
    let garden = IrItem(title: "Garden")
    trip.items.append(garden)
    #expect(garden.modelContext === context)
    #expect(try titles(context) == ["Garden", "Temple"])

    let market = IrItem(title: "Market")
    market.trip = trip
    #expect(market.modelContext === context)
    #expect(trip.items.map(\.title).sorted() == ["Garden", "Market", "Temple"])

    // The other way: a saved item pointed at a new trip, which holds a new item of its own.
    let temple = try #require(trip.items.first { $0.title == "Temple" })
    let osaka = IrTrip(name: "Osaka", items: [IrItem(title: "Castle")])
    temple.trip = osaka
    #expect(osaka.modelContext === context)
    #expect(osaka.items.allSatisfy { $0.modelContext === context })
    #expect(
      try context.fetch(FetchDescriptor<IrTrip>()).map(\.name).sorted() == ["Kyoto", "Osaka"])
    try context.save()

    let check = ModelContext(container)
    let trips = try check.fetch(FetchDescriptor<IrTrip>(sortBy: [SortDescriptor(\.name)]))
    #expect(
      trips.map { $0.items.map(\.title).sorted() } == [
        ["Garden", "Market"], ["Castle", "Temple"],
      ])
  }

  @Test(
    "a model of another context is not taken: the save refuses it, naming the relationship, and nothing is written",
    arguments: TestEngine.allCases)
  func anotherContextsModel(engine: TestEngine) throws {
    let container = try engineContainer(engine, IrTrip.self, IrItem.self)
    do {
      let context = ModelContext(container)
      context.insert(IrItem(title: "Loose"))
      try context.save()
    }
    let mine = ModelContext(container)
    let theirs = ModelContext(container)
    let loose = try #require(try theirs.fetch(FetchDescriptor<IrItem>()).first)
    let trip = IrTrip(name: "Kyoto")
    mine.insert(trip)
    trip.items.append(loose)
    #expect(loose.modelContext === theirs)
    let error = try #require(throws: PersistenceError.self) { try mine.save() }
    #expect(error.code == .relationshipConstraint)
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<IrTrip>()) == 0)
  }

  @Test(
    "a model forgotten by rollback() or reset() stays out: relating it, or relating to it, inserts nothing",
    arguments: TestEngine.allCases)
  func forgottenModelsStayOut(engine: TestEngine) throws {
    let container = try engineContainer(engine, IrTrip.self, IrItem.self)
    let context = ModelContext(container)
    let trip = IrTrip(name: "Kyoto", items: [IrItem(title: "Temple")])
    context.insert(trip)
    context.rollback()
    #expect(trip.modelContext == nil && context.insertedModelsArray.isEmpty)
    let late = IrItem(title: "Late")
    trip.items.append(late)
    #expect(late.modelContext == nil && context.insertedModelsArray.isEmpty)
    let item = IrItem(title: "Alone")
    context.insert(item)
    context.rollback()
    item.trip = IrTrip(name: "Osaka")
    #expect(item.modelContext == nil && context.insertedModelsArray.isEmpty)
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<IrTrip>()) == 0)
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<IrItem>()) == 0)

    let reset = ModelContext(container)
    let nara = IrTrip(name: "Nara")
    reset.insert(nara)
    _ = nara.items
    reset.reset()
    let deer = IrItem(title: "Deer")
    nara.items.append(deer)
    #expect(deer.modelContext == nil && reset.insertedModelsArray.isEmpty)
    try reset.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<IrTrip>()) == 0)
  }

  @Test(
    "an observer's model related to a new model is refused by that save, clearly, and not by the next",
    arguments: TestEngine.allCases)
  func observersModelRefusedAtOnce(engine: TestEngine) throws {
    let container = try engineContainer(engine, IrTrip.self, IrItem.self)
    let writer = ModelContext(container)
    writer.insert(IrTrip(name: "Kyoto"))
    try writer.save()
    let observer = try ResultsObserver(
      FetchDescriptor<IrTrip>(), modelContext: ModelContext(container))
    let snapshot = try #require(observer.results.first)
    let context = ModelContext(container)
    let item = IrItem(title: "Temple")
    context.insert(item)
    item.trip = snapshot
    let error = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(error.code == .modelInAnotherContext)
    #expect(error.message.contains("IrTrip"))
    // The refusal was this save's: the next one, without the snapshot, saves.
    item.trip = nil
    context.insert(IrTrip(name: "Osaka"))
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<IrTrip>()) == 2)
  }

  @Test("5,000 new items inserted with their trip in one walk")
  func wideGraph() throws {
    let container = try engineContainer(.sqlite, IrTrip.self, IrItem.self)
    let context = ModelContext(container)
    // Trip -> items, each item's trip the same trip: every item once, the trip once.
    let trip = IrTrip(name: "Wide", items: (0..<5_000).map { IrItem(title: "item \($0)") })
    context.insert(trip)
    #expect(context.insertedModelsArray.count == 5_001)
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<IrItem>()) == 5_000)
  }

  @Test(
    "a related model inserted and deleted before a save leaves its trip's list and is not written; its cascaded new items go with it",
    arguments: TestEngine.allCases)
  func insertedThenDeleted(engine: TestEngine) throws {
    let container = try engineContainer(engine, IrTrip.self, IrItem.self)
    let context = ModelContext(container)
    let trip = IrTrip(name: "Kyoto")
    context.insert(trip)
    try context.save()
    let item = IrItem(title: "Temple")
    trip.items.append(item)
    context.delete(item)
    #expect(trip.items.isEmpty && item.modelContext == nil)
    // A new trip deleted before its save takes its new items (cascade) with it.
    let other = IrTrip(name: "Nara", items: [IrItem(title: "Deer")])
    context.insert(other)
    context.delete(other)
    #expect(context.insertedModelsArray.isEmpty)
    try context.save()
    #expect(try titles(ModelContext(container)).isEmpty)
  }

  @Test(
    "a model deleted and saved, then related to a new model, is refused by the save, saying so, and nothing is written",
    arguments: TestEngine.allCases)
  func deletedThenRelated(engine: TestEngine) throws {
    let container = try engineContainer(engine, IrTrip.self, IrItem.self)
    let context = ModelContext(container)
    let item = IrItem(title: "Temple")
    context.insert(IrTrip(name: "Kyoto", items: [item]))
    try context.save()
    context.delete(item)
    try context.save()
    let other = IrTrip(name: "Nara")
    context.insert(other)
    other.items.append(item)
    #expect {
      try context.save()
    } throws: { error in
      let error = error as? PersistenceError
      return error?.code == .modelInAnotherContext
        && error?.message.contains("a deleted model is not inserted again") == true
    }
    #expect(try titles(ModelContext(container)).isEmpty)
  }

  @Test(
    "a model detached by reset(), related to a new model, is refused by the save (no trap)",
    arguments: TestEngine.allCases)
  func resetThenRelated(engine: TestEngine) throws {
    let container = try engineContainer(engine, IrTrip.self, IrItem.self)
    let context = ModelContext(container)
    context.insert(IrTrip(name: "Kyoto", items: [IrItem(title: "Temple")]))
    try context.save()
    let fetched = try #require(try context.fetch(FetchDescriptor<IrItem>()).first)
    context.reset()
    let other = IrTrip(name: "Nara")
    context.insert(other)
    other.items.append(fetched)
    #expect(throws: PersistenceError.self) { try context.save() }
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<IrTrip>()) == 1)
  }
}
