import Foundation
import Persistence
import PersistenceCore
import Synchronization
import TestSupport
import Testing

/// An engine of the test's own, in front of SQLite: it counts what the core asks of it. The
/// core reaches a store only through `StoreEngine`, so every connection, statement and
/// transaction of a container opened with it goes through these counters.
final class CountingEngine: StoreEngine {
  struct Counts: Sendable {
    var stores = 0
    var connections = 0
    var statements = 0
    var writeTransactions = 0
    var changeCounterReads = 0
  }
  let counts = Mutex(Counts())

  func openStore(
    _ configuration: ModelConfiguration, entities: [EntityDescription]
  ) throws -> any OpenStore {
    counts.withLock { $0.stores += 1 }
    return CountingStore(
      inner: try SQLiteEngine().openStore(configuration, entities: entities), engine: self)
  }
}

final class CountingStore: OpenStore {
  let inner: any OpenStore
  let engine: CountingEngine
  init(inner: any OpenStore, engine: CountingEngine) {
    self.inner = inner
    self.engine = engine
  }
  var identifier: UUID { inner.identifier }
  var isImmutable: Bool { inner.isImmutable }
  func makeConnection(cacheSizeKiB: Int?) throws -> any StoreConnection {
    engine.counts.withLock { $0.connections += 1 }
    return CountingConnection(
      inner: try inner.makeConnection(cacheSizeKiB: cacheSizeKiB), engine: engine)
  }
  func checkIntegrity() throws -> [String] { try inner.checkIntegrity() }
}

final class CountingConnection: StoreConnection {
  let inner: any StoreConnection
  let engine: CountingEngine
  init(inner: any StoreConnection, engine: CountingEngine) {
    self.inner = inner
    self.engine = engine
  }
  func execute(_ sql: String) throws { try inner.execute(sql) }
  func prepare(_ sql: String) throws -> any StoreStatement {
    engine.counts.withLock { $0.statements += 1 }
    return try inner.prepare(sql)
  }
  func cachedStatement(_ sql: String) throws -> any StoreStatement {
    engine.counts.withLock { $0.statements += 1 }
    return try inner.cachedStatement(sql)
  }
  var lastInsertedKey: Int64 { get throws { try inner.lastInsertedKey } }
  var changedRowCount: Int { inner.changedRowCount }
  var isInTransaction: Bool { inner.isInTransaction }
  func beginWriting() throws {
    engine.counts.withLock { $0.writeTransactions += 1 }
    try inner.beginWriting()
  }
  func beginReading() throws { try inner.beginReading() }
  func commit() throws { try inner.commit() }
  func rollback() throws { try inner.rollback() }
  func collation(for comparator: String.StandardComparator) throws -> String {
    try inner.collation(for: comparator)
  }
  func lastIssuedHistoryToken() throws -> Int64 { try inner.lastIssuedHistoryToken() }
  var tombstoneValueParameter: String { inner.tombstoneValueParameter }
  func keyListCondition(_ column: String) -> String { inner.keyListCondition(column) }
  func keyListText(_ keys: [Int64]) -> String { inner.keyListText(keys) }
  func queryPlan(_ sql: String, bindings: [SQLValue]) throws -> [String] {
    try inner.queryPlan(sql, bindings: bindings)
  }
  func externalChangeCounter() throws -> Int64 {
    engine.counts.withLock { $0.changeCounterReads += 1 }
    return try inner.externalChangeCounter()
  }
}

@Suite("The engine seam")
struct EngineSeamTests {
  /// The same work through the default engine and through an engine of the test's own:
  /// the same answers, and the test's engine saw every connection the core made.
  @Test("a container on an engine of one's own works only through it, with the same answers")
  func ownEngine() throws {
    let directory = TemporaryDirectory()
    func work(_ container: ModelContainer) throws -> [String] {
      let context = ModelContext(container)
      context.insert(Note(key: "b", text: "Zürich"))
      context.insert(Note(key: "a", text: "zurich"))
      try context.save()
      let observer = try ResultsObserver(
        FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key, order: .reverse)]),
        modelContext: ModelContext(container))
      // Another container on the same file: its commit reaches the observer only through the
      // store (the engine's change counter, then history).
      let outside = try ModelContainer(
        for: [Note.self], configuration: container.configuration, engine: SQLiteEngine())
      let writer = ModelContext(outside)
      writer.author = "outside"
      writer.insert(Note(key: "c", text: "Zurich"))
      try writer.save()
      #expect(eventually { observer.results.count == 3 })
      let found = try context.fetch(
        FetchDescriptor<Note>(
          predicate: #Predicate { $0.text.localizedStandardContains("zurich") },
          sortBy: [SortDescriptor(\.text, comparator: .lexical), SortDescriptor(\.key)]))
      let history = try context.fetchHistory()
      let plan = try context.explainQueryPlan(
        FetchDescriptor<Note>(predicate: #Predicate { $0.key == "a" }))
      var answers = found.map { "\($0.key):\($0.text)" }
      answers += observer.results.map(\.key)
      answers += history.map { $0.author ?? "-" }
      answers.append(plan.isEmpty ? "no plan" : "plan")
      answers += try container.checkIntegrity()
      return answers
    }
    let expected = try work(
      try ModelContainer(for: Note.self, configurations: .init(url: directory.file("a.store"))))
    let engine = CountingEngine()
    let seen = try work(
      try ModelContainer(
        for: [Note.self], configuration: .init(url: directory.file("b.store")), engine: engine))
    #expect(seen == expected)
    #expect(expected.contains("outside"))
    let counts = engine.counts.withLock { $0 }
    #expect(counts.stores == 1)
    #expect(counts.connections >= 3)  // the context, the observer, the monitor
    #expect(counts.statements > 5)
    #expect(counts.writeTransactions == 1)
    #expect(counts.changeCounterReads > 0)
  }

  @Test("the default engine is SQLite for files and memory, and a URL no engine opens is refused")
  func defaultEngine() throws {
    let directory = TemporaryDirectory()
    #expect(try ModelConfiguration(url: directory.file("x.store")).defaultEngine() is SQLiteEngine)
    #expect(try ModelConfiguration().defaultEngine() is SQLiteEngine)
    let url = try #require(URL(string: "postgres://db.example/trips"))
    let error = try #require(throws: PersistenceError.self) {
      try ModelContainer(for: Note.self, configurations: .init(url: url))
    }
    #expect(error.code == .cannotOpen)
    #expect(error.message.contains("postgres://"))
  }
}
