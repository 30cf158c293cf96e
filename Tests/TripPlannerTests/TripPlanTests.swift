import Foundation
import Geo
import Persistence
import TestSupport
import Testing

@testable import TripPlanner

@Suite("A trip's plan: bucket list and stay, on every engine")
struct TripPlanTests {
  enum Engine: String, CaseIterable, Sendable { case sqlite, postgreSQL }

  /// A new store's URL for `engine` (and a folder to remove for SQLite).
  static func storeURL(_ engine: Engine, _ name: String) throws -> URL {
    switch engine {
    case .sqlite:
      return FileManager.default.temporaryDirectory.appendingPathComponent(
        "\(name)-\(UUID().uuidString)/trips.sqlite")
    case .postgreSQL:
      return try #require(URL(string: try PostgreSQLCluster.shared.get().makeDatabase(name)))
    }
  }

  static let kyoto = TripRecord(
    name: "Cherry blossoms", destination: "Kyoto",
    startDate: Date(timeIntervalSinceReferenceDate: 800_000_000),
    endDate: Date(timeIntervalSinceReferenceDate: 800_400_000), latitude: 35.0116,
    longitude: 135.7681)

  /// Rows of each plan table.
  static func counts(_ store: TripStore) throws -> [Int] {
    [
      try store.context.fetchCount(FetchDescriptor<Trip>()),
      try store.context.fetchCount(FetchDescriptor<BucketListItem>()),
      try store.context.fetchCount(FetchDescriptor<LivingAccommodation>()),
    ]
  }

