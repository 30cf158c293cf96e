import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

/// Every query the core writes for a relationship, as the engine plans it: a table reached
/// through a relationship is read through an index on its key column (or its primary key),
/// never scanned, so that a page's relationship reads cost O(its rows · log n), not O(n).
@Suite("Relationship queries use the key columns' indexes, on every engine")
struct QueryPlanTests {
  /// A container on a new store of `engine` whose queries `recorder` records.
  func recordedHotels(_ engine: TestEngine) throws -> (ModelContainer, RecordingEngine, TestStore) {
    let store = try engine.makeStore()
    let configuration = ModelConfiguration(url: store.url)
    let recorder = RecordingEngine(try configuration.defaultEngine())
    let container = try ModelContainer(
      for: hotelModels, configuration: configuration, engine: recorder)
    return (container, recorder, store)
  }

  /// Runs `body`, then checks the plan of every `SELECT` it ran on an entity's table: no table
  /// but those of `scanning` is read whole. Returns the number of queries checked.
  @discardableResult
  func expectIndexed(
    _ recorder: RecordingEngine, _ engine: TestEngine, scanning allowed: Set<String> = [],
    _ shape: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
  ) throws -> Int {
    recorder.clear()
    try body()
    let plans = try recorder.plans(
      where: { !$0.contains("_history") && !$0.contains("_persistence_meta") },
      settings: engine == .postgreSQL ? ["enable_seqscan": "off"] : [:])
    #expect(!plans.isEmpty, "\(shape): no query ran", sourceLocation: sourceLocation)
    for (sql, plan) in plans {
      let scanned = RecordingEngine.scannedTables(in: plan).filter { !allowed.contains($0) }
      #expect(
        scanned.isEmpty, "\(shape) scans \(scanned):\n\(sql)\n\(plan.joined(separator: "\n"))",
        sourceLocation: sourceLocation)
    }
    return plans.count
  }

  /// Hotels with rooms, managers and reviews, and rooms in no hotel: enough rows of each that
  /// a scan would be a choice.
  func seed(_ container: ModelContainer) throws {
    let context = ModelContext(container)
    for index in 0..<40 {
      let hotel = Hotel("Hotel \(index)")
      context.insert(hotel)
      hotel.rooms = (0..<5).map { Room(index * 10 + $0) }
      if index.isMultiple(of: 2) { hotel.manager = Manager("Manager \(index)") }
      hotel.reviews = [Review("review \(index)")]
    }
    for number in 1000..<1010 { context.insert(Room(number)) }
    try context.save()
  }

  @Test(
    "prefetch, faults, predicates, sorts, sections and cascades through relationships read related tables by index",
    arguments: TestEngine.allCases)
  func relationshipShapes(engine: TestEngine) throws {
    let (container, recorder, store) = try recordedHotels(engine)
    defer { withExtendedLifetime(store) {} }
    try seed(container)

    try expectIndexed(recorder, engine, scanning: ["hotels", "rooms"], "prefetch") {
      let context = ModelContext(container)
      var hotels = FetchDescriptor<Hotel>()
      hotels.relationshipKeyPathsForPrefetching = [\.rooms, \.manager, \.reviews]
      let fetched = try context.fetch(hotels)
      #expect(fetched.map(\.rooms.count).reduce(0, +) == 200)
      var rooms = FetchDescriptor<Room>()
      rooms.relationshipKeyPathsForPrefetching = [\.hotel]
      #expect(try context.fetch(rooms).compactMap(\.hotel).count == 200)
      #expect(context.relationshipQueryCount <= 4)
    }
    try expectIndexed(recorder, engine, scanning: ["hotels", "rooms"], "faults") {
      let context = ModelContext(container)
      let hotels = try context.fetch(FetchDescriptor<Hotel>())
      #expect(hotels.map(\.rooms.count).reduce(0, +) == 200)
      #expect(hotels.compactMap(\.manager).count == 20)
      let other = ModelContext(container)
      let rooms = try other.fetch(FetchDescriptor<Room>())
      #expect(rooms.compactMap(\.hotel).count == 200)
    }
    let names = ["Hotel 3", "Hotel 4"]
    let predicates: [(String, Set<String>, () throws -> Int)] = [
      (
        "equality through a to-one", [],
        {
          try ModelContext(container).fetchCount(
            FetchDescriptor<Room>(predicate: #Predicate { $0.hotel?.name == "Hotel 3" }))
        }
      ),
      (
        "contains through a to-one", [],
        {
          try ModelContext(container).fetchCount(
            FetchDescriptor<Room>(predicate: #Predicate { names.contains($0.hotel!.name) }))
        }
      ),
      (
        "equality through a one-to-one keyed on the other side", [],
        {
          try ModelContext(container).fetchCount(
            FetchDescriptor<Hotel>(predicate: #Predicate { $0.manager?.name == "Manager 4" }))
        }
      ),
      (
        // Either side may be read whole: a row's test by the key column's index, or (the
        // filtered column having none) the rows passing the filter read once and joined.
        "any of a to-many", ["hotels", "rooms"],
        {
          try ModelContext(container).fetchCount(
            FetchDescriptor<Hotel>(
              predicate: #Predicate { $0.rooms.contains { $0.number == 33 } }))
        }
      ),
      (
        "count of a to-many", ["hotels"],
        {
          try ModelContext(container).fetchCount(
            FetchDescriptor<Hotel>(predicate: #Predicate { $0.reviews.count > 0 }))
        }
      ),
    ]
    // A one-to-one kept on the other side, two steps away, equal and not: Swift's answers.
    let context = ModelContext(container)
    let allRooms = try context.fetch(FetchDescriptor<Room>())
    let allHotels = try context.fetch(FetchDescriptor<Hotel>())
    let throughManager: [(String, Set<String>, Int, () throws -> Int)] = [
      (
        "equality two steps through a one-to-one kept on the other side", [],
        allRooms.filter { $0.hotel?.manager?.name == "Manager 4" }.count,
        {
          try ModelContext(container).fetchCount(
            FetchDescriptor<Room>(predicate: #Predicate { $0.hotel?.manager?.name == "Manager 4" })
          )
        }
      ),
      (
        "inequality two steps through a one-to-one kept on the other side", ["rooms"],
        allRooms.filter { $0.hotel?.manager?.name != "Manager 4" }.count,
        {
          try ModelContext(container).fetchCount(
            FetchDescriptor<Room>(predicate: #Predicate { $0.hotel?.manager?.name != "Manager 4" })
          )
        }
      ),
      (
        "inequality through a one-to-one kept on the other side", ["hotels"],
        allHotels.filter { $0.manager?.name != "Manager 4" }.count,
        {
          try ModelContext(container).fetchCount(
            FetchDescriptor<Hotel>(predicate: #Predicate { $0.manager?.name != "Manager 4" }))
        }
      ),
      (
        "contains through a one-to-one kept on the other side", [],
        allHotels.filter { ["Manager 4", "Manager 6"].contains($0.manager?.name ?? "") }.count,
        {
          let names = ["Manager 4", "Manager 6"]
          return try ModelContext(container).fetchCount(
            FetchDescriptor<Hotel>(predicate: #Predicate { names.contains($0.manager!.name) }))
        }
      ),
    ]
    #expect(throughManager.map(\.2) == [5, 205, 39, 2])
    for (shape, allowed, expected, count) in throughManager {
      try expectIndexed(recorder, engine, scanning: allowed, shape) {
        let counted = try count()
        #expect(counted == expected, "\(shape)")
      }
    }
    let expected = [5, 10, 1, 1, 40]
    for ((shape, allowed, count), expected) in zip(predicates, expected) {
      try expectIndexed(recorder, engine, scanning: allowed, shape) {
        let counted = try count()
        #expect(counted == expected, "\(shape)")
      }
    }
    try expectIndexed(recorder, engine, scanning: ["hotels", "rooms"], "sorts and sections") {
      let context = ModelContext(container)
      let rooms = try context.fetch(
        FetchDescriptor<Room>(sortBy: [SortDescriptor(\.hotel?.name), SortDescriptor(\.number)]))
      #expect(rooms.count == 210)
      let hotels = try context.fetch(
        FetchDescriptor<Hotel>(sortBy: [SortDescriptor(\.manager?.name)]))
      #expect(hotels.count == 40)
      let sections = try context.fetch(FetchDescriptor<Room>(), sectionBy: \Room.hotel?.name)
      #expect(sections.count == 41)
    }
    try expectIndexed(recorder, engine, "a cascade and a nullify") {
      let context = ModelContext(container)
      let hotel = try #require(
        try context.fetch(
          FetchDescriptor<Hotel>(predicate: #Predicate { $0.name == "Hotel 7" })
        ).first)
      context.delete(hotel)
      try context.save()
    }
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<Room>()) == 205)
  }

  @Test(
    "the history after a token is read through the changes' token index, whatever models it asks for",
    arguments: TestEngine.allCases)
  func historyAfterAToken(engine: TestEngine) throws {
    let (container, recorder, store) = try recordedHotels(engine)
    defer { withExtendedLifetime(store) {} }
    try seed(container)
    let context = ModelContext(container)
    let token = try context.currentHistoryToken()
    let hotel = try #require(try context.fetch(FetchDescriptor<Hotel>()).first)
    hotel.rooms.first?.number = 999
    try context.save()
    recorder.clear()
    var changes = 0
    try context.enumerateHistory(HistoryDescriptor(after: token, modelTypes: [Room.self])) {
      _, _ in changes += 1
    }
    #expect(changes == 1)
    let plans = try recorder.plans(
      where: { $0.contains("_history_changes c") },
      settings: engine == .postgreSQL ? ["enable_seqscan": "off"] : [:])
    #expect(plans.count == 1)
    for (sql, plan) in plans {
      #expect(
        plan.contains { $0.contains("_history_changes_token") }
          && !plan.contains { $0.contains("TEMP B-TREE") },
        "\(sql)\n\(plan.joined(separator: "\n"))")
    }
  }

  @Test(
    "a tree's children, parent, prefetch and cascade read the table by its parent key's index or primary key",
    arguments: TestEngine.allCases)
  func treeShapes(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let configuration = ModelConfiguration(url: store.url)
    let recorder = RecordingEngine(try configuration.defaultEngine())
    let container = try ModelContainer(
      for: [SrPlace.self], configuration: configuration, engine: recorder)
    defer { withExtendedLifetime(store) {} }
    let seeding = ModelContext(container)
    var middles: [SrPlace] = []
    for index in 0..<20 {
      let root = SrPlace(name: "root \(index)")
      let middle = SrPlace(name: "middle \(index)", parent: root)
      for leaf in 0..<5 { _ = SrPlace(name: "leaf \(index) \(leaf)", parent: middle) }
      seeding.insert(root)
      middles.append(middle)
    }
    try seeding.save()
    let ids = middles.map(\.persistentModelID)
    try expectIndexed(recorder, engine, "a tree's faults, prefetch and cascade") {
      let context = ModelContext(container)
      let middle = try #require(try context.model(for: ids[3], as: SrPlace.self))
      #expect(middle.children.count == 5)
      #expect(middle.parent?.name == "root 3")
      let more = try context.models(for: Array(ids[4..<8]), as: SrPlace.self)
      try context.prefetch([\SrPlace.children], of: more)
      #expect(more.map(\.children.count) == [5, 5, 5, 5])
      context.delete(middle)
      try context.save()
    }
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<SrPlace>()) == 134)
  }

  @Test(
    "a many-to-many's loads, prefetch, predicates, link writes and delete rules read the join table through its indexes",
    arguments: TestEngine.allCases)
  func joinTableShapes(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let configuration = ModelConfiguration(url: store.url)
    let recorder = RecordingEngine(try configuration.defaultEngine())
    let container = try ModelContainer(
      for: [MmTrip.self, MmTraveler.self], configuration: configuration, engine: recorder)
    defer { withExtendedLifetime(store) {} }
    let seeding = ModelContext(container)
    var trips: [MmTrip] = []
    var travelers: [MmTraveler] = []
    for index in 0..<40 { travelers.append(MmTraveler(name: "traveler \(index)")) }
    for index in 0..<40 {
      let trip = MmTrip(name: "trip \(index)")
      seeding.insert(trip)
      trip.travelers = (0..<5).map { travelers[(index + $0 * 7) % 40] }
      trips.append(trip)
    }
    try seeding.save()
    let tripIDs = trips.map(\.persistentModelID)
    let travelerIDs = travelers.map(\.persistentModelID)
    try expectIndexed(recorder, engine, "a many-to-many's reads and writes") {
      let context = ModelContext(container)
      let trip = try #require(try context.model(for: tripIDs[3], as: MmTrip.self))
      #expect(trip.travelers.count == 5)
      let traveler = try #require(try context.model(for: travelerIDs[3], as: MmTraveler.self))
      #expect(traveler.trips.count == 5)
      let more = try context.models(for: Array(tripIDs[4..<8]), as: MmTrip.self)
      try context.prefetch([\MmTrip.travelers], of: more)
      trip.travelers.removeFirst()
      trip.travelers.append(
        try #require(try context.model(for: travelerIDs[39], as: MmTraveler.self)))
      try context.save()
      context.delete(traveler)
      try context.save()
    }
    // A predicate tests every row of the table it filters (no index on a name): the join
    // table is read through its index all the same.
    try expectIndexed(
      recorder, engine, scanning: ["MmTrip", "MmTraveler", "\"MmTrip\"", "\"MmTraveler\""],
      "a many-to-many's predicates"
    ) {
      let context = ModelContext(container)
      let name = "traveler 9"
      _ = try context.fetch(
        FetchDescriptor<MmTrip>(predicate: #Predicate { $0.travelers.contains { $0.name == name } })
      )
      _ = try context.fetchCount(
        FetchDescriptor<MmTraveler>(predicate: #Predicate { $0.trips.count > 4 }))
    }
  }
}
