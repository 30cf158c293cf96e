import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

@Suite("Persistent history")
struct HistoryTests {
  /// A new store on `engine`: in memory for SQLite, a new database for PostgreSQL.
  func makeContainer(_ engine: TestEngine) throws -> ModelContainer {
    switch engine {
    case .sqlite:
      try ModelContainer(
        for: Note.self, Sample.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    case .postgreSQL:
      try ModelContainer(
        for: Note.self, Sample.self,
        configurations: ModelConfiguration(
          url: try #require(URL(string: try PostgreSQLCluster.shared.get().makeDatabase("history")))
        ))
    }
  }

  @Test(
    "records inserts, updates with attribute names, and deletes with tombstones",
    arguments: TestEngine.allCases)
  func recordsChanges(engine: TestEngine) throws {
    let container = try makeContainer(engine)
    let context = ModelContext(container)
    context.author = "app"
    let note = Note(key: "a", text: "x", group: "g")
    context.insert(note)
    try context.save()
    note.text = "y"
    note.group = "h"
    try context.save()
    context.delete(note)
    try context.save()

    let history = try ModelContext(container).fetchHistory()
    #expect(history.count == 3)
    #expect(history.map(\.author) == ["app", "app", "app"])
    #expect(history.map { $0.changes.map(\.kind) } == [[.insert], [.update], [.delete]])
    #expect(history[1].changes[0].updatedAttributeNames == ["text", "grp"])
    #expect(history[1].changes[0].updated(\Note.text))
    #expect(!history[1].changes[0].updated(\Note.key))
    let tombstone = try #require(history[2].changes[0].tombstone(as: Note.self))
    #expect(tombstone[\.key] as? String == "a")
    #expect(tombstone[\.text] == nil, "text is not .preserveValueOnDeletion")
    #expect(history[2].changes[0].tombstone(as: Sample.self) == nil, "a Note's, not a Sample's")
    let identifiers = Set(history.flatMap { $0.changes.map(\.changedPersistentIdentifier) })
    #expect(identifiers.count == 1)
  }

  @Test(
    "a save records the time it is given (historyTimestamp, then now again); a deleted row's last deletion time is found by its preserved value",
    arguments: TestEngine.allCases)
  func recordedTimes(engine: TestEngine) throws {
    let container = try makeContainer(engine)
    let context = ModelContext(container)
    let made = Date(timeIntervalSince1970: 1_700_000_000.125)  // before the deletion below
    let note = Note(key: "k", text: "x", group: "g")
    context.insert(note)
    context.historyTimestamp = made
    try context.save()
    #expect(context.historyTimestamp == nil, "reset by the save that wrote")
    let identifier = try #require(context.persistentIdentifier(for: note))
    #expect(try context.lastChangeDate(for: identifier) == made)
    #expect(try context.lastDeletionDate(of: Note.self, where: \.key, equals: "k") == nil)
    let before = Date()
    context.delete(note)
    try context.save()
    let deleted = try #require(
      try context.lastDeletionDate(of: Note.self, where: \.key, equals: "k"))
    #expect(deleted >= before.addingTimeInterval(-1) && deleted <= Date().addingTimeInterval(1))
    // Inserted again and deleted with an earlier recorded time: the latest deletion counts.
    context.insert(Note(key: "k", text: "y", group: "g"))
    try context.save()
    let again = try #require(
      try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.key == "k" })).first)
    context.delete(again)
    context.historyTimestamp = made
    try context.save()
    #expect(try context.lastDeletionDate(of: Note.self, where: \.key, equals: "k") == deleted)
    #expect(try context.lastDeletionDate(of: Note.self, where: \.key, equals: "other") == nil)
  }

  @Test(
    "one save of two entities' inserts, updates and tombstoned deletes records each change once",
    arguments: TestEngine.allCases)
  func mixedSave(engine: TestEngine) throws {
    // The change insert keeps the token and entity it bound while rows of one entity follow
    // each other; deletions with tombstones take the keyed statement, which on SQLite is the
    // same statement, reset when taken. Every change must still name its own entity.
    let container = try makeContainer(engine)
    let context = ModelContext(container)
    let notes = ["a", "b"].map { Note(key: $0, text: "t", group: "g") }
    let samples = ["s1", "s2"].map { name in
      let sample = Sample()
      sample.name = name
      return sample
    }
    notes.forEach(context.insert)
    samples.forEach(context.insert)
    try context.save()

    context.insert(Note(key: "c", text: "t", group: "g"))
    context.delete(notes[0])
    let third = Sample()
    third.name = "s3"
    context.insert(third)
    notes[1].text = "u"
    context.delete(samples[0])
    context.insert(Note(key: "d", text: "t", group: "g"))
    samples[1].count = 7
    try context.save()

    let history = try ModelContext(container).fetchHistory()
    #expect(history.count == 2)
    let changes = try #require(history.last).changes
    let described = changes.map { "\($0.kind) \($0.changedPersistentIdentifier.entityName)" }
      .sorted()
    #expect(
      described == [
        "delete notes", "delete samples", "insert notes", "insert notes", "insert samples",
        "update notes", "update samples",
      ])
    for change in changes where change.kind == .delete {
      switch change {
      case .delete(let deleted as DefaultHistoryDelete<Note>):
        #expect(deleted.tombstone[\.key] as? String == "a")
      case .delete(let deleted as DefaultHistoryDelete<Sample>):
        #expect(deleted.tombstone[\.name] as? String == "s1")
      default: Issue.record("a delete of neither model: \(change)")
      }
    }
    #expect(
      Set(changes.filter { $0.kind == .update }.map(\.updatedAttributeNames))
        == [["text"], ["count"]])
  }

  @Test("orders tokens by commit and resumes after a token", arguments: TestEngine.allCases)
  func tokensOrderAndResume(engine: TestEngine) throws {
    let container = try makeContainer(engine)
    let context = ModelContext(container)
    for index in 0..<5 {
      context.insert(Note(key: "k\(index)", text: ""))
      try context.save()
    }
    let history = try context.fetchHistory()
    let tokens = history.map(\.token)
    #expect(tokens == tokens.sorted() && Set(tokens).count == 5)
    let after = try context.fetchHistory(HistoryDescriptor(after: tokens[2]))
    #expect(after.map(\.token) == Array(tokens[3...]))
    #expect(try context.fetchHistory(HistoryDescriptor(after: tokens[4])).isEmpty)
    #expect(try context.currentHistoryToken() == tokens[4])
    // Tokens survive encoding, so a consumer can persist them.
    let decoded = try JSONDecoder().decode(
      DefaultHistoryToken.self, from: try JSONEncoder().encode(tokens[1]))
    #expect(decoded == tokens[1])
    #expect(DefaultHistoryToken(tokens[1].description) == tokens[1])
    #expect(DefaultHistoryToken("garbage") == nil)
  }

  @Test(
    "enumerateHistory hands over, one change at a time, what fetchHistory returns, for every filter and limit",
    arguments: TestEngine.allCases)
  func enumerated(engine: TestEngine) throws {
    let container = try makeContainer(engine)
    let app = ModelContext(container)
    app.author = "app"
    let sync = ModelContext(container)
    sync.author = "sync"
    var notes: [Note] = []
    for round in 0..<6 {
      let context = round.isMultiple(of: 3) ? sync : app
      let note = Note(key: "n\(round)", text: "first")
      context.insert(note)
      notes.append(note)
      if round.isMultiple(of: 2) { context.insert(Sample()) }
      try context.save()
    }
    notes[1].text = "changed"
    notes[2].group = "g"
    try app.save()
    app.delete(notes[4])
    app.delete(notes[1])
    try app.save()
    sync.delete(notes[3])
    try sync.save()
    let tokens = try app.fetchHistory().map(\.token)
    let descriptors: [HistoryDescriptor] = [
      HistoryDescriptor(), HistoryDescriptor(after: tokens[2]),
      HistoryDescriptor(authors: ["app"]),
      {
        var descriptor = HistoryDescriptor(after: tokens[0], modelTypes: [Note.self])
        descriptor.excludedAuthors = ["sync"]
        return descriptor
      }(),
      HistoryDescriptor(modelTypes: [Sample.self]),
      {
        var descriptor = HistoryDescriptor(after: tokens[1])
        descriptor.fetchLimit = 3
        return descriptor
      }(),
      HistoryDescriptor(after: tokens.last!),
    ]
    struct Row: Equatable {
      let token: DefaultHistoryToken
      let author: String?
      let time: Date
      let kind: HistoryChange.Kind
      let row: PersistentIdentifier
      let attributes: Set<String>
      let tombstone: [String: SQLValue]?
    }
    func row(_ transaction: DefaultHistoryTransaction, _ change: HistoryChange) -> Row {
      Row(
        token: transaction.token, author: transaction.author, time: transaction.timestamp,
        kind: change.kind, row: change.changedPersistentIdentifier,
        attributes: change.updatedAttributeNames,
        tombstone: change.kind == .delete ? change.record?.preserved : nil)
    }
    for (index, descriptor) in descriptors.enumerated() {
      let fetched = try app.fetchHistory(descriptor).flatMap { transaction in
        transaction.changes.map { row(transaction, $0) }
      }
      var enumerated: [Row] = []
      try app.enumerateHistory(descriptor) { enumerated.append(row($0, $1)) }
      #expect(enumerated == fetched, "descriptor \(index)")
      #expect(!fetched.isEmpty || index == descriptors.count - 1, "descriptor \(index)")
    }
    #expect(
      try app.fetchHistory().flatMap(\.changes).contains {
        $0.tombstone(as: Note.self)?[\.key] as? String == "n4"
      })
    // The body's error ends the read; an expired token is refused as fetchHistory refuses it.
    struct Stop: Error {}
    var seen = 0
    #expect(throws: Stop.self) {
      try app.enumerateHistory { _, _ in
        seen += 1
        throw Stop()
      }
    }
    #expect(seen == 1)
    _ = try app.deleteHistory(before: tokens[3])
    #expect(throws: PersistenceError.self) {
      try app.enumerateHistory(HistoryDescriptor(after: tokens[0])) { _, _ in }
    }
  }

  @Test("filters by author and by model type", arguments: TestEngine.allCases)
  func filters(engine: TestEngine) throws {
    let container = try makeContainer(engine)
    let app = ModelContext(container)
    app.author = "app"
    let sync = ModelContext(container)
    sync.author = "sync"
    app.insert(Note(key: "a", text: ""))
    try app.save()
    sync.insert(Note(key: "b", text: ""))
    try sync.save()
    app.insert(Sample())
    try app.save()

    #expect(try app.fetchHistory(HistoryDescriptor(authors: ["app"])).count == 2)
    #expect(try app.fetchHistory(HistoryDescriptor(authors: ["sync"])).count == 1)
    let notes = try app.fetchHistory(HistoryDescriptor(modelTypes: [Note.self]))
    #expect(notes.count == 2)
    #expect(
      notes.allSatisfy {
        $0.changes.allSatisfy { $0.changedPersistentIdentifier.entityName == "notes" }
      })
    #expect(
      try app.fetchHistory(HistoryDescriptor(authors: ["sync"], modelTypes: [Sample.self])).isEmpty)
  }

  @Test(
    "records nothing for a save with no changes, or a rolled-back one",
    arguments: TestEngine.allCases)
  func nothingForEmptySaves(engine: TestEngine) throws {
    let container = try makeContainer(engine)
    let context = ModelContext(container)
    try context.save()
    let note = Note(key: "a", text: "x")
    context.insert(note)
    try context.save()
    note.text = "x"  // same value
    try context.save()
    note.text = "z"
    context.rollback()
    try context.save()
    #expect(try context.fetchHistory().count == 1)
  }

  @Test("expires tokens older than the kept history", arguments: TestEngine.allCases)
  func expiry(engine: TestEngine) throws {
    let container = try makeContainer(engine)
    let context = ModelContext(container)
    for index in 0..<4 {
      context.insert(Note(key: "k\(index)", text: ""))
      try context.save()
    }
    let tokens = try context.fetchHistory().map(\.token)
    #expect(try context.deleteHistory(before: tokens[2]) == 2)
    #expect(try context.fetchHistory().map(\.token) == Array(tokens[2...]))
    // The consumer that saw tokens[1] has seen everything deleted: it may continue.
    #expect(try context.fetchHistory(HistoryDescriptor(after: tokens[1])).count == 2)
    let error = try #require(throws: PersistenceError.self) {
      try context.fetchHistory(HistoryDescriptor(after: tokens[0]))
    }
    #expect(error.code == .historyTokenExpired)
    #expect(error.message.contains("expired"))
  }

  @Test("refuses a token from another store", arguments: TestEngine.allCases)
  func foreignToken(engine: TestEngine) throws {
    let first = ModelContext(try makeContainer(engine))
    let second = ModelContext(try makeContainer(engine))
    first.insert(Note(key: "a", text: ""))
    try first.save()
    let token = try #require(try first.fetchHistory().first?.token)
    let error = try #require(throws: PersistenceError.self) {
      try second.fetchHistory(HistoryDescriptor(after: token))
    }
    #expect(error.code == .historyTokenForeign)
  }

  @Test("writes history in the same transaction as the data", arguments: TestEngine.allCases)
  func atomicWithData(engine: TestEngine) throws {
    let container = try makeContainer(engine)
    let context = ModelContext(container)
    context.insert(Note(key: "a", text: ""))
    try context.save()
    // A save that fails half-way (the second insert violates NOT NULL via NaN) writes neither.
    context.insert(Note(key: "b", text: ""))
    let bad = Sample()
    bad.score = .nan
    context.insert(bad)
    #expect(throws: PersistenceError.self) { try context.save() }
    let reader = ModelContext(container)
    #expect(try reader.fetchCount(FetchDescriptor<Note>()) == 1)
    #expect(try reader.fetchHistory().count == 1)
  }
}