  @Test(
    "a fetched trip makes its plan's links on first use: none after a fetch, made by a read, and the same answers as before (a context's trip, an observer's, a trip after its stay is set elsewhere)",
    arguments: Engine.allCases)
  func linksOnFirstUse(engine: Engine) throws {
    let url = try Self.storeURL(engine, "lazylinks")
    let store = try TripStore(url: url)
    let trip = try store.add(Self.kyoto)
    try store.addBucketListItem(itemValues(title: "Temple"), toTrip: trip.id.uuidString)
    let context = ModelContext(store.context.container)
    let fetched = try context.fetch(FetchDescriptor<Trip>())
    #expect(fetched.count == 1)
    let first = try #require(fetched.first)
    #expect(first.bucketListStorage == nil && first.livingAccommodationStorage == nil)
    #expect(first.linkOrigin.ownerKey != nil)
    #expect(first.bucketList.map(\.title) == ["Temple"])
    #expect(first.bucketListStorage != nil && first.livingAccommodationStorage == nil)
    // Set elsewhere, read here: the stay's link is made now and looks the stay up.
    try TripStore(url: url, author: "other").setStay(
      stayValues(name: "Inn", latitude: 35, longitude: 135),
      forTrip: trip.id.uuidString)
    #expect(first.livingAccommodation?.name == "Inn")
    // An observer's trip: made on first use too, from its snapshots' source.
    let observer = try ResultsObserver(
      FetchDescriptor<Trip>(), container: store.context.container)
    let observed = try #require(observer.results.first)
    #expect(observed.bucketListStorage == nil)
    #expect(observed.bucketList.map(\.title) == ["Temple"])
    #expect(observed.livingAccommodation?.name == "Inn")
    // A new trip, inserted and saved: its links are made on first use as well.
    let fresh = Trip(Self.kyoto)
    context.insert(fresh)
    fresh.bucketList = [itemValues(title: "Walk").newModel()]
    try context.save()
    #expect(
      try ModelContext(store.context.container).fetchCount(FetchDescriptor<BucketListItem>())
        == 2)
  }

  @Test(
    "a page of trips with their plans reads both in one snapshot: a writer that commits between the two reads changes neither (with the box index and without)",
    arguments: Engine.allCases, [false, true])
  func pageAndPlansInOneSnapshot(engine: Engine, withIndex: Bool) throws {
    let url = try Self.storeURL(engine, "pagesnapshot")
    let store = try TripStore(url: url)
    let trip = try store.add(Self.kyoto)
    let item = try store.addBucketListItem(
      itemValues(title: "before"), toTrip: trip.id.uuidString)
    let writer = try TripStore(url: url, author: "writer")
    var query = TripQuery()
    query.bbox = GeographicBox(west: 130, south: 30, east: 140, north: 40)
    query.limit = 10
    let index = withIndex ? TripBoxIndex() : nil
    var wrote = false
    store.betweenPageReads = {
      guard !wrote else { return }
      wrote = true
      _ = try? writer.updateBucketListItem(item.id) { $0.title = "after" }
    }
    let (records, matched) = try store.pageRecordsWithPlans(query, index: index)
    #expect(wrote)
    #expect(matched == 1)
    #expect(records.first?.plan?.bucketList.map(\.title) == ["before"])
    // The writer did commit: the next page has it.
    store.betweenPageReads = nil
    let (after, _) = try store.pageRecordsWithPlans(query, index: index)
    #expect(after.first?.plan?.bucketList.map(\.title) == ["after"])
  }

  @Test(
    "a trip by id with its plan reads both in one snapshot, as the model and its plan read; an unknown id is nil",
    arguments: Engine.allCases)
  func recordWithPlanInOneSnapshot(engine: Engine) throws {
    let url = try Self.storeURL(engine, "recordsnapshot")
    let store = try TripStore(url: url)
    let bare = try store.add(Self.kyoto)
    let trip = try store.add(Self.kyoto)
    let text = trip.id.uuidString
    let item = try store.addBucketListItem(itemValues(title: "before"), toTrip: text)
    try store.addBucketListItem(itemValues(title: "first"), toTrip: text, at: 0)
    try store.setStay(
      stayValues(name: "Inn", address: "Gion", latitude: 35, longitude: 135.7),
      forTrip: text)
    // As the model path reads it, in a context of its own.
    let other = try TripStore(url: url)
    let model = try other.trip(matching: text)
    var expected = try other.context.record(of: model)
    expected.plan = model.plan
    #expect(try store.recordWithPlan(id: trip.id) == expected)
    #expect(try store.recordWithPlan(id: bare.id)?.plan == TripPlan())
    #expect(try store.recordWithPlan(id: UUID()) == nil)
    // A writer between the trip's read and its plan's changes neither.
    let writer = try TripStore(url: url, author: "writer")
    var wrote = false
    store.betweenPageReads = {
      guard !wrote else { return }
      wrote = true
      _ = try? writer.updateBucketListItem(item.id) { $0.title = "after" }
    }
    let read = try #require(try store.recordWithPlan(id: trip.id))
    #expect(wrote)
    #expect(read.plan?.bucketList.map(\.title) == ["first", "before"])
    store.betweenPageReads = nil
    let after = try #require(try store.recordWithPlan(id: trip.id))
    #expect(after.plan?.bucketList.map(\.title) == ["first", "after"])
  }

  @Test(
    "a bucket list keeps its order through add at a position, move and remove; a stay is set, changed in place and cleared; a new store reads both back; deleting the trip deletes them, each in history",
    arguments: Engine.allCases)
  func plan(engine: Engine) throws {
    let url = try Self.storeURL(engine, "plan")
    let id: UUID
    do {
      let store = try TripStore(url: url)
      let trip = try store.add(Self.kyoto)
      id = trip.id
      let text = id.uuidString
      try store.addBucketListItem(itemValues(title: "Philosopher's Path"), toTrip: text)
      try store.addBucketListItem(
        itemValues(title: "Kaiseki dinner", hasReservation: true), toTrip: text)
      let first = try store.addBucketListItem(
        itemValues(title: "Fushimi Inari at dawn", isInPlan: true), toTrip: text, at: 0)
      #expect(
        try store.bucketList(ofTrip: text).map(\.title) == [
          "Fushimi Inari at dawn", "Philosopher's Path", "Kaiseki dinner",
        ])
      try store.moveBucketListItem(first.id, to: 2)
      try store.updateBucketListItem(first.id) { $0.details = "Before the crowds" }
      let path = try #require(try store.bucketList(ofTrip: text).first)
      try store.removeBucketListItem(path.id)
      try store.setStay(
        stayValues(name: "Ryokan", latitude: 35.0, longitude: 135.77),
        forTrip: text)
      let stay = try store.setStay(
        stayValues(
          name: "Ryokan Yachiyo", address: "Nanzenji", latitude: 35.0107, longitude: 135.7925,
          placeIdentifier: "geonames:1857910"), forTrip: text)
      #expect(try Self.counts(store) == [1, 2, 1])
      #expect(stay.trip === trip)
    }
    do {
      let store = try TripStore(url: url)
      let trip = try store.trip(matching: id.uuidString)
      #expect(trip.bucketList.map(\.title) == ["Kaiseki dinner", "Fushimi Inari at dawn"])
      #expect(trip.bucketList.map(\.position) == [0, 1])
      #expect(trip.bucketList.map(\.details) == ["", "Before the crowds"])
      #expect(trip.bucketList.map(\.hasReservation) == [true, false])
      #expect(trip.bucketList.map(\.isInPlan) == [false, true])
      let stay = try #require(trip.livingAccommodation)
      #expect(stay.name == "Ryokan Yachiyo" && stay.address == "Nanzenji")
      #expect(stay.placeIdentifier?.rawValue == "geonames:1857910")
      #expect(stay.latitude == 35.0107 && stay.longitude == 135.7925)

      #expect(try store.clearStay(ofTrip: id.uuidString)?.name == "Ryokan Yachiyo")
      #expect(try store.clearStay(ofTrip: id.uuidString) == nil)
      try store.setStay(
        stayValues(name: "Hotel", latitude: 35, longitude: 135),
        forTrip: id.uuidString)
      let before = try store.context.fetchHistory(HistoryDescriptor()).count
      try store.delete([id])
      #expect(try Self.counts(store) == [0, 0, 0])
      let after = try store.context.fetchHistory(HistoryDescriptor()).dropFirst(before)
      #expect(after.count == 1)  // one transaction
      let deletes = after.flatMap(\.changes).filter { $0.kind == .delete }
      #expect(deletes.count == 4)  // the trip, two items, the stay
    }
  }

  @Test(
    "bad plan input is a clear error naming the field, and nothing is written: a blank or too long title, control characters, a negative or past-the-end position, a latitude of 91, an unknown trip or item, a duplicate item id",
    arguments: Engine.allCases)
  func badInput(engine: Engine) throws {
    let store = try TripStore(url: try Self.storeURL(engine, "planbad"))
    let trip = try store.add(Self.kyoto)
    let text = trip.id.uuidString
    let item = try store.addBucketListItem(itemValues(title: "Gion"), toTrip: text)
    let long = String(repeating: "a", count: TripRecord.maximumTextLength + 1)
    let cases: [(String, () throws -> Void)] = [
      (
        "title", { _ = try store.addBucketListItem(itemValues(title: " "), toTrip: text) }
      ),
      (
        "title",
        { _ = try store.addBucketListItem(itemValues(title: long), toTrip: text) }
      ),
      (
        "details",
        {
          _ = try store.addBucketListItem(
            itemValues(title: "ok", details: "a\u{1B}[31m"), toTrip: text)
        }
      ),
      (
        "position",
        { _ = try store.addBucketListItem(itemValues(title: "ok"), toTrip: text, at: 2) }
      ),
      ("position", { _ = try store.moveBucketListItem(item.id, to: 1) }),
      ("position", { _ = try store.moveBucketListItem(item.id, to: -1) }),
      ("title", { _ = try store.updateBucketListItem(item.id) { $0.title = "" } }),
      (
        "id",
        {
          _ = try store.addBucketListItem(
            itemValues(id: item.id, title: "again"), toTrip: text)
        }
      ),
      (
        "latitude",
        {
          _ = try store.setStay(
            stayValues(name: "Inn", latitude: 91, longitude: 0), forTrip: text)
        }
      ),
      (
        "name",
        {
          _ = try store.setStay(
            stayValues(name: "In\nn", latitude: 1, longitude: 0), forTrip: text)
        }
      ),
    ]
    for (field, attempt) in cases {
      let error = #expect(throws: TripPlannerError.self) { try attempt() }
      #expect(error?.code == .invalidTrip, "\(field): \(String(describing: error))")
      #expect(error?.field == field, "\(String(describing: error))")
    }
    let missing = #expect(throws: TripPlannerError.self) {
      try store.addBucketListItem(
        itemValues(title: "ok"), toTrip: UUID().uuidString)
    }
    #expect(missing?.code == .notFound)
    let noItem = #expect(throws: TripPlannerError.self) {
      try store.removeBucketListItem(UUID())
    }
    #expect(noItem?.code == .notFound)
    #expect(try Self.counts(store) == [1, 1, 0])
    #expect(try store.bucketList(ofTrip: text).map(\.title) == ["Gion"])

    // A library save of an item without a trip is refused too.
    let orphan = itemValues(title: "Nowhere").newModel()
    store.context.insert(orphan)
    #expect(throws: (any Error).self) { try store.context.save() }
    store.context.rollback()
    #expect(try Self.counts(store) == [1, 1, 0])
  }

  @Test(
    "an id a deleted item or stay had is refused for another trip (by add, set, write and import), naming that trip; its own trip may take it back, and a trip deleted and imported again gets its plan back",
    arguments: Engine.allCases)
  func deletedIDsStayWithTheirTrip(engine: Engine) throws {
    let store = try TripStore(url: try Self.storeURL(engine, "reuse"))
    let first = try store.add(Self.kyoto)
    var other = Self.kyoto
    other.name = "Another"
    let second = try store.add(other)
    let item = try store.addBucketListItem(
      itemValues(title: "Tea ceremony"), toTrip: first.id.uuidString)
    let stay = try store.setStay(
      stayValues(name: "Machiya", latitude: 35, longitude: 135.7),
      forTrip: first.id.uuidString)
    let (itemID, stayID) = (item.id, stay.id)
    try store.removeBucketListItem(itemID)
    try store.clearStay(ofTrip: first.id.uuidString)
    let owner = first.id.lowercasedString

    let added = #expect(throws: TripPlannerError.self) {
      try store.addBucketListItem(
        itemValues(id: itemID, title: "Reused"), toTrip: second.id.uuidString)
    }
    #expect(
      added?.message.contains("of trip \(owner), since deleted") == true,
      "\(String(describing: added))")
    let set = #expect(throws: TripPlannerError.self) {
      try store.setStay(
        stayValues(id: stayID, name: "Reused", latitude: 1, longitude: 2),
        forTrip: second.id.uuidString)
    }
    #expect(
      set?.message.contains("of trip \(owner), since deleted") == true, "\(String(describing: set))"
    )
    let written = #expect(throws: TripPlannerError.self) {
      try store.write(second.id) { current in
        var record = try #require(current)
        record.plan = TripPlan(bucketList: [itemValues(id: itemID, title: "Reused")])
        return record
      }
    }
    #expect(
      written?.problems.first?.reason.contains("of trip \(owner), since deleted") == true,
      "\(String(describing: written))")
    var imported = Self.kyoto
    imported.id = UUID()
    imported.plan = TripPlan(
      livingAccommodation: stayValues(
        id: stayID, name: "Reused", latitude: 1, longitude: 2))
    #expect(throws: TripPlannerError.self) { try store.importRecords([imported]) }
    #expect(try Self.counts(store) == [2, 0, 0])

    // Its own trip takes it back.
    try store.addBucketListItem(
      itemValues(id: itemID, title: "Tea again"), toTrip: first.id.uuidString)
    // A trip deleted with its plan, then imported again from an export, gets its plan back.
    try store.setStay(
      stayValues(id: stayID, name: "Machiya", latitude: 35, longitude: 135.7),
      forTrip: first.id.uuidString)
    let exported = try store.exportRecords(plans: true).filter { $0.id == first.id }
    _ = try store.delete([first.id])
    #expect(try store.importRecords(exported) == 1)
    let back = try store.withPlans(try store.exportRecords()).first { $0.id == first.id }
    #expect(back?.plan?.bucketList.map(\.id) == [itemID])
    #expect(back?.plan?.livingAccommodation?.id == stayID)
  }

  @Test(
    "an id names one row for its whole life: a stay or item id of another trip is refused naming its owner, and the owner keeps it; a stay given a new id replaces the trip's own",
    arguments: Engine.allCases)
  func idsOwnTheirRows(engine: Engine) throws {
    let url = try Self.storeURL(engine, "planowner")
    let store = try TripStore(url: url)
    let owner = try store.add(Self.kyoto)
    var other = Self.kyoto
    other.name = "Elsewhere"
    let taker = try store.add(other)
    let stay = try store.setStay(
      stayValues(name: "Ryokan", latitude: 35, longitude: 135.7),
      forTrip: owner.id.uuidString)
    let item = try store.addBucketListItem(
      itemValues(title: "Gion"), toTrip: owner.id.uuidString)
    let history = try store.context.fetchHistory(HistoryDescriptor()).count
    do {
      // The taker has no stay (the row would be inserted), then has one (it would be replaced).
      let target = taker.id
      for round in 0..<2 {
        let error = #expect(throws: TripPlannerError.self) {
          try store.setStay(
            stayValues(id: stay.id, name: "Taken", latitude: 10, longitude: 20),
            forTrip: target.uuidString)
        }
        #expect(error?.code == .invalidInput)
        #expect(error?.message.contains(owner.id.lowercasedString) == true)
        try store.setStay(
          stayValues(name: "Own \(round)", latitude: 1, longitude: 2),
          forTrip: target.uuidString)
      }
    }
    let itemError = #expect(throws: TripPlannerError.self) {
      try store.addBucketListItem(
        itemValues(id: item.id, title: "Taken"), toTrip: taker.id.uuidString)
    }
    #expect(itemError?.message.contains(owner.id.lowercasedString) == true)
    let fresh = try TripStore(url: url)
    #expect(try fresh.trip(matching: owner.id.uuidString).livingAccommodation?.name == "Ryokan")
    #expect(try fresh.bucketList(ofTrip: owner.id.uuidString).map(\.title) == ["Gion"])
    #expect(try fresh.bucketList(ofTrip: taker.id.uuidString).isEmpty)
    // The two stays the taker was given in between (the second changed the first in place).
    #expect(try fresh.context.fetchHistory(HistoryDescriptor()).count == history + 2)

    // A stay with a new id replaces the trip's own: the old row is deleted, not renamed.
    let own = try #require(try fresh.trip(matching: taker.id.uuidString).livingAccommodation)
    let newID = UUID()
    try fresh.setStay(
      stayValues(id: newID, name: "New", latitude: 3, longitude: 4),
      forTrip: taker.id.uuidString)
    #expect(try fresh.stay(own.id) == nil)
    #expect(try fresh.stay(newID)?.tripID == taker.id)
    #expect(try Self.counts(fresh) == [2, 1, 2])
  }

  @Test(
    "changes made inside one performExclusively are one transaction: one that fails (a move past the end after a retitle) writes nothing, one that succeeds is one history transaction",
    arguments: Engine.allCases)
  func oneRequestOneTransaction(engine: Engine) throws {
    let url = try Self.storeURL(engine, "planatomic")
    let store = try TripStore(url: url)
    let trip = try store.add(Self.kyoto)
    for title in ["a", "b", "c", "d", "e"] {
      try store.addBucketListItem(itemValues(title: title), toTrip: trip.id.uuidString)
    }
    let item = try #require(try store.bucketList(ofTrip: trip.id.uuidString).first)
    let id = item.id
    let history = try store.context.fetchHistory(HistoryDescriptor()).count
    let error = #expect(throws: TripPlannerError.self) {
      try store.context.performExclusively {
        try store.updateBucketListItem(id) { $0.title = "CHANGED" }
        try store.moveBucketListItem(id, to: 999)
      }
    }
    #expect(
      error?.message
        == "position 999 is past the end of a bucket list of 5 items; positions go from 0 to 4")
    let fresh = try TripStore(url: url)
    #expect(
      try fresh.bucketList(ofTrip: trip.id.uuidString).map(\.title) == ["a", "b", "c", "d", "e"])
    #expect(try fresh.context.fetchHistory(HistoryDescriptor()).count == history)

    try store.context.performExclusively {
      try store.updateBucketListItem(id) { $0.title = "moved" }
      try store.moveBucketListItem(id, to: 4)
    }
    let after = try TripStore(url: url)
    #expect(
      try after.bucketList(ofTrip: trip.id.uuidString).map(\.title) == [
        "b", "c", "d", "e", "moved",
      ])
    #expect(try after.context.fetchHistory(HistoryDescriptor()).count == history + 1)
  }

  @Test(
    "SampleTrips' search: items whose title contains a text, within the trip of a name, in SQL",
    arguments: Engine.allCases)
  func search(engine: Engine) throws {
    let store = try TripStore(url: try Self.storeURL(engine, "plansearch"))
    let kyoto = try store.add(Self.kyoto)
    var osaka = Self.kyoto
    osaka.name = "Food tour"
    osaka.destination = "Osaka"
    let food = try store.add(osaka)
    for title in ["Tea ceremony", "Green tea ice cream", "Temple"] {
      try store.addBucketListItem(itemValues(title: title), toTrip: kyoto.id.uuidString)
    }
    try store.addBucketListItem(
      itemValues(title: "Bubble tea"), toTrip: food.id.uuidString)
    let text = "tea"
    let tripName = "Cherry blossoms"
    let found = try store.context.fetch(
      FetchDescriptor<BucketListItem>(
        predicate: #Predicate { item in
          item.title.localizedStandardContains(text) && item.trip?.name == tripName
        }, sortBy: [SortDescriptor(\.position)]))
    #expect(found.map(\.title) == ["Tea ceremony", "Green tea ice cream"])
  }
}

