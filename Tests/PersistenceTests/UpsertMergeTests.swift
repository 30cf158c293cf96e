import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// One row, one live model: an insert whose unique values name a row the context already holds
// a model of updates the row, and both references see the row's values; a later change made
// through either is saved, a delete through either deletes the row.

@Model final class UmTrip {
  @Attribute(.unique) var name: String
  var days: Int
  var notes: String?
  @Relationship(deleteRule: .cascade, inverse: \UmStop.trip) var stops: [UmStop] = []
  init(name: String, days: Int, notes: String? = nil) {
    self.name = name
    self.days = days
    self.notes = notes
  }
}

@Model final class UmStop {
  @Attribute(.unique) var title: String
  var trip: UmTrip?
  init(title: String) { self.title = title }
}

@Suite("An upsert merges into the model the context holds for the row")
struct UpsertMergeTests {
  /// A container with one stored trip, "Kyoto", 3 days, with one stop.
  func seeded(_ engine: TestEngine) throws -> ModelContainer {
    let container = try engineContainer(engine, UmTrip.self, UmStop.self)
    let context = ModelContext(container)
    let trip = UmTrip(name: "Kyoto", days: 3)
    trip.stops.append(UmStop(title: "Temple"))
    context.insert(trip)
    try context.save()
    return container
  }

  func stored(_ container: ModelContainer) throws -> [(String, Int, String?)] {
    try ModelContext(container).fetch(FetchDescriptor<UmTrip>(sortBy: [SortDescriptor(\.name)]))
      .map { ($0.name, $0.days, $0.notes) }
  }

  @Test(
    "after the upsert both references see the row's values, later changes through either are saved, and a fetch returns one model",
    arguments: TestEngine.allCases)
  func bothReferencesSaved(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    let fetched = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
    let inserted = UmTrip(name: "Kyoto", days: 5, notes: "again")
    context.insert(inserted)
    try context.save()
    #expect(fetched.days == 5 && fetched.notes == "again")
    #expect(fetched.persistentModelID == inserted.persistentModelID)
    #expect(!fetched.hasChanges && !inserted.hasChanges && !context.hasChanges)
    let again = try context.fetch(FetchDescriptor<UmTrip>())
    #expect(again.count == 1 && again.first === inserted)

    // The model held before: its change is saved (the issue's lost write).
    fetched.days = 7
    #expect(fetched.hasChanges && context.hasChanges)
    #expect(context.changedModelsArray.count == 1)
    try context.save()
    #expect(try stored(container).map(\.1) == [7])
    #expect(inserted.days == 7, "the inserted model sees the change saved through the other")
    // The inserted model: its change is saved too.
    inserted.notes = "third"
    try context.save()
    #expect(try stored(container).map(\.2) == ["third"])
    #expect(fetched.notes == "third")
    // Both changed before one save: both changes are saved.
    fetched.days = 9
    inserted.notes = "fourth"
    try context.save()
    #expect(try stored(container).map { "\($0.1) \($0.2 ?? "-")" } == ["9 fourth"])
    #expect(fetched.days == 9 && fetched.notes == "fourth")
    #expect(inserted.days == 9 && inserted.notes == "fourth")
  }

  @Test(
    "the merged model's relationships read the row: a stop appended through it is saved with the row's key; the inserted model's stops are the row's",
    arguments: TestEngine.allCases)
  func relationshipsOfBoth(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    let fetched = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
    #expect(fetched.stops.map(\.title) == ["Temple"])
    let inserted = UmTrip(name: "Kyoto", days: 4)
    inserted.stops.append(UmStop(title: "Garden"))
    context.insert(inserted)
    try context.save()
    #expect(Set(fetched.stops.map(\.title)) == ["Temple", "Garden"])
    #expect(Set(inserted.stops.map(\.title)) == ["Temple", "Garden"])
    fetched.stops.append(UmStop(title: "Market"))
    try context.save()
    let reader = ModelContext(container)
    let trip = try #require(try reader.fetch(FetchDescriptor<UmTrip>()).first)
    #expect(Set(trip.stops.map(\.title)) == ["Temple", "Garden", "Market"])
    #expect(try reader.fetchCount(FetchDescriptor<UmTrip>()) == 1)
  }

