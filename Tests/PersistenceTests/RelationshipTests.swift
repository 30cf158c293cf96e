import Foundation
import Observation
import Persistence
import Testing

@testable import PersistenceCore
@testable import PersistencePostgreSQL
@testable import PersistenceSQLite

// A service's own related models: a hotel, its rooms (cascade, ordered by number), its manager
// (a one-to-one, cascade, the key kept by the manager), its bookings (deny) and its reviews
// (nullify).

@Observable final class Hotel: PersistentModel {
  var name = ""
  let roomsLink = ToMany<Room>()
  var rooms: [Room] {
    get { roomsLink.value(of: self) }
    set { roomsLink.set(newValue, of: self) }
  }
  let managerLink = ToOne<Manager>()
  var manager: Manager? {
    get { managerLink.value(of: self) }
    set { managerLink.set(newValue, of: self) }
  }
  let bookingsLink = ToMany<Booking>()
  var bookings: [Booking] {
    get { bookingsLink.value(of: self) }
    set { bookingsLink.set(newValue, of: self) }
  }
  let reviewsLink = ToMany<Review>()
  var reviews: [Review] {
    get { reviewsLink.value(of: self) }
    set { reviewsLink.set(newValue, of: self) }
  }
  let memosLink = ToMany<Memo>()
  var memos: [Memo] {
    get { memosLink.value(of: self) }
    set { memosLink.set(newValue, of: self) }
  }

  init() {}
  init(_ name: String) { self.name = name }

  static let schema = ModelSchema<Hotel>(
    "hotels",
    .attribute(\.name, "name", .unique, .preserveValueOnDeletion),
    .toMany(
      \.rooms, "rooms", link: \.roomsLink, inverse: \.hotel, deleteRule: .cascade,
      orderBy: \.number),
    .toOne(
      \.manager, "manager", link: \.managerLink, inverse: \.hotel, deleteRule: .cascade,
      storesKey: false),
    .toMany(\.bookings, "bookings", link: \.bookingsLink, inverse: \.hotel, deleteRule: .deny),
    .toMany(\.reviews, "reviews", link: \.reviewsLink, inverse: \.hotel),
    .toMany(\.memos, "memos", link: \.memosLink, inverse: \.hotel, deleteRule: .noAction))
}

@Observable final class Memo: PersistentModel {
  var text = ""
  let hotelLink = ToOne<Hotel>()
  var hotel: Hotel? {
    get { hotelLink.value(of: self) }
    set { hotelLink.set(newValue, of: self) }
  }

  init() {}
  init(_ text: String) { self.text = text }

  static let schema = ModelSchema<Memo>(
    "memos",
    .attribute(\.text, "text"),
    .toOne(\.hotel, "hotel", link: \.hotelLink, inverse: \.memos))
}

@Observable final class Room: PersistentModel {
  var number = 0
  let hotelLink = ToOne<Hotel>()
  var hotel: Hotel? {
    get { hotelLink.value(of: self) }
    set { hotelLink.set(newValue, of: self) }
  }

  init() {}
  init(_ number: Int) { self.number = number }

  static let schema = ModelSchema<Room>(
    "rooms",
    .attribute(\.number, "number", .preserveValueOnDeletion),
    .toOne(\.hotel, "hotel", link: \.hotelLink, inverse: \.rooms)
  ).loading { row in
    let room = Room()
    room.number = try row.next(\.number)
    return room
  }
}

/// A value stored opaquely.
struct Badge: Codable, Hashable, Sendable {
  var level = 0
}

@Observable final class Manager: PersistentModel {
  var name = ""
  var badge: Badge? = nil
  let hotelLink = ToOne<Hotel>()
  var hotel: Hotel? {
    get { hotelLink.value(of: self) }
    set { hotelLink.set(newValue, of: self) }
  }

  init() {}
  init(_ name: String) { self.name = name }

  static let schema = ModelSchema<Manager>(
    "managers",
    .attribute(\.name, "name", .indexed),
    .codable(\.badge, "badge"),
    .toOne(\.hotel, "hotel", link: \.hotelLink, inverse: \.manager))
}

@Observable final class Booking: PersistentModel {
  var guest = ""
  let hotelLink = ToOne<Hotel>()
  var hotel: Hotel? {
    get { hotelLink.value(of: self) }
    set { hotelLink.set(newValue, of: self) }
  }

  init() {}
  init(_ guest: String) { self.guest = guest }

  static let schema = ModelSchema<Booking>(
    "bookings",
    .attribute(\.guest, "guest"),
    .toOne(\.hotel, "hotel", link: \.hotelLink, inverse: \.bookings))
}

@Observable final class Review: PersistentModel {
  var text = ""
  let hotelLink = ToOne<Hotel>()
  var hotel: Hotel? {
    get { hotelLink.value(of: self) }
    set { hotelLink.set(newValue, of: self) }
  }

  init() {}
  init(_ text: String) { self.text = text }

  static let schema = ModelSchema<Review>(
    "reviews",
    .attribute(\.text, "text"),
    .toOne(\.hotel, "hotel", link: \.hotelLink, inverse: \.reviews)
  ).saving { review, row in
    try row.bind(\.text, review.text)
  }
}

let hotelModels: [any PersistentModel.Type] = [
  Hotel.self, Room.self, Manager.self, Booking.self, Review.self, Memo.self,
]

extension TestStore {
  func hotels() throws -> ModelContainer {
    try ModelContainer(for: hotelModels, configuration: ModelConfiguration(url: url))
  }

}