@Suite("Trip queries over the plan, on every engine")
struct TripPlanQueryTests {
  @Test(
    "search finds bucket-list titles; the plan filters (mentions, reservation, not in plan) select what Swift selects",
    arguments: TripPlanTests.Engine.allCases)
  func filters(engine: TripPlanTests.Engine) throws {
    let store = try TripStore(url: try TripPlanTests.storeURL(engine, "planquery"))
    let kyoto = try store.add(TripPlanTests.kyoto)
    var record = TripPlanTests.kyoto
    record.name = "Food tour"
    record.destination = "Osaka"
    let osaka = try store.add(record)
    record.name = "Quiet week"
    record.destination = "Nara"
    _ = try store.add(record)
    try store.addBucketListItem(
      itemValues(title: "Tea ceremony", details: "matcha", hasReservation: true),
      toTrip: kyoto.id.uuidString)
    try store.addBucketListItem(
      itemValues(title: "Dōtonbori", isInPlan: true), toTrip: osaka.id.uuidString)
    try store.addBucketListItem(
      itemValues(title: "Kuromon market"), toTrip: osaka.id.uuidString)
    func names(_ change: (inout TripQuery) -> Void) throws -> [String] {
      var query = TripQuery(sort: .name)
      change(&query)
      return try store.trips(query).map(\.name)
    }
    #expect(try names { $0.search = "ceremony" } == ["Cherry blossoms"])
    #expect(try names { $0.search = "dotonbori" } == ["Food tour"])
    #expect(try names { $0.search = "osaka" } == ["Food tour"])
    #expect(try names { $0.bucketListMentions = "MATCHA" } == ["Cherry blossoms"])
    #expect(try names { $0.bucketListMentions = "market" } == ["Food tour"])
    #expect(try names { $0.hasReservation = true } == ["Cherry blossoms"])
    #expect(try names { $0.hasItemNotInPlan = true } == ["Cherry blossoms", "Food tour"])
    #expect(
      try names {
        $0.hasItemNotInPlan = true
        $0.search = "tour"
      } == ["Food tour"])
    var counted = TripQuery()
    counted.hasReservation = true
    #expect(try store.count(counted) == 1)
    // The paths that read values, counts and sections, without models, filter alike.
    var mentions = TripQuery()
    mentions.bucketListMentions = "market"
    #expect(try store.destinations(mentions).map(\.destination) == ["Osaka"])
    #expect(try store.coordinates(mentions).count == 1)
    #expect(try store.sections(mentions).map(\.id) == ["Osaka"])
    #expect(try store.count(mentions) == 1)
    mentions.search = "food"
    #expect(try store.destinations(mentions).map(\.count) == [1])
  }
}

