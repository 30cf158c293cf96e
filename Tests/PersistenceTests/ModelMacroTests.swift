import Foundation
import Observation
import Persistence
import Synchronization
import TestSupport
import Testing

/// A model declared as SwiftData's users declare theirs: `@Model`, stored variables, an
/// initializer of its own, a transient flag.
@Model final class MacroNote {
  var title: String
  var body = ""
  var created: Date
  var rating: Int?
  var views = 0
  var identifier: UUID
  var isPinned: Bool = false
  var attachment: Data?
  @Transient var isSelected = false
  /// Not stored: computed from stored ones.
  var summary: String { "\(title) (\(views))" }
  static let defaultTitle = "Untitled"

  init(title: String, created: Date = Date(timeIntervalSinceReferenceDate: 0)) {
    self.title = title
    self.created = created
    identifier = UUID()
  }
}

/// The same model written by hand, as ``PersistentModel`` documents it: what `@Model` must say.
@Observable final class HandNote: PersistentModel {
  var title = ""
  var body = ""
  var created = Date(timeIntervalSinceReferenceDate: 0)
  var rating: Int? = nil
  var views = 0
  var identifier = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
  var isPinned = false
  var attachment: Data? = nil

  static let schema = ModelSchema<HandNote>(
    "MacroNote",
    .attribute(\.title, "title"),
    .attribute(\.body, "body"),
    .attribute(\.created, "created"),
    .attribute(\.rating, "rating"),
    .attribute(\.views, "views"),
    .attribute(\.identifier, "identifier"),
    .attribute(\.isPinned, "isPinned"),
    .attribute(\.attachment, "attachment"))
}

/// A model whose declaration documents its fields in each way Swift allows.
@Model final class DocumentedPlace {
  /// Its name.
  ///
  /// A second paragraph, which is not the summary.
  var name = ""
  /// Degrees north,
  /// over two lines.
  @Attribute(originalName: "lat") var latitude: Double = 0
  // swift-format-ignore: UseTripleSlashForDocumentationComments
  /** Where it is listed, "quoted" \ escaped. */
  var listing: URL?
  // A plain comment documents nothing.
  var count: Int64? = nil
  @Attribute(.codable) var tags: [String] = []
  @Transient var isSelected = false
}

