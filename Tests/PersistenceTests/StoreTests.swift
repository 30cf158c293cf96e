import Dispatch
import Foundation
import Observation
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

@Suite("Store and context")
struct StoreTests {
  @Test(
    "ModelConfiguration() is SwiftData's persistent default store (default.store in the user's data folder), in memory only when asked; several different configurations are an error, one given twice is that one"
  )
  func defaultConfiguration() throws {
    #expect(!ModelConfiguration().isStoredInMemoryOnly)
    #expect(ModelConfiguration().url == ModelConfiguration.defaultStoreURL())
    #expect(
      ModelConfiguration.defaultStoreURL(environment: ["XDG_DATA_HOME": "/data"]).path
        == "/data/default.store")
    #expect(ModelConfiguration(isStoredInMemoryOnly: true).isStoredInMemoryOnly)
    let file = ModelConfiguration(
      url: FileManager.default.temporaryDirectory.appendingPathComponent("\(UUID()).sqlite"))
    #expect(throws: PersistenceError.self) {
      _ = try ModelContainer(
        for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true), file)
    }
    let memory = ModelConfiguration(isStoredInMemoryOnly: true)
    let container = try ModelContainer(for: Note.self, configurations: memory, memory)
    #expect(container.configuration.isStoredInMemoryOnly)
  }

  @Test(
    "Xcode's template compiles and runs: Schema([Model.self]), ModelConfiguration(schema:isStoredInMemoryOnly:), ModelContainer(for: schema, configurations: [configuration]); the container's schema lists what its relationships reach"
  )
  func template() throws {
    // As the template writes it (in memory: a test writes no default.store).
    let schema = Schema([SampleTrip.self])
    let modelConfiguration = ModelConfiguration(schema: schema, isStoredInMemoryOnly: true)
    let container = try ModelContainer(for: schema, configurations: [modelConfiguration])
    let context = ModelContext(container)
    context.insert(SampleTrip(name: "Kyoto", destination: "Japan", startDate: .now, endDate: .now))
    try context.save()
    #expect(try context.fetchCount(FetchDescriptor<SampleTrip>()) == 1)
    #expect(
      container.schema
        == Schema([SampleTrip.self, SampleBucketListItem.self, SampleLivingAccommodation.self]))
    #expect(container.schema.entityNames == container.entityNames)
    #expect(container.schema.version == Schema.Version(1, 0, 0))
    #expect(container.configurations == [modelConfiguration])
    // The variadic form, a version, a file named by url, and a configuration's own schema.
    let directory = TemporaryDirectory()
    let url = directory.file("template.store")
    let versioned = try ModelContainer(
      for: Schema([Note.self], version: Schema.Version(2, 1, 0)),
      configurations: ModelConfiguration(schema: Schema([SampleTrip.self]), url: url))
    #expect(versioned.schema.version.description == "2.1.0")
    #expect(versioned.schema.entityNames.count == 4)
    #expect(versioned.configuration.url == url && versioned.configuration.name == "default")
    // SwiftData's in-memory URL opens a store in memory.
    let null = ModelContext(
      try ModelContainer(
        for: Note.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: "/dev/null"))
      ))
    null.insert(Note(key: "n", text: "in memory"))
    try null.save()
    #expect(try null.fetchCount(FetchDescriptor<Note>()) == 1)
    // Versions order by major, minor, then patch.
    #expect(Schema.Version(1, 10, 0) > Schema.Version(1, 9, 9))
    #expect(Schema.Version(2, 0, 0) > Schema.Version(1, 99, 99))
    #expect(Schema([Note.self, Note.self]) == Schema([Note.self]))
    #expect(Schema([Note.self]) != Schema([Note.self], version: Schema.Version(1, 0, 1)))
  }

  @Test(
    "a named configuration is <name>.store in the user's data folder, never another folder; group and CloudKit arguments compile and change nothing"
  )
  func namedConfiguration() {
    let journal = ModelConfiguration("journal")
    #expect(journal.name == "journal" && !journal.isStoredInMemoryOnly)
    #expect(
      journal.url
        == ModelConfiguration.dataFolder().appendingPathComponent("journal.store"))
    let sneaky = ModelConfiguration("../../etc/passwd")
    #expect(sneaky.url.deletingLastPathComponent() == ModelConfiguration.dataFolder())
    #expect(sneaky.url.lastPathComponent == ".._.._etc_passwd.store")
    let apple = ModelConfiguration(
      isStoredInMemoryOnly: true, allowsSave: false, groupContainer: .identifier("group.trips"),
      cloudKitDatabase: .private("iCloud.trips"))
    #expect(apple.isStoredInMemoryOnly && !apple.allowsSave && apple.name == "default")
    // In memory, the url is SwiftData's /dev/null; no engine opens it.
    #expect(apple.url.path == "/dev/null" && apple.storeURL == nil)
    #expect(journal.storeURL == journal.url)
    // /dev/null given as a URL is a store in memory, as in SwiftData: a container opens and
    // saves in memory, never /dev/null as a file.
    let null = ModelConfiguration(url: URL(fileURLWithPath: "/dev/null"))
    #expect(null.isStoredInMemoryOnly && null.storeURL == nil)
    #expect(null == ModelConfiguration(isStoredInMemoryOnly: true))
    #expect(ModelConfiguration().name == "default")
  }

  @Test(
    "what a configuration cannot be is refused clearly: read-only in memory; a relative XDG_DATA_HOME is ignored; an empty name is the default; an unwritten store is removed only when it is a regular file"
  )
  func configurationEdges() throws {
    let error = #expect(throws: PersistenceError.self) {
      _ = try ModelContainer(
        for: Schema([Note.self]),
        configurations: [ModelConfiguration(isStoredInMemoryOnly: true, allowsSave: false)])
    }
    #expect(error?.code == .cannotOpen)
    #expect(error?.message.contains("cannot be opened read-only") == true)
    #expect(
      ModelConfiguration.dataFolder(environment: ["XDG_DATA_HOME": "relative", "HOME": "/home/u"])
        .path == "/home/u/.local/share")
    #expect(ModelConfiguration("").name == "default")
    #expect(ModelConfiguration("").url.lastPathComponent == "default.store")
    // A FIFO (as a device would) reads as an empty database: it is never unlinked.
    let directory = TemporaryDirectory()
    let fifo = directory.file("pipe.store")
    #expect(mkfifo(fifo.path, 0o600) == 0)
    #expect(!SQLiteEngine().removeStoreIfUnwritten(ModelConfiguration(url: fifo)))
    #expect(FileManager.default.fileExists(atPath: fifo.path))
    #expect(
      !SQLiteEngine().removeStoreIfUnwritten(
        ModelConfiguration(url: URL(fileURLWithPath: "/dev/null"))))
    #expect(FileManager.default.fileExists(atPath: "/dev/null"))
  }

  @Test("saves models to a file and reads them back in a new container")
  func savesAndReopens() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    do {
      let container = try ModelContainer(for: Note.self, configurations: .init(url: url))
      let context = ModelContext(container)
      context.insert(Note(key: "a", text: "first"))
      context.insert(Note(key: "b", text: "second"))
      #expect(context.hasChanges)
      try context.save()
      #expect(!context.hasChanges)
    }
    let container = try ModelContainer(for: Note.self, configurations: .init(url: url))
    let notes = try ModelContext(container).fetch(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    #expect(notes.map(\.text) == ["first", "second"])
  }

  @Test("keeps one instance per row", arguments: TestEngine.allCases)
  func identityMap(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    let note = Note(key: "a", text: "x")
    context.insert(note)
    try context.save()
    let first = try context.fetch(FetchDescriptor<Note>())
    let second = try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.key == "a" }))
    #expect(first.count == 1 && second.count == 1)
    #expect(first[0] === note && second[0] === note)
    let identifier = try #require(context.persistentIdentifier(for: note))
    #expect(try context.model(for: identifier, as: Note.self) === note)
  }

  @Test("detects property changes and saves only them", arguments: TestEngine.allCases)
  func savesChanges(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    let note = Note(key: "a", text: "x")
    context.insert(note)
    try context.save()
    note.text = "y"
    #expect(context.hasChanges)
    try context.save()
    let other = ModelContext(container)
    #expect(try other.fetch(FetchDescriptor<Note>()).map(\.text) == ["y"])
    let history = try other.fetchHistory()
    #expect(history.count == 2)
    #expect(history[1].changes.map(\.kind) == [.update])
    #expect(history[1].changes[0].updatedAttributeNames == ["text"])
  }

  @Test("upserts on a unique attribute", arguments: TestEngine.allCases)
  func upserts(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    context.insert(Note(key: "a", text: "old", group: "g"))
    try context.save()
    let replacement = Note(key: "a", text: "new", group: "g")
    context.insert(replacement)
    try context.save()
    let notes = try ModelContext(container).fetch(FetchDescriptor<Note>())
    #expect(notes.map(\.text) == ["new"])
    #expect(try context.fetch(FetchDescriptor<Note>()).first === replacement)
    let last = try #require(try context.fetchHistory().last)
    #expect(last.changes.map(\.kind) == [.update])
    #expect(last.changes[0].updatedAttributeNames == ["text"])
  }

  @Test("rolls back inserts, deletes and changes", arguments: TestEngine.allCases)
  func rollsBack(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    let kept = Note(key: "a", text: "x")
    context.insert(kept)
    try context.save()
    kept.text = "changed"
    context.insert(Note(key: "b", text: "new"))
    context.delete(kept)
    context.rollback()
    #expect(!context.hasChanges)
    #expect(kept.text == "x")
    try context.save()
    #expect(try context.fetch(FetchDescriptor<Note>()).map(\.key) == ["a"])
    #expect(try context.fetchHistory().count == 1)
  }

  @Test("transaction saves, and rolls back when the block throws", arguments: TestEngine.allCases)
  func transactionBlock(engine: TestEngine) throws {
    struct Stop: Error {}
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    try context.transaction { context.insert(Note(key: "a", text: "x")) }
    #expect(try context.fetchCount(FetchDescriptor<Note>()) == 1)
    #expect(throws: Stop.self) {
      try context.transaction {
        context.insert(Note(key: "b", text: "y"))
        throw Stop()
      }
    }
    #expect(!context.hasChanges)
    #expect(try context.fetchCount(FetchDescriptor<Note>()) == 1)
  }

  @Test(
    "deletes by predicate without loading, recording tombstones", arguments: TestEngine.allCases)
  func deletesByPredicate(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    for index in 0..<10 {
      context.insert(
        Note(key: "k\(index)", text: "t", group: index.isMultiple(of: 2) ? "even" : "odd"))
    }
    try context.save()
    let reader = ModelContext(container)
    try reader.delete(model: Note.self, where: #Predicate { $0.group == "even" })
    #expect(reader.hasChanges)
    try reader.save()
    #expect(try reader.fetchCount(FetchDescriptor<Note>()) == 5)
    let deletes = try #require(try reader.fetchHistory().last).changes
    #expect(deletes.count == 5 && deletes.allSatisfy { $0.kind == .delete })
    #expect(
      Set(deletes.compactMap { $0.tombstone(as: Note.self)?[\.key] as? String }) == [
        "k0", "k2", "k4", "k6", "k8",
      ])
  }

  @Test("counts, pages and lists identifiers in SQL", arguments: TestEngine.allCases)
  func countsAndPages(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    for index in 0..<25 { context.insert(Note(key: String(format: "k%02d", index), text: "")) }
    try context.save()
    var descriptor = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key, order: .reverse)])
    descriptor.fetchLimit = 5
    descriptor.fetchOffset = 3
    #expect(try context.fetch(descriptor).map(\.key) == ["k21", "k20", "k19", "k18", "k17"])
    #expect(try context.fetchCount(descriptor) == 5)
    #expect(try context.fetchCount(FetchDescriptor<Note>()) == 25)
    #expect(try context.fetchIdentifiers(descriptor).map(\.primaryKey) == [22, 21, 20, 19, 18])
  }

  @Test("enumerates in batches and releases unchanged models", arguments: TestEngine.allCases)
  func enumeratesInBatches(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let writer = ModelContext(container)
    for index in 0..<1000 { writer.insert(Note(key: "k\(index)", text: "")) }
    try writer.save()
    let context = ModelContext(container)
    var seen = 0
    var maximumRegistered = 0
    try context.enumerate(FetchDescriptor<Note>(), batchSize: 100) { note in
      seen += 1
      if note.key == "k5" { note.text = "changed" }
      maximumRegistered = max(maximumRegistered, context.registeredCount)
    }
    #expect(seen == 1000)
    #expect(maximumRegistered <= 101)
    #expect(context.registeredCount == 1)
    try context.save()
    #expect(
      try writer.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.text == "changed" })).count
        == 1)
  }

  @Test("adds a new attribute to an existing store in place")
  func migratesAddedAttribute() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    do {
      let context = ModelContext(
        try ModelContainer(for: Note.self, configurations: .init(url: url)))
      context.insert(Note(key: "a", text: "old row"))
      try context.save()
    }
    let container = try ModelContainer(for: NoteV2.self, configurations: .init(url: url))
    let notes = try ModelContext(container).fetch(FetchDescriptor<NoteV2>())
    #expect(notes.count == 1)
    #expect(notes[0].priority == 3)
    #expect(notes[0].tag == nil)
    #expect(notes[0].text == "old row")
  }

  @Test("refuses a store written by a newer schema and leaves it untouched")
  func refusesNewerSchema() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    do {
      let context = ModelContext(
        try ModelContainer(for: NoteV2.self, configurations: .init(url: url)))
      context.insert(NoteV2())
      try context.save()
    }
    let before = try Data(contentsOf: url)
    let error = try #require(throws: PersistenceError.self) {
      try ModelContainer(for: Note.self, configurations: .init(url: url))
    }
    #expect(error.code == .newerStore)
    #expect(error.message.contains("priority"))
    #expect(error.message.contains("or by another model whose table has this name"))
    #expect(try Data(contentsOf: url) == before)
  }

  @Test("refuses a store from a newer library version")
  func refusesNewerFormat() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    _ = try ModelContainer(for: Note.self, configurations: .init(url: url))
    let database = try Database(path: url.path, flags: 2)
    try database.execute("PRAGMA user_version = 99")
    let before = try Data(contentsOf: url)
    let error = try #require(throws: PersistenceError.self) {
      try ModelContainer(for: Note.self, configurations: .init(url: url))
    }
    #expect(error.code == .newerStore)
    #expect(try Data(contentsOf: url) == before)
  }

  @Test(
    "refuses files that are not stores and leaves them untouched",
    arguments: ["random", "text", "foreign-sqlite", "truncated"])
  func refusesForeignFiles(kind: String) throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    switch kind {
    case "random":
      var generator = SeededGenerator(seed: 7)
      try Data((0..<8192).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: url)
    case "text":
      try Data("name,destination\nParis,France\n".utf8).write(to: url)
    case "foreign-sqlite":
      let database = try Database(path: url.path, flags: 2 | 4)
      try database.execute("CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('x')")
    default:
      do {
        let context = ModelContext(
          try ModelContainer(for: Note.self, configurations: .init(url: url)))
        for index in 0..<500 {
          context.insert(Note(key: "k\(index)", text: String(repeating: "x", count: 200)))
        }
        try context.save()
      }
      let whole = try Data(contentsOf: url)
      try whole.prefix(whole.count / 3).write(to: url)
    }
    let before = try Data(contentsOf: url)
    let error = try #require(throws: PersistenceError.self) {
      let container = try ModelContainer(for: Note.self, configurations: .init(url: url))
      _ = try ModelContext(container).fetch(FetchDescriptor<Note>())
    }
    #expect(error.code == .notAStore)
    #expect(try Data(contentsOf: url) == before)
  }

  @Test(
    "fetchPage agrees with an ordered fetch and a count for every sort, direction, offset and limit"
  )
  func fetchPageAgrees() throws {
    let container = try ModelContainer(
      for: Sample.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    var generator = SeededGenerator(seed: 7)
    let names = ["", "a", "B", "b", "é", "e\u{301}", "zz", "Ω", "a\u{0}b"]
    for _ in 0..<400 {
      let sample = Sample()
      sample.name = names.randomElement(using: &generator)!
      sample.note = Bool.random(using: &generator) ? nil : names.randomElement(using: &generator)
      sample.count = Int.random(in: -3...3, using: &generator)
      sample.score = [-1.5, 0, 0.25, 2, 1e300].randomElement(using: &generator)!
      sample.rating =
        Bool.random(using: &generator) ? nil : Double(Int.random(in: 0...4, using: &generator))
      sample.blob = Data([UInt8.random(in: 0...2, using: &generator)])
      sample.when = Date(timeIntervalSince1970: Double(Int.random(in: 0...5, using: &generator)))
      context.insert(sample)
    }
    try context.save()
    let sorts: [[SortDescriptor<Sample>]] = [
      [], [SortDescriptor(\.name)], [SortDescriptor(\.note, order: .reverse)],
      [SortDescriptor(\.score), SortDescriptor(\.name, order: .reverse)],
      [SortDescriptor(\.rating), SortDescriptor(\.count)],
      [SortDescriptor(\.when, order: .reverse)],
      [SortDescriptor(\.small), SortDescriptor(\.note), SortDescriptor(\.count, order: .reverse)],
      [SortDescriptor(\.name, comparator: .lexical)],
    ]
    let predicates: [Predicate<Sample>?] = [
      nil, #Predicate { $0.count >= 0 }, #Predicate { $0.count > 9 },
    ]
    var checked = 0
    for sort in sorts {
      for predicate in predicates {
        for (offset, limit) in [(0, 1), (0, 10), (5, 7), (0, 0), (390, 50), (1000, 5), (3, 400)] {
          var descriptor = FetchDescriptor<Sample>(predicate: predicate, sortBy: sort)
          descriptor.fetchOffset = offset
          descriptor.fetchLimit = limit
          let reader = ModelContext(container)
          let page = try reader.fetchPage(descriptor)
          var unpaged = descriptor
          unpaged.fetchOffset = nil
          unpaged.fetchLimit = nil
          #expect(
            page.identifiers == (try reader.fetchIdentifiers(descriptor)),
            "\(sort) \(offset) \(limit)")
          #expect(page.matched == (try reader.fetchCount(unpaged)))
          let modelsContext = ModelContext(container)
          let models = try modelsContext.fetchModelsPage(descriptor)
          #expect(
            models.models.map { modelsContext.persistentIdentifier(for: $0) }
              == page.identifiers.map { Optional($0) })
          #expect(models.matched == page.matched)
          checked += 1
        }
      }
    }
    #expect(checked == 168)
    // A sort by an opaque .codable value is refused as the SQL path refuses it.
    var opaque = FetchDescriptor<Sample>(sortBy: [SortDescriptor(\.place?.raw)])
    opaque.fetchLimit = 3
    #expect(throws: PersistenceError.self) { try context.fetchPage(opaque) }
  }

  @Test(
    "a stored value of the wrong storage class is an error naming the row and the column; an integer in a REAL column reads as a number"
  )
  func wrongStorageClass() throws {
    let folder = TemporaryDirectory()
    let url = folder.url.appendingPathComponent("classes.sqlite")
    let container = try ModelContainer(
      for: Sample.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(container)
    for index in 0..<3 {
      let sample = Sample()
      sample.count = index
      sample.score = 1.5
      context.insert(sample)
    }
    try context.save()
    let outside = try Database(path: url.path, flags: 2)
    try outside.execute("UPDATE samples SET score = 7 WHERE _pk = 1")  // stored as an integer
    for (assignment, column) in [
      ("count = 'abc'", "count"), ("count = 2.5", "count"), ("score = 'x'", "score"),
      ("flag = 'yes'", "flag"), ("name = x'01'", "name"), ("blob = 'text'", "blob"),
      ("\"when\" = 'soon'", "when"), ("rating = 'high'", "rating"),
    ] {
      try outside.execute("UPDATE samples SET \(assignment) WHERE _pk = 2")
      let reader = ModelContext(container)
      let error = try #require(throws: PersistenceError.self) {
        try reader.fetch(FetchDescriptor<Sample>())
      }
      #expect(error.code == .invalidValue, "\(assignment)")
      #expect(error.attribute == column, "\(assignment): \(error)")
      #expect(error.row != nil, "\(assignment)")
      #expect(try reader.validateStoredRows(of: Sample.self).count == 1, "\(assignment)")
      try outside.execute(
        "UPDATE samples SET count = 1, score = 1.5, flag = 0, name = '', blob = x'', \"when\" = 0, rating = NULL WHERE _pk = 2"
      )
    }
    let scores = try ModelContext(container).fetch(
      FetchDescriptor<Sample>(sortBy: [SortDescriptor(\.count)])
    ).map(\.score)
    #expect(scores == [7, 1.5, 1.5])
  }

  @Test(
    "enumerateValues reads what models hold, all or by identifier; bad columns and bad bytes are errors naming the attribute"
  )
  func enumerateValues() throws {
    let folder = TemporaryDirectory()
    let url = folder.url.appendingPathComponent("values.sqlite")
    let container = try ModelContainer(
      for: Sample.self, Note.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(container)
    for index in 0..<5 {
      let sample = Sample()
      sample.name = "n\(index)"
      sample.score = Double(index) / 2
      sample.place = index % 2 == 0 ? PlaceToken(raw: "p\(index)") : nil
      context.insert(sample)
    }
    try context.save()
    let models = try context.fetch(FetchDescriptor<Sample>(sortBy: [SortDescriptor(\.name)]))
    let keyPaths: [PartialKeyPath<Sample> & Sendable] = [\.name, \.score, \.place]
    var read: [(PersistentIdentifier, String, Double, String?)] = []
    try context.enumerateValues(
      FetchDescriptor<Sample>(sortBy: [SortDescriptor(\.name)]), keyPaths
    ) { row in
      read.append(
        (
          row.identifier, try row.value(String.self, at: 0), try row.value(Double.self, at: 1),
          try row.decoded(PlaceToken.self, at: 2)?.raw
        ))
    }
    #expect(read.map(\.0) == models.map { context.persistentIdentifier(for: $0)! })
    #expect(read.map(\.1) == models.map(\.name))
    #expect(read.map(\.2) == models.map(\.score))
    #expect(read.map(\.3) == models.map { $0.place?.raw })
    // By identifier: a deleted row, another entity's and another store's identifiers are left out.
    let wanted = [read[3].0, read[1].0]
    context.delete(models[1])
    try context.save()
    var foreign = read[0].0
    foreign.storeIdentifier = UUID()
    var other = read[0].0
    other.entityName = Note.schema.name
    var names: [String] = []
    try context.enumerateValues(
      FetchDescriptor<Sample>(), keyPaths, identifiers: wanted + [foreign, other]
    ) { names.append(try $0.value(String.self, at: 0)) }
    #expect(names == ["n3"])
    #expect(
      try context.models(for: wanted + [foreign, other], as: Sample.self).map(\.name) == ["n3"])
    // A key path that is not a stored attribute.
    #expect(throws: PersistenceError.self) {
      try context.enumerateValues(FetchDescriptor<Sample>(), [\Sample.self]) { _ in }
    }
    // Text in a REAL column, and bytes that are not an encoding, from an outside writer.
    let outside = try Database(path: url.path, flags: 2)
    for (assignment, attribute) in [("score = 'x'", "score"), ("place = x'00ff'", "place")] {
      try outside.execute("UPDATE samples SET \(assignment) WHERE name = 'n4'")
      let error = try #require(throws: PersistenceError.self) {
        try context.enumerateValues(FetchDescriptor<Sample>(), keyPaths) { row in
          _ = try row.value(Double.self, at: 1)
          _ = try row.decoded(PlaceToken.self, at: 2)
        }
      }
      #expect(error.code == .invalidValue && error.attribute == attribute, "\(error)")
      #expect(error.row == "samples row 5", "\(error)")
      try outside.execute("UPDATE samples SET score = 1, place = NULL WHERE name = 'n4'")
    }
  }

  @Test(
    "localizedStandardSorts: SQL and an observer's Swift patches give the order of localizedStandardCompare"
  )
  func localizedStandardSorts() throws {
    let container = try ModelContainer(
      for: Sample.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    var generator = SeededGenerator(seed: 3)
    let words = [
      "zebra", "Zürich", "Zurich", "zurich", "apple", "Ábaco", "abaco", "Zoo 10", "Zoo 9", "Zoo 09",
      "eclair", "Éclair", "e\u{301}clair", "Ω", "omega", "", "10", "9",
    ]
    func add() {
      let sample = Sample()
      sample.name = words.randomElement(using: &generator)!
      sample.count = Int.random(in: 0...3, using: &generator)
      context.insert(sample)
    }
    for _ in 0..<60 { add() }
    try context.save()
    for order in [SortOrder.forward, .reverse] {
      var descriptor = FetchDescriptor<Sample>(
        sortBy: [SortDescriptor(\.name, order: order), SortDescriptor(\.count)])
      descriptor.localizedStandardSorts = [\.name]
      let observer = try ResultsObserver(descriptor, container: container)
      let fetched = try ModelContext(container).fetch(descriptor).map(\.name)
      // SQL's order is localizedStandardCompare's (ties to the next sort), not code point's.
      for (earlier, later) in zip(fetched, fetched.dropFirst()) {
        let compared = earlier.localizedStandardCompare(later)
        #expect(compared != (order == .forward ? .orderedDescending : .orderedAscending))
      }
      #expect(fetched != fetched.sorted(), "not code-point order")
      // Changes patched in Swift land where a fresh SQL fetch puts them.
      for _ in 0..<30 { add() }
      let renamed = try context.fetch(FetchDescriptor<Sample>()).prefix(10)
      for sample in renamed { sample.name = words.randomElement(using: &generator)! }
      try context.save()
      observer.waitForPendingUpdates()
      let fresh = try ModelContext(container).fetch(descriptor)
      #expect(observer.results.map(\.id) == fresh.map(\.id), "\(order)")
    }
  }

  @Test(
    "fetchValues reads two columns in the descriptor's order, without registering models",
    arguments: TestEngine.allCases)
  func fetchValues(engine: TestEngine) throws {
    let container = try engineContainer(engine, Sample.self)
    let context = ModelContext(container)
    for (index, name) in ["delta", "alpha", "charlie", "bravo"].enumerated() {
      let sample = Sample()
      sample.name = name
      sample.count = index
      sample.rating = index == 2 ? nil : Double(index) / 2
      context.insert(sample)
    }
    try context.save()
    let reader = ModelContext(container)
    var descriptor = FetchDescriptor<Sample>(
      predicate: #Predicate { $0.count > 0 }, sortBy: [SortDescriptor(\.name)])
    descriptor.fetchLimit = 2
    let values = try reader.fetchValues(descriptor, \.name, \.rating)
    #expect(values.map(\.0) == ["alpha", "bravo"] && values.map(\.1) == [0.5, 1.5])
    #expect(reader.registeredCount == 0)
    let all = try reader.fetchValues(FetchDescriptor<Sample>(), \.count, \.rating)
    #expect(all.count == 4 && all.contains { $0.0 == 2 && $0.1 == nil })
    // A .codable attribute does not compile here (not a PersistableValue); a key path that
    // is not a stored attribute is refused.
    #expect(throws: PersistenceError.self) {
      _ = try reader.fetchValues(FetchDescriptor<Sample>(), \.name, \.name.count)
    }
  }

  @Test(
    "models registered by a fetch are found by model afterwards (the index is built lazily)",
    arguments: TestEngine.allCases)
  func lookupsAfterFetch(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let writer = ModelContext(container)
    for key in ["a", "b", "c"] { writer.insert(Note(key: key, text: "")) }
    try writer.save()
    let context = ModelContext(container)
    let notes = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    #expect(notes.allSatisfy { context.persistentIdentifier(for: $0) != nil })
    context.insert(notes[0])  // already registered: nothing to write
    #expect(!context.hasChanges)
    let fresh = Note(key: "d", text: "")
    context.insert(fresh)
    #expect(context.insertedOrChanged(fresh) && !context.insertedOrChanged(notes[1]))
    context.delete(notes[1])
    try context.save()
    #expect(context.persistentIdentifier(for: fresh) != nil)
    #expect(context.persistentIdentifier(for: notes[1]) == nil)
    // Fetched after the index exists: indexed as they arrive.
    let again = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    #expect(again.map(\.key) == ["a", "c", "d"] && again[2] === fresh)
    let other = ModelContext(container)
    let late = try #require(try other.fetch(FetchDescriptor<Note>()).first)
    other.delete(late)
    try other.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<Note>()) == 2)
  }

  @Test(
    "rows a fetch registers unindexed are found by key afterwards, by every path",
    arguments: TestEngine.allCases)
  func unindexedRowsAfterFirstFetch(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let writer = ModelContext(container)
    for key in ["a", "b", "c", "d"] { writer.insert(Note(key: key, text: key, group: "g")) }
    try writer.save()

    // Each of these starts from an empty context, so its first fetch appends unindexed.
    let context = ModelContext(container)
    let notes = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    #expect(context.rowTable("notes").count == 4 && context.rowTable("notes").indexedCount == 0)
    let identifier = try #require(context.persistentIdentifier(for: notes[2]))
    let registered: Note? = context.registeredModel(for: identifier)
    #expect(registered === notes[2])
    notes[0].text = "edited"
    let again = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    #expect(zip(notes, again).allSatisfy { $0 === $1 } && again[0].text == "edited")

    let sectioned = ModelContext(container)
    let sections = try sectioned.fetch(FetchDescriptor<Note>(), sectionBy: \.group)
    let first = try #require(sections.first?.elements.first)
    #expect(try sectioned.fetch(FetchDescriptor<Note>()).contains { $0 === first })

    let deleting = ModelContext(container)
    let loaded = try deleting.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    try deleting.delete(model: Note.self, where: #Predicate { $0.key >= "c" })
    #expect(deleting.hasChanges)
    try deleting.save()
    // The registered models of deleted rows were marked, not left behind.
    #expect(deleting.persistentIdentifier(for: loaded[3]) == nil)
    #expect(deleting.persistentIdentifier(for: loaded[2]) == nil)
    #expect(deleting.persistentIdentifier(for: loaded[0]) != nil)
    #expect(try deleting.fetch(FetchDescriptor<Note>()).count == 2)

    try context.save()
    #expect(
      try ModelContext(container).fetch(FetchDescriptor<Note>()).map(\.text) == ["edited", "b"])
  }

  @Test(
    "snapshots: each attribute type's change is seen alone, and rollback restores it",
    arguments: TestEngine.allCases)
  func snapshotsEveryAttributeType(engine: TestEngine) throws {
    let container = try engineContainer(engine, Sample.self)
    let writer = ModelContext(container)
    let original = Sample()
    original.name = "Kyoto trip"
    original.note = "a long note that does not fit in a small string"
    original.place = PlaceToken(raw: "geonames:1857910")
    original.blob = Data(repeating: 7, count: 40)
    writer.insert(original)
    try writer.save()

    let context = ModelContext(container)
    let sample = try #require(try context.fetch(FetchDescriptor<Sample>()).first)
    let edits: [(String, (Sample) -> Void)] = [
      ("id", { $0.id = UUID() }), ("name", { $0.name += "!" }), ("note", { $0.note = nil }),
      ("count", { $0.count = 1 }), ("small", { $0.small = -1 }), ("score", { $0.score = 0.5 }),
      ("rating", { $0.rating = 4 }), ("flag", { $0.flag.toggle() }),
      ("maybe", { $0.maybe = false }),
      ("when", { $0.when = Date(timeIntervalSinceReferenceDate: 9) }),
      ("when_maybe", { $0.whenMaybe = Date(timeIntervalSinceReferenceDate: 1) }),
      ("blob", { $0.blob.append(1) }), ("ref", { $0.ref = UUID() }),
      ("place", { $0.place = PlaceToken(raw: "geonames:0") }),
    ]
    for (column, edit) in edits {
      #expect(!context.hasChanges, "before \(column)")
      edit(sample)
      #expect(context.insertedOrChanged(sample), "\(column) is a change")
      context.rollback()
      #expect(!context.hasChanges, "rollback of \(column)")
    }
    #expect(sample.name == "Kyoto trip" && sample.note == original.note && sample.blob.count == 40)
    #expect(sample.place?.raw == "geonames:1857910" && sample.id == original.id)

    // A saved change becomes the new snapshot; a refetch keeps the same instance.
    sample.note = "changed"
    try context.save()
    #expect(!context.hasChanges)
    sample.note = nil
    context.rollback()
    #expect(sample.note == "changed")
    #expect(try context.fetch(FetchDescriptor<Sample>()).first === sample)
    #expect(try ModelContext(container).fetch(FetchDescriptor<Sample>()).first?.note == "changed")
  }

  @Test("a save inside observation tracking depends only on attributes without storage")
  func saveReadsThroughStorage() throws {
    let context = ModelContext(
      try ModelContainer(
        for: Sample.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
    let sample = Sample()
    context.insert(sample)
    let changes = Mutex(0)
    withObservationTracking {
      _ = try? context.save()
    } onChange: {
      changes.withLock { $0 += 1 }
    }
    // `name`, `note` and `place` declare their backing storage: the save read them there.
    sample.name = "renamed"
    sample.note = "noted"
    sample.place = PlaceToken(raw: "geonames:1")
    #expect(changes.withLock { $0 } == 0)
    // `count` declares none: the save read it through its getter, which tracking saw.
    sample.count = 2
    #expect(changes.withLock { $0 } == 1)
  }

  @Test("round-trips a .codable class, and reads data written by an older version of the type")
  func codableRoundTrip() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    do {
      let context = ModelContext(
        try ModelContainer(for: Sample.self, configurations: .init(url: url)))
      let sample = Sample()
      sample.place = PlaceToken(raw: "geonames:1850147")
      context.insert(sample)
      let empty = Sample()
      empty.name = "none"
      context.insert(empty)
      try context.save()
      sample.place = PlaceToken(raw: "geonames:1850147")
      #expect(!context.hasChanges, "an equal encoding is not a change")
      sample.place = PlaceToken(raw: "geonames:2988507")
      #expect(context.hasChanges)
      try context.save()
    }
    let context = ModelContext(
      try ModelContainer(for: Sample.self, configurations: .init(url: url)))
    let samples = try context.fetch(FetchDescriptor<Sample>(sortBy: [SortDescriptor(\.name)]))
    #expect(samples.map { $0.place?.raw } == ["geonames:2988507", nil])

    // A newer version of the type adds a field; it must read what the old one wrote.
    struct PlaceTokenV2: Codable {
      var raw: String
      var source: String?
    }
    let database = try Database(path: url.path, flags: 2)
    let statement = try database.prepare("SELECT place FROM samples WHERE place IS NOT NULL")
    #expect(try statement.step())
    let decoded = try JSONDecoder().decode(PlaceTokenV2.self, from: statement.data(at: 0))
    #expect(decoded.raw == "geonames:2988507" && decoded.source == nil)
    // And the old type reads what the newer one writes (unknown keys ignored).
    let newer = try JSONEncoder().encode(PlaceTokenV2(raw: "geonames:1", source: "x"))
    #expect(try JSONDecoder().decode(PlaceToken.self, from: newer).raw == "geonames:1")
  }

  @Test("shared Hashable .codable values: equal hashes keep distinct encodings; aligned snapshots")
  func sharedHashableCodables() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    let north = Tile(corner: SIMD4(1, 2, 3, 4), label: "north")
    let south = Tile(corner: SIMD4(-1, -2, -3, -4), label: "south")
    do {
      let context = ModelContext(
        try ModelContainer(for: Board.self, configurations: .init(url: url)))
      // Equal values in different rows, and different values with equal hashes.
      for (key, tile, base) in [
        ("a", north, south), ("b", south, north), ("c", Tile?.none, north), ("d", north, south),
      ] {
        context.insert(Board(key: key, tile: tile, base: base))
      }
      try context.save()
    }
    let container = try ModelContainer(for: Board.self, configurations: .init(url: url))
    let context = ModelContext(container)
    let boards = try context.fetch(FetchDescriptor<Board>(sortBy: [SortDescriptor(\.key)]))
    #expect(boards.map(\.tile) == [north, south, nil, north])
    #expect(boards.map(\.base) == [south, north, north, south])
    for board in boards {
      let registration = try #require(context.registration(for: board))
      #expect(Int(bitPattern: registration.snapshotStorage) % 16 == 0)
    }

    // Snapshots in the registration's tail: a change is seen, rollback restores it.
    boards[0].base = north
    boards[2].tile = south
    #expect(context.hasChanges)
    context.rollback()
    #expect(!context.hasChanges)
    #expect(boards[0].base == south && boards[2].tile == nil)
    boards[1].tile = north
    try context.save()
    #expect(
      try ModelContext(container).fetch(FetchDescriptor<Board>(sortBy: [SortDescriptor(\.key)]))
        .map(\.tile) == [north, north, nil, north])
  }

  @Test("refuses predicates and sorts on .codable attributes")
  func refusesCodableInQueries() throws {
    let context = ModelContext(
      try ModelContainer(
        for: Sample.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
    let error = try #require(throws: PersistenceError.self) {
      try context.fetch(
        FetchDescriptor<Sample>(
          predicate: #Predicate { $0.place.flatMap { $0.raw == "x" } == true }))
    }
    #expect(error.code == .unsupportedPredicate)
    #expect(error.message.contains("place"))
  }

  @Test("refuses NaN instead of storing NULL")
  func refusesNaN() throws {
    let context = ModelContext(
      try ModelContainer(
        for: Sample.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
    let sample = Sample()
    sample.score = .nan
    context.insert(sample)
    let error = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(error.code == .invalidValue)
    #expect(context.hasChanges)
    #expect(try ModelContext(context.container).fetchCount(FetchDescriptor<Sample>()) == 0)
  }

  @Test("refuses saving a model type the container does not know")
  func refusesUnknownModel() throws {
    let context = ModelContext(
      try ModelContainer(
        for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
    context.insert(Sample())
    #expect(throws: PersistenceError.self) { try context.save() }
    #expect(throws: PersistenceError.self) { try context.fetch(FetchDescriptor<Sample>()) }
  }

  @Test("groups a sectioned fetch by key, in code-point order, one section per NFC key")
  func sections() throws {
    let context = ModelContext(
      try ModelContainer(
        for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
    let rows = [
      ("1", "b", "Zürich"), ("2", "a", "Zu\u{308}rich"), ("3", "c", "Oslo"), ("4", "a", "Ōsaka"),
      ("5", "z", "Oslo"), ("6", "m", "Zürich"),
    ]
    for (key, text, group) in rows { context.insert(Note(key: key, text: text, group: group)) }
    try context.save()
    let sections = try ModelContext(context.container).fetch(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.text, order: .reverse)]), sectionBy: \.group)
    #expect(sections.map(\.id) == ["Oslo", "Zürich", "Ōsaka"])
    #expect(sections.map { $0.map(\.key) } == [["5", "3"], ["6", "1", "2"], ["4"]])
  }

  @Test(
    "sections follow stored keys: nil apart from empty, unsaved key changes stay put",
    arguments: TestEngine.allCases)
  func sectionsFollowStoredKeys(engine: TestEngine) throws {
    let container = try engineContainer(engine, Sample.self, Note.self)
    let context = ModelContext(container)
    for (name, note) in [("1", String?.none), ("2", ""), ("3", "a"), ("4", nil), ("5", "a")] {
      let sample = Sample()
      sample.name = name
      sample.note = note
      context.insert(sample)
    }
    for (key, group) in [("k1", "north"), ("k2", "north"), ("k3", "south")] {
      context.insert(Note(key: key, text: key, group: group))
    }
    try context.save()
    let reader = ModelContext(container)
    let byNote = try reader.fetch(
      FetchDescriptor<Sample>(sortBy: [SortDescriptor(\.name)]), sectionBy: \.note)
    #expect(byNote.map(\.id) == [nil, "", "a"])
    #expect(byNote.map { $0.map(\.name) } == [["1", "4"], ["2"], ["3", "5"]])

    let notes = try reader.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    notes[0].group = "west"  // not saved
    let sections = try reader.fetch(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]), sectionBy: \.group)
    #expect(sections.map(\.id) == ["north", "south"])
    #expect(sections[0].elements.first === notes[0] && notes[0].group == "west")
    try reader.save()
    let saved = try reader.fetch(FetchDescriptor<Note>(), sectionBy: \.group)
    #expect(saved.map(\.id) == ["north", "south", "west"])
  }

  @Test("sections over keys an outside writer stored with other types group by their text")
  func sectionsOverForeignTypes() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    let container = try ModelContainer(for: Note.self, configurations: .init(url: url))
    let context = ModelContext(container)
    for key in ["a", "b", "c", "d"] { context.insert(Note(key: key, text: key, group: "north")) }
    try context.save()
    let outside = try Database(path: url.path, flags: 2)
    try outside.execute("UPDATE notes SET grp = 4200000 WHERE key IN ('a', 'b')")
    try outside.execute("UPDATE notes SET grp = 2.5 WHERE key = 'c'")
    let sections = try ModelContext(container).fetch(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]), sectionBy: \.group)
    #expect(sections.map(\.id) == ["2.5", "4200000", "north"])
    #expect(sections.map { $0.map(\.key) } == [["c"], ["a", "b"], ["d"]])
  }

  @Test("opens a read-only configuration and refuses to save")
  func readOnly() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    do {
      let context = ModelContext(
        try ModelContainer(for: Note.self, configurations: .init(url: url)))
      context.insert(Note(key: "a", text: "x"))
      try context.save()
    }
    let context = ModelContext(
      try ModelContainer(for: Note.self, configurations: .init(url: url, allowsSave: false)))
    #expect(try context.fetchCount(FetchDescriptor<Note>()) == 1)
    context.insert(Note(key: "b", text: "y"))
    let error = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(error.code == .readOnly)
  }
}

