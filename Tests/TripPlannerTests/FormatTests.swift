import Foundation
import Testing

@testable import TripPlanner

@Suite("Trip file formats")
struct FormatTests {
  static let records: [TripRecord] = [
    TripRecord(
      id: UUID(uuidString: "0378f603-a7ba-4528-8cae-a02f67f52dcf"), name: "Sun, sea and \"sand\"",
      destination: "Suva", startDate: TripDates.parse("2027-04-21")!,
      endDate: TripDates.parse("2027-05-05")!, latitude: -18.13683, longitude: 178.42531,
      placeIdentifier: "geonames:2198148"),
    TripRecord(
      id: UUID(uuidString: "59062751-9867-42dd-846d-afd049f2c596"),
      name: "Zürich — notes, \"quoted\"; and, commas",
      destination: "Zu\u{308}rich", startDate: TripDates.parse("2027-07-07T09:30:00Z")!,
      endDate: TripDates.parse("2027-07-19T18:00:00+02:00")!, latitude: 47.36667, longitude: 8.55,
      placeIdentifier: nil),
  ]

  @Test("round-trips every field", arguments: TripFileFormat.allCases)
  func roundTrip(format: TripFileFormat) throws {
    let data = format.encode(Self.records)
    let decoded = try format.decode(data, file: "x").map(\.record)
    #expect(decoded == Self.records)
  }

  @Test("reports every bad CSV row with FILE:LINE")
  func csvProblems() throws {
    let csv = """
      name,destination,start_date,end_date,latitude,longitude
      Good,Paris,2027-01-01,2027-01-02,48.8,2.3
      ,Paris,2027-01-01,2027-01-02,48.8,2.3
      Bad date,Paris,2027-13-01,2027-01-02,48.8,2.3
      Far,Paris,2027-01-01,2027-01-02,91,2.3
      Short,Paris

      """
    let error = try #require(throws: TripPlannerError.self) {
      try TripCSV.decode(Data(csv.utf8), file: "trips.csv")
    }
    #expect(error.code == .invalidInput)
    #expect(
      error.problems.map(\.description) == [
        "trips.csv:3: error: name must not be empty",
        "trips.csv:4: error: start_date '2027-13-01' is not a date (YYYY-MM-DD or ISO 8601 with a zone)",
        "trips.csv:5: error: latitude 91.0 is not a number between -90 and 90",
        "trips.csv:6: error: 2 fields, but the header has 6",
      ])
  }

  @Test(
    "rejects bad CSV headers",
    arguments: [
      ("", "empty"),
      ("name,destination,start_date,end_date,latitude\n", "'longitude' is missing"),
      (
        "name,destination,start_date,end_date,latitude,longitude,colour\n",
        "unknown column 'colour'"
      ),
      ("name,name,destination,start_date,end_date,latitude,longitude\n", "appears twice"),
    ])
  func csvHeaders(input: String, message: String) throws {
    let error = try #require(throws: TripPlannerError.self) {
      try TripCSV.decode(Data(input.utf8), file: "f.csv")
    }
    #expect(error.problems.contains { $0.reason.contains(message) }, "\(error.problems)")
  }

  @Test("reports bad JSON items on the line they start")
  func jsonProblems() throws {
    let json = """
      [
        {"name": "A", "destination": "Paris", "startDate": "2027-01-01", "endDate": "2027-01-02",
         "latitude": 1, "longitude": 2},
        {"name": "B", "destination": "Paris", "startDate": "2027-01-01", "endDate": "2027-01-02",
         "latitude": true, "longitude": 2, "colour": "red"}
      ]
      """
    let error = try #require(throws: TripPlannerError.self) {
      try TripJSON.decode(Data(json.utf8), file: "t.json")
    }
    #expect(
      Set(error.problems.map(\.description)) == [
        "t.json:4: error: unknown member 'colour'",
        "t.json:4: error: latitude must be a number",
      ])
  }

  @Test("rejects JSON that is not an array of trips", arguments: ["", "{", "{}", "[1]", "null"])
  func jsonGarbage(input: String) throws {
    #expect(throws: TripPlannerError.self) { try TripJSON.decode(Data(input.utf8), file: "t.json") }
  }

  @Test("writes a GeoJSON bbox that crosses the antimeridian when that is smaller")
  func geoJSONBox() throws {
    let value = TripGeoJSON.collection([
      Self.records[0],
      TripRecord(
        name: "Apia", destination: "Apia", startDate: .distantPast, endDate: .distantPast,
        latitude: -13.8, longitude: -171.8),
    ])
    #expect(
      value["bbox"]
        == .array([.number(178.42531), .number(-18.13683), .number(-171.8), .number(-13.8)]))
  }
}