@Suite("@Model: SwiftData's declaration of plain attributes")
struct ModelMacroTests {
  @Test(
    "the schema's fields come from the declaration: property names (not columns), unwrapped types, optionality, and each documentation comment's first paragraph"
  )
  func fieldsFromTheDeclaration() throws {
    let fields = DocumentedPlace.schema.fields
    #expect(fields.map(\.name) == ["name", "latitude", "listing", "count", "tags"])
    #expect(fields.map(\.column) == ["name", "lat", "listing", "count", "tags"])
    #expect(fields[0].valueType == String.self && !fields[0].isOptional)
    #expect(fields[2].valueType == URL.self && fields[2].isOptional)
    #expect(fields[3].valueType == Int64.self && fields[3].isOptional)
    #expect(fields[4].valueType == [String].self && fields[4].isCodable)
    #expect(
      fields.map(\.documentation) == [
        "Its name.", "Degrees north, over two lines.", #"Where it is listed, "quoted" \ escaped."#,
        "", "",
      ])
    let place = DocumentedPlace()
    place.name = "Suva"
    #expect(fields[0].value(of: place) as? String == "Suva")
    #expect((fields[3].value(of: place) as? Int64?) == .some(nil))
    // A schema declared by hand: each field named as its column, undocumented.
    #expect(HandNote.schema.fields.map(\.name) == HandNote.schema.attributes.map(\.name))
    #expect(HandNote.schema.fields.allSatisfy { $0.documentation.isEmpty })
  }

  /// Each column as name, storage type and optionality.
  static func columns<Model: PersistentModel>(_: Model.Type) -> [String] {
    Model.schema.attributes.map {
      "\($0.name) \($0.storageType.rawValue)\($0.isOptional ? "?" : "")"
    }
  }

  @Test(
    "the schema is what a hand-written one says: the class's name, a column per stored variable, none for transient or computed ones"
  )
  func schema() {
    #expect(MacroNote.schema.name == HandNote.schema.name)
    #expect(Self.columns(MacroNote.self) == Self.columns(HandNote.self))
    #expect(
      Self.columns(MacroNote.self) == [
        "title TEXT", "body TEXT", "created REAL", "rating INTEGER?", "views INTEGER",
        "identifier BLOB", "isPinned INTEGER", "attachment BLOB?",
      ])
  }

  @Test("init() gives initial values, else each type's empty value")
  func defaults() {
    let note = MacroNote()
    #expect(note.title == "")
    #expect(note.body == "")
    #expect(note.created == Date(timeIntervalSinceReferenceDate: 0))
    #expect(note.rating == nil)
    #expect(note.views == 0)
    #expect(note.identifier == UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
    #expect(note.attachment == nil)
    #expect(!note.isSelected)
    let own = MacroNote(title: "Mine")
    #expect(own.title == "Mine" && own.body == "" && own.views == 0)
  }

  @Test(
    "models round-trip through a store: inserted, saved, fetched by a predicate and sorted, changed and saved again; a transient keeps its initial value",
    arguments: TestEngine.allCases)
  func roundTrip(engine: TestEngine) throws {
    let container = try engineContainer(engine, MacroNote.self)
    let context = ModelContext(container)
    var written: [UUID: String] = [:]
    for index in 0..<5 {
      let note = MacroNote(
        title: "note \(index)", created: Date(timeIntervalSinceReferenceDate: Double(index)))
      note.views = index * 2
      note.rating = index.isMultiple(of: 2) ? index : nil
      note.attachment = index == 3 ? Data([1, 2, 3]) : nil
      note.isPinned = index == 1
      note.isSelected = true
      context.insert(note)
      written[note.identifier] = note.title
    }
    try context.save()
    let reader = ModelContext(container)
    let popular = try reader.fetch(
      FetchDescriptor<MacroNote>(
        predicate: #Predicate { $0.views > 3 }, sortBy: [SortDescriptor(\.created, order: .reverse)]
      ))
    #expect(popular.map(\.title) == ["note 4", "note 3", "note 2"])
    #expect(popular.map(\.rating) == [4, nil, 2])
    #expect(popular[1].attachment == Data([1, 2, 3]))
    #expect(popular.allSatisfy { !$0.isSelected })
    #expect(popular.allSatisfy { written[$0.identifier] == $0.title })
    #expect(
      try reader.fetchCount(FetchDescriptor<MacroNote>(predicate: #Predicate { $0.isPinned })) == 1)
    popular[0].body = "changed"
    popular[0].rating = nil
    try reader.save()
    let again = try ModelContext(container).fetch(
      FetchDescriptor<MacroNote>(predicate: #Predicate { $0.title == "note 4" }))
    #expect(again.map(\.body) == ["changed"])
    #expect(again.map(\.rating) == [nil])
  }

  @Test("a change to a fetched model's property is observed; one to another property is not")
  func observation() throws {
    let container = try engineContainer(.sqlite, MacroNote.self)
    let context = ModelContext(container)
    context.insert(MacroNote(title: "watched"))
    try context.save()
    let note = try #require(try ModelContext(container).fetch(FetchDescriptor<MacroNote>()).first)
    let changes = Mutex(0)
    withObservationTracking {
      _ = note.title
    } onChange: {
      changes.withLock { $0 += 1 }
    }
    note.views = 7
    #expect(changes.withLock { $0 } == 0)
    note.title = "seen"
    #expect(changes.withLock { $0 } == 1)
  }
}

@Suite("@Model: declarations it refuses, each an error at the declaration")
struct ModelMacroDiagnosticsTests {
  /// The build's products: where the test binary is, with `Modules` and the macro plugin.
  static let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()

  /// Type-checks `source` as a file importing `PersistenceCore` with the plugin this build
  /// made, as a user's package would: the compiler's errors, as `line: message`, and its status.
  static func typecheck(_ source: String) throws -> (errors: [String], status: Int32) {
    let (text, status, path) = try compile(source)
    let prefix = path + ":"
    let found = text.split(separator: "\n").compactMap { line -> String? in
      guard line.hasPrefix(prefix), line.contains(": error: ") else { return nil }
      let rest = line.dropFirst(prefix.count)
      let parts = rest.split(separator: ":", maxSplits: 1)
      guard let number = Int(parts[0]), parts.count == 2 else { return nil }
      let message = parts[1].components(separatedBy: ": error: ").last ?? ""
      // Line numbers of `source`, which follows the import.
      return
        "\(number - 1): \(message.replacingOccurrences(of: #" \(from macro 'Model ?'\)"#, with: "", options: .regularExpression))"
    }
    return (
      Array(Set(found)).sorted { $0.localizedStandardCompare($1) == .orderedAscending }, status
    )
  }

  /// Type-checks `source` as ``typecheck(_:)`` does: everything the compiler wrote to standard
  /// error (errors inside expansions included), its status, and the file's path.
  static func compile(_ source: String) throws -> (text: String, status: Int32, path: String) {
    let directory = FileManager.default.temporaryDirectory.appending(
      path: "model-macro-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let file = directory.appending(path: "Models.swift")
    try Data(("import PersistenceCore\n" + source).utf8).write(to: file)
    let plugin = products.appending(path: "PersistenceMacros-tool").path
    #expect(FileManager.default.isExecutableFile(atPath: plugin), "no plugin at \(plugin)")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [
      "swiftc", "-typecheck", "-swift-version", "6", "-I", products.appending(path: "Modules").path,
      "-load-plugin-executable", plugin + "#PersistenceMacros", file.path,
    ]
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (text, process.terminationStatus, file.path)
  }

  @Test("a model of every supported shape type-checks with no error (the harness's control)")
  func accepted() throws {
    let (errors, status) = try Self.typecheck(
      """
      import Foundation
      @Model public final class Accepted {
        public var name: String
        var count = 0
        var when: Date?
        @Transient var flag = false
        var computed: Int { count * 2 }
        static let shared = 1
        public init(name: String) { self.name = name }
      }
      @Model final class Empty {}
      @Model final class WithOwnInit {
        var name = ""
        init() { name = "x" }
      }
      @Model class NotFinal {
        var name = ""
        init(name: String) { self.name = name }
      }
      @Model open class NotFinalWithInit {
        var name = ""
        public required init() { name = "x" }
      }
      """)
    #expect(errors == [])
    #expect(status == 0)
  }

  @Test(
    "structs, enums, generic classes, a non-final class's init() not required, and properties it cannot persist"
  )
  func refused() throws {
    let (errors, status) = try Self.typecheck(
      """
      @Model class NotFinal {
        var name = ""
        init() {}
      }
      @Model struct AStruct {
        var name = ""
      }
      @Model enum AnEnum {
        case one
      }
      @Model final class Generic<Element> {
        var name = ""
      }
      @Model final class Properties {
        let constant: String = ""
        @Transient var flag: Bool
        var _hidden = 0
        var a = 1, b = 2
        var watched = 0 { didSet { print("x") } }
      }
      """)
    #expect(status != 0)
    #expect(
      errors == [
        "3: The store makes models of 'NotFinal' with init(), which a class that is not final must mark required",
        "5: @Model applies to a class: a model has an identity its context tracks, and a struct or an enum has none",
        "8: @Model applies to a class: a model has an identity its context tracks, and a struct or an enum has none",
        "11: @Model does not apply to a generic class: a table stores one type",
        "14: class 'Properties' has no initializers",
        "15: A @Model class persists its variables: declare 'constant' with 'var', or mark it @Transient",
        "16: A @Transient (or .ephemeral) property needs an initial value: the store makes models from rows without calling your initializers",
        "17: A persisted property's name is its column's, which cannot start with '_': rename '_hidden', or mark it @Transient",
        "18: Declare each property of a @Model class on its own (one name per 'var')",
        "19: A persisted property cannot have willSet or didSet: 'watched' is observed through Observation (withObservationTracking)",
      ])
  }
}

/// A position, stored as JSON.
struct MacroSpot: Codable, Hashable, Sendable {
  var latitude: Double
  var longitude: Double
}

/// SwiftData's options: `@Attribute` with `.unique`-like constraints, `originalName`, `.codable`
/// (optional: behind a fault), `#Unique` and `#Index`.
@Model final class MacroPlace {
  #Unique<MacroPlace>([\.code])
  #Index<MacroPlace>([\.city, \.rank], [\.rank])
  @Attribute(.preserveValueOnDeletion) var code: String
  @Attribute(originalName: "city_name") var city = ""
  var rank = 0
  @Attribute(.codable, .sharesEqualValues) var spot: MacroSpot?

  init(code: String, city: String, rank: Int, spot: MacroSpot?) {
    self.code = code
    self.city = city
    self.rank = rank
    self.spot = spot
  }
}

/// A non-optional `.codable` value, decoded with its row.
@Model final class MacroTagged {
  @Attribute(.unique) var name: String
  @Attribute(.codable) var tags: [String] = []

  init(name: String, tags: [String]) {
    self.name = name
    self.tags = tags
  }
}

@Suite("@Model: options and constraints it refuses")
struct ModelMacroOptionDiagnosticsTests {
  @Test(
    "a property beginning two unique constraints, key paths that are not persisted properties, .codable without a type or a value, an originalName that is not a literal"
  )
  func refused() throws {
    let (errors, status) = try ModelMacroDiagnosticsTests.typecheck(
      """
      let column = "c"
      @Model final class Constrained {
        #Unique<Constrained>([\\.a, \\.b], [\\.a])
        #Index<Constrained>([\\.a, \\.missing], [\\.a.count])
        var a = ""
        var b = 0
        @Attribute(.codable) var inferred = [1]
        @Attribute(.codable) var required: [Int]
        @Attribute(originalName: column) var renamed = 0
        init(required: [Int]) { self.required = required }
      }
      """)
    #expect(status != 0)
    #expect(
      errors == [
        "3: 'a' begins two unique constraints: begin each with another property (a value unique alone is unique with others too)",
        "4: #Index names persisted properties of this class, one step each (\\.name): \\.a.count is not one",
        "4: #Index names persisted properties of this class, one step each (\\.name): \\.missing is not one",
        "4: value of type 'Constrained' has no member 'missing'",
        "7: A .codable property needs its type written out: 'inferred' has none",
        "8: A .codable property that is not optional needs an initial value: 'required' has none for the model the store makes before loading a row, or for a column added to an existing table",
        "9: originalName: names the column 'renamed' is stored in: give it as one string literal, not empty and without interpolation",
      ])
  }

  @Test(
    "a hand-written schema refuses an attribute beginning two unique constraints, and one unique with a column it does not have"
  )
  func handWrittenUniques() {
    for (type, message) in [
      (TwoUniques.self as any PersistentModel.Type, "more than one .unique"),
      (UniqueWithMissing.self, "is unique with 'day', which is not another stored attribute"),
    ] {
      let error = #expect(throws: PersistenceError.self) {
        try ModelContainer(
          for: [type], configuration: ModelConfiguration(isStoredInMemoryOnly: true))
      }
      #expect(error?.message.contains(message) == true, "\(String(describing: error))")
    }
  }

  @Test("a hand-written schema refuses @Attribute's .codable option")
  func handWrittenCodableOption() {
    #expect(throws: PersistenceError.self) {
      try ModelContainer(
        for: [WrongOption.self], configuration: ModelConfiguration(isStoredInMemoryOnly: true))
    }
  }
}

/// An attribute that begins two unique constraints.
@Observable final class TwoUniques: PersistentModel {
  var name = ""
  var day = 0
  static let schema = ModelSchema<TwoUniques>(
    "two_uniques", .attribute(\.name, "name", .unique, .unique(with: "day")),
    .attribute(\.day, "day"))
}

/// An attribute unique with a column the schema does not have.
@Observable final class UniqueWithMissing: PersistentModel {
  var name = ""
  static let schema = ModelSchema<UniqueWithMissing>(
    "unique_with_missing", .attribute(\.name, "name", .unique(with: "day")))
}

/// `.codable` given to a hand-written attribute.
@Observable final class WrongOption: PersistentModel {
  var name = ""
  static let schema = ModelSchema<WrongOption>("wrong_option", .attribute(\.name, "name", .codable))
}

@Suite("@Model: @Attribute options, .codable, #Unique and #Index")
struct ModelMacroOptionsTests {
  @Test("the schema has the options, the original column name, .codable columns and the indexes")
  func schema() throws {
    let attributes = MacroPlace.schema.attributes
    #expect(attributes.map(\.name) == ["code", "city_name", "rank", "spot"])
    #expect(attributes[0].options == [.preserveValueOnDeletion, .unique])
    #expect(attributes[1].options == [.indexed(with: "rank")])
    #expect(attributes[2].options == [.indexed])
    #expect(attributes[3].options == [.sharesEqualValues])
    #expect(attributes.map(\.isCodable) == [false, false, false, true])
    #expect(MacroTagged.schema.attributes.map(\.isCodable) == [false, true])
    #expect(MacroTagged.schema.attributes[0].options == [.unique])
  }

