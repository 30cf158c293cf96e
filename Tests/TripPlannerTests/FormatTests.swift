import Foundation
import TestSupport
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

  @Test(
    "numbers as people write coordinates, and nothing else",
    arguments: [
      (" -33.9 ", -33.9), ("+151", 151), ("1.5e2", 150), (".5", 0.5), ("5.", 5), ("-0", 0),
      ("1E-2", 0.01), ("  7", 7),
    ] as [(String, Double)])
  func numbers(_ text: String, _ expected: Double) {
    #expect(TripRecord.parseNumber(text) == expected, "\(text)")
  }

  @Test(
    "garbage is not a number",
    arguments: [
      "", "   ", "0x10", "inf", "nan", "1 2", "1e999", "-", "+.e1", ".", "1e", "\u{A0}1", "1,5",
      "١٢", "1\u{0}", "--1", "1.2.3",
    ])
  func notNumbers(_ text: String) {
    #expect(TripRecord.parseNumber(text) == nil, "\(text)")
  }

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
        "trips.csv:4: error: start_date '2027-13-01' is not a date (ISO 8601 with a zone, or YYYY-MM-DD)",
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

@Suite("Fast writers agree with Foundation")
struct FastWriterTests {
  @Test("TripDates.format writes what Foundation's .iso8601 style writes, years 1–9999")
  func dates() {
    var generator = SeededGenerator(seed: 11)
    var seconds: [Double] = [
      -62_135_596_800, 253_402_300_799, 0, -1, 951_782_400, 951_868_800, 4_107_542_400,
      -2_208_988_800, 1.5, -0.25, 253_402_300_800, -62_135_596_801,
    ]
    for _ in 0..<20_000 {
      seconds.append(Double(Int64.random(in: -62_135_596_800..<253_402_300_800, using: &generator)))
    }
    for value in seconds {
      let date = Date(timeIntervalSince1970: value)
      #expect(TripDates.format(date) == date.formatted(.iso8601), "\(value)")
    }
  }

  @Test("TripGeoJSON.writeFeature writes what the feature's tree renders, plans included")
  func features() {
    var generator = SeededGenerator(seed: 5)
    let texts = ["", "a\"b\\c", "tab\t", "Zürich", "\u{1}\u{1F}", "🌍 e\u{301}"]
    var records = FormatTests.records
    for _ in 0..<300 {
      records.append(
        TripRecord(
          id: Bool.random(using: &generator) ? nil : UUID(),
          name: texts.randomElement(using: &generator)!,
          destination: texts.randomElement(using: &generator)!,
          startDate: Date(
            timeIntervalSince1970: Double.random(in: -1e11...1e11, using: &generator)),
          endDate: Date(
            timeIntervalSince1970: Double(
              Int.random(in: -99_999_999...99_999_999, using: &generator))),
          latitude: [0, -0.0, 90, -89.999999, 1e-7, 12.5].randomElement(using: &generator)!,
          longitude: Double.random(in: -180...180, using: &generator),
          placeIdentifier: Bool.random(using: &generator)
            ? nil : texts.randomElement(using: &generator)))
      // Half of them with a plan: items of every kind of text and flag, a stay or none.
      if Bool.random(using: &generator) {
        records[records.count - 1].plan = TripPlan(
          bucketList: (0..<Int.random(in: 0...3, using: &generator)).map { position in
            itemValues(
              id: Bool.random(using: &generator) ? nil : UUID(),
              title: texts.randomElement(using: &generator)!,
              details: texts.randomElement(using: &generator)!,
              hasReservation: Bool.random(using: &generator),
              isInPlan: Bool.random(using: &generator),
              position: [position, 7, 2_147_483_647].randomElement(using: &generator)!)
          },
          livingAccommodation: Bool.random(using: &generator)
            ? nil
            : stayValues(
              id: UUID(), name: texts.randomElement(using: &generator)!,
              address: texts.randomElement(using: &generator)!,
              latitude: [0, -0.0, 45.5, 1e-7].randomElement(using: &generator)!,
              longitude: Double.random(in: -180...180, using: &generator),
              placeIdentifier: Bool.random(using: &generator)
                ? nil : texts.randomElement(using: &generator)))
      }
    }
    #expect(records.contains { $0.plan?.livingAccommodation != nil })
    for record in records {
      var bytes: [UInt8] = []
      TripGeoJSON.writeFeature(record, into: &bytes)
      #expect(bytes == TripGeoJSON.feature(record).utf8(), "\(record)")
    }
  }

  @Test("JSONValue.format writes what interpolation writes, integers without a fraction")
  func numbers() {
    var generator = SeededGenerator(seed: 8)
    var values: [Double] = [
      0, -0.0, 1e-7, 1e15, 1e15 - 1, -1e15, 12.5, -73.86641, 40.84985, .leastNonzeroMagnitude,
      .greatestFiniteMagnitude, .pi, 180, -180, 1e22, -2.5e-308,
    ]
    for _ in 0..<10_000 {
      let bits = UInt64.random(in: 0...UInt64.max, using: &generator)
      let value = Double(bitPattern: bits)
      values.append(value.isFinite ? value : Double.random(in: -1e6...1e6, using: &generator))
    }
    for value in values {
      let expected =
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
      #expect(JSONValue.format(value) == expected, "\(value)")
    }
    #expect(JSONValue.format(.nan) == "null" && JSONValue.format(-.infinity) == "null")
  }

  @Test("UUID.lowercasedString is uuidString.lowercased()")
  func uuids() {
    for _ in 0..<1000 {
      let id = UUID()
      #expect(id.lowercasedString == id.uuidString.lowercased())
    }
    let fixed = UUID(uuid: (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 255))
    #expect(fixed.lowercasedString == "00010203-0405-0607-0809-0a0b0c0d0eff")
  }

  @Test("JSONValue writes text that JSON readers read back, escaping every control character")
  func json() throws {
    var texts = ["", "plain", "quote \" and \\ backslash", "tab\tnew\nline\r", "é Ω 🌍", "/"]
    texts.append(String(String.UnicodeScalarView((0..<0x20).map { Unicode.Scalar($0)! })))
    texts.append("\u{7F}\u{85}\u{2028}")
    let value = JSONValue.array(
      texts.map { .object([("k\u{1}\"", .array([.string($0), .number(1.5), .null]))]) })
    for pretty in [false, true] {
      let text = value.rendered(pretty: pretty)
      #expect(!text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
      #expect(try JSONValue.parse(Data(text.utf8)) == value)
      #expect(value.utf8(pretty: pretty) == Array(text.utf8))
    }
    #expect(
      JSONValue.object([("a", .array([.number(1), .object([])]))]).rendered(pretty: true)
        == "{\n  \"a\": [\n    1,\n    {}\n  ]\n}")
  }
}