  @Test(
    "deleting through the model held before deletes the row; rollback undoes a merged model's change; reset forgets both",
    arguments: TestEngine.allCases)
  func deleteRollbackReset(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    var fetched = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
    var inserted = UmTrip(name: "Kyoto", days: 5)
    context.insert(inserted)
    try context.save()
    fetched.days = 11
    context.rollback()
    #expect(fetched.days == 5 && inserted.days == 5 && !context.hasChanges)
    try context.save()
    #expect(try stored(container).map(\.1) == [5])

    context.delete(fetched)
    #expect(fetched.isDeleted && inserted.isDeleted)
    #expect(context.deletedModelsArray.count == 1)
    try context.save()
    #expect(try stored(container).isEmpty)
    #expect(fetched.modelContext == nil && inserted.modelContext == nil)
    #expect(!context.hasChanges)

    // Again, then reset: neither is tracked, nothing is written.
    context.insert(UmTrip(name: "Osaka", days: 1))
    try context.save()
    fetched = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
    inserted = UmTrip(name: "Osaka", days: 2)
    context.insert(inserted)
    try context.save()
    context.reset()
    fetched.days = 20
    #expect(!context.hasChanges)
    try context.save()
    #expect(try stored(container).map(\.1) == [2])
  }

  @Test(
    "an upsert onto a row merged before: the three models are one row, each change saved",
    arguments: TestEngine.allCases)
  func chainOfUpserts(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    let first = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
    let second = UmTrip(name: "Kyoto", days: 4)
    context.insert(second)
    try context.save()
    let third = UmTrip(name: "Kyoto", days: 6)
    context.insert(third)
    try context.save()
    #expect([first.days, second.days, third.days] as [Int] == [6, 6, 6])
    first.notes = "from the first"
    try context.save()
    #expect(try stored(container).map(\.2) == ["from the first"])
    #expect(second.notes == "from the first" && third.notes == "from the first")
    #expect(try context.fetch(FetchDescriptor<UmTrip>()).first === third)
  }

  @Test(
    "a merged model's to-one set to a new model is saved as the holder's: the new model inserted, the row pointing to it",
    arguments: TestEngine.allCases)
  func mergedToOneToNewModel(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    let fetched = try #require(try context.fetch(FetchDescriptor<UmStop>()).first)
    #expect(fetched.trip?.name == "Kyoto")
    // An upsert writes every value of the inserted model, its to-one too (none here).
    let inserted = UmStop(title: "Temple")
    context.insert(inserted)
    try context.save()
    #expect(inserted.trip == nil && fetched.trip == nil)
    let nara = UmTrip(name: "Nara", days: 1)
    fetched.trip = nara
    #expect(nara.modelContext === context)
    try context.save()
    #expect(inserted.trip === nara)
    #expect(nara.stops.count == 1)
    let reader = ModelContext(container)
    let stop = try #require(try reader.fetch(FetchDescriptor<UmStop>()).first)
    #expect(stop.trip?.name == "Nara")
    #expect(try stored(container).map(\.0) == ["Kyoto", "Nara"])
    // And back to a saved trip, through the inserted model this time.
    let kyoto = try #require(
      try context.fetch(FetchDescriptor<UmTrip>(predicate: #Predicate { $0.name == "Kyoto" })).first
    )
    inserted.trip = kyoto
    try context.save()
    #expect(fetched.trip === kyoto)
    let later = ModelContext(container)
    #expect(try later.fetch(FetchDescriptor<UmStop>()).first?.trip?.name == "Kyoto")
  }

  @Test(
    "repeated upserts by inserts alone keep no merged model nobody holds: the old ones are released",
    arguments: TestEngine.allCases)
  func mergedModelsReleased(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    weak var first: UmTrip?
    do {
      let trip = UmTrip(name: "Kyoto", days: 0)
      first = trip
      context.insert(trip)
      try context.save()
    }
    for round in 1...50 {
      context.insert(UmTrip(name: "Kyoto", days: round))
      try context.save()
    }
    #expect(first == nil)
    #expect(context.mergedModels.count <= 1)
    #expect(try stored(container).map(\.1) == [50])
  }

  @Test(
    "a merged stop moved off its trip leaves the trip's list, and emptying the list later deletes nothing of it",
    arguments: TestEngine.allCases)
  func mergedToOneClearedLeavesInverse(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    let kyoto = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
    let fetched = try #require(kyoto.stops.first)
    let inserted = UmStop(title: "Temple")
    inserted.trip = kyoto
    context.insert(inserted)
    try context.save()
    #expect(kyoto.stops.count == 1)
    fetched.trip = nil
    try context.save()
    #expect(inserted.trip == nil && kyoto.stops.isEmpty)
    kyoto.stops = []
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<UmStop>()) == 1)