  @Test(
    "a unique value inserted again updates its row; .codable values round-trip, decoded on first read where optional",
    arguments: TestEngine.allCases)
  func roundTrip(engine: TestEngine) throws {
    let container = try engineContainer(engine, MacroPlace.self, MacroTagged.self)
    let context = ModelContext(container)
    let spot = MacroSpot(latitude: 35, longitude: 135.7)
    context.insert(MacroPlace(code: "kyo", city: "Kyoto", rank: 1, spot: spot))
    context.insert(MacroPlace(code: "osa", city: "Osaka", rank: 2, spot: nil))
    context.insert(MacroTagged(name: "a", tags: ["x", "y"]))
    try context.save()
    // The same code again: SwiftData's upsert.
    let again = ModelContext(container)
    again.insert(MacroPlace(code: "kyo", city: "Kyōto", rank: 3, spot: spot))
    again.insert(MacroTagged(name: "a", tags: ["z"]))
    try again.save()
    let reader = ModelContext(container)
    let places = try reader.fetch(FetchDescriptor<MacroPlace>(sortBy: [SortDescriptor(\.rank)]))
    #expect(places.map(\.code) == ["osa", "kyo"])
    #expect(places.map(\.city) == ["Osaka", "Kyōto"])
    #expect(places.map(\.spot) == [nil, spot])
    #expect(
      try reader.fetchCount(
        FetchDescriptor<MacroPlace>(predicate: #Predicate { $0.city == "Osaka" }))
        == 1)
    let tagged = try reader.fetch(FetchDescriptor<MacroTagged>())
    #expect(tagged.map(\.tags) == [["z"]])
    tagged[0].tags.append("w")
    places[0].spot = spot
    try reader.save()
    let third = ModelContext(container)
    #expect(try third.fetch(FetchDescriptor<MacroTagged>()).map(\.tags) == [["z", "w"]])
    #expect(
      try third.fetch(FetchDescriptor<MacroPlace>(sortBy: [SortDescriptor(\.rank)])).map(\.spot)
        == [spot, spot])
  }
}

/// SampleTrips' trip constraint: unique by name and dates together.
@Model final class MacroOuting {
  #Unique<MacroOuting>([\.name, \.startDate, \.endDate])
  var name: String
  var startDate: Date
  var endDate: Date?
  var note = ""

  init(name: String, startDate: Date, endDate: Date?, note: String) {
    self.name = name
    self.startDate = startDate
    self.endDate = endDate
    self.note = note
  }
}

@Suite("@Model: #Unique over several properties")
struct ModelMacroCompositeUniqueTests {
  @Test(
    "an insert whose name and dates are stored updates that row, in a batch and alone; other combinations and NULLs insert",
    arguments: TestEngine.allCases)
  func upsert(engine: TestEngine) throws {
    let container = try engineContainer(engine, MacroOuting.self)
    let day = Date(timeIntervalSinceReferenceDate: 86_400)
    let next = day.addingTimeInterval(86_400)
    func outings() throws -> [String] {
      try ModelContext(container).fetch(
        FetchDescriptor<MacroOuting>(sortBy: [SortDescriptor(\.note)])
      ).map { "\($0.name) \($0.endDate == nil ? "open" : "\($0.endDate! == next)") \($0.note)" }
    }
    let context = ModelContext(container)
    context.insert(MacroOuting(name: "Hike", startDate: day, endDate: next, note: "a"))
    context.insert(MacroOuting(name: "Hike", startDate: day, endDate: nil, note: "b"))
    try context.save()
    // One save of several (a batch of lookups), one matching a stored row, two matching each
    // other, one differing by a date, one with a NULL (never matches).
    let batch = ModelContext(container)
    batch.insert(MacroOuting(name: "Hike", startDate: day, endDate: next, note: "c"))
    batch.insert(MacroOuting(name: "Swim", startDate: day, endDate: next, note: "d"))
    batch.insert(MacroOuting(name: "Swim", startDate: day, endDate: next, note: "e"))
    batch.insert(MacroOuting(name: "Hike", startDate: next, endDate: next, note: "f"))
    batch.insert(MacroOuting(name: "Hike", startDate: day, endDate: nil, note: "g"))
    try batch.save()
    #expect(
      try outings() == ["Hike open b", "Hike true c", "Swim true e", "Hike true f", "Hike open g"])
    // Alone (no batch): the upsert of one row.
    let single = ModelContext(container)
    single.insert(MacroOuting(name: "Swim", startDate: day, endDate: next, note: "h"))
    try single.save()
    #expect(
      try outings() == ["Hike open b", "Hike true c", "Hike true f", "Hike open g", "Swim true h"])
    #expect(MacroOuting.schema.attributes[0].options == [.unique(with: "startDate", "endDate")])
  }
}

/// SampleTrips' models as its source declares them: the trip names both inverses; the item
/// and the stay say `var trip: SampleTrip?` with no `@Relationship`. (An index over a value of
/// one's own, `grade`, is ours.)
@Model final class SampleTrip {
  #Index<SampleTrip>(
    [\.name], [\.startDate], [\.endDate], [\.name, \.startDate, \.endDate], [\.grade])
  #Unique<SampleTrip>([\.name, \.startDate, \.endDate])
  @Attribute(.preserveValueOnDeletion) var name: String
  var destination: String
  @Attribute(.preserveValueOnDeletion) var startDate: Date
  @Attribute(.preserveValueOnDeletion) var endDate: Date
  @Relationship(deleteRule: .cascade, inverse: \SampleBucketListItem.trip)
  var bucketList: [SampleBucketListItem] = [SampleBucketListItem]()
  @Relationship(deleteRule: .cascade, inverse: \SampleLivingAccommodation.trip)
  var livingAccommodation: SampleLivingAccommodation?
  /// A value of a type of our own, which the macro cannot tell from a model.
  var grade: SampleGrade?
  @Transient var isSelected = false

  init(name: String, destination: String, startDate: Date, endDate: Date) {
    self.name = name
    self.destination = destination
    self.startDate = startDate
    self.endDate = endDate
  }
}

/// See ``SampleTrip``.
@Model final class SampleBucketListItem {
  var title: String
  var details: String
  var hasReservation: Bool
  var isInPlan: Bool
  var trip: SampleTrip?

  init(title: String, details: String, hasReservation: Bool, isInPlan: Bool) {
    self.title = title
    self.details = details
    self.hasReservation = hasReservation
    self.isInPlan = isInPlan
  }
}

/// See ``SampleTrip``.
@Model final class SampleLivingAccommodation {
  var address: String
  var placeName: String
  var trip: SampleTrip?

  init(address: String, placeName: String) {
    self.address = address
    self.placeName = placeName
  }
}

/// A `PersistableValue` of one's own: a letter grade stored as text.
struct SampleGrade: PersistableValue {
  let letter: String
  static var storageType: StorageType { .text }
  var sqlValue: SQLValue { .text(letter) }
  init(_ letter: String) { self.letter = letter }
  init(sqlValue: SQLValue) throws {
    guard case .text(let text) = sqlValue else {
      throw PersistenceError(code: .invalidValue, message: "not a grade: \(sqlValue)")
    }
    letter = text
  }
}

@Suite("@Model: Identifiable")
struct ModelMacroIdentifiableTests {
  @Test("a model without an id is identified by the instance; SampleTrips' trip too")
  func identity() {
    let first = MacroNote(title: "a")
    let second = MacroNote(title: "a")
    #expect(first.id == ObjectIdentifier(first) && first.id != second.id)
    let ids: Set<SampleTrip.ID> = [
      SampleTrip(name: "a", destination: "b", startDate: .now, endDate: .now).id
    ]
    #expect(ids.count == 1)
  }
}

