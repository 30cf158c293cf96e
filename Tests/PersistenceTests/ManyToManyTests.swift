import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// Many-to-many relationships as SwiftData's users write them: a to-many on each side, the
// inverse named on one. The links are rows of a join table the store keeps; either side reads
// and writes them, deletes take them, rules apply through them, predicates and prefetch read
// them through the join table's indexes.

@Model final class MmTrip {
  var name: String
  var travelers: [MmTraveler] = []
  init(name: String) { self.name = name }
}

@Model final class MmTraveler {
  var name: String
  @Relationship(inverse: \MmTrip.travelers) var trips: [MmTrip] = []
  init(name: String) { self.name = name }
}

/// Albums whose delete takes their photos (cascade), photos in several albums.
@Model final class MmAlbum {
  var title: String
  @Relationship(deleteRule: .cascade, inverse: \MmPhoto.albums) var photos: [MmPhoto] = []
  init(title: String) { self.title = title }
}

@Model final class MmPhoto {
  var caption: String
  @Relationship var albums: [MmAlbum] = []
  init(caption: String) { self.caption = caption }
}

/// Tags that cannot be deleted while something is tagged with them (deny).
@Model final class MmTag {
  var label: String
  @Relationship(deleteRule: .deny, inverse: \MmNote.tags) var notes: [MmNote] = []
  init(label: String) { self.label = label }
}

@Model final class MmNote {
  var text: String
  var tags: [MmTag] = []
  init(text: String) { self.text = text }
}

@Suite("Many-to-many relationships")
struct ManyToManyTests {
  func container(_ engine: TestEngine) throws -> ModelContainer {
    try engineContainer(engine, MmTrip.self, MmTraveler.self)
  }

  func names(_ travelers: [MmTraveler]) -> [String] { travelers.map(\.name).sorted() }
  func names(_ trips: [MmTrip]) -> [String] { trips.map(\.name).sorted() }