@Suite("Sections")
struct SectionTests {
  @Test(
    "sections index from zero, match a grouping in memory, and change alone",
    arguments: TestEngine.allCases)
  func slicesOfOneArray(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let writer = ModelContext(container)
    for (index, group) in ["b", "a", "c", "a", "b", "b", "c"].enumerated() {
      writer.insert(Note(key: "k\(index)", text: "", group: group))
    }
    try writer.save()
    let context = ModelContext(container)
    let all = try context.fetch(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.group), SortDescriptor(\.key)]))
    var sections = try context.fetch(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]), sectionBy: \.group)
    #expect(sections.map(\.id) == ["a", "b", "c"])
    let grouped = Dictionary(grouping: all, by: \.group)
    for section in sections {
      #expect(section.startIndex == 0 && section.endIndex == section.count)
      #expect(section.map(\.key) == grouped[section.id]?.map(\.key))
      #expect(section.elements.map(\.key) == section.map(\.key))
      #expect((0..<section.count).map { section[$0].key } == section.map(\.key))
    }
    // A changed section copies its models first: the others, and a copy made before, stay.
    let before = sections
    let extra = Note(key: "k9", text: "", group: "b")
    sections[1].insert(extra, at: 1)
    sections[1].remove(at: 0)
    sections[0].append(extra)
    #expect(sections[1].map(\.key) == ["k9", "k4", "k5"])
    #expect(sections[0].map(\.key) == ["k1", "k3", "k9"])
    #expect(sections[2].map(\.key) == ["k2", "k6"])
    #expect(before.map { $0.map(\.key) } == [["k1", "k3"], ["k0", "k4", "k5"], ["k2", "k6"]])
  }
}

