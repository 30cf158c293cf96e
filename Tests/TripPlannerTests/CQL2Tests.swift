import CQL2
import Foundation
import Persistence
import Testing

@testable import TripPlanner

/// Strips locations, to compare the trees of two encodings.
func shape(_ expression: CQL2Expression) -> String {
  "\(expression.node)".replacingOccurrences(
    of: #"location: [^)]*"#, with: "", options: .regularExpression)
}

@Suite("CQL2: the text and JSON encodings, and the meaning TripFilter gives them")
struct CQL2Tests {
  @Test(
    "the standard's examples parse to the same tree from CQL2 Text and from CQL2 JSON",
    arguments: [
      ("avg_temp > 30.5", #"{"op":">","args":[{"property":"avg_temp"},30.5]}"#),
      (
        "city='Toronto' AND NOT (depth < -5)",
        #"{"op":"and","args":[{"op":"=","args":[{"property":"city"},"Toronto"]},{"op":"not","args":[{"op":"<","args":[{"property":"depth"},-5]}]}]}"#
      ),
      ("name LIKE 'Smith%'", #"{"op":"like","args":[{"property":"name"},"Smith%"]}"#),
      (
        "depth BETWEEN 100.0 AND 150.0",
        #"{"op":"between","args":[{"property":"depth"},100.0,150.0]}"#
      ),
      (
        "cityName IN ('Toronto','Frankfurt','Tokyo','New York')",
        #"{"op":"in","args":[{"property":"cityName"},["Toronto","Frankfurt","Tokyo","New York"]]}"#
      ),
      ("geometry IS NULL", #"{"op":"isNull","args":[{"property":"geometry"}]}"#),
      (
        "S_INTERSECTS(geometry,POINT(36.319836 32.288087))",
        #"{"op":"s_intersects","args":[{"property":"geometry"},{"type":"Point","coordinates":[36.319836,32.288087]}]}"#
      ),
      (
        "S_INTERSECTS(location,BBOX(-118,33.8,-117.9,34))",
        #"{"op":"s_intersects","args":[{"property":"location"},{"bbox":[-118,33.8,-117.9,34]}]}"#
      ),
      (
        "T_INTERSECTS(INTERVAL(starts_at,ends_at),INTERVAL('1991-10-07','2010-02-10T05:29:20.073225Z'))",
        #"{"op":"t_intersects","args":[{"interval":[{"property":"starts_at"},{"property":"ends_at"}]},{"interval":["1991-10-07","2010-02-10T05:29:20.073225Z"]}]}"#
      ),
      (
        "updated >= DATE('1970-01-01')",
        #"{"op":">=","args":[{"property":"updated"},{"date":"1970-01-01"}]}"#
      ),
      (
        "CASEI(road_class) IN (CASEI('Οδος'),CASEI('Straße'))",
        #"{"op":"in","args":[{"op":"casei","args":[{"property":"road_class"}]},[{"op":"casei","args":["Οδος"]},{"op":"casei","args":["Straße"]}]]}"#
      ),
      (
        "vehicle_height > (bridge_clearance - 1)",
        #"{"op":">","args":[{"property":"vehicle_height"},{"op":"-","args":[{"property":"bridge_clearance"},1]}]}"#
      ),
      (
        "\"name\" = 'O''Hare' AND -x ^ 2 * 3 div 2 % 4 = y",
        #"{"op":"and","args":[{"op":"=","args":[{"property":"name"},"O'Hare"]},{"op":"=","args":[{"op":"%","args":[{"op":"div","args":[{"op":"*","args":[{"op":"^","args":[{"op":"-","args":[0,{"property":"x"}]},2]},3]},2]},4]},{"property":"y"}]}]}"#
      ),
    ])
  func encodingsAgree(text: String, json: String) throws {
    let fromText = try CQL2Expression(text: text)
    let fromJSON = try CQL2Expression(json: Data(json.utf8))
    if text.contains("-x") {
      // `-x` is a negation in text; JSON has no unary minus (0 - x): both mean the same.
      #expect(shape(fromText).contains("negation"))
    } else {
      #expect(shape(fromText) == shape(fromJSON))
    }
  }

  @Test(
    "errors name the character or the member",
    arguments: [
      ("a = ", "character 5"), ("a = 'x", "character 5"), ("(a = 1", "character 7"),
      ("a BETWEEN 1 2", "character 13"), ("a IS 3", "character 6"), ("POINT(1)", "character 8"),
      ("POLYGON((0 0, 1 0, 0 0))", "character 1"), ("BBOX(1,2,3)", "character 1"),
      ("a = 1 b", "character 7"), ("", "empty"), ("INTERVAL('x', '..')", "character 10"),
    ])
  func textErrors(text: String, place: String) {
    #expect {
      _ = try CQL2Expression(text: text)
    } throws: { error in
      "\(error)".contains(place)
    }
  }

  @Test(
    "JSON errors name the member",
    arguments: [
      (#"{"op":"=","args":[1]}"#, "$: '=' takes 2 arguments"),
      (#"{"op":"and","args":[true,{"property":""}]}"#, "$.args[1]"),
      (#"{"op":"in","args":[{"property":"a"},[]]}"#, "$.args[1]"),
      (
        #"{"op":"s_intersects","args":[{"property":"g"},{"type":"Point","coordinates":[1]}]}"#,
        "$.args[1].coordinates"
      ),
      (#"{"bbox":[1,2,"3",4]}"#, "$.bbox[2]"), (#"null"#, "$"), (#"[1]"#, "$"),
      (#"{"interval":["2020-01-01","tomorrow"]}"#, "$.interval[1]"),
    ])
  func jsonErrors(json: String, place: String) {
    #expect {
      _ = try CQL2Expression(json: Data(json.utf8))
    } throws: { error in
      "\(error)".contains(place)
    }
  }

  @Test(
    "CQL2 JSON nested past the limit (operators or GeometryCollections, 100 to 10,000 levels) is refused within 50 ms, naming the nesting, never as 'not JSON'"
  )
  func deepJSON() {
    for levels in [110, 260, 1_000, 10_000] {
      let collection =
        String(repeating: "{\"type\":\"GeometryCollection\",\"geometries\":[", count: levels)
        + "{\"type\":\"Point\",\"coordinates\":[0,0]}" + String(repeating: "]}", count: levels)
      let operators =
        String(repeating: "{\"op\":\"not\",\"args\":[", count: levels) + "true"
        + String(repeating: "]}", count: levels)
      for json in [
        "{\"op\":\"s_intersects\",\"args\":[{\"property\":\"geometry\"},\(collection)]}",
        operators,
      ] {
        let started = ContinuousClock.now
        #expect {
          _ = try CQL2Expression(json: Data(json.utf8))
        } throws: { error in
          "\(error)".contains("nests deeper than")
        }
        #expect(ContinuousClock.now - started < .milliseconds(50), "\(levels) levels")
      }
    }
  }

  @Test("LIKE: % any run, _ one character, \\ escapes; by Character")
  func like() {
    let cases: [(String, String, Bool)] = [
      ("Paris", "P%", true), ("Paris", "%is", true), ("Paris", "P_r_s", true),
      ("Paris", "P_s", false), ("Paris", "%", true), ("", "%", true), ("", "_", false),
      ("50%", "50\\%", true), ("500", "50\\%", false), ("a_b", "a\\_b", true),
      ("axb", "a\\_b", false),
      ("Zürich", "Z_rich", true), ("e\u{301}", "_", true), ("abcabc", "%abc", true),
      ("abcab", "%abc", false), ("aaa", "a%a%a", true), ("aa", "a%a%a", false),
    ]
    for (text, pattern, expected) in cases {
      #expect(CQL2LikePattern(pattern).matches(text) == expected, "\(text) LIKE \(pattern)")
    }
  }

  @Test("a planar shape holds its boundary, not its holes, and a box across 180° on both sides")
  func shapes() throws {
    let square = try #require(
      try? CQL2Expression(
        text: "S_INTERSECTS(g, POLYGON((0 0, 10 0, 10 10, 0 10, 0 0), (4 4, 6 4, 6 6, 4 6, 4 4)))"))
    guard case .spatial(_, _, let literal) = square.node,
      case .geometry(let geometry) = literal.node
    else { throw CQL2Error("not a geometry", at: .character(0)) }
    let shape = CQL2PlanarShape(geometry)
    #expect(shape.contains(x: 1, y: 1))
    #expect(shape.contains(x: 0, y: 5))  // on the outer ring
    #expect(shape.contains(x: 4, y: 5))  // on the hole's ring
    #expect(!shape.contains(x: 5, y: 5))  // inside the hole
    #expect(!shape.contains(x: 11, y: 5))
    let box = CQL2PlanarShape(.box(west: 170, south: -10, east: -170, north: 10))
    #expect(box.contains(x: 175, y: 0) && box.contains(x: -175, y: 0) && !box.contains(x: 0, y: 0))
    let line = CQL2PlanarShape(.lineString([.init(x: 0, y: 0), .init(x: 10, y: 10)]))
    #expect(line.contains(x: 5, y: 5) && !line.contains(x: 5, y: 6))
  }

  @Test("instants: RFC 3339 with a zone, real days only")
  func instants() {
    #expect(CQL2Instant.day("2024-02-29")?.timeIntervalSince1970 == 1_709_164_800)
    #expect(CQL2Instant.day("2023-02-29") == nil)
    #expect(CQL2Instant.day("1969-12-31")?.timeIntervalSince1970 == -86_400)
    #expect(
      CQL2Instant.timestamp("2024-01-01T01:00:00+01:00")?.timeIntervalSince1970 == 1_704_067_200)
    #expect(
      CQL2Instant.timestamp("2024-01-01T00:00:00.5Z")?.timeIntervalSince1970 == 1_704_067_200.5)
    #expect(CQL2Instant.timestamp("2024-01-01T00:00:00") == nil)
    #expect(CQL2Instant.timestamp("2024-01-01T24:00:00Z") == nil)
  }

  @Test("random bytes and random token soup never trap the parsers")
  func garbage() {
    var generator = SystemRandomNumberGenerator()
    let pieces = [
      "(", ")", "'", "\"", ",", "AND", "NOT", "BBOX(", "POINT(", "1", "-", "^", "a", " ", "{", "}",
      "[", "]", ":", "\"op\"", "\"args\"",
    ]
    for _ in 0..<2_000 {
      let text = (0..<Int.random(in: 0...12, using: &generator)).map { _ in
        pieces.randomElement(using: &generator)!
      }.joined()
      _ = try? CQL2Expression(text: text)
      _ = try? CQL2Expression(json: Data(text.utf8))
      if let tree = try? CQL2Expression(text: text) { _ = try? TripFilter(tree) }
    }
  }

  @Test(
    "a filter's Swift functions run inside SQL on SQLite (a value read that Swift would have to finish works) and are finished in Swift on PostgreSQL; both give the fetch's trips, with limit and offset",
    arguments: TripPlanTests.Engine.allCases)
  func swiftFunctionsInSQL(engine: TripPlanTests.Engine) throws {
    let store = try TripStore(url: try TripPlanTests.storeURL(engine, "cql2calls"))
    for (index, name) in ["Alpha", "alpine", "Beta", "ÄLPS", "Gamma", "Albatross"].enumerated() {
      var record = TripPlanTests.kyoto
      record.name = name
      record.latitude = Double(index)
      _ = try store.add(record)
    }
    var query = TripQuery()
    query.filter = try TripFilter(
      text:
        "ACCENTI(CASEI(name)) LIKE 'al%' AND latitude / 2 < 2.6 AND S_INTERSECTS(geometry, POLYGON((130 -1, 140 -1, 140 10, 130 10, 130 -1)))"
    )
    query.sort = .name
    #expect(try store.trips(query).map(\.name) == ["Albatross", "Alpha", "alpine", "ÄLPS"])
    query.limit = 2
    query.offset = 1
    #expect(try store.trips(query).map(\.name) == ["Alpha", "alpine"])
    query.limit = nil
    query.offset = nil
    var latitudes: [Double] = []
    let values = Result {
      try store.context.enumerateValues(query.fetchDescriptor, [\Trip.latitude]) { row in
        latitudes.append(try row.value(Double.self, at: 0))
      }
    }
    switch engine {
    case .sqlite:
      // One SQL query: without swift_call this read is refused (it would need Swift to finish).
      #expect(throws: Never.self) { try values.get() }
      #expect(latitudes.sorted() == [0, 1, 3, 5])
    case .postgreSQL:
      #expect(throws: PersistenceError.self) { try values.get() }
    }
  }

  @Test(
    "CASEI and ACCENTI: the ASCII fast path answers as Foundation does, and other text goes to Foundation"
  )
  func folds() {
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<2_000 {
      let text = String(
        (0..<Int.random(in: 0...12, using: &generator)).map { _ in
          Character(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &generator)))
        })
      #expect(Fold.caseInsensitive.apply(text) == text.lowercased())
      #expect(
        Fold.accentInsensitive.apply(text)
          == text.folding(options: .diacriticInsensitive, locale: nil))
    }
    #expect(Fold.caseInsensitive.apply("ÅNGSTRÖM") == "ångström")
    #expect(Fold.accentInsensitive.apply("Zürich Ångström") == "Zurich Angstrom")
  }

  @Test(
    "the library refuses each shape at ten times its budget before any work, and evaluates long chains at the budget without deep recursion, in SQL and in Swift",
    arguments: TripPlanTests.Engine.allCases)
  func budget(engine: TripPlanTests.Engine) throws {
    func repeated(_ term: String, _ count: Int, _ separator: String) -> String {
      Array(repeating: term, count: count).joined(separator: separator)
    }
    let tooMuch: [(String, String)] = [
      ("latitude IN (" + repeated("1", 10_000, ",") + ")", "at most 1000"),
      (repeated("latitude=1", 7_000, " OR "), "more than 2000 terms"),
      (repeated("latitude<>1", 7_000, " AND "), "more than 2000 terms"),
      (repeated("latitude", 300, " + ") + " > 0", "more than 30 levels"),
      (repeated("latitude", 300, " ^ ") + " > 0", "deeper than 100"),
      (repeated("name LIKE '%a%'", 80, " OR "), "more than 8 functions"),
    ]
    for (text, reason) in tooMuch {
      #expect {
        _ = try TripFilter(text: text)
      } throws: { error in
        "\(error)".contains(reason)
      }
    }
    let store = try TripStore(url: try TripPlanTests.storeURL(engine, "cql2budget"))
    for index in 0..<20 {
      var record = TripPlanTests.kyoto
      record.latitude = Double(index)
      _ = try store.add(record)
    }
    // A 600-term OR, a 1,000-item IN and a 600-term AND: the predicate is a balanced tree, its
    // SQL too (SQLite refuses a statement nested about 50 levels deep), and Swift's evaluation
    // of it recurses ⌈log₂ n⌉ levels.
    let cases: [(String, Int)] = [
      ((0..<600).map { "latitude = \($0 % 5)" }.joined(separator: " OR "), 5),
      ("latitude IN (" + (0..<1_000).map { "\($0 * 2)" }.joined(separator: ",") + ")", 10),
      (repeated("latitude <> 3", 600, " AND "), 19),
    ]
    for (text, count) in cases {
      var query = TripQuery()
      query.filter = try TripFilter(text: text)
      #expect(try store.trips(query).count == count, "\(text.prefix(60))")
      let trips = try store.trips(TripQuery())
      let predicate = try #require(query.filter?.predicate)
      #expect(try trips.filter { try predicate.evaluate($0) }.count == count)
    }
  }

  @Test("CASEI is Unicode's full case folding")
  func caseFolding() {
    for (a, b) in [("ΣΊΣΥΦΟΣ", "Σίσυφος"), ("STRASSE", "Straße"), ("FISH", "ﬁsh"), ("ǅ", "ǆ")] {
      #expect(Fold.caseInsensitive.apply(a) == Fold.caseInsensitive.apply(b), "\(a) \(b)")
    }
  }
}