  func trip(_ name: String, in context: ModelContext) throws -> MmTrip {
    try #require(
      try context.fetch(FetchDescriptor<MmTrip>(predicate: #Predicate { $0.name == name })).first)
  }

  func traveler(_ name: String, in context: ModelContext) throws -> MmTraveler {
    try #require(
      try context.fetch(FetchDescriptor<MmTraveler>(predicate: #Predicate { $0.name == name }))
        .first)
  }

  /// The rows of the join table, as (trip name, traveler name), sorted.
  func links(_ container: ModelContainer) throws -> [String] {
    let context = ModelContext(container)
    var result: [String] = []
    for trip in try context.fetch(FetchDescriptor<MmTrip>()) {
      for traveler in trip.travelers { result.append("\(trip.name)-\(traveler.name)") }
    }
    return result.sorted()
  }

  @Test(
    "links made from either side are saved once and read back from both sides",
    arguments: TestEngine.allCases)
  func linkBothSides(engine: TestEngine) throws {
    let container = try container(engine)
    let context = ModelContext(container)
    let kyoto = MmTrip(name: "Kyoto")
    let lisbon = MmTrip(name: "Lisbon")
    let ana = MmTraveler(name: "Ana")
    let ben = MmTraveler(name: "Ben")
    context.insert(kyoto)
    context.insert(lisbon)
    kyoto.travelers = [ana, ben]
    // From the other side: Lisbon lists Ana too.
    ana.trips.append(lisbon)
    #expect(names(lisbon.travelers) == ["Ana"])
    #expect(names(ana.trips) == ["Kyoto", "Lisbon"])
    // Related models are inserted at once, as SwiftData's.
    #expect(ana.modelContext === context && ben.modelContext === context)
    try context.save()

    let reader = ModelContext(container)
    #expect(names(try trip("Kyoto", in: reader).travelers) == ["Ana", "Ben"])
    #expect(names(try trip("Lisbon", in: reader).travelers) == ["Ana"])
    #expect(names(try traveler("Ana", in: reader).trips) == ["Kyoto", "Lisbon"])
    #expect(names(try traveler("Ben", in: reader).trips) == ["Kyoto"])
    #expect(try links(container) == ["Kyoto-Ana", "Kyoto-Ben", "Lisbon-Ana"])
  }

  @Test(
    "removing and reassigning unlinks without deleting, from either side, in a later save",
    arguments: TestEngine.allCases)
  func unlink(engine: TestEngine) throws {
    let container = try container(engine)
    let setup = ModelContext(container)
    let kyoto = MmTrip(name: "Kyoto")
    setup.insert(kyoto)
    kyoto.travelers = [MmTraveler(name: "Ana"), MmTraveler(name: "Ben"), MmTraveler(name: "Cy")]
    try setup.save()

    let context = ModelContext(container)
    let loaded = try trip("Kyoto", in: context)
    loaded.travelers.removeAll { $0.name == "Ben" }
    #expect(context.hasChanges)
    #expect(loaded.hasChanges)
    // From the traveler's side, not loaded yet on the trip's (its array is read to know it).
    let cy = try traveler("Cy", in: context)
    cy.trips = []
    try context.save()
    #expect(!context.hasChanges)
    #expect(try links(container) == ["Kyoto-Ana"])
    // Unlinked, not deleted.
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MmTraveler>()) == 3)

    // Assignment: the array as set.
    let again = ModelContext(container)
    let dan = MmTraveler(name: "Dan")
    try trip("Kyoto", in: again).travelers = [try traveler("Ben", in: again), dan]
    try again.save()
    #expect(try links(container) == ["Kyoto-Ben", "Kyoto-Dan"])
  }

  @Test(
    "a save with only link changes writes them; the same link made twice is one row",
    arguments: TestEngine.allCases)
  func onlyLinks(engine: TestEngine) throws {
    let container = try container(engine)
    let setup = ModelContext(container)
    setup.insert(MmTrip(name: "Kyoto"))
    setup.insert(MmTraveler(name: "Ana"))
    try setup.save()

    // Two contexts make the same link: the second finds it made, and records nothing.
    let first = ModelContext(container)
    let second = ModelContext(container)
    try trip("Kyoto", in: first).travelers.append(try traveler("Ana", in: first))
    try trip("Kyoto", in: second).travelers.append(try traveler("Ana", in: second))
    let before = try historyCount(container)
    try first.save()
    #expect(try historyCount(container) == before + 2)
    try second.save()
    #expect(try historyCount(container) == before + 2)
    #expect(try links(container) == ["Kyoto-Ana"])
  }

  func historyCount(_ container: ModelContainer) throws -> Int {
    try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
      .reduce(0) { $0 + $1.changes.count }
  }

  @Test(
    "history records a link made or broken as an update of the rows on both sides",
    arguments: TestEngine.allCases)
  func history(engine: TestEngine) throws {
    let container = try container(engine)
    let setup = ModelContext(container)
    setup.insert(MmTrip(name: "Kyoto"))
    setup.insert(MmTraveler(name: "Ana"))
    try setup.save()
    let token = try #require(
      try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        .last?.token)

    let context = ModelContext(container)
    let kyoto = try trip("Kyoto", in: context)
    let ana = try traveler("Ana", in: context)
    ana.trips.append(kyoto)
    try context.save()
    var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
    descriptor.predicate = #Predicate { $0.token > token }
    let changes = try ModelContext(container).fetchHistory(descriptor).flatMap(\.changes)
    #expect(changes.count == 2)
    let updatedTrip = changes.contains { change in
      guard case .update(let update) = change, let trip = update as? DefaultHistoryUpdate<MmTrip>
      else { return false }
      return trip.changedPersistentIdentifier == kyoto.persistentModelID
        && change.updated(\MmTrip.travelers)
    }
    let updatedTraveler = changes.contains { change in
      guard case .update = change else { return false }
      return change.changedPersistentIdentifier == ana.persistentModelID
        && change.updated(\MmTraveler.trips)
    }
    #expect(updatedTrip && updatedTraveler)
  }

