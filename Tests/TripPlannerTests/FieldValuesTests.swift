import Foundation
import Persistence
import Testing

@testable import TripPlanner

/// A model the domain does not have, declared only here: what the formats written over
/// ``FieldValues`` carry of it comes from this declaration alone.
@Model(table: "journal_entries")
final class JournalEntry {
  /// The entry's identity.
  @Attribute(.unique) var id: UUID
  /// What it says.
  var text: String
  /// Anything to add, or nothing.
  var notes: String?
  /// When it was written.
  var written: Date
  /// How many stars it earned.
  var stars: Int
  /// Whether it is kept at the top.
  var pinned: Bool
  /// Degrees north.
  var latitude: Double
  /// Where, in a gazetteer.
  @Attribute(.codable) var place: PlaceIdentifier?

  init() {
    id = UUID()
    text = ""
    notes = nil
    written = Date(timeIntervalSince1970: 0)
    stars = 0
    pinned = false
    latitude = 0
    place = nil
  }
}

extension JournalEntry: FieldRules {
  static func violations(of values: FieldValues<JournalEntry>) -> [(field: String, reason: String)]
  {
    (values.stars ?? 0) > 5 ? [("stars", "stars must be at most 5")] : []
  }
}

@Suite("A model's values, written once over its declared fields")
struct FieldValuesTests {
  static func entry() -> JournalEntry {
    let entry = JournalEntry()
    entry.text = "Tea in Uji"
    entry.notes = "Matcha, \"koicha\""
    entry.written = TripDates.parse("2027-04-02T09:30:00Z")!
    entry.stars = 4
    entry.pinned = true
    entry.latitude = 34.88
    entry.place = PlaceIdentifier(rawValue: "geonames:1849429")
    return entry
  }

  static func read(_ text: String) -> (FieldValues<JournalEntry>?, [String]) {
    var problems = ProblemList(file: "t.json")
    let values = FieldValues<JournalEntry>.read(
      try! JSONValue.parse(Data(text.utf8)), label: "entry", line: 3, problems: &problems)
    return (values, problems.problems.map(\.reason))
  }