@Suite("@Model: SampleTrips' declarations, a plain optional model property a to-one")
struct ModelMacroSampleTripsTests {
  @Test(
    "var trip: SampleTrip? is the to-one that stores the key; a value of one's own is an attribute; SampleTrips' search predicate, sections, upsert and cascade",
    arguments: TestEngine.allCases)
  func sampleTrips(engine: TestEngine) throws {
    let container = try engineContainer(engine, SampleTrip.self)
    let context = ModelContext(container)
    let day = Date(timeIntervalSinceReferenceDate: 800_000_000)
    let week = day.addingTimeInterval(7 * 86_400)
    let paris = SampleTrip(name: "Spring", destination: "Paris", startDate: day, endDate: week)
    paris.grade = SampleGrade("A")
    let tokyo = SampleTrip(name: "Autumn", destination: "Tokyo", startDate: week, endDate: week)
    context.insert(paris)
    context.insert(tokyo)
    let louvre = SampleBucketListItem(
      title: "Louvre", details: "", hasReservation: true, isInPlan: true)
    louvre.trip = paris
    #expect(paris.bucketList.map(\.title) == ["Louvre"])
    tokyo.bucketList = [
      SampleBucketListItem(
        title: "Louvre replica", details: "", hasReservation: false, isInPlan: false)
    ]
    let hotel = SampleLivingAccommodation(address: "1 Rue", placeName: "Hôtel")
    hotel.trip = paris
    #expect(paris.livingAccommodation === hotel)
    try context.save()

    let reader = ModelContext(container)
    let text = "Louvre"
    let name = "Spring"
    let found = try reader.fetch(
      FetchDescriptor<SampleBucketListItem>(
        predicate: #Predicate { item in item.title.contains(text) && item.trip?.name == name }))
    #expect(found.map(\.title) == ["Louvre"])
    let sections = try reader.fetch(
      FetchDescriptor<SampleTrip>(sortBy: [SortDescriptor(\.destination)]),
      sectionBy: \SampleTrip.destination)
    #expect(sections.map(\.id) == ["Paris", "Tokyo"])
    let trips = try reader.fetch(FetchDescriptor<SampleTrip>(sortBy: [SortDescriptor(\.name)]))
    #expect(trips.map { $0.grade?.letter } == [nil, "A"])
    #expect(
      try reader.fetchCount(FetchDescriptor<SampleTrip>(predicate: #Predicate { $0.grade != nil }))
        == 1)
    #expect(trips[1].livingAccommodation?.placeName == "Hôtel")
    #expect(trips[1].bucketList.first?.trip === trips[1])

    // #Unique over name and dates: the same trip again updates it.
    let again = ModelContext(container)
    again.insert(SampleTrip(name: "Spring", destination: "Lyon", startDate: day, endDate: week))
    try again.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<SampleTrip>()) == 2)
    // A cascade: the trip's items and stay go with it.
    let deleter = ModelContext(container)
    let spring = try deleter.fetch(
      FetchDescriptor<SampleTrip>(predicate: #Predicate { $0.name == "Spring" }))
    #expect(spring.map(\.destination) == ["Lyon"])
    deleter.delete(spring[0])
    try deleter.save()
    let left = ModelContext(container)
    #expect(
      try left.fetch(FetchDescriptor<SampleBucketListItem>()).map(\.title) == ["Louvre replica"])
    #expect(try left.fetchCount(FetchDescriptor<SampleLivingAccommodation>()) == 0)
    #expect(SampleTrip.schema.attributes.map(\.name).contains("grade"))
    #expect(
      SampleTrip.schema.attributes.first { $0.name == "grade" }?.options.contains(.indexed)
        == true)
  }
}

/// A hotel, its rooms (deleted with it) and its reviews (which stay), declared with `@Model`
/// and `@Relationship`, each inverse named on one side (the rooms' here, the reviews' there).
@Model final class MacroHotel {
  #Unique<MacroHotel>([\.name])
  var name: String
  @Relationship(deleteRule: .cascade, inverse: \MacroRoom.hotel) var rooms: [MacroRoom] = []
  @Relationship(inverse: \MacroReview.hotel) var reviews: [MacroReview] = []

  init(name: String) { self.name = name }
}

/// A room of a hotel.
@Model final class MacroRoom {
  var number: Int
  @Relationship var hotel: MacroHotel?

  init(number: Int) { self.number = number }
}

/// A review of a hotel.
@Model final class MacroReview {
  var text: String
  @Relationship var hotel: MacroHotel?

  init(text: String, hotel: MacroHotel) {
    self.text = text
    self.hotel = hotel
  }
}

@Suite("@Model: @Relationship")
struct ModelMacroRelationshipTests {
  @Test(
    "to-one and to-many round-trip; a container for rooms finds hotels and reviews; predicates and prefetch through them; a cascade deletes rooms, reviews stay",
    arguments: TestEngine.allCases)
  func relationships(engine: TestEngine) throws {
    let container = try engineContainer(engine, MacroRoom.self)
    let context = ModelContext(container)
    let inn = MacroHotel(name: "Inn")
    let lodge = MacroHotel(name: "Lodge")
    context.insert(inn)
    context.insert(lodge)
    inn.rooms = [MacroRoom(number: 101), MacroRoom(number: 102)]
    let loose = MacroRoom(number: 7)
    loose.hotel = lodge
    #expect(lodge.rooms.map(\.number) == [7])
    _ = MacroReview(text: "quiet", hotel: inn)
    #expect(inn.reviews.map(\.text) == ["quiet"])
    try context.save()

    let reader = ModelContext(container)
    let hotels = try reader.fetch(FetchDescriptor<MacroHotel>(sortBy: [SortDescriptor(\.name)]))
    #expect(hotels.map(\.name) == ["Inn", "Lodge"])
    #expect(hotels.map { $0.rooms.map(\.number).sorted() } == [[101, 102], [7]])
    #expect(hotels.map { $0.reviews.map(\.text) } == [["quiet"], []])
    let innRooms = try reader.fetch(
      FetchDescriptor<MacroRoom>(
        predicate: #Predicate { $0.hotel?.name == "Inn" }, sortBy: [SortDescriptor(\.number)]))
    #expect(innRooms.map(\.number) == [101, 102])
    #expect(innRooms.allSatisfy { $0.hotel === hotels[0] })
    var prefetched = FetchDescriptor<MacroHotel>(sortBy: [SortDescriptor(\.name)])
    prefetched.relationshipKeyPathsForPrefetching = [\.rooms]
    #expect(
      try ModelContext(container).fetch(prefetched).map { $0.rooms.count } == [2, 1])

    // Models compare by identity: a relationship compared with nil, in SQL (a count).
    reader.insert(MacroRoom(number: 1))
    try reader.save()
    #expect(
      try reader.fetchCount(FetchDescriptor<MacroRoom>(predicate: #Predicate { $0.hotel == nil }))
        == 1)
    #expect(
      try reader.fetch(
        FetchDescriptor<MacroRoom>(
          predicate: #Predicate { $0.hotel != nil }, sortBy: [SortDescriptor(\.number)])
      ).map(\.number) == [7, 101, 102])
    #expect(hotels[0] == hotels[0] && hotels[0] != hotels[1])
    #expect(Set(hotels).count == 2)

    reader.delete(hotels[0])
    try reader.save()
    let after = ModelContext(container)
    #expect(
      try after.fetch(FetchDescriptor<MacroRoom>(sortBy: [SortDescriptor(\.number)])).map(\.number)
        == [1, 7])
    let reviews = try after.fetch(FetchDescriptor<MacroReview>())
    #expect(reviews.map(\.text) == ["quiet"])
    #expect(reviews.map { $0.hotel == nil } == [true])
  }
}

/// A guest with a one-to-one (the passport: the guest names the inverse, the passport stores
/// the key) and an ordered to-many, in a table named by `@Model(table:)`.
@Model(table: "macro_guests") final class MacroGuest {
  var name: String
  @Relationship(deleteRule: .cascade, inverse: \MacroPassport.guest)
  var passport: MacroPassport?
  @Relationship(
    deleteRule: .cascade, inverse: \MacroStop.guest, orderBy: \MacroStop.position,
    \MacroStop.label)
  var stops: [MacroStop] = []

  init(name: String) { self.name = name }
}

/// See ``MacroGuest``.
@Model final class MacroPassport {
  var number: String
  @Relationship var guest: MacroGuest?

  init(number: String) { self.number = number }
}

/// See ``MacroGuest``.
@Model final class MacroStop {
  var position: Int
  var label: String
  @Relationship var guest: MacroGuest?

