import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

/// Every attribute of a `Sample` as a value: a model without a row loader, whose `.codable`
/// attribute (a class that is not `Equatable`) is decoded to its raw text.
struct SampleValue: ModelValue, Equatable {
  var id: UUID
  var name: String
  var note: String?
  var count: Int
  var small: Int
  var score: Double
  var rating: Double?
  var flag: Bool
  var maybe: Bool?
  var when: Date
  var whenMaybe: Date?
  var blob: Data
  var ref: UUID?
  var place: String?

  init(row: inout ModelRow<Sample>) throws {
    id = try row.next(\.id)
    name = try row.next(\.name)
    note = try row.next(\.note)
    count = try row.next(\.count)
    small = try row.next(\.small)
    score = try row.next(\.score)
    rating = try row.next(\.rating)
    flag = try row.next(\.flag)
    maybe = try row.next(\.maybe)
    when = try row.next(\.when)
    whenMaybe = try row.next(\.whenMaybe)
    blob = try row.next(\.blob)
    ref = try row.next(\.ref)
    place = try row.decoded(\.place)?.raw
  }

  /// What a fetched model holds.
  init(_ model: Sample) {
    id = model.id
    name = model.name
    note = model.note
    count = model.count
    small = model.small
    score = model.score
    rating = model.rating
    flag = model.flag
    maybe = model.maybe
    when = model.when
    whenMaybe = model.whenMaybe
    blob = model.blob
    ref = model.ref
    place = model.place?.raw
  }
}

/// A value holding two of a note's attributes, passing over the third.
struct NoteKey: ModelValue, Equatable {
  var key: String
  var group: String
  init(row: inout ModelRow<Note>) throws {
    key = try row.next(\.key)
    try row.skip(\.text)
    group = try row.next(\.group)
  }
}

/// Reads a note's attributes out of the schema's order (text before key, both strings).
struct NoteOutOfOrder: ModelValue {
  var text: String
  init(row: inout ModelRow<Note>) throws {
    text = try row.next(\.text)
    _ = try row.next(\.key)
    _ = try row.next(\.group)
  }
}

/// Reads two of a note's three attributes.
struct NoteMissingOne: ModelValue {
  var key: String
  init(row: inout ModelRow<Note>) throws {
    key = try row.next(\.key)
    try row.skip(\.text)
  }
}

/// A board's shared codable values, the non-optional one decoded too.
struct BoardValue: ModelValue, Equatable {
  var key: String
  var tile: Tile?
  var base: Tile
  init(row: inout ModelRow<Board>) throws {
    key = try row.next(\.key)
    tile = try row.decoded(\.tile)
    base = try row.decoded(\.base)
  }
}

@Suite("Value fetches: Sendable values from rows, equal to what model fetches load")
struct ModelValueTests {
  /// Samples with every attribute varied, from a seeded generator: names in several scripts
  /// and cases, missing optionals, equal sort keys.
  static func insertSamples(_ context: ModelContext, count: Int) throws {
    var random = SeededGenerator(seed: 41)
    let names = ["Zürich", "zurich", "Oslo", "ÖSLO", "e\u{301}clair", "Éclair", "Zoo 10", "Zoo 9"]
    for index in 0..<count {
      let sample = Sample()
      sample.name = names[Int.random(in: 0..<names.count, using: &random)] + " \(index % 7)"
      sample.note = index % 3 == 0 ? nil : ["a", "b", "B", "é"][index % 4]
      sample.count = Int.random(in: -5...5, using: &random)
      sample.small = index % 4
      sample.score = Double(Int.random(in: -100...100, using: &random)) / 8
      sample.rating = index % 5 == 0 ? nil : Double(index % 3)
      sample.flag = index % 2 == 0
      sample.maybe = index % 3 == 0 ? nil : index % 3 == 1
      sample.when = Date(timeIntervalSinceReferenceDate: Double(index % 9) * 86_400)
      sample.whenMaybe = index % 4 == 0 ? nil : Date(timeIntervalSince1970: Double(index))
      sample.blob = Data((0..<(index % 5)).map { UInt8($0 + index % 200) })
      sample.ref = index % 2 == 0 ? nil : UUID()
      sample.place = index % 3 == 0 ? nil : PlaceToken(raw: "osm:node/\(index % 4)")
      context.insert(sample)
    }
    try context.save()
  }