/// Counts of each table's rows.
func rowCounts(_ context: ModelContext) throws -> [String: Int] {
  [
    "hotels": try context.fetchCount(FetchDescriptor<Hotel>()),
    "rooms": try context.fetchCount(FetchDescriptor<Room>()),
    "managers": try context.fetchCount(FetchDescriptor<Manager>()),
    "bookings": try context.fetchCount(FetchDescriptor<Booking>()),
    "reviews": try context.fetchCount(FetchDescriptor<Review>()),
  ]
}

@Suite("Relationships, on every engine")
struct RelationshipTests {
  /// A hotel with rooms 3, 1, 2 (set from both sides), a manager and a review, saved.
  func seed(_ container: ModelContainer) throws -> ModelContext {
    let context = ModelContext(container)
    let hotel = Hotel("Kyoto Inn")
    context.insert(hotel)
    let three = Room(3)
    hotel.rooms.append(three)
    let one = Room(1)
    one.hotel = hotel
    hotel.rooms.append(Room(2))
    hotel.manager = Manager("Aiko")
    hotel.reviews = [Review("quiet")]
    #expect(hotel.rooms.map(\.number) == [3, 1, 2])
    #expect(one.hotel === hotel && three.hotel === hotel)
    #expect(hotel.manager?.hotel === hotel)
    try context.save()
    return context
  }

  /// ``seed(_:)``'s hotel, then an annex with rooms 7 and 8 and a manager, a hotel with
  /// nothing, and room 9 in no hotel.
  func seedThreeHotels(_ container: ModelContainer) throws {
    let context = try seed(container)
    let annex = Hotel("Annex")
    context.insert(annex)
    annex.rooms = [Room(7), Room(8)]
    annex.manager = Manager("Ren")
    context.insert(Hotel("Empty"))
    context.insert(Room(9))
    try context.save()
  }

  @Test(
    "setting either side updates the other before a save; the save inserts what is reached, parents first; a new context faults each side in with one query, in the declared order, one object per row",
    arguments: TestEngine.allCases)
  func roundTrip(engine: TestEngine) throws {
    let store = try engine.makeStore()
    _ = try seed(try store.hotels())
    let context = ModelContext(try store.hotels())
    #expect(
      try rowCounts(context) == [
        "hotels": 1, "rooms": 3, "managers": 1, "bookings": 0, "reviews": 1,
      ])
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    #expect(context.relationshipQueryCount == 0)
    let rooms = hotel.rooms
    #expect(context.relationshipQueryCount == 1)
    #expect(rooms.map(\.number) == [1, 2, 3])
    #expect(rooms.allSatisfy { $0.hotel === hotel })
    #expect(context.relationshipQueryCount == 1)  // the rooms' hotel is registered already
    _ = hotel.rooms
    #expect(context.relationshipQueryCount == 1)
    #expect(hotel.manager?.name == "Aiko")
    #expect(context.relationshipQueryCount == 2)
    #expect(hotel.manager?.hotel === hotel)