  init(position: Int, label: String) {
    self.position = position
    self.label = label
  }
}

@Suite("@Model: one-to-one, an ordered to-many, a table's name")
struct ModelMacroOneToOneTests {
  @Test(
    "the side naming the inverse reads it on first use, the other stores the key (uniquely); a cascade deletes it; a to-many reads in its order; the table is named",
    arguments: TestEngine.allCases)
  func oneToOne(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let configuration = ModelConfiguration(url: store.url)
    let recorder = RecordingEngine(try configuration.defaultEngine())
    let container = try ModelContainer(
      for: [MacroGuest.self], configuration: configuration, engine: recorder)
    let context = ModelContext(container)
    let ann = MacroGuest(name: "Ann")
    let bo = MacroGuest(name: "Bo")
    context.insert(ann)
    context.insert(bo)
    ann.passport = MacroPassport(number: "A1")
    #expect(ann.passport?.guest === ann)
    let second = MacroPassport(number: "B2")
    second.guest = bo
    #expect(bo.passport === second)
    ann.stops = [
      MacroStop(position: 2, label: "c"), MacroStop(position: 0, label: "b"),
      MacroStop(position: 0, label: "a"),
    ]
    try context.save()
    #expect(recorder.queries.contains { $0.sql.contains("\"macro_guests\"") })

    let reader = ModelContext(container)
    let guests = try reader.fetch(FetchDescriptor<MacroGuest>(sortBy: [SortDescriptor(\.name)]))
    #expect(guests.map { $0.passport?.number } == ["A1", "B2"])
    #expect(guests.map { $0.stops.map(\.label) } == [["a", "b", "c"], []])
    #expect(
      try reader.fetch(
        FetchDescriptor<MacroGuest>(predicate: #Predicate { $0.passport?.number == "B2" })
      ).map(\.name) == ["Bo"])

    // One passport a guest: a second for Ann takes her first one's place (its key nulled).
    let replacement = MacroPassport(number: "A9")
    guests[0].passport = replacement
    try reader.save()
    let check = ModelContext(container)
    let passports = try check.fetch(
      FetchDescriptor<MacroPassport>(sortBy: [SortDescriptor(\.number)]))
    #expect(
      passports.map { "\($0.number):\($0.guest?.name ?? "-")" } == ["A1:-", "A9:Ann", "B2:Bo"])

    reader.delete(guests[1])
    try reader.save()
    let after = ModelContext(container)
    #expect(
      try after.fetch(FetchDescriptor<MacroPassport>(sortBy: [SortDescriptor(\.number)]))
        .map(\.number) == ["A1", "A9"])
  }
}

@Suite("@Model: one-to-one declarations it refuses")
struct ModelMacroOneToOneDiagnosticsTests {
  @Test(
    "a to-one naming a to-many as its inverse, orderBy on a to-one, a table name that is not a plain literal, indexes that differ after one property, a lazy property: errors saying what to write"
  )
  func refused() throws {
    let (text, status, _) = try ModelMacroDiagnosticsTests.compile(
      """
      @Model final class Shelf {
        @Relationship var books: [Book] = []
      }
      @Model final class Book {
        @Relationship(inverse: \\Shelf.books) var shelf: Shelf?
      }
      """)
    #expect(status != 0)
    #expect(
      text.contains(
        "a to-one whose inverse is a to-many stores the key: name the inverse on the to-many"),
      "\(text)")
    let (errors, other) = try ModelMacroDiagnosticsTests.typecheck(
      """
      @Model(table: "1trips") final class Odd {
        var x = 0
      }
      @Model final class Even {
        @Relationship(inverse: \\Pair.even, orderBy: \\Pair.x) var pair: Pair?
      }
      @Model final class Pair {
        var x = 0
        @Relationship var even: Even?
      }
      @Model final class Twice {
        #Index<Twice>([\\.a, \\.b], [\\.a, \\.c], [\\.a])
        var a = 0
        var b = 0
        var c = 0
      }
      @Model final class Lazy {
        lazy var cached = 0
      }
      @Model final class Named {
        var id = 0
      }
      let named: Named.ID = 1
      """)
    #expect(other != 0)
    let expected = [
      "1: table: names the model's table: give it as one string literal of letters, digits and underscores, not starting with '_' or a digit",
      "5: orderBy: orders a to-many: 'pair' is a to-one",
      "11: 'a' begins two #Index lists that differ after it: begin one with another property",
      "18: A @Model class does not persist a lazy property: make it a stored 'var', a computed property, or mark it @Transient",
    ]
    // The class declaring `id` is `Identifiable` by it: no error at its lines.
    #expect(!errors.contains { $0.hasPrefix("20:") || $0.hasPrefix("21:") || $0.hasPrefix("23:") })
    #expect(errors.filter { expected.contains($0) } == expected, "\(errors)")
  }
}

/// Two models related with no inverse named on either side.
@Model final class UnnamedOwner {
  var name = ""
  @Relationship var pets: [UnnamedPet] = []
}

/// See ``UnnamedOwner``.
@Model final class UnnamedPet {
  var name = ""
  @Relationship var owner: UnnamedOwner?
}

@Suite("@Model: a relationship compared with nil runs in SQL")
struct ModelMacroNilComparisonTests {
  @Test(
    "== nil and != nil on a to-one are a condition on its key column, no row read to finish them",
    arguments: TestEngine.allCases)
  func nilComparison(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let configuration = ModelConfiguration(url: store.url)
    let recorder = RecordingEngine(try configuration.defaultEngine())
    let container = try ModelContainer(
      for: [MacroRoom.self], configuration: configuration, engine: recorder)
    let context = ModelContext(container)
    let inn = MacroHotel(name: "Inn")
    context.insert(inn)
    inn.rooms = [MacroRoom(number: 1)]
    context.insert(MacroRoom(number: 2))
    try context.save()
    recorder.clear()
    let reader = ModelContext(container)
    #expect(
      try reader.fetch(FetchDescriptor<MacroRoom>(predicate: #Predicate { $0.hotel == nil }))
        .map(\.number) == [2])
    #expect(
      try reader.fetchCount(FetchDescriptor<MacroRoom>(predicate: #Predicate { $0.hotel != nil }))
        == 1)
    let selects = recorder.queries.map(\.sql).filter { $0.hasPrefix("SELECT") }
    #expect(selects.count == 2, "\(selects)")
    #expect(
      selects.allSatisfy {
        $0.contains("\"hotel\" IS NULL") || $0.contains("\"hotel\" IS NOT NULL")
      }, "\(selects)")
  }
}

@Suite("@Model: relationships it refuses")
struct ModelMacroRelationshipDiagnosticsTests {
  @Test(
    "a to-many without '= []', a to-one with an initial value, a type that is neither, @Attribute on one"
  )
  func refused() throws {
    let (errors, status) = try ModelMacroDiagnosticsTests.typecheck(
      """
      @Model final class Owner {
        @Relationship var pets: [Pet]
        @Relationship var best: Pet? = nil
        @Relationship var count: Int = 0
        @Attribute(.unique) @Relationship var other: Pet?
        init(pets: [Pet]) { self.pets = pets }
      }
      @Model final class Pet {
        var name = ""
      }
      """)
    #expect(status != 0)
    #expect(
      errors == [
        "2: A to-many relationship starts empty: declare 'pets' with '= []', and set it once the model's stored properties are",
        "3: A to-one relationship starts as nil: leave out the initial value of 'best', and set it once the model's stored properties are",
        "4: A relationship is an optional model (Hotel?) or an array of models ([Room]): 'count' is neither",
        "5: @Attribute does not apply to a relationship: 'other' is stored as its related rows' keys",
      ])
  }

  @Test(
    "a relationship whose inverse neither side names is refused when the container opens, naming it"
  )
  func noInverse() throws {
    let error = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: [UnnamedOwner.self], configuration: ModelConfiguration(isStoredInMemoryOnly: true))
    }
    #expect(error.message.contains("'pets' of UnnamedOwner"))
    #expect(error.message.contains("names no inverse"))
  }
}

/// A model without a row loader (a non-optional `.codable` value) whose own `init()` counts its
/// calls: a fetch must not run it.
@Model final class CountedInit {
  nonisolated(unsafe) static var made = 0
  var number = 0
  @Attribute(.codable) var tags: [String] = []

  init() { CountedInit.made += 1 }
}

