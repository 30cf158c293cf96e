import Foundation
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
      try store.addBucketListItem(BucketListItemRecord(title: "Philosopher's Path"), toTrip: text)
      try store.addBucketListItem(
        BucketListItemRecord(title: "Kaiseki dinner", hasReservation: true), toTrip: text)
      let first = try store.addBucketListItem(
        BucketListItemRecord(title: "Fushimi Inari at dawn", isInPlan: true), toTrip: text, at: 0)
      #expect(
        try store.bucketList(ofTrip: text).map(\.title) == [
          "Fushimi Inari at dawn", "Philosopher's Path", "Kaiseki dinner",
        ])
      try store.moveBucketListItem(first.id, to: 2)
      try store.updateBucketListItem(first.id) { $0.details = "Before the crowds" }
      let path = try #require(try store.bucketList(ofTrip: text).first)
      try store.removeBucketListItem(path.id)
      try store.setStay(
        LivingAccommodationRecord(name: "Ryokan", latitude: 35.0, longitude: 135.77),
        forTrip: text)
      let stay = try store.setStay(
        LivingAccommodationRecord(
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
      #expect(stay.record.name == "Ryokan Yachiyo" && stay.address == "Nanzenji")
      #expect(stay.placeIdentifier?.rawValue == "geonames:1857910")
      #expect(stay.latitude == 35.0107 && stay.longitude == 135.7925)

      #expect(try store.clearStay(ofTrip: id.uuidString)?.name == "Ryokan Yachiyo")
      #expect(try store.clearStay(ofTrip: id.uuidString) == nil)
      try store.setStay(
        LivingAccommodationRecord(name: "Hotel", latitude: 35, longitude: 135),
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
    let item = try store.addBucketListItem(BucketListItemRecord(title: "Gion"), toTrip: text)
    let long = String(repeating: "a", count: TripRecord.maximumTextLength + 1)
    let cases: [(String, () throws -> Void)] = [
      (
        "title", { _ = try store.addBucketListItem(BucketListItemRecord(title: " "), toTrip: text) }
      ),
      (
        "title",
        { _ = try store.addBucketListItem(BucketListItemRecord(title: long), toTrip: text) }
      ),
      (
        "details",
        {
          _ = try store.addBucketListItem(
            BucketListItemRecord(title: "ok", details: "a\u{1B}[31m"), toTrip: text)
        }
      ),
      (
        "position",
        { _ = try store.addBucketListItem(BucketListItemRecord(title: "ok"), toTrip: text, at: 2) }
      ),
      ("position", { _ = try store.moveBucketListItem(item.id, to: 1) }),
      ("position", { _ = try store.moveBucketListItem(item.id, to: -1) }),
      ("title", { _ = try store.updateBucketListItem(item.id) { $0.title = "" } }),
      (
        "id",
        {
          _ = try store.addBucketListItem(
            BucketListItemRecord(id: item.id, title: "again"), toTrip: text)
        }
      ),
      (
        "latitude",
        {
          _ = try store.setStay(
            LivingAccommodationRecord(name: "Inn", latitude: 91, longitude: 0), forTrip: text)
        }
      ),
      (
        "name",
        {
          _ = try store.setStay(
            LivingAccommodationRecord(name: "In\nn", latitude: 1, longitude: 0), forTrip: text)
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
        BucketListItemRecord(title: "ok"), toTrip: UUID().uuidString)
    }
    #expect(missing?.code == .notFound)
    let noItem = #expect(throws: TripPlannerError.self) {
      try store.removeBucketListItem(UUID())
    }
    #expect(noItem?.code == .notFound)
    #expect(try Self.counts(store) == [1, 1, 0])
    #expect(try store.bucketList(ofTrip: text).map(\.title) == ["Gion"])

    // A library save of an item without a trip is refused too.
    let orphan = BucketListItem(BucketListItemRecord(title: "Nowhere"))
    store.context.insert(orphan)
    #expect(throws: (any Error).self) { try store.context.save() }
    store.context.rollback()
    #expect(try Self.counts(store) == [1, 1, 0])
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
      try store.addBucketListItem(BucketListItemRecord(title: title), toTrip: kyoto.id.uuidString)
    }
    try store.addBucketListItem(
      BucketListItemRecord(title: "Bubble tea"), toTrip: food.id.uuidString)
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
      BucketListItemRecord(title: "Tea ceremony", details: "matcha", hasReservation: true),
      toTrip: kyoto.id.uuidString)
    try store.addBucketListItem(
      BucketListItemRecord(title: "Dōtonbori", isInPlan: true), toTrip: osaka.id.uuidString)
    try store.addBucketListItem(
      BucketListItemRecord(title: "Kuromon market"), toTrip: osaka.id.uuidString)
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
