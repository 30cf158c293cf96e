import Foundation
import Testing

@testable import TripPlanner

@Suite("CSV reader")
struct CSVReaderTests {
  func fields(_ text: String) throws -> [[String]] {
    try CSVReader.records(Data(text.utf8)).map(\.fields)
  }

  @Test("reads quoted commas, doubled quotes and line breaks inside quotes")
  func quoting() throws {
    #expect(try fields("a,\"b,c\",\"say \"\"hi\"\"\"\n") == [["a", "b,c", "say \"hi\""]])
    let records = try CSVReader.records(Data("x,\"two\nlines\"\ny,z\n".utf8))
    #expect(records.map(\.fields) == [["x", "two\nlines"], ["y", "z"]])
    #expect(records.map(\.line) == [1, 3])
  }

  @Test("accepts CRLF, a byte-order mark, blank lines and a missing final newline")
  func lineEnds() throws {
    #expect(try fields("\u{FEFF}a,b\r\n1,2\r\n\r\n3,4") == [["a", "b"], ["1", "2"], ["3", "4"]])
    #expect(try fields("a,,\n") == [["a", "", ""]])
    #expect(try fields("\"\"\n") == [[""]])
  }

  @Test(
    "reports syntax errors with their line",
    arguments: [
      ("a,b\n\"open\n", 2, "not closed"),
      ("a,b\nx\"y,z\n", 2, "double quote inside"),
      ("a,b\n\"x\"y,z\n", 2, "after a closing"),
      ("a\rb\n", 1, "carriage return"),
      ("a,b\nc,\u{0}\n", 2, "NUL"),
    ])
  func syntaxErrors(input: String, line: Int, reason: String) throws {
    let error = try #require(throws: CSVReader.SyntaxError.self) {
      try CSVReader.records(Data(input.utf8))
    }
    #expect(error.line == line)
    #expect(error.reason.contains(reason))
  }

  @Test("rejects invalid UTF-8, naming the line")
  func invalidUTF8() throws {
    var data = Data("a,b\n".utf8)
    data.append(contentsOf: [0x63, 0xFF, 0x0A])
    let error = try #require(throws: CSVReader.SyntaxError.self) { try CSVReader.records(data) }
    #expect(error.line == 2)
    #expect(error.reason.contains("UTF-8"))
  }

  @Test("writes fields that read back the same")
  func writerRoundTrip() throws {
    let samples = [["plain", "a,b", "say \"x\"", "two\nlines", " edge ", "", "日本"]]
    let text = samples.map(CSVWriter.line).joined()
    #expect(try fields(text) == samples)
  }
}

@Suite("Trip validation")
struct TripValidationTests {
  let day = Date(timeIntervalSince1970: 1_800_000_000)

  func record(
    name: String = "Trip", destination: String = "Paris", latitude: Double = 48.85,
    longitude: Double = 2.35, end: TimeInterval = 86400
  ) -> TripRecord {
    TripRecord(
      name: name, destination: destination, startDate: day, endDate: day.addingTimeInterval(end),
      latitude: latitude, longitude: longitude)
  }

  @Test(
    "names the field at fault",
    arguments: [
      ("name", "", "Paris", 0.0, 0.0, 0.0),
      ("name", "  ", "Paris", 0, 0, 0),
      ("destination", "Trip", "", 0, 0, 0),
      ("latitude", "Trip", "Paris", 90.5, 0, 0),
      ("latitude", "Trip", "Paris", Double.nan, 0, 0),
      ("longitude", "Trip", "Paris", 0, -180.01, 0),
      ("longitude", "Trip", "Paris", 0, Double.infinity, 0),
      ("endDate", "Trip", "Paris", 0, 0, -1),
    ])
  func rejects(
    field: String, name: String, destination: String, latitude: Double, longitude: Double,
    end: Double
  ) throws {
    let bad = record(
      name: name, destination: destination, latitude: latitude, longitude: longitude, end: end)
    let error = try #require(throws: TripPlannerError.self) { try bad.validate() }
    #expect(error.code == .invalidTrip)
    #expect(error.field == field)
  }

  @Test("accepts the edges of every range")
  func acceptsEdges() throws {
    try record(latitude: 90, longitude: 180, end: 0).validate()
    try record(latitude: -90, longitude: -180).validate()
  }

  @Test("is enforced on saves made straight through a context")
  func enforcedOnContextSaves() throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    let trip = Trip(record(latitude: 100))
    store.context.insert(trip)
    #expect(throws: TripPlannerError.self) { try store.context.save() }
    #expect(try store.count() == 0)
  }
}