@Suite("Files carry a trip's plan, on every engine")
struct TripPlanFileTests {
  /// A store with three trips: one with a bucket list and a stay, one with a stay only, one
  /// with nothing planned.
  static func planned(_ engine: TripPlanTests.Engine, _ name: String) throws -> TripStore {
    let store = try TripStore(url: try TripPlanTests.storeURL(engine, name))
    let kyoto = try store.add(TripPlanTests.kyoto).id.uuidString
    var record = TripPlanTests.kyoto
    record.name = "Food tour"
    record.destination = "Osaka"
    let osaka = try store.add(record).id.uuidString
    record.name = "Quiet week"
    _ = try store.add(record)
    try store.addBucketListItem(
      itemValues(
        title: "Tea ceremony", details: "matcha, \"usucha\"", hasReservation: true),
      toTrip: kyoto)
    try store.addBucketListItem(
      itemValues(title: "Fushimi Inari", isInPlan: true), toTrip: kyoto)
    try store.setStay(
      stayValues(
        name: "Ryokan", address: "Nanzenji", latitude: 35.01, longitude: 135.79,
        placeIdentifier: "geonames:1857910"), forTrip: kyoto)
    try store.setStay(
      stayValues(name: "Hostel", latitude: 34.67, longitude: 135.5), forTrip: osaka)
    return store
  }

