import Foundation
import Geo
import Persistence
import TestSupport
import Testing

@testable import TripPlanner

/// The queries behind a service's pages of trips with plans, of items and of stays, as each
/// engine plans them: the plan tables are read by their trip key's index, never scanned, so
/// that a page costs O(page · log n) whatever the store holds.
@Suite("The plans' queries use the key columns' indexes, on every engine")
struct PlanQueryPlanTests {
  @Test(
    "a page's plans, a trip's items and stay, items and stays by id, and the plan filters read the plan tables by index",
    arguments: TripPlanTests.Engine.allCases)
  func planQueries(engine: TripPlanTests.Engine) throws {
    let configuration = ModelConfiguration(url: try TripPlanTests.storeURL(engine, "plans"))
    let recorder = RecordingEngine(try configuration.defaultEngine())
    let store = TripStore(
      container: try ModelContainer(
        for: Trip.modelTypes, configuration: configuration, engine: recorder))
    var ids: [UUID] = []
    for index in 0..<60 {
      var record = TripPlanTests.kyoto
      record.name = "Trip \(index)"
      record.longitude = Double(index) - 30
      record.latitude = Double(index % 40)
      let trip = try store.add(record)
      ids.append(trip.id)
      for item in 0..<3 {
        try store.addBucketListItem(
          itemValues(title: "Item \(index).\(item)", hasReservation: item == 1),
          toTrip: trip.id.uuidString)
      }
      try store.setStay(
        stayValues(name: "Stay \(index)", latitude: 1, longitude: 2),
        forTrip: trip.id.uuidString)
    }
    let settings = engine == .postgreSQL ? ["enable_seqscan": "off"] : [:]
    let planTables = ["bucket_list_items", "living_accommodations"]

    /// Runs `body` and checks every query it ran on the trip tables: only the tables of
    /// `scanning` may be read whole.
    func expectIndexed(
      _ shape: String, scanning allowed: Set<String> = [],
      sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
    ) throws {
      recorder.clear()
      try body()
      let plans = try recorder.plans(
        where: { sql in planTables.contains { sql.contains("\"\($0)\"") } }, settings: settings)
      #expect(!plans.isEmpty, "\(shape): no plan query ran", sourceLocation: sourceLocation)
      for (sql, plan) in plans {
        let scanned = RecordingEngine.scannedTables(in: plan).filter { !allowed.contains($0) }
        #expect(
          scanned.isEmpty, "\(shape) scans \(scanned):\n\(sql)\n\(plan.joined(separator: "\n"))",
          sourceLocation: sourceLocation)
      }
    }

    // Whether the store holds plan rows is asked once per history token (a first row of each
    // plan table, LIMIT 1), before the pages measured here.
    _ = try store.hasPlanRows()
    try expectIndexed("a bbox page's plans") {
      var query = TripQuery(limit: 10)
      query.bbox = GeographicBox(west: -10, south: 0, east: 10, north: 40)
      let page = try store.pageRecords(query, index: nil)
      let planned = try store.withPlans(page.records)
      #expect(planned.count == 10)
      #expect(
        planned.allSatisfy { $0.plan?.bucketList.count == 3 && $0.plan?.livingAccommodation != nil }
      )
    }
    // A page the index answers reads its plans by the trips' keys: two queries, the items'
    // and the stays', by the key columns' indexes, and none on the trips; the same plans, in
    // the same order, as read by the trips' ids.
    let index = TripBoxIndex()
    var boxQuery = TripQuery(limit: 25)
    boxQuery.bbox = GeographicBox(west: -30, south: 0, east: 30, north: 40)
    _ = try store.pageRecords(boxQuery, index: index)
    var keyed: [TripRecord] = []
    try expectIndexed("a page's plans by the index's keys") {
      keyed = try store.pageRecordsWithPlans(boxQuery, index: index).records
    }
    let onTrips = recorder.queries.map(\.sql).filter { $0.contains("FROM \"trips\"") }
    #expect(onTrips.isEmpty, "the page by keys read the trips: \(onTrips)")
    let planQueries = recorder.queries.map(\.sql).filter {
      $0.contains("\"bucket_list_items\"") || $0.contains("\"living_accommodations\"")
    }
    #expect(planQueries.count == 2, "\(planQueries)")
    #expect(keyed.count == 25)
    #expect(
      keyed.allSatisfy {
        $0.plan?.bucketList.map(\.position) == [0, 1, 2] && $0.plan?.livingAccommodation != nil
      })
    let byID = try store.withPlans(
      keyed.map { record in
        var record = record
        record.plan = nil
        return record
      })
    #expect(keyed == byID)
    let trip = ids[7]
    try expectIndexed("a trip's bucket list and stay") {
      let list = try store.bucketList(ofTrip: trip.uuidString)
      let items = try store.bucketListItems(ofTrip: trip, limit: 10).items
      let stays = try store.stays(ofTrip: trip).stays
      #expect([list.count, items.count, stays.count] as [Int] == [3, 3, 1])
    }
    let item = try #require(try store.bucketList(ofTrip: trip.uuidString).first).id
    try expectIndexed("an item and a stay by id") {
      let itemTrip = try store.bucketListItem(item)?.tripID
      let stay = try #require(try store.stays(ofTrip: trip).stays.first?.record.id)
      let stayTrip = try store.stay(stay)?.tripID
      #expect(itemTrip == trip && stayTrip == trip)
    }
    // A trip's test of its items: a row's test by the key column's index, or the items
    // passing the filter read once and joined: either table may be read whole, once.
    try expectIndexed("the plan filters", scanning: ["trips", "bucket_list_items"]) {
      var query = TripQuery()
      query.hasReservation = true
      let records = try store.records(query)
      #expect(records.count == 60)
    }
  }

  @Test(
    "pages on a store without plans run no plan query once it is known to hold none; the first commit that adds an item makes the next page read it",
    arguments: TripPlanTests.Engine.allCases)
  func noPlansNoPlanQuery(engine: TripPlanTests.Engine) throws {
    let url = try TripPlanTests.storeURL(engine, "noplans")
    let configuration = ModelConfiguration(url: url)
    let recorder = RecordingEngine(try configuration.defaultEngine())
    let store = TripStore(
      container: try ModelContainer(
        for: Trip.modelTypes, configuration: configuration, engine: recorder))
    for index in 0..<20 {
      var record = TripPlanTests.kyoto
      record.name = "Trip \(index)"
      try store.add(record)
    }
    var query = TripQuery(limit: 10)
    query.bbox = GeographicBox(west: 130, south: 30, east: 140, north: 40)
    func planQueries() -> [String] {
      recorder.queries.map(\.sql).filter {
        $0.contains("\"bucket_list_items\"") || $0.contains("\"living_accommodations\"")
      }
    }
    let first = try store.pageRecordsWithPlans(query, index: nil)
    #expect(first.records.count == 10 && first.records.allSatisfy { $0.plan == TripPlan() })
    recorder.clear()
    for offset in [0, 10] {
      query.offset = offset
      let page = try store.pageRecordsWithPlans(query, index: TripBoxIndex())
      #expect(page.records.count == 10)
    }
    #expect(planQueries().isEmpty, "\(planQueries())")
    // Another writer adds an item: its commit is a new history token.
    let writer = try TripStore(url: url, author: "writer")
    let trip = try #require(first.records.first?.id)
    try writer.addBucketListItem(itemValues(title: "Kava"), toTrip: trip.uuidString)
    query.offset = 0
    let after = try store.pageRecordsWithPlans(query, index: nil)
    #expect(after.records.first { $0.id == trip }?.plan?.bucketList.map(\.title) == ["Kava"])
  }

}