@Suite("Row identity")
struct RowIdentityTests {
  @Test("never reuses a deleted row's primary key, so history keeps meaning one row")
  func keysNotReused() throws {
    let context = ModelContext(
      try ModelContainer(
        for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
    let first = Note(key: "a", text: "")
    context.insert(first)
    try context.save()
    let firstKey = try #require(context.persistentIdentifier(for: first)).primaryKey
    context.delete(first)
    try context.save()
    let second = Note(key: "b", text: "")
    context.insert(second)
    try context.save()
    #expect(try #require(context.persistentIdentifier(for: second)).primaryKey > firstKey)
  }
}

@Suite("History updates as an AsyncSequence")
struct HistoryUpdatesTests {
  @Test("kept history first, then each new transaction from this and another connection, in order")
  func follows() async throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    let container = try ModelContainer(for: Note.self, configurations: .init(url: url))
    let context = ModelContext(container)
    context.author = "app"
    context.insert(Note(key: "a", text: ""))
    try context.save()
    let updates = container.historyUpdates(HistoryDescriptor(authors: ["app", "other"]))
    let task = Task { () -> [String] in
      var seen: [String] = []
      for try await transaction in updates {
        seen.append(transaction.author ?? "-")
        if seen.count == 3 { break }
      }
      return seen
    }
    // Another connection on the same file, as another process would write.
    let other = try ModelContainer(for: Note.self, configurations: .init(url: url))
    let otherContext = ModelContext(other)
    otherContext.author = "other"
    otherContext.insert(Note(key: "b", text: ""))
    try otherContext.save()
    let ignored = ModelContext(container)
    ignored.author = "ignored"
    ignored.insert(Note(key: "x", text: ""))
    try ignored.save()
    context.insert(Note(key: "c", text: ""))
    try context.save()
    #expect(try await task.value == ["app", "other", "app"])
  }

  @Test("a token whose history was deleted ends the sequence with historyTokenExpired")
  func expired() async throws {
    let container = try ModelContainer(
      for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    for key in ["a", "b", "c"] {
      context.insert(Note(key: key, text: ""))
      try context.save()
    }
    let history = try context.fetchHistory()
    let old = history[0].token
    try context.deleteHistory(before: history[2].token)
    var failure: PersistenceError?
    do {
      for try await _ in container.historyUpdates(HistoryDescriptor(after: old)) {}
    } catch let error as PersistenceError {
      failure = error
    }
    #expect(failure?.code == .historyTokenExpired)
  }
}