  @Test(
    "JSON and GeoJSON exports carry bucket lists and stays, and importing them into an empty store gives the same export (lossless); CSV stays one row a trip",
    arguments: TripPlanTests.Engine.allCases)
  func roundTrip(engine: TripPlanTests.Engine) throws {
    let source = try Self.planned(engine, "planfiles")
    let records = try source.exportRecords(plans: true)
    #expect(records.compactMap(\.plan).map(\.bucketList.count).sorted() == [0, 0, 2])
    for format in [TripFileFormat.json, .geojson] {
      let data = format.encode(records)
      let target = try TripStore(url: try TripPlanTests.storeURL(engine, "planfiles\(format)"))
      try target.importRecords(try format.decode(data, file: "plans.\(format)"), file: "plans")
      let again = try target.exportRecords(plans: true)
      #expect(again == records, "\(format)")
      #expect(format.encode(again) == data, "\(format)")
      #expect(try TripPlanTests.counts(target) == [3, 2, 2])
    }
    let csv = TripFileFormat.csv.encode(try source.exportRecords())
    #expect(
      try TripFileFormat.csv.decode(csv, file: "trips.csv").allSatisfy { $0.record.plan == nil })
  }

  @Test(
    "importing a plan replaces the trip's: items matched by id keep their identity and take the file's order, the others go; a stay given none goes; a trip without plan keys keeps its plan",
    arguments: TripPlanTests.Engine.allCases)
  func replace(engine: TripPlanTests.Engine) throws {
    let store = try Self.planned(engine, "planreplace")
    var records = try store.exportRecords(plans: true)
    let kyotoIndex = try #require(records.firstIndex { $0.name == "Cherry blossoms" })
    var plan = try #require(records[kyotoIndex].plan)
    let kept = plan.bucketList[1]
    plan.bucketList = [kept, itemValues(title: "Kaiseki dinner")]
    plan.livingAccommodation = nil
    records[kyotoIndex].plan = plan
    let osakaIndex = try #require(records.firstIndex { $0.name == "Food tour" })
    records[osakaIndex].plan = nil  // CSV-like: the plan is left alone
    let file = TripFileFormat.json.encode(records)
    try store.importRecords(try TripFileFormat.json.decode(file, file: "plans.json"), file: "plans")
    let kyoto = try store.trip(matching: records[kyotoIndex].id!.uuidString)
    #expect(kyoto.bucketList.map(\.title) == ["Fushimi Inari", "Kaiseki dinner"])
    #expect(kyoto.bucketList.first?.id == kept.id)
    #expect(kyoto.livingAccommodation == nil)
    let osaka = try store.trip(matching: records[osakaIndex].id!.uuidString)
    #expect(osaka.livingAccommodation?.name == "Hostel")
    #expect(try TripPlanTests.counts(store) == [3, 2, 1])
  }

  @Test(
    "a plan in a file with a duplicate or foreign id, a blank title, a stay at latitude 91 or a malformed member is an error naming the line, and nothing is imported",
    arguments: TripPlanTests.Engine.allCases)
  func badFiles(engine: TripPlanTests.Engine) throws {
    let store = try Self.planned(engine, "planbadfiles")
    let records = try store.exportRecords(plans: true)
    let kyoto = try #require(records.first { $0.name == "Cherry blossoms" })
    let item = try #require(kyoto.plan?.bucketList.first)
    func attempt(_ change: (inout [TripRecord]) -> Void) throws -> [String] {
      var changed = records
      change(&changed)
      let data = TripFileFormat.json.encode(changed)
      do {
        try store.importRecords(
          try TripFileFormat.json.decode(data, file: "f.json"), file: "f.json")
      } catch let error as TripPlannerError {
        #expect(error.code == .invalidInput)
        return error.problems.map(\.description)
      }
      return []
    }
    // The same item id under a second trip (and so a foreign id for that trip too).
    let duplicate = try attempt { records in
      let index = records.firstIndex { $0.name == "Quiet week" }!
      records[index].plan = TripPlan(bucketList: [item])
    }
    #expect(duplicate.contains { $0.contains("is also on line") }, "\(duplicate)")
    // An item of one trip moved under another in the file, removed from the first.
    let foreign = try attempt { records in
      let first = records.firstIndex { $0.name == "Cherry blossoms" }!
      records[first].plan?.bucketList.removeAll { $0.id == item.id }
      let index = records.firstIndex { $0.name == "Quiet week" }!
      records[index].plan = TripPlan(bucketList: [item])
    }
    #expect(foreign.contains { $0.contains("belongs to trip") }, "\(foreign)")
    let blank = try attempt { records in
      let index = records.firstIndex { $0.name == "Quiet week" }!
      records[index].plan = TripPlan(bucketList: [itemValues(title: " ")])
    }
    #expect(
      blank.contains { $0.hasSuffix("bucket-list item 1: title must not be empty") }, "\(blank)")
    let far = try attempt { records in
      let index = records.firstIndex { $0.name == "Quiet week" }!
      records[index].plan = TripPlan(
        livingAccommodation: stayValues(name: "Pole", latitude: 91, longitude: 0))
    }
    #expect(
      far.contains { $0.contains("stay: latitude 91.0 is not a number between -90 and 90") },
      "\(far)")
    #expect(try TripPlanTests.counts(store) == [3, 2, 2])

    let malformed = Data(
      #"[{"name":"x","destination":"y","startDate":"2027-01-01","endDate":"2027-01-02","latitude":1,"longitude":2,"bucketList":[{"title":1},{"title":"ok","extra":true}],"livingAccommodation":"inn"}]"#
        .utf8)
    let error = #expect(throws: TripPlannerError.self) {
      try TripFileFormat.json.decode(malformed, file: "m.json")
    }
    let reasons = error?.problems.map(\.reason) ?? []
    #expect(reasons.contains("bucket-list item 1: title must be a string"), "\(reasons)")
    #expect(reasons.contains("bucket-list item 2: unknown member 'extra'"), "\(reasons)")
    #expect(reasons.contains("livingAccommodation must be an object or null"), "\(reasons)")
  }

  @Test(
    "a Feature read without plans (TripGeoJSON.decodeFeature's default) and a sync feed's trip do not take a plan: its members are unknown there, an error rather than dropped"
  )
  func planWhereNotWritten() throws {
    let feature = Data(
      #"{"type":"Feature","geometry":{"type":"Point","coordinates":[135.7,35.0]},"properties":{"name":"x","destination":"y","startDate":"2027-01-01","endDate":"2027-01-02","bucketList":[]}}"#
        .utf8)
    let error = #expect(throws: TripPlannerError.self) {
      try TripGeoJSON.decodeFeature(feature, file: "body")
    }
    #expect(error?.problems.map(\.reason) == ["unknown member 'bucketList'"])
    let feed = Data(
      (#"{"token":"0d6b8c1e-5a0e-4b8e-9a63-6f4a2f1d3c21:1","time":"2027-01-01T00:00:00.000Z","kind":"insert","tripId":"71c27976-fe83-4757-aab5-31f72532f909","trip":{"id":"71c27976-fe83-4757-aab5-31f72532f909","name":"x","destination":"y","startDate":"2027-01-01","endDate":"2027-01-02","latitude":1,"longitude":2,"placeIdentifier":null,"livingAccommodation":null}}"#
        + "\n" + #"{"resumeToken":"0d6b8c1e-5a0e-4b8e-9a63-6f4a2f1d3c21:1"}"#).utf8)
    let feedError = #expect(throws: TripPlannerError.self) {
      try SyncFeed.parse(feed, file: "feed")
    }
    #expect(
      feedError?.problems.contains { $0.reason.contains("unknown member 'livingAccommodation'") }
        == true, "\(String(describing: feedError))")
  }
}