  @Test("the byte writer writes what the JSON tree renders, for every type and for none")
  func bytesAsTheTree() throws {
    let entry = Self.entry()
    var values = FieldValues(entry)
    func check(_ note: Comment) {
      var bytes: [UInt8] = []
      values.writeJSONObject(into: &bytes)
      #expect(bytes == JSONValue.object(values.jsonMembers()).utf8(), note)
      bytes = [UInt8(ascii: "[")]
      values.writeJSONMembers(leaving: ["id", "pinned"], after: true, into: &bytes)
      #expect(
        bytes == [UInt8(ascii: "[")]
          + JSONValue.object(values.jsonMembers(leaving: ["id", "pinned"]))
          .utf8().dropFirst().dropLast().reduce(into: [UInt8(ascii: ",")]) { $0.append($1) }, note)
    }
    check("a whole entry")
    values.notes = "tab\there, \u{7F} and \"quotes\" \\ back"
    values.written = Date(timeIntervalSince1970: 1_800_000_000.125)  // a fraction of a second
    values.latitude = -0.000_001
    values.stars = Int(1 << 40)
    values.place = .some(nil)
    check("escapes, a fraction of a second, a small and a large number, none")
    values.written = Date(timeIntervalSince1970: -13_000_000_000)  // before 1583
    values.latitude = 1e300
    check("a date before the Gregorian reform, a large double")
    var sparse = FieldValues<JournalEntry>(none: ())
    sparse.text = "only this"
    values = sparse
    check("fields not given are null")
  }

  @Test("a trip record takes values that give every field but the id, and names the others")
  func tripRecordNeedsEveryField() throws {
    var values = FieldValues<Trip>()
    #expect(try TripRecord(values).id == nil)
    values.name = nil
    values.startDate = nil
    #expect {
      try TripRecord(values)
    } throws: { error in
      let failure = error as? TripPlannerError
      return failure?.code == .invalidInput && failure?.field == "name"
        && failure?.message.contains("not given: name, startDate") == true
    }
  }

  @Test("every declared field goes to JSON in declaration order and back, and onto a new model")
  func roundTrip() throws {
    let entry = Self.entry()
    let values = FieldValues(entry)
    let text = JSONValue.object(values.jsonMembers()).rendered()
    #expect(
      text
        == #"{"id":"\#(entry.id.lowercasedString)","text":"Tea in Uji","notes":"Matcha, \"koicha\"","written":"2027-04-02T09:30:00Z","stars":4,"pinned":true,"latitude":34.88,"place":"geonames:1849429"}"#
    )
    let (read, problems) = Self.read(text)
    #expect(problems == [])
    #expect(read == values)
    let copy = try #require(read).newModel()
    #expect(FieldValues(copy) == values)
    #expect(copy.notes == entry.notes && copy.written == entry.written && copy.place == entry.place)
    // Typed reads through the model's key paths.
    #expect(values.notes == .some(entry.notes) && values.stars == 4 && values.pinned == true)
  }

  @Test(
    "a member left out takes its type's value (text empty, none, false, 0), but numbers and dates are required; the identity is not given"
  )
  func absentMembers() throws {
    let (values, problems) = Self.read(#"{"written":"2027-04-02","latitude":1}"#)
    #expect(problems == [])
    let given = try #require(values)
    #expect(given.id == nil && given.text == "" && given.notes == .some(nil))
    #expect(given.pinned == false && given.stars == 0 && given.place == .some(nil))
    #expect(given.written == TripDates.parse("2027-04-02T00:00:00Z"))
    let (missing, reasons) = Self.read(#"{"text":"x"}"#)
    #expect(missing == nil)
    #expect(reasons == ["entry: written is missing", "entry: latitude is missing"])
  }

  @Test("garbage in any member is named, every one at once, and nothing is read")
  func garbage() {
    let (values, reasons) = Self.read(
      #"{"id":"nope","text":7,"notes":[],"written":"someday","stars":1.5,"pinned":"yes","latitude":"north","place":{},"mood":"good"}"#
    )
    #expect(values == nil)
    #expect(
      reasons == [
        "entry: unknown member 'mood'", "entry: id must be a UUID", "entry: text must be a string",
        "entry: notes must be a string or null",
        "entry: written must be a date (ISO 8601 with a zone, or YYYY-MM-DD)",
        "entry: stars must be a whole number", "entry: pinned must be true or false",
        "entry: latitude must be a number",
        "entry: place must be a string that is not blank or null",
      ])
    let (notObject, reason) = Self.read("[1]")
    #expect(notObject == nil && reason == ["entry must be an object"])
  }

  @Test("every text field keeps the text rules, beside the model's own; a blank place is none")
  func rules() throws {
    var values = FieldValues(Self.entry())
    values.notes = .some("line\nbreak")
    values.stars = 6
    #expect(values.violations.map(\.field) == ["stars", "notes"])
    let error = #expect(throws: TripPlannerError.self) { try values.validate() }
    #expect(error?.field == "stars")
    #expect(error?.message.contains("notes contains the control character U+000A") == true)
    values.notes = .some(String(repeating: "é", count: TripRecord.maximumTextLength + 1))
    values.stars = 5
    #expect(
      values.violations.map(\.reason) == ["notes is 257 characters long; at most 256 are allowed"])
    let (blank, _) = Self.read(#"{"written":"2027-04-02","latitude":1,"place":"  "}"#)
    #expect(try #require(blank).place == .some(nil))
  }

  @Test(
    "set by name takes only a value of the field's type, or nothing, and names the field otherwise; the values are unchanged"
  )
  func setByName() throws {
    var values = FieldValues(Self.entry())
    let before = values
    for (name, json) in [
      ("stars", JSONValue.string("four")), ("stars", .number(1.5)), ("notes", .number(1)),
      ("written", .string("someday")), ("text", .null), ("mood", .string("good")),
    ] {
      let error = #expect(throws: TripPlannerError.self) { try values.set(name, json) }
      #expect(error?.field == name && error?.code == .invalidInput, "\(name)")
    }
    #expect(values == before)
    let id = UUID()
    try values.set("id", .string(id.uuidString))  // upper case, written lower
    try values.set("notes", .null)
    try values.set("stars", nil)
    #expect(values["id"] == .string(id.lowercasedString) && values.notes == .some(nil))
    #expect(values.stars == nil)
    let copy = values.newModel()
    #expect(copy.id == id && copy.notes == nil && copy.stars == 0)
  }

  @Test("/api's schema of the model is its fields': types, formats, nullable, documentation")
  func schema() {
    let schema = FieldSchema.object(JournalEntry.schema.fields).rendered()
    #expect(
      schema.contains(
        #""notes":{"type":"string","nullable":true,"description":"Anything to add, or nothing."}"#))
    #expect(schema.contains(#""written":{"type":"string","format":"date-time""#))
    #expect(schema.contains(#""stars":{"type":"integer","description""#))
    #expect(schema.contains(#""place":{"type":"string","nullable":true"#))
  }

  @Test(
    "a value row reads every field as the model has it, in a real store",
    arguments: TripPlanTests.Engine.allCases)
  func valueRows(engine: TripPlanTests.Engine) throws {
    let configuration = ModelConfiguration(url: try TripPlanTests.storeURL(engine, "journal"))
    let container = try ModelContainer(for: [JournalEntry.self], configuration: configuration)
    let context = ModelContext(container)
    let entry = Self.entry()
    let plain = JournalEntry()
    plain.written = Date(timeIntervalSince1970: 86_400)
    context.insert(entry)
    context.insert(plain)
    try context.save()
    var read: [FieldValues<JournalEntry>] = []
    try context.enumerateValues(
      FetchDescriptor<JournalEntry>(sortBy: [SortDescriptor(\.stars, order: .reverse)]),
      FieldValues<JournalEntry>.keyPaths
    ) { row in read.append(try FieldValues(row: row, from: 0)) }
    #expect(read == [FieldValues(entry), FieldValues(plain)])
  }

  @Test("each field of the domain's models has a format type")
  func domainFields() {
    for field in Trip.schema.fields { #expect(formatType(of: field) != nil, "\(field.name)") }
    for field in BucketListItem.schema.fields {
      #expect(formatType(of: field) != nil, "\(field.name)")
    }
    for field in LivingAccommodation.schema.fields {
      #expect(formatType(of: field) != nil, "\(field.name)")
    }
  }
}