    // An upsert that writes no trip: the trip no longer lists the stop held before.
    let other = ModelContext(container)
    let trip = try #require(
      try other.fetch(FetchDescriptor<UmTrip>()).first)
    let stop = UmStop(title: "Garden")
    trip.stops.append(stop)
    try other.save()
    let held = try #require(trip.stops.first { $0.title == "Garden" })
    other.insert(UmStop(title: "Garden"))
    try other.save()
    #expect(held.trip == nil && !trip.stops.contains { $0 === held })
    trip.stops = []
    try other.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<UmStop>()) == 2)
  }

  @Test(
    "a merged trip deleted: its stops are gone from it too; a refetch refreshes both models of the row",
    arguments: TestEngine.allCases)
  func mergedDeletedAndRefreshed(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    let fetched = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
    #expect(fetched.stops.count == 1)
    let inserted = UmTrip(name: "Kyoto", days: 5)
    context.insert(inserted)
    try context.save()
    // Another context changes the row; this one fetches again.
    let other = ModelContext(container)
    try #require(try other.fetch(FetchDescriptor<UmTrip>()).first).days = 42
    try other.save()
    _ = try context.fetch(FetchDescriptor<UmTrip>())
    #expect(inserted.days == 42 && fetched.days == 42)
    context.delete(fetched)
    try context.save()
    #expect(fetched.stops.isEmpty && inserted.stops.isEmpty)
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<UmStop>()) == 0)
  }

  @Test(
    "a changed stop whose trip the same save deletes is deleted, not refused as deleted elsewhere; so is a row deleted unloaded, then loaded and changed",
    arguments: TestEngine.allCases)
  func changedChildOfDeletedParent(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    let trip = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
    trip.stops.first?.title = "Changed"
    context.delete(trip)
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<UmStop>()) == 0)

    let again = ModelContext(container)
    again.insert(UmTrip(name: "Nara", days: 1))
    try again.save()
    let id = try #require(try again.fetchIdentifiers(FetchDescriptor<UmTrip>()).first)
    let later = ModelContext(container)
    try later.delete(model: UmTrip.self)
    try #require(try later.model(for: id, as: UmTrip.self)).days = 9
    try later.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<UmTrip>()) == 0)
  }

  @Test(
    "a merged model changed and then let go before the save has its change saved",
    arguments: TestEngine.allCases)
  func mergedChangedThenReleased(engine: TestEngine) throws {
    let container = try seeded(engine)
    let context = ModelContext(container)
    let inserted = UmTrip(name: "Kyoto", days: 5)
    do {
      let fetched = try #require(try context.fetch(FetchDescriptor<UmTrip>()).first)
      context.insert(inserted)
      try context.save()
      fetched.notes = "changed, then let go"
    }
    try context.save()
    #expect(try stored(container).map(\.2) == ["changed, then let go"])
    #expect(inserted.notes == "changed, then let go")
  }
}