@Suite("A page's plans read as values, on every engine")
struct TripPlanValueTests {
  @Test(
    "withPlans reads as values the plans the export reads as models, empty for a trip without one or not in the store, across batches of 500",
    arguments: TripPlanTests.Engine.allCases)
  func plansAsValues(engine: TripPlanTests.Engine) throws {
    let store = try TripStore(url: try TripPlanTests.storeURL(engine, "values"))
    var records: [TripRecord] = []
    for index in 0..<620 {
      var record = TripPlanTests.kyoto
      record.id = UUID()
      record.name = "Trip \(index)"
      if index % 3 != 0 {
        record.plan = TripPlan(
          bucketList: (0..<(index % 4)).map {
            itemValues(
              title: "Item \($0)", details: $0 == 1 ? "details" : "", hasReservation: $0 == 2,
              isInPlan: $0 == 0)
          },
          livingAccommodation: index % 2 == 0
            ? stayValues(
              name: "Stay \(index)", address: "Street", latitude: 35, longitude: 135.7,
              placeIdentifier: index % 4 == 0 ? "geonames:\(index)" : nil) : nil)
      }
      records.append(record)
    }
    try store.importRecords(records)
    let expected = try store.exportRecords(plans: true).sorted { $0.name < $1.name }
    var asked = records.map { record -> TripRecord in
      var record = record
      record.plan = nil
      return record
    }
    var stranger = TripPlanTests.kyoto
    stranger.id = UUID()
    asked.append(stranger)
    let read = try store.withPlans(asked)
    #expect(read.last?.plan == TripPlan())
    #expect(read.dropLast().sorted { $0.name < $1.name } == expected)
    #expect(expected.contains { $0.plan?.livingAccommodation?.placeIdentifier != nil })
  }

