import Dispatch
import Foundation
import Observation
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import PersistenceCore

/// A store engine the tests below run against: each test runs once per engine, the same code,
/// so that both keep the layer's promises alike.
enum TestEngine: String, CaseIterable, CustomTestStringConvertible, Sendable {
  case sqlite
  case postgreSQL

  var testDescription: String { rawValue }

  /// A new, empty store: a file in a temporary folder, or a new database of the test cluster.
  func makeStore() throws -> TestStore {
    switch self {
    case .sqlite:
      let directory = TemporaryDirectory()
      return TestStore(url: directory.file("store.sqlite"), keep: directory)
    case .postgreSQL:
      let url = try PostgreSQLCluster.shared.get().makeDatabase("store")
      return TestStore(url: try #require(URL(string: url)), keep: nil)
    }
  }
}

/// A container on a new store of `engine`: in memory for SQLite, a new database of the test
/// cluster for PostgreSQL (which lives as long as the cluster).
func engineContainer(_ engine: TestEngine, _ types: any PersistentModel.Type...) throws
  -> ModelContainer
{
  switch engine {
  case .sqlite:
    return try ModelContainer(
      for: types, configuration: ModelConfiguration(isStoredInMemoryOnly: true))
  case .postgreSQL:
    let url = try PostgreSQLCluster.shared.get().makeDatabase("suite")
    return try ModelContainer(
      for: types, configuration: ModelConfiguration(url: try #require(URL(string: url))))
  }
}

/// A store's URL, and what keeps it alive (the temporary folder of a SQLite file).
struct TestStore: @unchecked Sendable {
  let url: URL
  let keep: AnyObject?

  /// A container on this store, with the engine its URL calls for.
  func container(
    _ types: any PersistentModel.Type..., allowsSave: Bool = true
  ) throws -> ModelContainer {
    try ModelContainer(
      for: types, configuration: ModelConfiguration(url: url, allowsSave: allowsSave))
  }
}

/// The store, context and history promises, on every engine.
@Suite("Every engine: store and context")
struct EngineSuiteTests {
  @Test(
    "Xcode's template on a store of each engine: a Schema and ModelConfiguration(schema:url:) save, and another container reads what it saved",
    arguments: TestEngine.allCases)
  func templateOnEachEngine(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let schema = Schema([Sample.self])
    let configuration = ModelConfiguration(schema: schema, url: store.url)
    do {
      let container = try ModelContainer(for: schema, configurations: [configuration])
      #expect(container.schema == schema && container.configurations == [configuration])
      let context = ModelContext(container)
      context.insert(Sample())
      try context.save()
    }
    let again = try ModelContainer(for: schema, configurations: configuration)
    #expect(try ModelContext(again).fetchCount(FetchDescriptor<Sample>()) == 1)
  }

  @Test(
    "withSnapshot: reads inside see one snapshot while another connection commits; a save inside fails",
    arguments: TestEngine.allCases)
  func withSnapshot(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.container(Sample.self)
    let reader = ModelContext(container)
    let writer = ModelContext(try store.container(Sample.self))
    writer.insert(Sample())
    try writer.save()
    let (before, after, token, tokenAfter) = try reader.withSnapshot {
      let before = try reader.fetchCount(FetchDescriptor<Sample>())
      let token = try reader.currentHistoryToken()
      writer.insert(Sample())
      try writer.save()
      return (
        before, try reader.fetchCount(FetchDescriptor<Sample>()), token,
        try reader.currentHistoryToken()
      )
    }
    #expect(before == 1 && after == 1 && token == tokenAfter)
    #expect(try reader.fetchCount(FetchDescriptor<Sample>()) == 2)
    // It is for reads: a save inside fails, and writes nothing.
    #expect(throws: PersistenceError.self) {
      try reader.withSnapshot {
        _ = try reader.fetchCount(FetchDescriptor<Sample>())
        reader.insert(Sample())
        try reader.save()
      }
    }
    reader.rollback()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<Sample>()) == 2)
  }