@Suite("@Model: what the review found")
struct ModelMacroReviewTests {
  @Test(
    "a fetched model is made without running the class's own init(), with or without a row loader")
  func fetchRunsNoInitializer() throws {
    let container = try ModelContainer(
      for: [CountedInit.self, MacroRoom.self],
      configuration: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    for number in 0..<3 {
      let model = CountedInit()
      model.number = number
      context.insert(model)
    }
    try context.save()
    let before = CountedInit.made
    let fetched = try ModelContext(container).fetch(
      FetchDescriptor<CountedInit>(sortBy: [SortDescriptor(\.number)]))
    #expect(fetched.map(\.number) == [0, 1, 2])
    #expect(CountedInit.made == before)
  }

  @Test(
    "an initializer callable with no arguments, an optional to-many, a rule on a to-one, names @Model writes or that need backticks: errors at the declaration; a name like a link's is the user's"
  )
  func refused() throws {
    let (errors, status) = try ModelMacroDiagnosticsTests.typecheck(
      """
      @Model final class Defaulted {
        var x: Int
        init(x: Int = 3) { self.x = x }
      }
      @Model final class Team {
        var name = ""
        @Relationship(inverse: \\Player.team) var players: [Player]? = []
      }
      @Model final class Player {
        @Relationship(deleteRule: .cascade) var team: Team?
        var `default` = 0
        var schema = 1
        var linkOrigin = 2
      }
      @Model final class Crew {
        @Relationship var members: [Player] = []
        var membersLink = 0
      }
      """)
    #expect(status != 0)
    let expected = [
      "3: This initializer can be called with no arguments, as the init() that @Model writes for the store: 'Defaulted()' would call that one. Declare init() yourself, or give a parameter no default",
      "7: A to-many relationship is an array, not an optional one: declare 'players' as [Player] = []",
      "10: A to-one that names no inverse stores the key and keeps the rule .nullify (deleting a row never deletes what it points to): declare 'deleteRule:' on the other side, with 'inverse:'",
      "11: A persisted property's name is its column's and a name in the code @Model writes: rename `default`, which needs backticks",
      "12: 'schema' is a member @Model writes for the class: rename the property",
      "13: 'linkOrigin' is a member @Model writes for the class: rename the property",
    ]
    #expect(errors.filter { expected.contains($0) } == expected, "\(errors)")
    // A relationship's link is `_$link_members`: a property named `membersLink` is the user's.
    #expect(!errors.contains { $0.hasPrefix("17:") }, "\(errors)")
  }
}

/// A trip declared as SwiftData's SampleTrips declares its models: a class that is not final.
@Model class OpenTrip {
  #Unique<OpenTrip>([\.name])
  var name: String
  @Relationship(deleteRule: .cascade, inverse: \OpenStop.trip) var stops: [OpenStop] = []

  init(name: String) { self.name = name }
}

/// A stop of an ``OpenTrip``, not final either.
@Model class OpenStop {
  var title: String
  var trip: OpenTrip?

  init(title: String) { self.title = title }
}

/// A subclass of a model: not a model of its own.
final class SpecialOpenTrip: OpenTrip {}

@Suite("@Model: a class that is not final")
struct ModelMacroNonFinalTests {
  @Test(
    "round-trips with its relationships, a cascade and a #Unique upsert; fetched models are of the class",
    arguments: TestEngine.allCases)
  func roundTrip(engine: TestEngine) throws {
    let container = try engineContainer(engine, OpenTrip.self)
    let context = ModelContext(container)
    let trip = OpenTrip(name: "Spring")
    context.insert(trip)
    trip.stops = [OpenStop(title: "Louvre"), OpenStop(title: "Orsay")]
    try context.save()

    let reader = ModelContext(container)
    let trips = try reader.fetch(FetchDescriptor<OpenTrip>())
    #expect(trips.map(\.name) == ["Spring"])
    #expect(trips.map { ObjectIdentifier(type(of: $0)) } == [ObjectIdentifier(OpenTrip.self)])
    #expect(Set(trips[0].stops.map(\.title)) == ["Louvre", "Orsay"])
    #expect(trips[0].stops.allSatisfy { $0.trip === trips[0] })
    let name = "Spring"
    #expect(
      try reader.fetchCount(
        FetchDescriptor<OpenStop>(predicate: #Predicate { $0.trip?.name == name })) == 2)
    // The same name again updates the stored trip (#Unique).
    let again = ModelContext(container)
    again.insert(OpenTrip(name: "Spring"))
    try again.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<OpenTrip>()) == 1)
    #expect(OpenTrip.makeForLoading().name == "")
    #expect(OpenTrip().stops.isEmpty)

    let deleter = ModelContext(container)
    deleter.delete(try deleter.fetch(FetchDescriptor<OpenTrip>())[0])
    try deleter.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<OpenStop>()) == 0)
  }

  @Test(
    "a subclass kept as its model's class is stored as the model; asked for as itself, it traps")
  func subclassTraps() async throws {
    let container = try engineContainer(.sqlite, OpenTrip.self)
    let context = ModelContext(container)
    context.insert(SpecialOpenTrip(name: "Special") as OpenTrip)
    try context.save()
    let fetched = try ModelContext(container).fetch(FetchDescriptor<OpenTrip>())
    #expect(fetched.map(\.name) == ["Special"])
    #expect(fetched.map { $0 is SpecialOpenTrip } == [false])
    // A subclass instance kept as its model names its row, read through either type.
    let special = SpecialOpenTrip(name: "Kept")
    #expect(special.persistentModelID.isTemporary)
    context.insert(special as OpenTrip)
    try context.save()
    #expect(special.modelContext === context)
    #expect(!special.persistentModelID.isTemporary)
    #expect(special.persistentModelID == (special as OpenTrip).persistentModelID)
    #expect(special.persistentModelID.entityName == "OpenTrip")
    // Asked for as the subclass, a fetch says to fetch the model.
    let refusal = #expect(throws: PersistenceError.self) {
      try context.fetch(FetchDescriptor<SpecialOpenTrip>())
    }
    #expect(
      refusal?.message
        == "SpecialOpenTrip is a subclass of the model OpenTrip: a subclass is not a model of its own. Fetch OpenTrip, and cast."
    )
    await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let container = try engineContainer(.sqlite, OpenTrip.self)
      ModelContext(container).insert(SpecialOpenTrip(name: "Special"))
    }.map { result in
      let message = String(decoding: result.standardErrorContent, as: UTF8.self)
      #expect(
        message.contains(
          "SpecialOpenTrip is a subclass of the model OpenTrip not declared with @Model: mark it @Model to keep it"
        ), "\(message)")
    }
  }
}

@Suite("@Model: modelContext and persistentModelID")
struct ModelMacroContextTests {
  @Test(
    "a model's context and identifier: none and temporary in memory; the context's once inserted; the row's once saved, fetched, reset, deleted or its context gone",
    arguments: TestEngine.allCases)
  func contextAndIdentifier(engine: TestEngine) throws {
    let container = try engineContainer(engine, MacroPlace.self, MacroHotel.self)
    let place = MacroPlace(code: "KIX", city: "Osaka", rank: 1, spot: nil)
    let other = MacroPlace(code: "HND", city: "Tokyo", rank: 2, spot: nil)
    #expect(place.modelContext == nil)
    #expect(place.persistentModelID.isTemporary)
    #expect(place.persistentModelID != other.persistentModelID)
    #expect(place.persistentModelID.description == "MacroPlace/temporary")

    let context = ModelContext(container)
    context.insert(place)
    #expect(place.modelContext === context)
    #expect(place.persistentModelID.isTemporary)
    #expect(context.registeredModel(for: place.persistentModelID) as MacroPlace? === place)
    try context.save()
    let id = place.persistentModelID
    #expect(!id.isTemporary)
    #expect(id == context.persistentIdentifier(for: place))
    #expect(id.storeIdentifier == container.storeIdentifier)
    #expect(id.entityName == "MacroPlace")
    #expect(context.registeredModel(for: id) as MacroPlace? === place)

    let reader = ModelContext(container)
    let fetched = try reader.fetch(FetchDescriptor<MacroPlace>())
    #expect(fetched.map(\.persistentModelID) == [id])
    #expect(fetched[0].modelContext === reader)
    reader.reset()
    #expect(fetched[0].modelContext == nil)
    #expect(fetched[0].persistentModelID == id)

    var scoped: ModelContext? = ModelContext(container)
    let kept = try #require(try scoped?.fetch(FetchDescriptor<MacroPlace>()).first)
    #expect(kept.modelContext === scoped)
    scoped = nil
    #expect(kept.modelContext == nil)
    #expect(kept.persistentModelID == id)

    context.delete(place)
    try context.save()
    #expect(place.modelContext == nil)
    #expect(place.persistentModelID == id)

    // A model with relationships, and the models its relationships load.
    let hotel = MacroHotel(name: "Kyoto Inn")
    context.insert(hotel)
    hotel.rooms = [MacroRoom(number: 1)]
    try context.save()
    let hotels = try reader.fetch(FetchDescriptor<MacroHotel>())
    #expect(hotels.map(\.persistentModelID) == [hotel.persistentModelID])
    #expect(hotels[0].modelContext === reader)
    #expect(hotels[0].rooms.map { $0.modelContext === reader } == [true])
    #expect(hotels[0].rooms.map(\.persistentModelID) == hotel.rooms.map(\.persistentModelID))
    #expect(hotel.rooms.allSatisfy { !$0.persistentModelID.isTemporary })
  }
}