  @Test(
    "value fetches of trips and bucket-list items equal their models' records: a predicate and sections across the to-one, a page, an enumeration",
    arguments: TripPlanTests.Engine.allCases)
  func valueFetches(engine: TripPlanTests.Engine) throws {
    let store = try TripStore(url: try TripPlanTests.storeURL(engine, "values"))
    for (index, city) in ["Kyoto", "Lima", "Oslo", "Kyoto", "Quito"].enumerated() {
      var record = TripPlanTests.kyoto
      record.name = "Trip \(index)"
      record.destination = city
      record.placeIdentifier =
        index % 2 == 0 ? PlaceIdentifier(rawValue: "osm:node/\(index % 3)") : nil
      let trip = try store.add(record)
      for item in 0..<(index + 1) {
        try store.addBucketListItem(
          itemValues(title: "Item \(item)", isInPlan: item % 2 == 0),
          toTrip: trip.id.uuidString)
      }
    }
    let context = ModelContext(store.context.container)
    let trips = FetchDescriptor<Trip>(
      predicate: #Predicate { $0.destination != "Lima" },
      sortBy: [SortDescriptor(\.destination), SortDescriptor(\.name, order: .reverse)])
    #expect(
      try ModelContext(store.context.container).fetch(trips, as: TripRecord.self)
        == context.fetch(trips).map(\.record))
    // Items of trips to Kyoto, across the to-one, sectioned by their trip's name (String?).
    let items = FetchDescriptor<BucketListItem>(
      predicate: #Predicate { $0.trip?.destination == "Kyoto" && $0.isInPlan },
      sortBy: [SortDescriptor(\.title)])
    let models = try context.fetch(items, sectionBy: \.trip?.name)
    let values = try ModelContext(store.context.container).fetch(
      items, as: FieldValues<BucketListItem>.self, sectionBy: \.trip?.name)
    #expect(values.map(\.id) == ["Trip 0", "Trip 3"])
    #expect(values.map(\.id) == models.map(\.id))
    #expect(values.map { Array($0) } == models.map { $0.map(FieldValues.init) })
    var page = items
    page.fetchLimit = 2
    page.fetchOffset = 1
    let (pageValues, matched) = try context.fetchPage(page, as: FieldValues<BucketListItem>.self)
    #expect(try pageValues == context.fetch(page).map(FieldValues.init) && matched == 3)
    var enumerated: [TripRecord] = []
    try context.enumerate(FetchDescriptor<Trip>(), as: TripRecord.self) { enumerated.append($0) }
    #expect(enumerated.count == 5 && enumerated.filter { $0.placeIdentifier != nil }.count == 3)
  }

  @Test(
    "an export streamed a batch at a time is byte for byte the document encoded whole, in every format, for any batch size, with the plans, in one snapshot",
    arguments: TripPlanTests.Engine.allCases)
  func streamedExport(engine: TripPlanTests.Engine) throws {
    let store = try TripStore(url: try TripPlanTests.storeURL(engine, "export"))
    for format in TripFileFormat.allCases {
      var empty: [UInt8] = []
      try store.export(as: format) { empty += $0 }
      #expect(Data(empty) == format.encode([]), "\(format), no trips")
    }
    for index in 0..<7 {
      var record = TripPlanTests.kyoto
      record.name = "Trip \(index)"
      // Across the antimeridian: the GeoJSON bbox is the enclosing box of all of them.
      record.longitude = index.isMultiple(of: 2) ? 179.5 - Double(index) : -179.5 + Double(index)
      if index == 3 { record.placeIdentifier = PlaceIdentifier(rawValue: "geonames:\"3\"") }
      let trip = try store.add(record)
      for item in 0..<(index % 3) {
        try store.addBucketListItem(
          itemValues(title: "Item \(index).\(item)"), toTrip: trip.id.uuidString)
      }
      if index.isMultiple(of: 2) {
        try store.setStay(
          stayValues(name: "Stay \(index)", latitude: 1, longitude: 2),
          forTrip: trip.id.uuidString)
      }
    }
    let whole = try store.exportRecords(plans: true)
    let expected: [TripFileFormat: Data] = [
      // The tree each trip's object makes, rendered: what the byte writer must write.
      .json: Data((JSONValue.array(whole.map(TripJSON.object)).rendered(pretty: true) + "\n").utf8),
      .geojson: TripGeoJSON.encode(whole),
      .csv: TripCSV.encode(try store.exportRecords()),
    ]
    for format in TripFileFormat.allCases {
      for size in [1, 2, 500] {
        var chunks: [[UInt8]] = []
        try store.export(as: format, batchSize: size) { chunks.append($0) }
        #expect(Data(chunks.joined()) == expected[format], "\(format), batches of \(size)")
        #expect(chunks.count == 2 + (7 + size - 1) / size, "\(format), batches of \(size)")
      }
    }
    // A sink's error ends the export with that error.
    struct Full: Error {}
    var calls = 0
    #expect(throws: Full.self) {
      try store.export(as: .json, batchSize: 2) { _ in
        calls += 1
        if calls == 2 { throw Full() }
      }
    }
    #expect(calls == 2)
  }

  @Test(
    "a change feed written as it is read is byte for byte the feed collected whole, for any batch size; the sink's error ends it",
    arguments: TripPlanTests.Engine.allCases)
  func streamedFeed(engine: TripPlanTests.Engine) throws {
    let store = try TripStore(url: try TripPlanTests.storeURL(engine, "feed"))
    var ids: [UUID] = []
    for index in 0..<5 {
      var record = TripPlanTests.kyoto
      record.name = "Trip \(index)"
      ids.append(try store.add(record).id)
      try store.addBucketListItem(
        itemValues(title: "Item \(index)"), toTrip: ids[index].uuidString)
    }
    let middle = try store.context.currentHistoryToken()
    // A plan row changed before its trip's later change moves after it.
    try store.addBucketListItem(itemValues(title: "Late"), toTrip: ids[0].uuidString)
    _ = try store.update(ids[0]) { $0.name = "Renamed" }
    _ = try store.delete([ids[1]])
    for token in [nil, middle] {
      let whole = try store.changeFeed(after: token)
      for size in [1, 2, 1000] {
        var chunks: [[UInt8]] = []
        let written = try store.writeChangeFeed(after: token, batchSize: size) {
          chunks.append($0)
        }
        #expect(String(decoding: chunks.joined(), as: UTF8.self) == whole.jsonLines)
        #expect(written.count == whole.changes.count && written.resumeToken == whole.resumeToken)
        #expect(chunks.count == whole.changes.count / size + 1, "batches of \(size)")
      }
    }
    let late = try store.changeFeed(after: middle).changes
    #expect(late.first?.trip?.name == "Renamed")
    #expect(
      late.dropFirst().first.map { if case .bucketListItem = $0.subject { true } else { false } }
        == true)
    struct Full: Error {}
    #expect(throws: Full.self) {
      try store.writeChangeFeed(after: nil, batchSize: 1) { _ in throw Full() }
    }
  }
}