  /// The descriptors every feature of a fetch makes: predicates SQL finishes and predicates
  /// Swift finishes, sorts of each kind and direction, limits and offsets.
  static func descriptors() -> [(String, FetchDescriptor<Sample>)] {
    var result: [(String, FetchDescriptor<Sample>)] = [("all", FetchDescriptor<Sample>())]
    let sorted = [SortDescriptor(\Sample.when), SortDescriptor(\Sample.name, order: .reverse)]
    result.append(("sorted", FetchDescriptor(sortBy: sorted)))
    result.append(
      (
        "predicate",
        FetchDescriptor(
          predicate: #Predicate { $0.flag && $0.score > -4 && $0.note != nil }, sortBy: sorted)
      ))
    var window = FetchDescriptor<Sample>(
      predicate: #Predicate { $0.count >= 0 }, sortBy: [SortDescriptor(\.score)])
    window.fetchLimit = 7
    window.fetchOffset = 3
    result.append(("limit and offset", window))
    var beyond = window
    beyond.fetchOffset = 10_000
    result.append(("offset past the end", beyond))
    var swift = FetchDescriptor<Sample>(
      predicate: #Predicate { $0.name.localizedStandardContains("zur") || $0.name.count == 6 },
      sortBy: [SortDescriptor(\.small)])
    swift.localizedStandardSorts = [\.name]
    result.append(("finished in Swift, localized sort", swift))
    var swiftWindow = swift
    swiftWindow.fetchLimit = 4
    swiftWindow.fetchOffset = 2
    result.append(("finished in Swift with a window", swiftWindow))
    result.append(
      (
        "string comparator",
        FetchDescriptor(
          predicate: #Predicate { $0.maybe == true },
          sortBy: [SortDescriptor(\.name, comparator: .lexical), SortDescriptor(\.id)])
      ))
    result.append(
      (
        "optional sorts",
        FetchDescriptor(
          sortBy: [
            SortDescriptor(\.rating, order: .reverse), SortDescriptor(\.whenMaybe),
            SortDescriptor(\.id),
          ])
      ))
    return result
  }

  @Test(
    "fetch, sections, pages and enumeration as values equal the models' values for every descriptor",
    arguments: TestEngine.allCases)
  func equalToModels(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Sample.self)
    try Self.insertSamples(ModelContext(container), count: 120)
    for (name, descriptor) in Self.descriptors() {
      // A new context for each: models loaded fresh, nothing unsaved.
      let context = ModelContext(container)
      let models = try context.fetch(descriptor).map(SampleValue.init)
      let values = try ModelContext(container).fetch(descriptor, as: SampleValue.self)
      #expect(values == models, "fetch: \(name)")
      #expect(!values.isEmpty || name == "offset past the end", "\(name) tests nothing")

      var enumerated: [SampleValue] = []
      try ModelContext(container).enumerate(descriptor, as: SampleValue.self) {
        enumerated.append($0)
      }
      #expect(enumerated == models, "enumerate: \(name)")

      let modelSections = try context.fetch(descriptor, sectionBy: \.name)
      let valueSections = try ModelContext(container).fetch(
        descriptor, as: SampleValue.self, sectionBy: \.name)
      #expect(valueSections.map(\.id) == modelSections.map(\.id), "section keys: \(name)")
      #expect(
        valueSections.map { Array($0) } == modelSections.map { $0.map(SampleValue.init) },
        "sections: \(name)")
      let optionalModels = try context.fetch(descriptor, sectionBy: \.note)
      let optionalValues = try ModelContext(container).fetch(
        descriptor, as: SampleValue.self, sectionBy: \.note)
      #expect(optionalValues.map(\.id) == optionalModels.map(\.id), "optional keys: \(name)")
      #expect(
        optionalValues.map { Array($0) } == optionalModels.map { $0.map(SampleValue.init) },
        "optional sections: \(name)")

      var page = descriptor
      page.fetchLimit = page.fetchLimit ?? 5
      let (pageModels, modelsMatched) = try context.fetchModelsPage(page)
      let (pageValues, valuesMatched) = try ModelContext(container).fetchPage(
        page, as: SampleValue.self)
      #expect(pageValues == pageModels.map(SampleValue.init), "page: \(name)")
      #expect(valuesMatched == modelsMatched, "matched: \(name)")
    }
  }

  @Test(
    "values hold no model: nothing is registered, unsaved changes are not in them, and they cross to other tasks",
    arguments: TestEngine.allCases)
  func valuesAreTheStores(engine: TestEngine) async throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    for index in 0..<5 {
      context.insert(Note(key: "k\(index)", text: "t\(index)", group: index < 2 ? "a" : "b"))
    }
    try context.save()
    let reader = ModelContext(container)
    let values = try reader.fetch(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]), as: NoteKey.self)
    #expect(values.map(\.key) == ["k0", "k1", "k2", "k3", "k4"])
    #expect(values.map(\.group) == ["a", "a", "b", "b", "b"])
    let registered = reader.rowTables.values.reduce(0) { $0 + $1.count }
    #expect(registered == 0)
    // Another task reads them as they are (the compiler checks `Sendable`).
    let keys = await Task.detached { values.map(\.key).joined() }.value
    #expect(keys == "k0k1k2k3k4")
    // An unsaved change and an unsaved insert are not the store's yet.
    let changing = try #require(try context.fetch(FetchDescriptor<Note>()).first)
    changing.group = "z"
    context.insert(Note(key: "k9", text: "", group: "a"))
    let before = try context.fetch(FetchDescriptor<Note>(), as: NoteKey.self)
    #expect(before.count == 5 && !before.contains { $0.group == "z" })
    // With autosave they are saved first, as for any fetch.
    context.autosaveEnabled = true
    let after = try context.fetch(FetchDescriptor<Note>(), as: NoteKey.self)
    #expect(after.count == 6 && after.contains { $0.group == "z" })
  }

  @Test(
    "shared codable values decode once per fetch; a non-optional one's NULL and damaged bytes are errors naming the row",
    arguments: TestEngine.allCases)
  func codableValues(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Board.self)
    let context = ModelContext(container)
    let shared = Tile(corner: SIMD4(1, 2, 3, 4), label: "shared")
    for index in 0..<6 {
      context.insert(
        Board(
          key: "b\(index)", tile: index % 2 == 0 ? shared : nil,
          base: Tile(corner: .zero, label: "base \(index % 2)")))
    }
    try context.save()
    let descriptor = FetchDescriptor<Board>(sortBy: [SortDescriptor(\.key)])
    let values = try ModelContext(container).fetch(descriptor, as: BoardValue.self)
    let models = try ModelContext(container).fetch(descriptor)
    #expect(values.map(\.key) == models.map(\.key))
    #expect(values.map(\.tile) == models.map(\.tile))
    #expect(values.map(\.base) == models.map(\.base))

    // Damaged bytes in one row: the fetch fails naming the row and the column.
    try context.connection().execute(
      "UPDATE boards SET base = \(engine == .sqlite ? "X'7B7D'" : "'\\x7b7d'::bytea") WHERE key = 'b3'"
    )
    let failure = try #require(
      throws: PersistenceError.self,
      performing: { try ModelContext(container).fetch(descriptor, as: BoardValue.self) })
    #expect(failure.code == .invalidValue)
    #expect(failure.attribute == "base")
    #expect(failure.row?.contains("b3") == true)
  }

  @Test(
    "a value type that reads out of order, or too few attributes, is refused by its first fetch with an error naming it",
    arguments: TestEngine.allCases)
  func misreadValueTypes(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    context.insert(Note(key: "k", text: "t", group: "g"))
    try context.save()
    let swapped = try #require(
      throws: PersistenceError.self,
      performing: { try context.fetch(FetchDescriptor<Note>(), as: NoteOutOfOrder.self) })
    #expect(swapped.code == .invalidValue)
    #expect(swapped.message.contains("NoteOutOfOrder"))
    #expect(swapped.message.contains("as attribute 1 of 3"))
    let short = try #require(
      throws: PersistenceError.self,
      performing: {
        try context.enumerate(FetchDescriptor<Note>(), as: NoteMissingOne.self) { _ in }
      })
    #expect(short.message.contains("NoteMissingOne"))
    #expect(short.message.contains("reads 2 of the 3 attributes"))
    // Refused again, not trapping, on the next fetch; a correct type still reads.
    #expect(throws: PersistenceError.self) {
      _ = try context.fetch(FetchDescriptor<Note>(), as: NoteOutOfOrder.self)
    }
    #expect(try context.fetch(FetchDescriptor<Note>(), as: NoteKey.self).map(\.key) == ["k"])
  }

  @Test(
    "an enumeration's own error ends it unchanged; the enumeration's statement is its own, so the body may fetch",
    arguments: TestEngine.allCases)
  func enumerationErrors(engine: TestEngine) throws {
    struct Stop: Error {}
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    for index in 0..<4 { context.insert(Note(key: "k\(index)", text: "", group: "g")) }
    try context.save()
    var seen: [String] = []
    #expect(throws: Stop.self) {
      try context.enumerate(
        FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]), as: NoteKey.self
      ) { value in
        seen.append(value.key)
        _ = try context.fetchCount(FetchDescriptor<Note>())
        if seen.count == 2 { throw Stop() }
      }
    }
    #expect(seen == ["k0", "k1"])
    // A PersistenceError of the body's own is not renamed as a row's.
    let own = PersistenceError(code: .busy, message: "mine")
    let thrown = try #require(
      throws: PersistenceError.self,
      performing: {
        try context.enumerate(FetchDescriptor<Note>(), as: NoteKey.self) { _ in throw own }
      })
    #expect(thrown.message == "mine" && thrown.row == nil && thrown.attribute == nil)
  }
}