@Suite("Autosave")
struct AutosaveTests {
  @Test(
    "saves pending changes before a fetch when enabled, and not otherwise",
    arguments: TestEngine.allCases)
  func savesBeforeFetch(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let manual = ModelContext(container)
    manual.insert(Note(key: "a", text: ""))
    var stored = FetchDescriptor<Note>()
    stored.includePendingChanges = false
    #expect(try manual.fetchCount(stored) == 0)
    #expect(try manual.fetchCount(FetchDescriptor<Note>()) == 1, "the unsaved insert, counted")
    #expect(manual.hasChanges)
    manual.rollback()

    let automatic = ModelContext(container)
    automatic.autosaveEnabled = true
    automatic.insert(Note(key: "b", text: ""))
    #expect(try automatic.fetchCount(FetchDescriptor<Note>()) == 1)
    #expect(!automatic.hasChanges)
  }

  @Test("saves at deinit when enabled", arguments: TestEngine.allCases)
  func savesAtDeinit(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    do {
      let context = ModelContext(container)
      context.autosaveEnabled = true
      context.insert(Note(key: "a", text: ""))
    }
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<Note>()) == 1)
  }
}

@Suite("Contexts sharing a file store")
struct SharedStoreTests {
  /// A model type's operations are made once per container (they cost about 200k
  /// instructions), whichever of its contexts, on whichever thread, asks first; another
  /// container makes its own, and a type not in the container is still refused.
  @Test("contexts of one container share each model type's operations, made once")
  func sharedOperations() throws {
    let container = try ModelContainer(
      for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    let made = Mutex<[ObjectIdentifier]>([])
    DispatchQueue.concurrentPerform(iterations: 16) { _ in
      let context = ModelContext(container)
      guard let entity = try? context.entity(for: Note.self) else { return }
      made.withLock { $0.append(ObjectIdentifier(entity)) }
      _ = try? context.fetchCount(FetchDescriptor<Note>())
    }
    let identities = made.withLock { $0 }
    #expect(identities.count == 16 && Set(identities).count == 1)
    let context = ModelContext(container)
    #expect(try ObjectIdentifier(context.entity(for: Note.self)) == identities.first)
    let other = try ModelContainer(
      for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    #expect(try ModelContext(other).entity(for: Note.self) !== context.entity(for: Note.self))
    #expect(throws: PersistenceError.self) { try context.entity(for: Sample.self) }
  }

  @Test("a context sees what another context saved, and fetch refreshes unchanged models")
  func seesOtherContexts() throws {
    let directory = TemporaryDirectory()
    let container = try ModelContainer(
      for: Note.self, configurations: .init(url: directory.file("store.sqlite")))
    let reader = ModelContext(container)
    let writer = ModelContext(container)
    writer.insert(Note(key: "a", text: "one"))
    try writer.save()
    let note = try #require(try reader.fetch(FetchDescriptor<Note>()).first)
    #expect(try reader.fetchCount(FetchDescriptor<Note>()) == 1)
    let written = try #require(try writer.fetch(FetchDescriptor<Note>()).first)
    written.text = "two"
    writer.insert(Note(key: "b", text: ""))
    try writer.save()
    #expect(try reader.fetchCount(FetchDescriptor<Note>()) == 2)
    #expect(try reader.fetch(FetchDescriptor<Note>()).first === note)
    #expect(note.text == "two")
    // A model with unsaved edits keeps them across a fetch.
    note.text = "mine"
    _ = try reader.fetch(FetchDescriptor<Note>())
    #expect(note.text == "mine")
  }

  @Test("opening a current store reads only: it succeeds while another connection writes")
  func openingDoesNotWaitForWriters() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    let first = try ModelContainer(for: Note.self, configurations: .init(url: url))
    let context = ModelContext(first)
    context.insert(Note(key: "a", text: "x"))
    try context.save()
    // Another connection holds the write lock for the whole open.
    let writer = try Database(path: url.path, flags: 2)
    try writer.execute("BEGIN IMMEDIATE")
    defer { try? writer.execute("ROLLBACK") }
    let started = Date()
    let second = try ModelContainer(
      for: Note.self, configurations: .init(url: url, busyTimeout: .milliseconds(50)))
    #expect(Date().timeIntervalSince(started) < 1)
    #expect(try ModelContext(second).fetchCount(FetchDescriptor<Note>()) == 1)
    // A store that needs a change (here a new model's table) still takes the lock, and says so.
    #expect(throws: PersistenceError.self) {
      _ = try ModelContainer(
        for: Note.self, Sample.self, configurations: .init(url: url, busyTimeout: .milliseconds(50))
      )
    }
  }