  @Test(
    "currentHistoryToken stays the last one issued when all history is deleted, and a reader resuming from it misses nothing",
    arguments: TestEngine.allCases)
  func tokenAfterDeletedHistory(engine: TestEngine) throws {
    let container = try engineContainer(engine, Sample.self)
    let context = ModelContext(container)
    for _ in 0..<3 {
      context.insert(Sample())
      try context.save()
    }
    let last = try context.currentHistoryToken()
    // Every transaction deleted: only the history floor remembers where tokens were.
    let beyond = DefaultHistoryToken(
      storeIdentifier: container.storeIdentifier, value: last.value + 1)
    #expect(try context.deleteHistory(before: beyond) == 3)
    #expect(try context.fetchHistory().isEmpty)
    #expect(try context.currentHistoryToken() == last)
    #expect(try context.fetchHistory(HistoryDescriptor(after: last)).isEmpty)
    context.insert(Sample())
    try context.save()
    let next = try context.fetchHistory(HistoryDescriptor(after: last))
    let current = try context.currentHistoryToken()
    #expect(next.count == 1 && next.first?.token == current)
  }

  @Test(
    "fetchModelsPage reads a page larger than one by-key batch in order, from the registered models, refreshed",
    arguments: TestEngine.allCases)
  func modelsPage(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let writer = ModelContext(container)
    for index in 0..<1_203 {
      writer.insert(Note(key: String(format: "k%05d", index), text: "t\(index % 7)"))
    }
    try writer.save()
    let reader = ModelContext(container)
    // A model registered before the page, then changed by another context: the page gives
    // the registered instance with the stored text, as a fetch does.
    let registered = try #require(
      try reader.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.key == "k00002" })).first)
    let other = try #require(
      try writer.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.key == "k00002" })).first)
    other.text = "changed"
    try writer.save()
    for (offset, limit) in [(0, 1_100), (1, 3), (1_200, 10), (0, 0), (5_000, 2)] {
      var descriptor = FetchDescriptor<Note>(
        predicate: #Predicate { $0.key != "k00100" },
        sortBy: [SortDescriptor(\.text, order: .reverse), SortDescriptor(\.key)])
      descriptor.fetchOffset = offset
      descriptor.fetchLimit = limit
      let page = try reader.fetchModelsPage(descriptor)
      let expected = try ModelContext(container).fetch(descriptor)
      #expect(page.models.map(\.key) == expected.map(\.key), "\(offset) \(limit)")
      #expect(page.models.map(\.text) == expected.map(\.text))
      #expect(page.matched == 1_202)
      if let again = page.models.first(where: { $0.key == "k00002" }) {
        #expect(again === registered)
        #expect(registered.text == "changed")
      }
      // The page's read transaction is over: writers and the next read are not held.
      #expect(try reader.connection().isInTransaction == false)
    }
    // Inside a transaction the caller opened, the page reads in it and leaves it open.
    let connection = try reader.connection()
    try connection.beginReading()
    var inside = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)])
    inside.fetchLimit = 2
    #expect(try reader.fetchModelsPage(inside).models.map(\.key) == ["k00000", "k00001"])
    #expect(connection.isInTransaction)
    try connection.commit()
  }

  @Test("saves models and reads them back in a new container", arguments: TestEngine.allCases)
  func savesAndReopens(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    do {
      let context = ModelContext(try store.container(Note.self))
      context.insert(Note(key: "a", text: "first"))
      context.insert(Note(key: "b", text: "second", group: "g"))
      try context.save()
    }
    let context = ModelContext(try store.container(Note.self))
    let notes = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    #expect(notes.map(\.text) == ["first", "second"])
    let grouped = try context.fetch(
      FetchDescriptor<Note>(predicate: #Predicate { $0.group == "g" }))
    #expect(grouped.map(\.key) == ["b"])
    #expect(try context.fetchCount(FetchDescriptor<Note>()) == 2)
  }

  @Test(
    "saves only changes, upserts on a unique attribute, records history",
    arguments: TestEngine.allCases)
  func changesUpsertsHistory(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    context.author = "tester"
    let note = Note(key: "a", text: "x")
    context.insert(note)
    try context.save()
    note.text = "y"
    try context.save()
    context.insert(Note(key: "a", text: "z"))
    try context.save()
    let other = ModelContext(container)
    #expect(try other.fetch(FetchDescriptor<Note>()).map(\.text) == ["z"])
    let history = try other.fetchHistory()
    #expect(history.count == 3)
    #expect(history.map(\.author) == ["tester", "tester", "tester"])
    #expect(history.map { $0.changes.map(\.kind) } == [[.insert], [.update], [.update]])
    #expect(history[1].changes[0].updatedAttributeNames == ["text"])
    let tokens = history.map(\.token)
    #expect(zip(tokens, tokens.dropFirst()).allSatisfy { $0 < $1 })
    #expect(try other.fetchHistory(HistoryDescriptor(after: tokens[1])).map(\.token) == [tokens[2]])
  }

  @Test(
    "hundreds of new rows in one save, an upsert and a repeated unique value among them, mean what they mean one row at a time",
    arguments: TestEngine.allCases)
  func manyRowsInOneSave(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    context.author = "tester"
    context.insert(Note(key: "k1100", text: "stored"))
    try context.save()
    // More rows than two of PostgreSQL's batches (128): k1100 is stored already (an upsert),
    // and "twice" comes at 150 and 170 (the second merges into the row of the first); the
    // rows from 256 on are all new.
    var notes: [Note] = []
    for index in 0..<300 {
      let key: String = index == 150 || index == 170 ? "twice" : "k\(1000 + index)"
      notes.append(Note(key: key, text: "t\(index)"))
    }
    for note in notes { context.insert(note) }
    try context.save()
    let other = ModelContext(container)
    var stored = Dictionary(
      uniqueKeysWithValues: try other.fetch(FetchDescriptor<Note>()).map { ($0.key, $0.text) })
    #expect(stored.count == 299)
    #expect(stored["k1100"] == "t100")
    #expect(stored["twice"] == "t170")
    #expect(stored["k1299"] == "t299" && stored["k1000"] == "t0")
    let changes = try #require(try other.fetchHistory().last).changes
    #expect(
      changes.map(\.kind)
        == (0..<300).map { $0 == 100 || $0 == 170 ? HistoryChange.Kind.update : .insert })
    // Each model knows its row: a change to every one reaches the row it was saved to.
    for (index, note) in notes.enumerated() where index != 150 {
      note.text = "u\(index)"
    }
    try context.save()
    stored = Dictionary(
      uniqueKeysWithValues: try other.fetch(FetchDescriptor<Note>()).map { ($0.key, $0.text) })
    for (index, note) in notes.enumerated() where index != 150 {
      let text: String? = stored[note.key]
      #expect(text == "u\(index)", Comment(rawValue: note.key))
    }
    // Changes of different attributes, interleaved: each row gets its own, history too.
    for (index, note) in notes.enumerated() where index != 150 {
      if index % 3 == 0 { note.group = "g\(index)" } else { note.text = "v\(index)" }
    }
    try context.save()
    let rows = try other.fetch(FetchDescriptor<Note>())
    let byKey = Dictionary(uniqueKeysWithValues: rows.map { ($0.key, ($0.text, $0.group)) })
    for (index, note) in notes.enumerated() where index != 150 {
      let row = byKey[note.key]
      let expected = index % 3 == 0 ? ("u\(index)", "g\(index)") : ("v\(index)", "")
      #expect(row?.0 == expected.0 && row?.1 == expected.1, Comment(rawValue: note.key))
    }
    let updates = try #require(try other.fetchHistory().last).changes
    #expect(updates.count == 299)
    // (A save's changed rows come in the context's order, not the order they were changed.)
    let regrouped = notes.indices.filter { $0 != 150 && $0 % 3 == 0 }.count
    #expect(updates.filter { $0.updatedAttributeNames == ["grp"] }.count == regrouped)
    #expect(updates.filter { $0.updatedAttributeNames == ["text"] }.count == 299 - regrouped)
  }

  @Test(
    "rolls back, and a transaction block that throws leaves nothing", arguments: TestEngine.allCases
  )
  func rollback(engine: TestEngine) throws {
    struct Stop: Error {}
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    let kept = Note(key: "a", text: "x")
    context.insert(kept)
    try context.save()
    kept.text = "changed"
    context.insert(Note(key: "b", text: "new"))
    context.delete(kept)
    context.rollback()
    #expect(kept.text == "x")
    #expect(throws: Stop.self) {
      try context.transaction {
        context.insert(Note(key: "c", text: "y"))
        throw Stop()
      }
    }
    #expect(try ModelContext(container).fetch(FetchDescriptor<Note>()).map(\.key) == ["a"])
    #expect(try context.fetchHistory().count == 1)
  }

  @Test("deletes by predicate with tombstones; counts and pages", arguments: TestEngine.allCases)
  func deletesAndPages(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    for index in 0..<25 {
      context.insert(
        Note(
          key: String(format: "k%02d", index), text: "t",
          group: index.isMultiple(of: 2) ? "even" : "odd"))
    }
    try context.save()
    var descriptor = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key, order: .reverse)])
    descriptor.fetchLimit = 5
    descriptor.fetchOffset = 3
    #expect(try context.fetch(descriptor).map(\.key) == ["k21", "k20", "k19", "k18", "k17"])
    #expect(try context.fetchCount(descriptor) == 5)
    descriptor.fetchLimit = nil
    #expect(try context.fetchCount(descriptor) == 22)
    try context.delete(model: Note.self, where: #Predicate { $0.group == "even" })
    try context.save()
    #expect(try context.fetchCount(FetchDescriptor<Note>()) == 12)
    let deletes = try #require(try context.fetchHistory().last).changes
    #expect(deletes.count == 13 && deletes.allSatisfy { $0.kind == .delete })
    #expect(
      deletes.compactMap { $0.tombstone(as: Note.self)?[\.key] as? String }.sorted().first == "k00")
    try context.deleteHistory(before: try #require(try context.fetchHistory().last).token)
    #expect(try context.fetchHistory().count == 1)
  }

  @Test(
    "every attribute type round-trips, and a change of each is seen alone",
    arguments: TestEngine.allCases)
  func everyAttributeType(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Sample.self)
    let sample = Sample()
    sample.name = "Zürich e\u{301}"
    sample.note = "quote ' \" \\"
    sample.count = .max
    sample.small = .min
    sample.score = -0.1
    sample.rating = .greatestFiniteMagnitude
    sample.flag = true
    sample.maybe = false
    sample.when = Date(timeIntervalSinceReferenceDate: 1_234_567.890_123)
    sample.whenMaybe = Date(timeIntervalSince1970: 0)
    sample.blob = Data((0...255).map(UInt8.init))
    sample.ref = UUID()
    sample.place = PlaceToken(raw: "osm:node/1")
    let context = ModelContext(container)
    context.insert(sample)
    try context.save()
    let loaded = try #require(try ModelContext(container).fetch(FetchDescriptor<Sample>()).first)
    #expect(loaded.id == sample.id)
    #expect(loaded.name == "Zürich \u{e9}")  // stored NFC
    #expect(loaded.note == sample.note)
    #expect(loaded.count == .max && loaded.small == .min)
    #expect(loaded.score == -0.1 && loaded.rating == .greatestFiniteMagnitude)
    #expect(loaded.flag && loaded.maybe == false)
    #expect(loaded.when == sample.when && loaded.whenMaybe == sample.whenMaybe)
    #expect(loaded.blob == sample.blob && loaded.ref == sample.ref)
    #expect(loaded.place?.raw == "osm:node/1")
    let when = sample.when
    let found = try context.fetch(
      FetchDescriptor<Sample>(
        predicate: #Predicate { $0.flag && $0.when >= when && $0.count > 0 && $0.score < 0 }))
    #expect(found.count == 1)
    // Preserved values come back from a deletion's tombstone in their own types.
    context.delete(try #require(try context.fetch(FetchDescriptor<Sample>()).first))
    try context.save()
    let change = try #require(try context.fetchHistory().last?.changes.first)
    guard case .delete(let deleted as DefaultHistoryDelete<Sample>) = change else {
      Issue.record("not a delete of a Sample: \(change)")
      return
    }
    #expect(deleted.tombstone[\.id] as? UUID == sample.id)
    #expect(deleted.tombstone[\.name] as? String == "Zürich \u{e9}")
  }

  @Test("sections by key in code-point order", arguments: TestEngine.allCases)
  func sections(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    for (key, group) in [
      ("1", "b"), ("2", "B"), ("3", "a"), ("4", "b"), ("5", "é"), ("6", "e\u{301}"),
    ] {
      context.insert(Note(key: key, text: "", group: group))
    }
    try context.save()
    let sections = try ModelContext(container).fetch(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key, order: .reverse)]), sectionBy: \.group)
    #expect(sections.map(\.id) == ["B", "a", "b", "é"])
    #expect(sections.map { $0.map(\.key) } == [["2"], ["3"], ["4", "1"], ["6", "5"]])
  }

  @Test(
    "adds a new attribute in place; refuses a newer schema untouched",
    arguments: TestEngine.allCases)
  func migrates(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    do {
      let context = ModelContext(try store.container(Note.self))
      context.insert(Note(key: "a", text: "x"))
      try context.save()
    }
    do {
      let notes = try ModelContext(try store.container(NoteV2.self)).fetch(
        FetchDescriptor<NoteV2>())
      #expect(notes.map(\.priority) == [3])
    }
    #expect {
      _ = try store.container(Note.self)
    } throws: { error in
      (error as? PersistenceError)?.code == .newerStore
    }
  }

  @Test(
    "the schema check refuses alike on every engine: a missing table or column read-only, a column of another type; a refused store is left as it was",
    arguments: TestEngine.allCases)
  func schemaCheck(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    do {
      let context = ModelContext(try store.container(Note.self))
      context.insert(Note(key: "a", text: "x"))
      try context.save()
    }
    func refusal(_ open: () throws -> Void) -> PersistenceError? {
      do {
        try open()
        return nil
      } catch {
        return error as? PersistenceError
      }
    }
    // Read-only, a column to add is refused (nothing may be written), naming it.
    let missingColumn = refusal { _ = try store.container(NoteV2.self, allowsSave: false) }
    #expect(missingColumn?.code == .schemaMismatch)
    #expect(missingColumn?.message.contains("notes.priority") == true)
    // Read-only, a table to create is refused, naming it.
    let missingTable = refusal { _ = try store.container(Note.self, Board.self, allowsSave: false) }
    #expect(missingTable?.code == .schemaMismatch)
    #expect(missingTable?.message.contains("no table boards") == true)
    // Writable, the column is added; a program declaring it with another type is refused.
    _ = try store.container(NoteV2.self)
    let otherType = refusal { _ = try store.container(NoteV2Text.self) }
    #expect(otherType?.code == .schemaMismatch)
    #expect(otherType?.message.contains("notes.priority") == true)
    // Nothing was lost or changed by the refusals: the row is there, and still opens.
    let notes = try ModelContext(try store.container(NoteV2.self, allowsSave: false)).fetch(
      FetchDescriptor<NoteV2>())
    #expect(notes.map(\.key) == ["a"])
    #expect(notes.map(\.priority) == [3])
  }

  @Test(
    "Swift's own string functions give Swift's answers on every fetch path (narrowed in SQL and finished in Swift where the engine cannot run them)",
    arguments: TestEngine.allCases)
  func swiftFunctions(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let container = try store.container(Note.self)
    let context = ModelContext(container)
    let words = [
      "Zürich", "Zurich", "zurich", "Zoo 10", "Zoo 9", "Oslo", "ÖSLO", "e\u{301}clair", "Éclair",
    ]
    for (index, word) in words.enumerated() {
      context.insert(
        Note(key: String(format: "k%02d", index), text: word, group: index < 4 ? "a" : "b"))
    }
    try context.save()
    let all = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    let search = #Predicate<Note> { $0.text.localizedStandardContains("zur") || $0.text.count == 4 }
    let expected = all.filter { $0.text.localizedStandardContains("zur") || $0.text.count == 4 }
    var descriptor = FetchDescriptor<Note>(predicate: search, sortBy: [SortDescriptor(\.text)])
    descriptor.localizedStandardSorts = [\.text]
    let sorted = expected.sorted {
      let order = $0.text.localizedStandardCompare($1.text)
      return order == .orderedSame ? $0.key < $1.key : order == .orderedAscending
    }
    #expect(try context.fetch(descriptor).map(\.key) == sorted.map(\.key))
    #expect(try context.fetchCount(descriptor) == expected.count)
    var page = descriptor
    page.fetchOffset = 1
    page.fetchLimit = 2
    #expect(try context.fetch(page).map(\.key) == Array(sorted.dropFirst(1).prefix(2)).map(\.key))
    #expect(try context.fetchCount(page) == 2)
    let (identifiers, matched) = try context.fetchPage(page)
    #expect(identifiers.count == 2 && matched == expected.count)
    #expect(
      try context.fetchIdentifiers(page).map(\.primaryKey)
        == page.fetchLimit.map { _ in
          try context.fetch(page).compactMap { context.persistentIdentifier(for: $0)?.primaryKey }
        })
    let values = try context.fetchValues(descriptor, \.key, \.group)
    #expect(values.map(\.0) == sorted.map(\.key))
    let counts = try context.fetchCounts(FetchDescriptor(predicate: search), groupedBy: \.group)
    #expect(counts.map(\.value) == Array(Set(expected.map(\.group))).sorted())
    #expect(counts.map(\.count).reduce(0, +) == expected.count)
    let sections = try context.fetch(descriptor, sectionBy: \.group)
    #expect(sections.flatMap { $0.map(\.key) }.count == expected.count)
    #expect(sections.map(\.id) == Array(Set(expected.map(\.group))).sorted())
    var enumerated: [String] = []
    try context.enumerate(descriptor, batchSize: 2) { enumerated.append($0.key) }
    #expect(enumerated == sorted.map(\.key))
    try context.delete(model: Note.self, where: search)
    try context.save()
    #expect(
      try ModelContext(container).fetchCount(FetchDescriptor<Note>()) == words.count
        - expected.count)
  }

  /// `fetchCount` and `fetch` of a predicate whose shape (and, for a fetch, order and window)
  /// ran before bind the new values to the statement the context kept for it
  /// (`ModelContext.keptQueries`); whether a value is nil changes the SQL (`IS NULL`), and a
  /// narrowed, combined or localized query takes the general path. Every count and every
  /// fetch, in order, must still be Swift's.
  @Test(
    "counts and fetches of a predicate shape run before reuse its statement with their own values",
    arguments: TestEngine.allCases)
  func keptQueries(engine: TestEngine) throws {
    let container = try engineContainer(engine, NoteV2.self)
    let context = ModelContext(container)
    let tags: [String?] = [nil, "a", "b", "a", nil, "c", "Zürich"]
    for index in 0..<40 {
      let note = NoteV2()
      note.key = String(format: "k%02d", index)
      note.text = index.isMultiple(of: 3) ? "zurich \(index)" : "oslo"
      note.group = "g\(index % 4)"
      note.priority = index % 5
      note.tag = tags[index % tags.count]
      context.insert(note)
    }
    try context.save()
    let all = try context.fetch(FetchDescriptor<NoteV2>())  // in insertion (key) order
    let orders: [[SortDescriptor<NoteV2>]] = [
      [], [SortDescriptor(\.priority, order: .reverse), SortDescriptor(\.key)],
      [SortDescriptor(\.key, order: .reverse)], [SortDescriptor(\.text)],
    ]
    func check(
      _ predicate: Predicate<NoteV2>, _ change: (inout FetchDescriptor<NoteV2>) -> Void = { _ in }
    ) throws {
      for (index, order) in orders.enumerated() {
        var descriptor = FetchDescriptor(predicate: predicate, sortBy: order)
        change(&descriptor)
        if index == 3 { descriptor.localizedStandardSorts = [\.text] }
        let matching = try all.enumerated().filter { try descriptor.matches($0.element) }
        let sorted = matching.sorted { a, b in
          for sort in descriptor.sortBy {
            if index == 3 {
              let result = a.element.text.localizedStandardCompare(b.element.text)
              if result != .orderedSame { return result == .orderedAscending }
              continue
            }
            let result = sort.compare(a.element, b.element)
            if result != .orderedSame { return result == .orderedAscending }
          }
          return a.offset < b.offset
        }
        let expected = sorted.dropFirst(descriptor.fetchOffset ?? 0).prefix(
          descriptor.fetchLimit ?? .max
        ).map(\.element.key)
        #expect(try context.fetchCount(descriptor) == expected.count)
        #expect(try context.fetch(descriptor).map(\.key) == Array(expected))
      }
    }
    for round in 0..<3 {
      for group in ["g0", "g1", "g3", "none", "g\(round)"] {
        try check(#Predicate { $0.group == group })
      }
      for priority in [0, 2, 4, 5] {
        let group = "g\(round + 1)"
        try check(#Predicate { $0.priority >= priority && $0.group != group })
      }
      // nil and not nil alternate: `IS NULL` has no parameter, `= ?` has one.
      for tag in [nil, "a", nil, "Zürich", "b", nil] as [String?] {
        try check(#Predicate { $0.tag == tag })
      }
      for word in ["ZUR", "osl", "\(round)"] {
        try check(#Predicate { $0.text.localizedStandardContains(word) })
      }
      let group = "g\(round)"
      try check(#Predicate { $0.group != group }) { $0.fetchLimit = 7 - round }
      try check(#Predicate { $0.group != group }) { $0.fetchOffset = 25 + round }
      try check(#Predicate { $0.group != group }) { descriptor in
        descriptor.fetchLimit = 3
        descriptor.fetchOffset = round
      }
      try check(#Predicate { $0.group != group }) { descriptor in
        descriptor.conditions = [#Predicate { $0.priority < 3 }]
      }
    }
    // A shape run again with other values reuses what it kept: the count and the fetches in
    // the three orders that are kept (the localized one is built each time) add nothing.
    func byGroup(_ group: String) -> Predicate<NoteV2> { #Predicate { $0.group == group } }
    context.keptQueries = [:]
    try check(byGroup("g1"))
    #expect(context.keptQueries.count == 4)
    for group in ["g2", "g3", "none"] { try check(byGroup(group)) }
    #expect(context.keptQueries.count == 4)
    #expect(context.keptQueries.count <= ModelContext.keptQueryCapacity)
  }
}

/// Observers on every engine.
@Suite("Every engine: observers")
struct EngineObserverTests {
  @Test(
    "a ResultsObserver follows another container's saves, a Swift-only predicate and sort included",
    arguments: TestEngine.allCases)
  func resultsObserverAcrossContainers(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let writer = ModelContext(try store.container(Note.self))
    writer.insert(Note(key: "1", text: "Zürich"))
    writer.insert(Note(key: "2", text: "Oslo"))
    try writer.save()
    // Another container, as another server would have.
    let context = ModelContext(try store.container(Note.self))
    var descriptor = FetchDescriptor<Note>(
      predicate: #Predicate { $0.text.localizedStandardContains("zur") },
      sortBy: [SortDescriptor(\.text)])
    descriptor.localizedStandardSorts = [\.text]
    let observer = try ResultsObserver(descriptor, modelContext: context)
    #expect(observer.results.map(\.key) == ["1"])
    writer.insert(Note(key: "3", text: "zurich"))
    writer.insert(Note(key: "4", text: "Bergen"))
    try writer.save()
    #expect(eventually(10) { observer.results.map(\.key) == ["3", "1"] })
    let zurich = try #require(
      try writer.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.key == "1" })).first)
    zurich.text = "Zug"
    try writer.save()
    #expect(eventually(10) { observer.results.map(\.key) == ["3"] })
    #expect(observer.lastError == nil)
  }
}

extension EngineObserverTests {
  @Test(
    "a HistoryObserver counts another container's transactions by author and model type",
    arguments: TestEngine.allCases)
  func historyObserverAcrossContainers(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let observed = try store.container(Note.self, Sample.self)
    let observer = try HistoryObserver(
      container: observed, authors: ["App"], modelTypes: [Note.self])
    let writer = ModelContext(try store.container(Note.self, Sample.self))
    writer.author = "Server"
    writer.insert(Note(key: "s", text: ""))
    try writer.save()
    writer.author = "App"
    writer.insert(Sample())
    try writer.save()
    writer.insert(Note(key: "a", text: ""))
    try writer.save()
    writer.insert(Note(key: "b", text: ""))
    try writer.save()
    #expect(eventually(10) { observer.eventCounter == 2 })
    Thread.sleep(forTimeInterval: 0.3)
    #expect(observer.eventCounter == 2)
  }
}

/// History on a store several processes write at once.
@Suite("Every engine: concurrent writers")
struct ConcurrentWriterTests {
  @Test(
    "a reader following history after its last token gets every writer's commit, each once",
    arguments: TestEngine.allCases)
  func historyNeverSkipsACommit(engine: TestEngine) throws {
    let store = try engine.makeStore()
    defer { withExtendedLifetime(store) {} }
    let writers = 3
    let saves = 60
    // Each writer is a container of its own, as another server would be.
    let containers = try (0..<writers).map { _ in try store.container(Note.self) }
    let reader = ModelContext(try store.container(Note.self))
    let failures = Mutex<[String]>([])
    let group = DispatchGroup()
    for (index, container) in containers.enumerated() {
      DispatchQueue.global().async(group: group) {
        let context = ModelContext(container)
        context.author = "writer\(index)"
        for save in 0..<saves {
          context.insert(Note(key: "\(index)-\(save)", text: "t"))
          do { try context.save() } catch {
            failures.withLock { $0.append("\(error)") }
          }
        }
      }
    }
    var seen: [DefaultHistoryToken] = []
    var last: DefaultHistoryToken?
    func follow() throws {
      let transactions = try reader.fetchHistory(HistoryDescriptor(after: last))
      seen += transactions.map(\.token)
      last = transactions.last?.token ?? last
    }
    while group.wait(timeout: .now() + .milliseconds(2)) == .timedOut { try follow() }
    try follow()
    #expect(failures.withLock { $0 } == [])
    #expect(seen.count == writers * saves)
    #expect(Set(seen).count == seen.count)
    #expect(try reader.fetchCount(FetchDescriptor<Note>()) == writers * saves)
  }
}

/// Runs `sql` on a connection of `container`'s, as an outside writer would (for tests that use
/// the library as users do, without `@testable`).
func executeOutside(_ container: ModelContainer, _ sql: String) throws {
  try ModelContext(container).connection().execute(sql)
}