    let other = ModelContext(try store.hotels())
    let room = try #require(try other.fetch(FetchDescriptor<Room>()).first)
    #expect(other.relationshipQueryCount == 0)
    let owner = try #require(room.hotel)
    #expect(other.relationshipQueryCount == 1)
    #expect(owner.name == "Kyoto Inn")
    #expect(try other.fetch(FetchDescriptor<Hotel>()).first === owner)
  }

  @Test(
    "a deleted child's tombstone keeps its parent's key (deleted alone, and by a cascade) when the model preserves an attribute; a model that preserves none keeps none",
    arguments: TestEngine.allCases)
  func tombstonesNameTheParent(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let context = try seed(try store.hotels())
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    let hotelKey = try #require(context.persistentIdentifier(for: hotel)?.primaryKey)
    let before = try context.currentHistoryToken()
    let room = try #require(hotel.rooms.first)
    context.delete(room)
    let review = try #require(hotel.reviews.first)
    context.delete(review)
    try context.save()
    context.delete(hotel)
    try context.save()
    let deletes = try context.fetchHistory(HistoryDescriptor(after: before)).flatMap(\.changes)
      .filter { $0.kind == .delete }
    let rooms = deletes.filter { $0.changedPersistentIdentifier.entityName == "rooms" }
    #expect(rooms.count == 3)
    #expect(rooms.allSatisfy { $0.tombstone(as: Room.self)?.key(of: \.hotel) == hotelKey })
    #expect(
      rooms.compactMap { $0.tombstone(as: Room.self)?[\.number] as? Int }.sorted() == [1, 2, 3])
    let reviews = deletes.filter { $0.changedPersistentIdentifier.entityName == "reviews" }
    #expect(
      reviews.count == 1
        && reviews.allSatisfy { $0.tombstone(as: Review.self)?.key(of: \.hotel) == nil })
    let hotels = deletes.filter { $0.changedPersistentIdentifier.entityName == "hotels" }
    #expect(
      hotels.count == 1
        && hotels.first?.tombstone(as: Hotel.self)?[\.name] as? String == "Kyoto Inn")
  }

  @Test(
    "a prefetch loads each relationship in one query for all the models; without it, touching every to-many costs a query per model",
    arguments: TestEngine.allCases)
  func prefetch(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    do {
      let context = ModelContext(container)
      for index in 0..<5 {
        let hotel = Hotel("Hotel \(index)")
        context.insert(hotel)
        hotel.rooms = (0..<index).reversed().map { Room($0) }
        if index.isMultiple(of: 2) { hotel.manager = Manager("M\(index)") }
      }
      try context.save()
    }
    let sorted = [SortDescriptor(\Hotel.name)]
    let context = ModelContext(container)
    var descriptor = FetchDescriptor<Hotel>(sortBy: sorted)
    descriptor.relationshipKeyPathsForPrefetching = [\.rooms, \.manager]
    let hotels = try context.fetch(descriptor)
    #expect(context.relationshipQueryCount == 2)
    #expect(hotels.map { $0.rooms.map(\.number) } == (0..<5).map { Array(0..<$0) })
    #expect(hotels.map { $0.manager?.name } == ["M0", nil, "M2", nil, "M4"])
    #expect(hotels.allSatisfy { hotel in hotel.rooms.allSatisfy { $0.hotel === hotel } })
    #expect(context.relationshipQueryCount == 2)

    let rooms = ModelContext(container)
    var byRoom = FetchDescriptor<Room>()
    byRoom.relationshipKeyPathsForPrefetching = [\.hotel]
    let all = try rooms.fetch(byRoom)
    #expect(all.count == 10)
    #expect(rooms.relationshipQueryCount == 1)
    #expect(Set(all.compactMap { $0.hotel?.name }).count == 4)
    #expect(rooms.relationshipQueryCount == 1)

    let lazy = ModelContext(container)
    let unfetched = try lazy.fetch(FetchDescriptor<Hotel>(sortBy: sorted))
    #expect(unfetched.map(\.rooms.count) == [0, 1, 2, 3, 4])
    #expect(lazy.relationshipQueryCount == 5)

    var wrong = FetchDescriptor<Hotel>()
    wrong.relationshipKeyPathsForPrefetching = [\.name]
    let error = try #require(throws: PersistenceError.self) { try context.fetch(wrong) }
    #expect(error.message.contains("not a relationship of Hotel"))
  }

  @Test(
    "a prefetch for 70,000 models, past every engine's limit on parameters, is one query",
    arguments: TestEngine.allCases)
  func largePrefetch(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    let count = 70_000
    do {
      let context = ModelContext(container)
      var last = Hotel()
      for index in 0..<count {
        last = Hotel("H\(index)")
        context.insert(last)
      }
      last.rooms = [Room(1)]
      try context.save()
    }
    let context = ModelContext(container)
    var descriptor = FetchDescriptor<Hotel>()
    descriptor.relationshipKeyPathsForPrefetching = [\.rooms]
    let hotels = try context.fetch(descriptor)
    #expect(hotels.count == count)
    #expect(context.relationshipQueryCount == 1)
    #expect(hotels.reduce(0) { $0 + $1.rooms.count } == 1)
    #expect(context.relationshipQueryCount == 1)
  }

  @Test(
    "predicates through a to-one (optional chaining, two steps, nil) and over a to-many (contains(where:), allSatisfy, isEmpty, count) select in SQL what Predicate.evaluate selects",
    arguments: TestEngine.allCases)
  func predicates(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    try seedThreeHotels(container)
    let context = ModelContext(container)
    let names = ["Kyoto Inn", "Empty", "Nowhere"]
    let rooms: [Predicate<Room>] = [
      #Predicate { $0.hotel?.name == "Kyoto Inn" },
      #Predicate { !($0.hotel?.name == "Kyoto Inn") },
      #Predicate { $0.hotel?.name == nil },
      #Predicate { $0.hotel?.name != nil && $0.number > 2 },
      #Predicate { ($0.hotel?.name ?? "none") != "Annex" },
      #Predicate { $0.hotel?.manager?.name == "Aiko" },
      #Predicate { $0.hotel?.name != "Annex" },
      #Predicate { $0.hotel?.rooms.contains { $0.number == 8 } == true },
      #Predicate { $0.hotel.flatMap { names.contains($0.name) } ?? false },
      #Predicate { !($0.hotel.flatMap { names.contains($0.name) } ?? false) },
      #Predicate { $0.hotel.flatMap { names.contains($0.name) } == false },
    ]
    let allRooms = try context.fetch(FetchDescriptor<Room>())
    // Named by their place in the list: describing some predicates traps in Foundation.
    for (index, predicate) in rooms.enumerated() {
      let fetched = try context.fetch(FetchDescriptor(predicate: predicate)).map(\.number)
      let evaluated = try allRooms.filter { try predicate.evaluate($0) }.map(\.number)
      #expect(fetched.sorted() == evaluated.sorted(), "room predicate \(index)")
      #expect(try context.fetchCount(FetchDescriptor(predicate: predicate)) == evaluated.count)
    }
    let hotels: [Predicate<Hotel>] = [
      #Predicate { $0.rooms.contains { $0.number > 2 } },
      #Predicate { $0.rooms.isEmpty },
      #Predicate { $0.rooms.count >= 2 },
      #Predicate { $0.rooms.allSatisfy { $0.number < 3 } },
      #Predicate { $0.manager?.name == "Aiko" },
      #Predicate { $0.manager?.name == nil },
      #Predicate { $0.rooms.contains { $0.number == 1 } && !$0.reviews.isEmpty },
      #Predicate { hotel in
        hotel.rooms.contains { room in room.number > 1 && hotel.name != "Annex" }
      },
      // Swift-only functions inside a to-many's test (PostgreSQL narrows them, Swift finishes).
      #Predicate { $0.reviews.contains { $0.text.localizedStandardContains("QUIET") } },
      #Predicate {
        $0.reviews.contains {
          $0.text.localizedStandardContains("loud") || $0.text.localizedStandardContains("quiet")
        }
      },
      #Predicate { $0.reviews.allSatisfy { $0.text.localizedStandardContains("qui") } },
      #Predicate { !$0.reviews.allSatisfy { $0.text.localizedStandardContains("loud") } },
    ]
    let allHotels = try context.fetch(FetchDescriptor<Hotel>())
    #expect(allHotels.count == 3)
    for (index, predicate) in hotels.enumerated() {
      let fetched = try context.fetch(FetchDescriptor(predicate: predicate)).map(\.name)
      let evaluated = try allHotels.filter { try predicate.evaluate($0) }.map(\.name)
      #expect(fetched.sorted() == evaluated.sorted(), "hotel predicate \(index)")
    }
    // A forced unwrap through the to-one: no match for a room in no hotel (where Swift would
    // stop), the others as Swift selects them.
    let unwrapped = #Predicate<Room> { names.contains($0.hotel!.name) }
    let inHotels = allRooms.filter { $0.hotel != nil }
    #expect(allRooms.count > inHotels.count)
    #expect(
      try context.fetch(FetchDescriptor(predicate: unwrapped)).map(\.number).sorted()
        == (try inHotels.filter { try unwrapped.evaluate($0) }.map(\.number).sorted()))
    // A second predicate of one shape reuses the first's translation with its own values.
    let kyoto = "Kyoto Inn"
    let annex = "Annex"
    #expect(
      try context.fetch(FetchDescriptor<Room>(predicate: #Predicate { $0.hotel?.name == kyoto }))
        .count == 3)
    #expect(
      try context.fetch(FetchDescriptor<Room>(predicate: #Predicate { $0.hotel?.name == annex }))
        .count == 2)
  }

  @Test(
    "a results observer whose predicate reads a relationship follows changes to the related rows",
    arguments: TestEngine.allCases)
  func observer(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    let context = try seed(container)
    let observer = try ResultsObserver(
      FetchDescriptor<Room>(
        predicate: #Predicate { $0.hotel?.name == "Kyoto Inn" }, sortBy: [SortDescriptor(\.number)]),
      modelContext: ModelContext(container))
    #expect(observer.results.map(\.number) == [1, 2, 3])
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    hotel.name = "Kyoto Annex"
    try context.save()
    #expect(eventually { observer.results.isEmpty })
    hotel.name = "Kyoto Inn"
    hotel.rooms.removeAll { $0.number == 2 }
    try context.save()
    #expect(eventually { observer.results.map(\.number) == [1, 3] })
  }

  @Test(
    "sorts and sections through to-ones (one step, two, a one-to-one keyed on the other side; nil first) order in SQL as Swift's sort does, windowed and paged too; an observer sorted so follows renames",
    arguments: TestEngine.allCases)
  func relatedSorts(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    try seedThreeHotels(container)
    let context = ModelContext(container)
    let allRooms = try context.fetch(FetchDescriptor<Room>())
    let orders: [[SortDescriptor<Room>]] = [
      [SortDescriptor(\.hotel?.name), SortDescriptor(\.number)],
      [SortDescriptor(\.hotel?.name, order: .reverse), SortDescriptor(\.number, order: .reverse)],
      [SortDescriptor(\.hotel?.manager?.name, order: .reverse), SortDescriptor(\.number)],
      [SortDescriptor(\.hotel?.name)],
    ]
    for order in orders {
      let expected = allRooms.sorted(using: order).map(\.number)
      #expect(try context.fetch(FetchDescriptor(sortBy: order)).map(\.number) == expected)
      var window = FetchDescriptor(sortBy: order)
      window.fetchLimit = 3
      window.fetchOffset = 1
      #expect(try context.fetch(window).map(\.number) == Array(expected.dropFirst(1).prefix(3)))
      let page = try context.fetchPage(window)
      #expect(
        try context.models(for: page.identifiers, as: Room.self).map(\.number)
          == Array(expected.dropFirst(1).prefix(3)))
      #expect(page.matched == expected.count)
    }
    #expect(
      try context.fetch(FetchDescriptor(sortBy: [SortDescriptor(\Room.number)])).map(\.number)
        == [1, 2, 3, 7, 8, 9])
    let hotels = try context.fetch(
      FetchDescriptor(sortBy: [SortDescriptor(\Hotel.manager?.name)]))
    #expect(hotels.map(\.name) == ["Empty", "Kyoto Inn", "Annex"])

    let sections = try context.fetch(
      FetchDescriptor(sortBy: [SortDescriptor(\Room.number, order: .reverse)]),
      sectionBy: \Room.hotel?.name)
    #expect(sections.map(\.id) == [nil, "Annex", "Kyoto Inn"])
    #expect(sections.map { $0.map(\.number) } == [[9], [8, 7], [3, 2, 1]])
    let managed = try context.fetch(FetchDescriptor<Room>(), sectionBy: \Room.hotel?.manager?.name)
    #expect(managed.map(\.id) == [nil, "Aiko", "Ren"])

    let unsupported = #expect(throws: PersistenceError.self) {
      try context.fetch(FetchDescriptor(sortBy: [SortDescriptor(\Hotel.rooms.count)]))
    }
    #expect(unsupported?.code == .unsupportedPredicate)
    #expect(
      unsupported?.message.contains("nor one reached through to-one relationships") == true,
      "\(String(describing: unsupported))")

    let observer = try ResultsObserver(
      FetchDescriptor<Room>(sortBy: [SortDescriptor(\.hotel?.name), SortDescriptor(\.number)]),
      modelContext: ModelContext(container))
    #expect(observer.results.map(\.number) == [9, 7, 8, 1, 2, 3])
    let annex = try #require(hotels.last)
    annex.name = "Zen"
    try context.save()
    #expect(eventually { observer.results.map(\.number) == [9, 1, 2, 3, 7, 8] })
    let room = try #require(allRooms.first { $0.number == 9 })
    room.hotel = annex
    try context.save()
    #expect(eventually { observer.results.map(\.number) == [1, 2, 3, 7, 8, 9] })
  }

  @Test(
    "deleting the side of a one-to-one that keeps the key, reached from the other side, leaves the other side pointing to nothing",
    arguments: TestEngine.allCases)
  func deleteDependentOneToOne(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    _ = try seed(container)
    let context = ModelContext(container)
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    let manager = try #require(hotel.manager)
    context.delete(manager)
    try context.save()
    #expect(hotel.manager == nil)
    let fresh = ModelContext(container)
    #expect(try fresh.fetch(FetchDescriptor<Hotel>()).first?.manager == nil)
    #expect(try context.fetchCount(FetchDescriptor<Manager>()) == 0)
  }

  @Test(
    "an observer whose predicate calls a Swift-only function through a to-many keeps its matches as their rows change (PostgreSQL finishes it in Swift, through a context)",
    arguments: TestEngine.allCases)
  func observerFinishedThroughRelationships(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    let context = try seed(container)
    let observer = try ResultsObserver(
      FetchDescriptor<Hotel>(
        predicate: #Predicate { $0.reviews.contains { $0.text.localizedStandardContains("QUIET") } }
      ), modelContext: ModelContext(container))
    #expect(observer.results.map(\.name) == ["Kyoto Inn"])
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    hotel.name = "Kyoto Inn East"
    try context.save()
    #expect(eventually { observer.results.map(\.name) == ["Kyoto Inn East"] })
    hotel.reviews.first?.text = "loud"
    try context.save()
    #expect(eventually { observer.results.isEmpty })
    hotel.reviews.first?.text = "very quiet"
    try context.save()
    #expect(eventually { observer.results.map(\.name) == ["Kyoto Inn East"] })
  }

  @Test("SQLite: an equality through a to-one is served by the related table's index and the key's")
  func equalityUsesIndexes() throws {
    let store = try TestEngine.sqlite.makeStore()
    let context = ModelContext(try store.hotels())
    let plan = try context.explainQueryPlan(
      FetchDescriptor<Room>(predicate: #Predicate { $0.hotel?.name == "Kyoto Inn" }))
    #expect(plan.contains { $0.contains("rooms_hotel_index") }, "\(plan)")
    #expect(plan.contains { $0.contains("hotels_name_unique") }, "\(plan)")
    #expect(!plan.contains { $0.hasPrefix("SCAN rooms") }, "\(plan)")
  }

  @Test(
    "SQLite: [values].contains through a to-one is served by the related table's index and the key's"
  )
  func containsUsesIndexes() throws {
    let store = try TestEngine.sqlite.makeStore()
    let context = ModelContext(try store.hotels())
    let names = ["Kyoto Inn", "Annex"]
    for predicate in [
      #Predicate<Room> { names.contains($0.hotel!.name) },
      #Predicate<Room> { $0.hotel.flatMap { names.contains($0.name) } ?? false },
    ] {
      let plan = try context.explainQueryPlan(FetchDescriptor<Room>(predicate: predicate))
      #expect(plan.contains { $0.contains("hotels_name_unique") }, "\(plan)")
    }
    let plan = try context.explainQueryPlan(
      FetchDescriptor<Room>(predicate: #Predicate { names.contains($0.hotel!.name) }))
    #expect(plan.contains { $0.contains("rooms_hotel_index") }, "\(plan)")
    #expect(!plan.contains { $0.hasPrefix("SCAN rooms") }, "\(plan)")
  }

  @Test(
    "enumerateValues reads a to-one that stores its key as the related row's primary key, nil for none",
    arguments: TestEngine.allCases)
  func valuesReadKeys(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    try seedThreeHotels(container)
    let context = ModelContext(container)
    var keys: [Int: Int64?] = [:]
    try context.enumerateValues(FetchDescriptor<Room>(), [\Room.number, \Room.hotel]) { row in
      keys.updateValue(
        try row.value(Int?.self, at: 1).map(Int64.init), forKey: try row.value(Int.self, at: 0))
    }
    for room in try context.fetch(FetchDescriptor<Room>()) {
      let expected = room.hotel.flatMap { context.persistentIdentifier(for: $0) }
      #expect(keys[room.number] == .some(expected?.primaryKey), "room \(room.number)")
    }
    #expect(keys[9] == .some(nil))
  }

  @Test("a predicate through a relationship to a .codable attribute is an error naming it")
  func codableThroughRelationship() throws {
    let store = try TestEngine.sqlite.makeStore()
    let container = try store.hotels()
    let context = ModelContext(container)
    let error = try #require(throws: PersistenceError.self) {
      try context.fetch(
        FetchDescriptor<Hotel>(predicate: #Predicate { $0.manager?.badge?.level == 2 }))
    }
    #expect(error.code == .unsupportedPredicate)
    #expect(error.message.contains("'badge' of Manager"))
  }

  @Test(
    "moving a child takes it from one array to the other at once and in the store; removing it nullifies (or, under cascade, deletes) it",
    arguments: TestEngine.allCases)
  func moving(engine: TestEngine) throws {
    let store = try engine.makeStore()
    _ = try seed(try store.hotels())
    let context = ModelContext(try store.hotels())
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    let annex = Hotel("Annex")
    context.insert(annex)
    let room = try #require(hotel.rooms.first)
    room.hotel = annex
    #expect(hotel.rooms.map(\.number) == [2, 3])
    #expect(annex.rooms.map(\.number) == [1])
    let review = try #require(hotel.reviews.first)
    hotel.reviews = []
    #expect(review.hotel == nil)
    hotel.rooms.removeAll { $0.number == 3 }
    try context.save()

    let fresh = ModelContext(try store.hotels())
    let hotels = try fresh.fetch(FetchDescriptor<Hotel>(sortBy: [SortDescriptor(\.name)]))
    #expect(hotels.map(\.name) == ["Annex", "Kyoto Inn"])
    #expect(hotels[0].rooms.map(\.number) == [1])
    #expect(hotels[1].rooms.map(\.number) == [2])
    #expect(try fresh.fetchCount(FetchDescriptor<Room>()) == 2)
    let stored = try #require(try fresh.fetch(FetchDescriptor<Review>()).first)
    #expect(stored.hotel == nil)
  }

  @Test(
    "deleting a hotel cascades to its rooms and manager, loaded or not, and nullifies its reviews, in one transaction whose history lists every row",
    arguments: TestEngine.allCases)
  func cascade(engine: TestEngine) throws {
    let store = try engine.makeStore()
    _ = try seed(try store.hotels())
    let context = ModelContext(try store.hotels())
    let token = try context.currentHistoryToken()
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    let loaded = try #require(hotel.rooms.first)
    let review = try #require(hotel.reviews.first)
    context.delete(hotel)
    try context.save()
    #expect(
      try rowCounts(context) == [
        "hotels": 0, "rooms": 0, "managers": 0, "bookings": 0, "reviews": 1,
      ])
    #expect(context.persistentIdentifier(for: loaded) == nil)
    #expect(review.hotel == nil)
    #expect(!context.hasChanges)
    let transactions = try context.fetchHistory(HistoryDescriptor(after: token))
    #expect(transactions.count == 1)
    let changes = try #require(transactions.first).changes
    let deleted = changes.filter { $0.kind == .delete }.map(
      \.changedPersistentIdentifier.entityName)
    #expect(deleted.sorted() == ["hotels", "managers", "rooms", "rooms", "rooms"])
    // Children before the rows they point to.
    #expect(deleted.last == "hotels")
    let updates = changes.filter { $0.kind == .update }
    #expect(updates.map(\.changedPersistentIdentifier.entityName) == ["reviews"])
    #expect(updates.first?.updatedAttributeNames == ["hotel"])
  }

  @Test(
    "a deny rule refuses the delete, naming the model, its row and the relationship; nothing is saved",
    arguments: TestEngine.allCases)
  func deny(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let context = try seed(try store.hotels())
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    hotel.bookings.append(Booking("Ito"))
    try context.save()
    context.delete(hotel)
    let error = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(error.code == .relationshipConstraint)
    #expect(error.message.contains("hotels row"))
    #expect(error.message.contains("'bookings'"))
    #expect(error.message.contains("bookings row"))
    let fresh = ModelContext(try store.hotels())
    #expect(
      try rowCounts(fresh) == ["hotels": 1, "rooms": 3, "managers": 1, "bookings": 1, "reviews": 1])
    // Deleting the booking in the same save lets the hotel go.
    let booking = try #require(hotel.bookings.first)
    context.delete(booking)
    try context.save()
    #expect(try rowCounts(fresh)["hotels"] == 0)
  }

  @Test(
    "under noAction the store refuses to delete a hotel that still has memos; moving them first lets it go",
    arguments: TestEngine.allCases)
  func noAction(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let context = try seed(try store.hotels())
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    let memo = Memo("call back")
    hotel.memos.append(memo)
    try context.save()
    context.delete(hotel)
    let error = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(error.code == .relationshipConstraint)
    let fresh = ModelContext(try store.hotels())
    #expect(try rowCounts(fresh)["hotels"] == 1)
    #expect(try fresh.fetchCount(FetchDescriptor<Memo>()) == 1)
    context.rollback()
    memo.hotel = nil
    context.delete(hotel)
    try context.save()
    #expect(try rowCounts(fresh)["hotels"] == 0)
    #expect(try fresh.fetch(FetchDescriptor<Memo>()).first?.hotel == nil)
  }

  @Test(
    "a child added to a hotel deleted in the same save, or by another context, is refused; nothing is saved",
    arguments: TestEngine.allCases)
  func deletedParent(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let context = try seed(try store.hotels())
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    context.delete(hotel)
    let room = Room(9)
    room.hotel = hotel
    context.insert(room)
    let same = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(same.code == .relationshipConstraint)
    #expect(same.message.contains("deleted in the same save"))
    context.rollback()

    let other = ModelContext(try store.hotels())
    let gone = try #require(try other.fetch(FetchDescriptor<Hotel>()).first)
    other.delete(gone)
    try other.save()
    let late = Room(10)
    context.insert(late)
    late.hotel = hotel
    let elsewhere = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(elsewhere.code == .relationshipConstraint)
    #expect(try rowCounts(other)["rooms"] == 0)
  }

  @Test(
    "a related model of another context is refused at save", arguments: TestEngine.allCases)
  func otherContext(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.hotels()
    _ = try seed(container)
    let one = ModelContext(container)
    let two = ModelContext(container)
    let hotel = try #require(try one.fetch(FetchDescriptor<Hotel>()).first)
    let room = Room(7)
    two.insert(room)
    room.hotel = hotel
    let error = try #require(throws: PersistenceError.self) { try two.save() }
    #expect(error.code == .relationshipConstraint)
    #expect(error.message.contains("another context"))
  }

  @Test(
    "rollback puts relationships back as saved", arguments: TestEngine.allCases)
  func rollback(engine: TestEngine) throws {
    let store = try engine.makeStore()
    _ = try seed(try store.hotels())
    let context = ModelContext(try store.hotels())
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    let room = try #require(hotel.rooms.first)
    room.hotel = nil
    #expect(hotel.rooms.count == 2)
    context.rollback()
    #expect(room.hotel === hotel)
    #expect(hotel.rooms.map(\.number) == [1, 2, 3])
    #expect(!context.hasChanges)
  }

  @Test(
    "a store made before the relationship gains its column in place; check reports a key that points nowhere, by row",
    arguments: TestEngine.allCases)
  func migration(engine: TestEngine) throws {
    let store = try engine.makeStore()
    do {
      let context = ModelContext(try store.container(PlainRoom.self))
      context.insert(PlainRoom(number: 5))
      try context.save()
    }
    let container = try store.hotels()
    let context = ModelContext(container)
    let room = try #require(try context.fetch(FetchDescriptor<Room>()).first)
    #expect(room.number == 5 && room.hotel == nil)
    let hotel = Hotel("New")
    context.insert(hotel)
    room.hotel = hotel
    try context.save()
    #expect(try container.checkIntegrity().isEmpty)
  }

  @Test(
    "a key damaged by hand (foreign keys off) is reported by the store check, by row",
    arguments: TestEngine.allCases)
  func damaged(engine: TestEngine) throws {
    let store = try engine.makeStore()
    _ = try seed(try store.hotels())
    let damage = [
      "UPDATE rooms SET hotel = 99 WHERE number = 2",
      "UPDATE rooms SET hotel = 98 WHERE number = 3",
    ]
    switch engine {
    case .sqlite:
      let database = try Database(path: store.url.path, flags: 2)  // SQLITE_OPEN_READWRITE
      try database.execute("PRAGMA foreign_keys = OFF")
      for sql in damage { try database.execute(sql) }
    case .postgreSQL:
      // The test cluster's user is a superuser, who may switch the foreign keys' triggers off.
      let url = store.url.absoluteString
      let connection = try Connection(conninfo: url, location: url)
      try connection.execute("ALTER TABLE rooms DISABLE TRIGGER ALL")
      for sql in damage { try connection.execute(sql) }
      try connection.execute("ALTER TABLE rooms ENABLE TRIGGER ALL")
    }
    let problems = try store.hotels().checkIntegrity()
    #expect(problems.count == 2, "\(problems)")
    #expect(
      problems.allSatisfy { $0.hasPrefix("rooms row ") && $0.contains("which does not exist") })
    #expect(problems.contains { $0.contains("hotel points to hotels row 99") })
    #expect(problems.contains { $0.contains("hotel points to hotels row 98") })
  }
}

/// `rooms` as a store made before rooms had a hotel.
@Observable final class PlainRoom: PersistentModel {
  var number = 0
  init() {}
  init(number: Int) { self.number = number }
  static let schema = ModelSchema<PlainRoom>("rooms", .attribute(\.number, "number"))
}

// MARK: Declarations the container refuses

@Observable final class Writer: PersistentModel {
  var name = ""
  let booksLink = ToMany<Book>()
  var books: [Book] {
    get { booksLink.value(of: self) }
    set { booksLink.set(newValue, of: self) }
  }
  let draftsLink = ToMany<Book>()
  var drafts: [Book] {
    get { draftsLink.value(of: self) }
    set { draftsLink.set(newValue, of: self) }
  }
  init() {}
  // Book.writer names books as its inverse, not drafts.
  static let schema = ModelSchema<Writer>(
    "writers", .attribute(\.name, "name"),
    .toMany(\.books, "books", link: \.booksLink, inverse: \.writer),
    .toMany(\.drafts, "drafts", link: \.draftsLink, inverse: \.writer))
}

@Observable final class Book: PersistentModel {
  var title = ""
  let writerLink = ToOne<Writer>()
  var writer: Writer? {
    get { writerLink.value(of: self) }
    set { writerLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<Book>(
    "books", .attribute(\.title, "title"),
    .toOne(\.writer, "writer", link: \.writerLink, inverse: \.books))
}

@Observable final class Loop: PersistentModel {
  var name = ""
  let parentLink = ToOne<Loop>()
  var parent: Loop? {
    get { parentLink.value(of: self) }
    set { parentLink.set(newValue, of: self) }
  }
  let childrenLink = ToMany<Loop>()
  var children: [Loop] {
    get { childrenLink.value(of: self) }
    set { childrenLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<Loop>(
    "loops", .attribute(\.name, "name"),
    .toOne(\.parent, "parent", link: \.parentLink, inverse: \.children),
    .toMany(\.children, "children", link: \.childrenLink, inverse: \.parent, deleteRule: .cascade))
}

@Model final class CycleA {
  var name = ""
  var b: CycleB?
  @Relationship(inverse: \CycleB.a) var bs: [CycleB] = []
  init() {}
}

@Model final class CycleB {
  var name = ""
  var a: CycleA?
  @Relationship(inverse: \CycleA.b) var owners: [CycleA] = []
  init() {}
}

@Observable final class Twin: PersistentModel {
  var name = ""
  let otherLink = ToOne<Twin>()
  var other: Twin? {
    get { otherLink.value(of: self) }
    set { otherLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<Twin>(
    "twins", .attribute(\.name, "name"),
    .toOne(\.other, "other", link: \.otherLink, inverse: \.other, deleteRule: .cascade))
}

@Observable final class Shelf: PersistentModel {
  var name = ""
  let volumesLink = ToMany<Volume>()
  var volumes: [Volume] {
    get { volumesLink.value(of: self) }
    set { volumesLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<Shelf>(
    "shelves", .attribute(\.name, "name"),
    .toMany(\.volumes, "volumes", link: \.volumesLink, inverse: \.shelf, orderBy: \.shelf))
}

@Observable final class Volume: PersistentModel {
  var title = ""
  let shelfLink = ToOne<Shelf>()
  var shelf: Shelf? {
    get { shelfLink.value(of: self) }
    set { shelfLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<Volume>(
    "volumes", .attribute(\.title, "title"),
    .toOne(\.shelf, "shelf", link: \.shelfLink, inverse: \.volumes))
}

@Suite("Relationships: declarations the container refuses")
struct RelationshipDeclarationTests {
  func refusal(_ types: [any PersistentModel.Type]) throws -> PersistenceError {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    let error = try #require(throws: PersistenceError.self) {
      _ = try ModelContainer(for: types, configuration: ModelConfiguration(url: url))
    }
    #expect(!FileManager.default.fileExists(atPath: url.path))
    return error
  }

  @Test(
    "a container given one model finds the models its relationships reach, as SwiftData's does",
    arguments: TestEngine.allCases)
  func reachedTargets(engine: TestEngine) throws {
    // Room reaches Hotel, which reaches Review.
    let container = try engineContainer(engine, Room.self)
    let context = ModelContext(container)
    let hotel = Hotel()
    hotel.name = "Inn"
    let room = Room()
    room.number = 7
    room.hotel = hotel
    context.insert(room)
    try context.save()
    let reader = ModelContext(container)
    #expect(try reader.fetch(FetchDescriptor<Hotel>()).map { $0.rooms.map(\.number) } == [[7]])
    #expect(try reader.fetchCount(FetchDescriptor<Review>()) == 0)
  }

  @Test("an inverse that does not point back")
  func inverseNotBack() throws {
    let error = try refusal([Writer.self, Book.self])
    #expect(error.message.contains("'drafts' of Writer"))
    #expect(error.message.contains("does not name it as its own inverse"))
  }

  @Test("a cycle of keys through two models (each stores a key to the other)")
  func cycle() throws {
    let error = try refusal([CycleA.self, CycleB.self])
    #expect(error.message.contains("cycle"))
    #expect(error.message.contains("CycleA → CycleB → CycleA"), "\(error.message)")
  }

  @Test(
    "a model pointing to its own kind (a tree) is accepted, its key referencing its own table",
    arguments: TestEngine.allCases)
  func tree(engine: TestEngine) throws {
    let container = try engineContainer(engine, Loop.self)
    let context = ModelContext(container)
    let root = Loop()
    root.name = "root"
    let child = Loop()
    child.name = "child"
    child.parent = root
    context.insert(child)
    try context.save()
    let reader = ModelContext(container)
    let read = try reader.fetch(FetchDescriptor<Loop>(predicate: #Predicate { $0.name == "root" }))
    #expect(read.first?.children.map(\.name) == ["child"])
  }

  @Test("a one-to-one whose both sides store the key, with a rule on a storing side")
  func contradiction() throws {
    let error = try refusal([Twin.self])
    #expect(error.message.contains("'other' of Twin"))
    #expect(error.message.contains("both sides"))
  }

  @Test("an order that is not an attribute of the related model")
  func badOrder() throws {
    let error = try refusal([Shelf.self, Volume.self])
    #expect(error.message.contains("'volumes' of Shelf"))
    #expect(error.message.contains("not a stored attribute of Volume"))
  }
}

@Suite("Values of related rows read by their owners' keys, on every engine")
struct RelatedValuesTests {
  @Test(
    "enumerateValues(relatedTo:through:) reads the rooms of given hotels by the key column, leaves out other hotels, other entities and other stores, and refuses a to-one without the key",
    arguments: TestEngine.allCases)
  func roomsOfHotels(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let context = ModelContext(try store.hotels())
    var hotels: [Hotel] = []
    for name in ["A", "B", "C"] {
      let hotel = Hotel(name)
      context.insert(hotel)
      hotel.rooms = (1...3).map { Room($0 + 10 * hotels.count) }
      hotels.append(hotel)
    }
    context.insert(Room(99))  // in no hotel
    try context.save()
    let wanted = try [hotels[0], hotels[2]].map {
      try #require(context.persistentIdentifier(for: $0))
    }
    let other = try #require(context.persistentIdentifier(for: hotels[1]))
    let foreign = PersistentIdentifier(
      storeIdentifier: UUID(), entityName: "hotels", primaryKey: other.primaryKey)
    let otherEntity = PersistentIdentifier(
      storeIdentifier: other.storeIdentifier, entityName: "rooms", primaryKey: other.primaryKey)
    var rows: [(hotel: Int?, number: Int)] = []
    try context.enumerateValues(
      relatedTo: wanted + [foreign, otherEntity], through: \Room.hotel, [\Room.hotel, \Room.number]
    ) { row in
      rows.append((try row.value(Int?.self, at: 0), try row.value(Int.self, at: 1)))
    }
    #expect(rows.map(\.number).sorted() == [1, 2, 3, 21, 22, 23])
    let keys = Set(wanted.map { Int($0.primaryKey) })
    #expect(rows.allSatisfy { $0.hotel.map(keys.contains) == true })
    // Hotel's manager is a to-one whose key the manager stores: there is no column to read by.
    let error = try #require(throws: PersistenceError.self) {
      try context.enumerateValues(relatedTo: wanted, through: \Hotel.manager, [\Hotel.name]) {
        _ in
      }
    }
    #expect(error.code == .unsupportedPredicate)
    #expect(error.message.contains("manager"), "\(error.message)")
    // No owners, no query and no rows.
    try context.enumerateValues(relatedTo: [], through: \Room.hotel, [\Room.number]) { _ in
      Issue.record("a row without owners")
    }
  }
}