  @Test("a refetch that changes an observed model notifies its observers, storage-backed or not")
  func refreshNotifiesObservers() throws {
    let directory = TemporaryDirectory()
    let container = try ModelContainer(
      for: Sample.self, configurations: .init(url: directory.file("store.sqlite")))
    let writer = ModelContext(container)
    let original = Sample()
    original.name = "before"
    writer.insert(original)
    try writer.save()

    let reader = ModelContext(container)
    let sample = try #require(try reader.fetch(FetchDescriptor<Sample>()).first)
    #expect(sample.name == "before")
    let changed = Mutex<[String]>([])
    for (label, read) in [
      ("name", { (s: Sample) in _ = s.name }), ("note", { _ = $0.note }),
      ("count", { _ = $0.count }), ("place", { _ = $0.place }),
    ] {
      withObservationTracking {
        read(sample)
      } onChange: {
        changed.withLock { $0.append(label) }
      }
    }
    original.name = "after"
    original.note = "n"
    original.count = 3
    original.place = PlaceToken(raw: "geonames:1")
    try writer.save()
    _ = try reader.fetch(FetchDescriptor<Sample>())
    #expect(sample.name == "after" && sample.note == "n" && sample.count == 3)
    #expect(sample.place?.raw == "geonames:1")
    #expect(changed.withLock { Set($0) } == ["name", "note", "count", "place"])
  }
}

