import Foundation
import Persistence
import Testing

@testable import TripPlanner

@Suite("Trip store")
struct TripStoreTests {
  func record(_ id: String, _ name: String = "Trip") -> TripRecord {
    TripRecord(
      id: UUID(uuidString: id), name: name, destination: "Paris",
      startDate: TripDates.parse("2027-01-01")!, endDate: TripDates.parse("2027-01-02")!,
      latitude: 48.85, longitude: 2.35)
  }

  @Test("finds trips by id prefix through the index, refusing ambiguous or short prefixes")
  func prefixes() throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    try store.add(record("abcd0000-0000-4000-8000-000000000001", "one"))
    try store.add(record("abcd0000-0000-4000-8000-000000000002", "two"))
    try store.add(record("abce0000-0000-4000-8000-000000000003", "three"))
    try store.add(record("ffffffff-ffff-4fff-bfff-ffffffffffff", "last"))
    #expect(try store.trip(matching: "abce").name == "three")
    #expect(try store.trip(matching: "ABCD0000-0000-4000-8000-000000000002").name == "two")
    #expect(try store.trip(matching: "ffff").name == "last")
    for bad in ["abcd", "abc", "zzzz", "1234"] {
      #expect(throws: TripPlannerError.self) { try store.trip(matching: bad) }
    }
  }

  @Test("deletes all or none")
  func deleteAllOrNone() throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    let trip = try store.add(record("abcd0000-0000-4000-8000-000000000001"))
    #expect(throws: TripPlannerError.self) {
      try store.delete([trip.id.uuidString, "eeee0000-0000-4000-8000-000000000000"])
    }
    #expect(try store.count() == 1)
  }

  @Test("leaves a trip unchanged when an update breaks a rule")
  func invalidUpdate() throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    let trip = try store.add(record("abcd0000-0000-4000-8000-000000000001", "kept"))
    #expect(throws: TripPlannerError.self) {
      try store.update(trip.id.uuidString) { $0.latitude = 123 }
    }
    #expect(trip.latitude == 48.85)
    #expect(!store.context.hasChanges)
  }

  @Test("imports all or nothing, and updates trips whose id exists")
  func importAllOrNothing() throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    try store.add(record("abcd0000-0000-4000-8000-000000000001", "old"))
    var bad = record("abcd0000-0000-4000-8000-000000000002")
    bad.destination = ""
    let error = try #require(throws: TripPlannerError.self) {
      try store.importRecords(
        [(2, record("abcd0000-0000-4000-8000-000000000001", "new")), (3, bad)], file: "f")
    }
    #expect(error.problems.map(\.description) == ["f:3: error: destination must not be empty"])
    #expect(try store.trips().map(\.name) == ["old"])
    try store.importRecords([(2, record("abcd0000-0000-4000-8000-000000000001", "new"))], file: "f")
    #expect(try store.trips().map(\.name) == ["new"])
  }
}