  @Test(
    "deleting a model deletes its links only (nullify); the other side forgets it",
    arguments: TestEngine.allCases)
  func deleteNullifies(engine: TestEngine) throws {
    let container = try container(engine)
    let setup = ModelContext(container)
    let kyoto = MmTrip(name: "Kyoto")
    let lisbon = MmTrip(name: "Lisbon")
    setup.insert(kyoto)
    setup.insert(lisbon)
    let ana = MmTraveler(name: "Ana")
    kyoto.travelers = [ana, MmTraveler(name: "Ben")]
    lisbon.travelers = [ana]
    try setup.save()

    let context = ModelContext(container)
    let loaded = try trip("Kyoto", in: context)
    #expect(names(loaded.travelers) == ["Ana", "Ben"])
    // Ana's trips are not loaded: the loaded trip forgets her anyway.
    context.delete(try traveler("Ana", in: context))
    try context.save()
    #expect(names(loaded.travelers) == ["Ben"])
    #expect(!context.hasChanges)
    #expect(try links(container) == ["Kyoto-Ben"])
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MmTrip>()) == 2)

    // A trip's delete: its travelers stay.
    context.delete(loaded)
    try context.save()
    #expect(try links(container) == [])
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MmTraveler>()) == 1)
  }

  @Test(
    "cascade deletes the linked models; deny refuses while links exist",
    arguments: TestEngine.allCases)
  func rules(engine: TestEngine) throws {
    let container = try engineContainer(
      engine, MmAlbum.self, MmPhoto.self, MmTag.self, MmNote.self)
    let context = ModelContext(container)
    let summer = MmAlbum(title: "Summer")
    let best = MmAlbum(title: "Best")
    context.insert(summer)
    context.insert(best)
    let beach = MmPhoto(caption: "beach")
    summer.photos = [beach, MmPhoto(caption: "dunes")]
    best.photos = [beach, MmPhoto(caption: "snow")]
    let travel = MmTag(label: "travel")
    let note = MmNote(text: "pack")
    context.insert(travel)
    note.tags = [travel]
    try context.save()

    // Removing a photo from an album unlinks it: it may be in other albums.
    summer.photos.removeAll { $0.caption == "dunes" }
    try context.save()
    #expect(try context.fetchCount(FetchDescriptor<MmPhoto>()) == 3)

    context.delete(summer)
    try context.save()
    let captions = try context.fetch(FetchDescriptor<MmPhoto>()).map(\.caption).sorted()
    #expect(captions == ["dunes", "snow"])
    #expect(best.photos.map(\.caption) == ["snow"])

    context.delete(travel)
    #expect(throws: PersistenceError.self) { try context.save() }
    do {
      try context.save()
    } catch let error as PersistenceError {
      #expect(error.code == .relationshipConstraint)
      #expect(error.message.contains("'notes'") && error.message.contains("still linked"))
    }
    context.rollback()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MmTag>()) == 1)
    note.tags = []
    context.delete(travel)
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MmTag>()) == 0)
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MmNote>()) == 1)
  }

  @Test(
    "predicates read links through the join table: contains(where:), count, isEmpty",
    arguments: TestEngine.allCases)
  func predicates(engine: TestEngine) throws {
    let container = try container(engine)
    let context = ModelContext(container)
    let kyoto = MmTrip(name: "Kyoto")
    let lisbon = MmTrip(name: "Lisbon")
    let oslo = MmTrip(name: "Oslo")
    [kyoto, lisbon, oslo].forEach(context.insert)
    let ana = MmTraveler(name: "Ana")
    kyoto.travelers = [ana, MmTraveler(name: "Ben")]
    lisbon.travelers = [ana]
    try context.save()

    let reader = ModelContext(container)
    func trips(_ predicate: Predicate<MmTrip>) throws -> [String] {
      names(try reader.fetch(FetchDescriptor(predicate: predicate)))
    }
    let name = "Ben"
    #expect(try trips(#Predicate { $0.travelers.contains { $0.name == name } }) == ["Kyoto"])
    #expect(try trips(#Predicate { $0.travelers.count == 1 }) == ["Lisbon"])
    #expect(try trips(#Predicate { $0.travelers.isEmpty }) == ["Oslo"])
    let travelers = try reader.fetch(
      FetchDescriptor<MmTraveler>(
        predicate: #Predicate { $0.trips.contains { $0.name == "Lisbon" } }))
    #expect(names(travelers) == ["Ana"])
    #expect(
      try reader.fetchCount(
        FetchDescriptor<MmTraveler>(predicate: #Predicate { $0.trips.count > 1 }))
        == 1)
  }

  @Test(
    "prefetch loads every owner's links in two queries, in the related rows' order",
    arguments: TestEngine.allCases)
  func prefetch(engine: TestEngine) throws {
    let container = try container(engine)
    let context = ModelContext(container)
    for index in 0..<20 {
      let trip = MmTrip(name: "trip \(index)")
      context.insert(trip)
      trip.travelers = (0..<(index % 4)).map { MmTraveler(name: "t\(index)-\($0)") }
    }
    try context.save()

    let reader = ModelContext(container)
    var descriptor = FetchDescriptor<MmTrip>(sortBy: [SortDescriptor(\.name)])
    descriptor.relationshipKeyPathsForPrefetching = [\.travelers]
    let trips = try reader.fetch(descriptor)
    let before = reader.relationshipQueryCount
    for trip in trips {
      let index = Int(trip.name.dropFirst(5))!
      #expect(trip.travelers.map(\.name) == (0..<(index % 4)).map { "t\(index)-\($0)" })
    }
    #expect(reader.relationshipQueryCount == before)
  }

  @Test(
    "rollback forgets link changes; a refused save leaves them to retry",
    arguments: TestEngine.allCases)
  func rollback(engine: TestEngine) throws {
    let container = try container(engine)
    let context = ModelContext(container)
    let kyoto = MmTrip(name: "Kyoto")
    context.insert(kyoto)
    context.insert(MmTraveler(name: "Ana"))
    try context.save()
    let ana = try traveler("Ana", in: context)
    kyoto.travelers.append(ana)
    context.rollback()
    #expect(kyoto.travelers.isEmpty)
    #expect(!context.hasChanges)
    try context.save()
    #expect(try links(container) == [])
  }
}