/// The value types beyond the first seven: fixed-width integers, `Float`, `URL`.
@Model final class MacroMeasure {
  var label: String
  var tiny: Int8 = 0
  var small: Int16 = 0
  var medium: Int32 = 0
  var large: Int64 = 0
  var byte: UInt8 = 0
  var word: UInt16 = 0
  var wide: UInt32 = 0
  var ratio: Float = 0
  var link = URL(string: "https://example.com/")!
  var optionalLink: URL?
  var optionalTiny: Int8?

  init(label: String) { self.label = label }
}

@Suite("@Model: fixed-width integers, Float and URL")
struct ModelMacroMoreTypesTests {
  @Test(
    "each round-trips at its extremes, compares and sorts in SQL; a stored value out of its range is an error naming the column",
    arguments: TestEngine.allCases)
  func moreTypes(engine: TestEngine) throws {
    let container = try engineContainer(engine, MacroMeasure.self)
    let context = ModelContext(container)
    let low = MacroMeasure(label: "low")
    low.tiny = .min
    low.small = .min
    low.medium = .min
    low.large = .min
    low.ratio = -0.1
    low.link = try #require(URL(string: "https://example.com/caf%C3%A9?q=1&r=%20"))
    let high = MacroMeasure(label: "high")
    high.tiny = .max
    high.small = .max
    high.medium = .max
    high.large = .max
    high.byte = .max
    high.word = .max
    high.wide = .max
    high.ratio = .greatestFiniteMagnitude
    high.optionalLink = URL(fileURLWithPath: "/tmp/a b")
    high.optionalTiny = 7
    context.insert(low)
    context.insert(high)
    try context.save()

    let reader = ModelContext(container)
    let all = try reader.fetch(FetchDescriptor<MacroMeasure>(sortBy: [SortDescriptor(\.large)]))
    #expect(all.map(\.label) == ["low", "high"])
    #expect(all.map(\.tiny) == [.min, .max])
    #expect(all.map(\.small) == [.min, .max])
    #expect(all.map(\.medium) == [.min, .max])
    #expect(all.map(\.large) == [.min, .max])
    #expect(all.map(\.byte) == [0, .max])
    #expect(all.map(\.word) == [0, .max])
    #expect(all.map(\.wide) == [0, .max])
    #expect(all.map(\.ratio) == [-0.1, .greatestFiniteMagnitude])
    #expect(all.map(\.link) == [low.link, high.link])
    #expect(all.map(\.optionalLink) == [nil, high.optionalLink])
    #expect(all.map(\.optionalTiny) == [nil, 7])

    let wideLimit: UInt32 = 4_000_000_000
    let ratio: Float = -0.1
    let link = low.link
    func labels(_ predicate: Predicate<MacroMeasure>) throws -> [String] {
      let descriptor = FetchDescriptor(predicate: predicate)
      let found = try reader.fetch(descriptor).map(\.label)
      #expect(try reader.fetchCount(descriptor) == found.count)
      return found
    }
    #expect(try labels(#Predicate { $0.tiny < 0 }) == ["low"])
    #expect(try labels(#Predicate { $0.wide > wideLimit }) == ["high"])
    #expect(try labels(#Predicate { $0.ratio == ratio }) == ["low"])
    #expect(try labels(#Predicate { $0.link == link }) == ["low"])
    #expect(try labels(#Predicate { $0.optionalLink == nil }) == ["low"])
    #expect(try labels(#Predicate { $0.byte == 255 && $0.optionalTiny == 7 }) == ["high"])
    #expect(
      try reader.fetch(
        FetchDescriptor<MacroMeasure>(sortBy: [SortDescriptor(\.tiny, order: .reverse)])
      ).map(\.label) == ["high", "low"])

    // An outside writer's value out of a type's range: an error naming the column, not a
    // value wrapped or clamped.
    for (assignment, column) in [
      ("\"tiny\" = 300", "tiny"), ("\"byte\" = -1", "byte"), ("\"wide\" = 4294967296", "wide"),
      ("\"ratio\" = 1e300", "ratio"), ("\"link\" = ''", "link"),
      ("\"link\" = 'not a url'", "link"),
    ] {
      try executeOutside(
        container, "UPDATE \"MacroMeasure\" SET \(assignment) WHERE \"label\" = 'low'")
      let failure = try #require(
        throws: PersistenceError.self,
        performing: { try ModelContext(container).fetch(FetchDescriptor<MacroMeasure>()) })
      #expect(failure.code == .invalidValue, "\(assignment)")
      #expect(failure.attribute == column, "\(assignment)")
      #expect(failure.message.hasSuffix(", column \(column))"), "\(failure.message)")
      try executeOutside(
        container,
        "UPDATE \"MacroMeasure\" SET \"tiny\" = 0, \"byte\" = 0, \"wide\" = 0, \"ratio\" = 0, \"link\" = 'https://example.com/' WHERE \"label\" = 'low'"
      )
    }
  }

  @Test(
    "a URL that is not optional needs an initial value; UInt64, UInt and Decimal are not attributes; a type neither kept nor Codable is an error at its property"
  )
  func refused() throws {
    let (errors, status) = try ModelMacroDiagnosticsTests.typecheck(
      """
      import Foundation
      @Model final class Links {
        var home: URL
        init(home: URL) { self.home = home }
      }
      """)
    #expect(status != 0)
    #expect(
      errors == [
        "3: A URL has no empty value for the model the store makes before loading a row: give 'home' an initial value, or declare it URL?"
      ])
    // Codable, so the compiler would keep them as JSON: refused by name, saying why; not
    // when marked `.codable`, which says JSON is meant.
    let (numbers, numbersStatus) = try ModelMacroDiagnosticsTests.typecheck(
      """
      import Foundation
      @Model final class Prices {
        var count: UInt64 = 0
        var price: Swift.UInt?
        var exact: Foundation.Decimal = 0
        @Attribute(.codable) var kept: Decimal = 0
        init() {}
      }
      """)
    #expect(numbersStatus != 0)
    #expect(numbers.map { $0.prefix(3) } == ["3: ", "4: ", "5: "], "\(numbers)")
    #expect(numbers[0].contains("A UInt64 has no INTEGER column that keeps its order"))
    #expect(numbers[1].contains("A UInt has no INTEGER column"))
    #expect(numbers[2].contains("A Decimal has no exact column that also sorts"))
    #expect(numbers[0].contains("declare 'count' Int64, or mark it @Attribute(.codable)"))
    #expect(numbers[2].contains("declare 'exact' an Int of minor units, or mark it"))
    #expect(
      numbers.allSatisfy {
        $0.hasSuffix(
          "or mark it @Attribute(.codable) to keep it as JSON, opaque to predicates and sorts")
      })
    // The error is at each property of a type that is neither kept nor Codable, saying what
    // to do.
    let (text, failed, path) = try ModelMacroDiagnosticsTests.compile(
      """
      import Foundation
      struct Opaque { var a = 0 }
      @Model final class Holder {
        var thing = Opaque()
        var fine: [Int8] = []
      }
      """)
    #expect(failed != 0)
    let (optionals, optionalStatus) = try ModelMacroDiagnosticsTests.typecheck(
      """
      import Foundation
      struct Opaque { var a = 0 }
      @Model final class OptionalHolder {
        var thing: Opaque? = nil
        var fine: Int8?
        var listed: [String]? = nil
        init() {}
      }
      """)
    #expect(optionalStatus != 0)
    #expect(optionals == [], "errors at the file's lines: none are outside the expansions")
    let (optionalText, _, optionalPath) = try ModelMacroDiagnosticsTests.compile(
      """
      import Foundation
      struct Opaque { var a = 0 }
      @Model final class OptionalHolder {
        var thing: Opaque? = nil
        var fine: Int8?
        var listed: [String]? = nil
        init() {}
      }
      """)
    let unkept =
      "is unavailable: The store keeps optionals of models (a to-one), of String, Int, Int8…Int64, UInt8…UInt32, Double, Float, Bool, Date, UUID, Data, URL and PersistableValue types, of enums with their raw values, and of other Codable types as JSON: make the type Codable, or a PersistableValue"
    let errorLines = optionalText.split(separator: "\n").filter {
      $0.hasPrefix("macro expansion") && $0.contains(": error: ")
    }
    #expect(!errorLines.isEmpty && errorLines.allSatisfy { $0.contains(unkept) }, "\(optionalText)")
    #expect(optionalText.contains("`- \(optionalPath):5:"), "\(optionalText)")
    #expect(!optionalText.contains("`- \(optionalPath):6:"), "\(optionalText)")
    #expect(!optionalText.contains("`- \(optionalPath):7:"), "\(optionalText)")
    let origins = text.split(separator: "\n").filter {
      $0.hasPrefix("`- \(path):") && $0.hasSuffix("note: expanded code originates here")
    }.map { $0.dropFirst(3 + path.count + 1).prefix(2) }
    // File lines: the harness's import comes first.
    #expect(Set(origins).contains("5:"), "\(text)")
    #expect(!origins.contains("6:"), "\(text)")
    #expect(
      text.contains(
        "'_persistableAttribute' is unavailable: The store keeps String, Int, Int8…Int64, UInt8…UInt32, Double, Float, Bool, Date, UUID, Data, URL and PersistableValue types, enums with their raw values, other Codable types as JSON, and optionals of each: make the type Codable, or a PersistableValue; an array of models is a to-many, marked @Relationship"
      ), "\(text)")
  }
}

