import Foundation
import Geo
import Persistence
import TestSupport
import Testing

@testable import PersistenceSQLite
@testable import TripPlanner

@Suite("TripBoxIndex: bounding-box pages from memory")
struct TripBoxIndexTests {
  enum Engine: String, CaseIterable, Sendable { case sqlite, postgreSQL }

  static func storeURL(_ engine: Engine, _ name: String) throws -> (URL, URL) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "\(name)-\(UUID().uuidString)")
    switch engine {
    case .sqlite: return (directory.appendingPathComponent("trips.sqlite"), directory)
    case .postgreSQL:
      return (
        try #require(URL(string: try PostgreSQLCluster.shared.get().makeDatabase(name))),
        directory
      )
    }
  }

  /// Trips that make the edges matter: the same places again and again, places on cell edges
  /// (multiples of a quarter degree), on and beside ±180 and ±90, few start dates and few
  /// names (ties on both), names whose code-point order differs from case-blind order.
  static func record(_ generator: inout SeededGenerator) -> TripRecord {
    let places: [(Double, Double)] = [
      (40.7128, -74.006), (40.75, -74.0), (40.5, -73.75), (-17.7134, 178.065), (-16.5, -179.9),
      (0, 180), (0, -180), (89.99, 10), (-90, 0), (90, 179.75), (51.5, -0.25), (35.6, 139.7),
    ]
    let names = ["Zürich", "Zurich", "zurich", "Ångström", "Éclair", "eclair", "A", "B", "b"]
    var latitude: Double
    var longitude: Double
    if Bool.random(using: &generator) {
      (latitude, longitude) = places.randomElement(using: &generator)!
    } else {
      latitude = (Double.random(in: -90...90, using: &generator) * 4).rounded() / 4
      longitude = Double.random(in: -180...180, using: &generator)
      if Bool.random(using: &generator) { longitude = (longitude * 4).rounded() / 4 }
    }
    let day = Int.random(in: 0..<12, using: &generator)
    let start = TripDates.parse("2027-01-01")!.addingTimeInterval(Double(day) * 86_400)
    return TripRecord(
      name: names.randomElement(using: &generator)!,
      destination: ["D", "Düsseldorf", "A long destination name beyond fifteen bytes"]
        .randomElement(using: &generator)!, startDate: start,
      endDate: start.addingTimeInterval(86_400), latitude: latitude, longitude: longitude,
      placeIdentifier: Bool.random(using: &generator)
        ? "geonames:\(Int.random(in: 1...99, using: &generator))" : nil)
  }

  static func box(_ generator: inout SeededGenerator) -> GeographicBox {
    func edge(_ range: ClosedRange<Double>) -> Double {
      switch Int.random(in: 0..<3, using: &generator) {
      case 0: return (Double.random(in: range, using: &generator) * 4).rounded() / 4
      case 1:
        return [40.7128, -74.006, 178.065, -17.7134, 180, -180, 90, -90, 0].filter {
          range.contains($0)
        }.randomElement(using: &generator)!
      default: return Double.random(in: range, using: &generator)
      }
    }
    var south = edge(-90...90)
    var north = edge(-90...90)
    if south > north { swap(&south, &north) }
    // West above east crosses the antimeridian: about half of the boxes.
    return GeographicBox(west: edge(-180...180), south: south, east: edge(-180...180), north: north)
  }

  @Test(
    "pages and counts from memory equal the store's, for random boxes (across 180° too), offsets, limits and both orders",
    arguments: Engine.allCases)
  func equalsTheStore(engine: Engine) throws {
    let (url, directory) = try Self.storeURL(engine, "boxindex")
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try TripStore(url: url)
    var generator = SeededGenerator(seed: 2027)
    _ = try store.importRecords((0..<1500).map { _ in Self.record(&generator) })
    let index = TripBoxIndex()
    var nonEmpty = 0
    for round in 0..<300 {
      var query = TripQuery(
        reverse: round % 2 == 1, limit: Int.random(in: 0...40, using: &generator),
        offset: [0, 0, 3, 17, 200].randomElement(using: &generator)!)
      query.bbox = Self.box(&generator)
      let expected = try store.page(query)
      let answered = try store.page(query, index: index)
      #expect(
        answered.trips.map(\.id) == expected.trips.map(\.id), "\(query.bbox!) \(query)")
      #expect(answered.matched == expected.matched, "\(query.bbox!)")
      let records = try store.pageRecords(query, index: index)
      #expect(records.records == expected.trips.map(\.record), "\(query.bbox!)")
      #expect(records.matched == expected.matched)
      if expected.matched > 0 { nonEmpty += 1 }
    }
    #expect(index.count == 1500)
    #expect(index.answeredPages.load(ordering: .relaxed) == 600)
    #expect(nonEmpty > 100)
  }

  @Test(
    "follows another store's inserts, moves, renames and deletes, and rebuilds after its history is deleted",
    arguments: Engine.allCases)
  func followsChanges(engine: Engine) throws {
    let (url, directory) = try Self.storeURL(engine, "boxfollow")
    defer { try? FileManager.default.removeItem(at: directory) }
    let reader = try TripStore(url: url, author: "reader")
    let writer = try TripStore(url: url, author: "writer")
    var generator = SeededGenerator(seed: 7)
    _ = try writer.importRecords((0..<300).map { _ in Self.record(&generator) })
    let index = TripBoxIndex()
    try index.prepare(reader)
    #expect(index.count == 300)
    var boxes = (0..<20).map { _ in Self.box(&generator) }
    boxes.append(GeographicBox(west: -180, south: -90, east: 180, north: 90))
    func check(_ step: String) throws {
      for (number, box) in boxes.enumerated() {
        var query = TripQuery(reverse: number % 2 == 0, limit: 25)
        query.bbox = box
        let expected = try reader.page(query)
        let answered = try reader.page(query, index: index)
        #expect(answered.trips.map(\.id) == expected.trips.map(\.id), "\(step) \(box)")
        #expect(answered.matched == expected.matched, "\(step) \(box)")
        let records = try reader.pageRecords(query, index: index)
        #expect(records.records == expected.trips.map(\.record), "\(step) \(box)")
      }
    }
    try check("built")
    let all = try writer.trips()
    for (number, trip) in all.prefix(60).enumerated() {
      _ = try writer.update(trip.id) { record in
        switch number % 6 {
        case 0: (record.latitude, record.longitude) = (-17.7134, 178.065)
        case 1: record.name = "Änderung \(number)"
        case 2: record.startDate = record.startDate.addingTimeInterval(-86_400 * 30)
        case 3: record.endDate = record.endDate.addingTimeInterval(86_400 * 3)
        case 4:
          record.placeIdentifier =
            record.placeIdentifier == nil ? PlaceIdentifier(rawValue: "wikidata:Q\(number)") : nil
        default: record.destination = "Zielort \(number)"
        }
      }
    }
    _ = try writer.delete(all.suffix(40).map(\.id))
    _ = try writer.importRecords((0..<50).map { _ in Self.record(&generator) })
    _ = try writer.update(all[100].id) { $0.destination = "Elsewhere" }
    try check("changed")
    #expect(index.count == 310)
    // The reader's snapshot older than the index: the store answers, not the index.
    let current = try reader.context.currentHistoryToken()
    #expect(
      index.page(
        box: boxes[0], reverse: false, offset: 0, limit: 5,
        token: DefaultHistoryToken(
          storeIdentifier: current.storeIdentifier, value: current.value - 1),
        context: reader.context) == nil)
    // History deleted after the index's token: it rebuilds.
    _ = try writer.importRecords((0..<5).map { _ in Self.record(&generator) })
    _ = try writer.context.deleteHistory(before: try writer.context.currentHistoryToken())
    _ = try writer.update(all[101].id) { $0.latitude = 1.5 }
    try check("history deleted")
    #expect(index.count == 315)
  }

  @Test("other filters and sorts are answered by the store; an empty store has an empty index")
  func otherQueries() throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    let index = TripBoxIndex()
    var query = TripQuery(limit: 10)
    query.bbox = GeographicBox(west: -10, south: -10, east: 10, north: 10)
    #expect(try store.page(query, index: index).matched == 0)
    #expect(index.count == 0)
    #expect(index.answeredPages.load(ordering: .relaxed) == 1)
    var generator = SeededGenerator(seed: 3)
    _ = try store.importRecords((0..<50).map { _ in Self.record(&generator) })
    for variant in [
      TripQuery(search: "a", limit: 10), TripQuery(sort: .name, limit: 10),
      TripQuery(from: Date(), limit: 10), TripQuery(),
    ] {
      var variant = variant
      variant.bbox = GeographicBox(west: -180, south: -90, east: 180, north: 90)
      let expected = try store.page(variant)
      let answered = try store.page(variant, index: index)
      #expect(answered.trips.map(\.id) == expected.trips.map(\.id))
      #expect(answered.matched == expected.matched)
    }
    #expect(index.answeredPages.load(ordering: .relaxed) == 1)
  }

  @Test("the text arena compacts without changing a page; keys far beyond the store's go aside")
  func arenaAndKeys() throws {
    let token = DefaultHistoryToken(storeIdentifier: UUID(), value: 1)
    var state = TripBoxIndex.State(token: token)
    var generator = SeededGenerator(seed: 5)
    var expectedBytes = 0
    var kept: [Int64: TripRecord] = [:]
    for key in 1...400 {
      let name =
        String(repeating: "ä", count: Int.random(in: 0..<30, using: &generator)) + "\(key % 7)"
      let record = TripRecord(
        id: UUID(), name: name, destination: "Ziel \(key % 11)",
        startDate: Date(timeIntervalSinceReferenceDate: Double(key % 5)),
        endDate: Date(timeIntervalSinceReferenceDate: Double(key % 5 + 3)),
        latitude: Double(key % 13) / 10, longitude: Double(key % 20) / 10,
        placeIdentifier: key % 3 == 0 ? nil : "geonames:\(key)")
      let storedKey: Int64 = key == 400 ? 1 << 40 : Int64(key)
      state.insert(key: storedKey, record)
      if key % 2 == 0 {
        expectedBytes +=
          name.utf8.count + record.destination.utf8.count
          + (record.placeIdentifier?.rawValue.utf8.count ?? 0)
        kept[storedKey] = record
      }
    }
    #expect(state.sparseSlots.count == 1)
    for key in stride(from: 1, through: 399, by: 2) { state.remove(Int64(key)) }
    #expect(state.count == 200)
    let box = GeographicBox(west: 0, south: 0, east: 2, north: 2)
    func keys(_ page: (entries: [TripBoxIndex.Entry], matched: Int)) -> ([Int64], Int) {
      (page.entries.map(\.key), page.matched)
    }
    let before = keys(TripBoxIndex.page(state, box: box, reverse: false, offset: 3, limit: 50))
    let reversed = keys(TripBoxIndex.page(state, box: box, reverse: true, offset: 0, limit: 500))
    state.compactText()
    #expect(state.text.count == expectedBytes)
    #expect(
      keys(TripBoxIndex.page(state, box: box, reverse: false, offset: 3, limit: 50)) == before)
    let after = TripBoxIndex.page(state, box: box, reverse: true, offset: 0, limit: 500)
    #expect(keys(after) == reversed)
    #expect(reversed.1 == 200 && reversed.0.count == 200)
    // Every record, made from the compacted arena, is the one inserted.
    #expect(after.entries.map { state.record($0) } == after.entries.map { kept[$0.key] })
    state.remove(1 << 40)
    #expect(state.sparseSlots.isEmpty && state.count == 199)
    #expect(state.cell(of: 2) != nil && state.cell(of: 3) == nil)
  }

  @Test(
    "a row the index cannot read: the store answers, lastError names it, and the index is back once the store changes"
  )
  func unreadableRow() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "boxdamaged-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let url = directory.appendingPathComponent("trips.sqlite")
    let store = try TripStore(url: url)
    var generator = SeededGenerator(seed: 9)
    _ = try store.importRecords((0..<200).map { _ in Self.record(&generator) })
    let outside = try Database(path: url.path, flags: 2)
    try outside.execute("UPDATE trips SET latitude = 'north' WHERE _pk = 3")
    let index = TripBoxIndex()
    #expect(throws: PersistenceError.self) { try index.prepare(store) }
    #expect(index.lastError?.attribute == "latitude", "\(String(describing: index.lastError))")
    #expect(index.lastError?.row != nil)
    var query = TripQuery(limit: 20)
    query.bbox = GeographicBox(west: -180, south: -90, east: 180, north: 90)
    let expected = try store.page(query)
    let answered = try store.pageRecords(query, index: index)
    #expect(answered.records == expected.trips.map(\.record))
    #expect(answered.matched == expected.matched && expected.matched == 199)
    #expect(index.answeredPages.load(ordering: .relaxed) == 0)
    // Mended by the outside writer (no history), then any change through the store.
    try outside.execute("UPDATE trips SET latitude = 10 WHERE _pk = 3")
    _ = try store.add(Self.record(&generator))
    let after = try store.pageRecords(query, index: index)
    #expect(after.matched == 201 && index.count == 201)
    #expect(index.answeredPages.load(ordering: .relaxed) == 1)
    #expect(index.lastError == nil)
  }
}