@Suite("Damaged and full stores")
struct FullStoreTests {
  @Test("fails a save that would overflow the store, writing nothing")
  func storeFull() throws {
    let directory = TemporaryDirectory()
    var configuration = ModelConfiguration(url: directory.file("store.sqlite"))
    configuration.maximumPageCount = 40
    let container = try ModelContainer(for: [Note.self], configuration: configuration)
    let context = ModelContext(container)
    context.insert(Note(key: "first", text: ""))
    try context.save()
    for index in 0..<2000 {
      context.insert(Note(key: "k\(index)", text: String(repeating: "x", count: 100)))
    }
    let error = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(error.code == .storeFull)
    #expect(context.hasChanges, "the unsaved work is kept, to retry")
    let reader = ModelContext(container)
    #expect(try reader.fetchCount(FetchDescriptor<Note>()) == 1)
    #expect(try reader.fetchHistory().count == 1)
    #expect(try container.checkIntegrity().isEmpty)
  }
}

@Suite("Schema's entities, as SwiftData describes them")
struct SchemaEntityTests {
  @Test(
    "entities, attributes, relationships, unique constraints and indexes of SampleTrips' models")
  func sampleTrips() throws {
    let schema = Schema([SampleTrip.self, SampleBucketListItem.self, Outing.self])
    #expect(schema.entities.map(\.name) == ["SampleTrip", "SampleBucketListItem", "Outing"])
    #expect(Set(schema.entitiesByName.keys) == ["SampleTrip", "SampleBucketListItem", "Outing"])
    #expect(schema.entity(for: SampleLivingAccommodation.self) == nil)
    let trip = try #require(schema.entity(for: SampleTrip.self))
    #expect(trip == schema.entitiesByName["SampleTrip"])
    // A schema of entities (SwiftData's `init(_ entities:version:)`) lists their models.
    let item = try #require(schema.entity(for: SampleBucketListItem.self))
    let rebuilt = Schema(trip, item, version: Schema.Version(2, 0, 0))
    #expect(rebuilt.entities.map(\.name) == ["SampleTrip", "SampleBucketListItem"])
    #expect(rebuilt.version == Schema.Version(2, 0, 0))
    #expect(Schema(trip, item) == Schema([SampleTrip.self, SampleBucketListItem.self]))
    #expect(Schema().entities.isEmpty)
    #expect(
      trip.storedProperties.map(\.name) == [
        "name", "destination", "startDate", "endDate", "grade", "bucketList",
        "livingAccommodation",
      ])
    #expect(
      Set(trip.attributes.map(\.name)) == ["name", "destination", "startDate", "endDate", "grade"])
    let name = try #require(trip.attributesByName["name"])
    #expect(name.valueType == String.self && !name.isOptional && name.isUnique)
    #expect(name.options.contains(.preserveValueOnDeletion))
    #expect(name.defaultValue as? String == "")
    #expect(trip.attributesByName["grade"]?.isOptional == true)
    #expect(trip.uniquenessConstraints == [["name", "startDate", "endDate"]])
    #expect(trip.indices.contains(["startDate"]) && trip.indices.contains(["grade"]))
    let bucketList = try #require(trip.relationshipsByName["bucketList"])
    #expect(bucketList.destination == "SampleBucketListItem")
    #expect(!bucketList.isToOneRelationship)
    #expect(bucketList.deleteRule == .cascade)
    #expect(bucketList.keypath == \SampleTrip.bucketList)
    #expect(bucketList.inverseKeyPath == \SampleBucketListItem.trip)
    #expect(trip.relationshipsByName["livingAccommodation"]?.isToOneRelationship == true)
    #expect(trip.superentity == nil && trip.subentities.isEmpty)

    // A column of another name, an enum's raw value, a struct's JSON.
    let outing = try #require(schema.entity(for: Outing.self))
    #expect(outing.attributesByName["reason"]?.valueType == Outing.Reason.self)
    #expect(outing.attributesByName["reason"]?.defaultValue as? Outing.Reason == .family)
    #expect(outing.attributesByName["address"]?.options == [])
    let venue = try #require(Schema([QualifiedVenue.self]).entities.first)
    #expect(venue.attributesByName["city"]?.originalName == "town")
    #expect(venue.attributesByName["code"]?.originalName == "code")
  }
}