/// Notes of a table without a unique constraint, then declaring one over two columns.
@Model(table: "repeated_notes") final class RepeatedNote {
  var title: String
  var day: Int
  init(title: String, day: Int) {
    self.title = title
    self.day = day
  }
}

/// ``RepeatedNote``'s table, the title and day now unique together.
@Model(table: "repeated_notes") final class UniqueNote {
  #Unique<UniqueNote>([\.title, \.day])
  var title: String
  var day: Int
  init(title: String, day: Int) {
    self.title = title
    self.day = day
  }
}

@Suite("@Model: a unique constraint added to a table whose rows break it")
struct ModelMacroAddedUniqueTests {
  @Test(
    "opening the store is an error naming the table and the columns; without repeats, it opens",
    arguments: TestEngine.allCases)
  func addedUnique(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let before = ModelContext(try store.container(RepeatedNote.self))
    before.insert(RepeatedNote(title: "Plan", day: 1))
    before.insert(RepeatedNote(title: "Plan", day: 1))
    try before.save()
    let error = try #require(throws: PersistenceError.self) {
      try store.container(UniqueNote.self)
    }
    #expect(error.code == .uniqueConstraint)
    #expect(
      error.message.contains(
        "The table repeated_notes of the store at"), "\(error)")
    #expect(
      error.message.contains(
        "has rows that repeat a value of (title, day), which the model now declares unique"),
      "\(error)")
    // The rows are as they were; once the repeat is gone, the constraint is added.
    let after = ModelContext(try store.container(RepeatedNote.self))
    let notes = try after.fetch(FetchDescriptor<RepeatedNote>())
    #expect(notes.count == 2)
    notes[1].day = 2
    try after.save()
    let unique = ModelContext(try store.container(UniqueNote.self))
    unique.insert(UniqueNote(title: "Plan", day: 2))
    try unique.save()
    #expect(try unique.fetchCount(FetchDescriptor<UniqueNote>()) == 2)
  }
}

@Suite("@Model: #Unique and #Index naming a plain optional")
struct ModelMacroUndeclaredConstraintTests {
  @Test(
    "naming a to-one (a plain optional of a model type) is an error saying it is not an attribute")
  func toOneInIndex() throws {
    let (text, status, _) = try ModelMacroDiagnosticsTests.compile(
      """
      @Model final class Owner {
        var name = ""
        @Relationship(inverse: \\Pet.owner) var pets: [Pet] = []
      }
      @Model final class Pet {
        #Index<Pet>([\\.owner])
        var name = ""
        var owner: Owner?
      }
      """)
    #expect(status != 0)
    #expect(
      text.contains(
        "#Unique and #Index name attributes: a to-one (a property of a model type) is not one; its key column is indexed already"
      ), "\(text)")
  }
}

@Suite("@Model: a model in one context at a time")
struct ModelMacroOneContextTests {
  @Test(
    "a model of another context, or of a stored row, is not inserted: the save says so and writes nothing; an unsaved model leaving its context names none",
    arguments: TestEngine.allCases)
  func oneContext(engine: TestEngine) throws {
    let container = try engineContainer(engine, MacroPlace.self)
    let first = ModelContext(container)
    let second = ModelContext(container)
    let place = MacroPlace(code: "KIX", city: "Osaka", rank: 1, spot: nil)
    first.insert(place)
    second.insert(place)
    #expect(place.modelContext === first)
    // A temporary identifier finds the inserted model, in its context only.
    let temporary = place.persistentModelID
    #expect(first.registeredModel(for: temporary) as MacroPlace? === place)
    #expect(try first.model(for: temporary, as: MacroPlace.self) === place)
    #expect(second.registeredModel(for: temporary) as MacroPlace? == nil)
    let refusal = #expect(throws: PersistenceError.self) { try second.save() }
    #expect(refusal?.code == .modelInAnotherContext)
    #expect(refusal?.message.contains("MacroPlace (not saved, in another context)") == true)
    try second.save()  // told once: the next save writes the rest (nothing)
    try first.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MacroPlace>()) == 1)

    // A fetched model inserted elsewhere, while its context lives or after it is gone.
    let reader = ModelContext(container)
    let fetched = try reader.fetch(FetchDescriptor<MacroPlace>())[0]
    let other = ModelContext(container)
    other.insert(fetched)
    fetched.rank = 9
    #expect(throws: PersistenceError.self) { try other.save() }
    #expect(fetched.modelContext === reader)
    reader.reset()
    other.insert(fetched)
    let afterReset = #expect(throws: PersistenceError.self) { try other.save() }
    #expect(afterReset?.message.contains("of the store it was loaded from") == true)
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MacroPlace>()) == 1)

    // Another store's identifier with the same key finds nothing here.
    let elsewhere = try engineContainer(engine, MacroPlace.self)
    let foreign = PersistentIdentifier(
      storeIdentifier: elsewhere.storeIdentifier, entityName: "MacroPlace",
      primaryKey: place.persistentModelID.primaryKey)
    #expect(first.registeredModel(for: foreign) as MacroPlace? == nil)
    #expect(first.registeredModel(for: place.persistentModelID) as MacroPlace? === place)

    // Unsaved models leaving their context (rollback, delete, delete by predicate, reset).
    let context = ModelContext(container)
    let rolled = MacroPlace(code: "A", city: "", rank: 0, spot: nil)
    let deleted = MacroPlace(code: "B", city: "", rank: 0, spot: nil)
    let matched = MacroPlace(code: "C", city: "", rank: 0, spot: nil)
    context.insert(rolled)
    context.rollback()
    context.insert(deleted)
    context.delete(deleted)
    context.insert(matched)
    try context.delete(model: MacroPlace.self, where: #Predicate { $0.code == "C" })
    let reset = MacroPlace(code: "D", city: "", rank: 0, spot: nil)
    context.insert(reset)
    context.reset()
    #expect(
      [rolled, deleted, matched, reset].map { $0.modelContext == nil } == [true, true, true, true])
    // Each may be inserted again, here or elsewhere.
    let again = ModelContext(container)
    again.insert(rolled)
    try again.save()
    #expect(rolled.modelContext === again && !rolled.persistentModelID.isTemporary)
  }
}

/// A hand-written model that is not final: its schema names the class, `init()` is required.
@Observable class OpenHandNote: PersistentModel {
  var key = ""
  var text = ""
  required init() {}
  init(key: String, text: String) {
    self.key = key
    self.text = text
  }
  static let schema = ModelSchema<OpenHandNote>(
    "open_hand_notes", .attribute(\.key, "key", .unique), .attribute(\.text, "text"))
}

@Suite("A hand-written model that is not final")
struct OpenHandModelTests {
  @Test("round-trips, upserts by its unique key, and is fetched as its class")
  func openHandModel() throws {
    let container = try engineContainer(.sqlite, OpenHandNote.self)
    let context = ModelContext(container)
    context.insert(OpenHandNote(key: "a", text: "one"))
    try context.save()
    let again = ModelContext(container)
    again.insert(OpenHandNote(key: "a", text: "two"))
    try again.save()
    let notes = try ModelContext(container).fetch(FetchDescriptor<OpenHandNote>())
    #expect(notes.map(\.text) == ["two"])
    #expect(notes.map { ObjectIdentifier(type(of: $0)) } == [ObjectIdentifier(OpenHandNote.self)])
  }
}
