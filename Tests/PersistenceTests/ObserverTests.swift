import Foundation
import Observation
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

/// Waits up to `seconds` for `condition`.
func eventually(_ seconds: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
  let deadline = Date().addingTimeInterval(seconds)
  while Date() < deadline {
    if try condition() { return true }
    Thread.sleep(forTimeInterval: 0.002)
  }
  return try condition()
}

@Suite("ResultsObserver")
struct ResultsObserverTests {
  func fileContainer(_ directory: TemporaryDirectory) throws -> ModelContainer {
    try ModelContainer(for: Note.self, configurations: .init(url: directory.file("store.sqlite")))
  }

  @Test(
    "fetches in init and follows saves from its own and other contexts", arguments: [false, true])
  func followsContexts(onFile: Bool) throws {
    let directory = TemporaryDirectory()
    let container =
      onFile
      ? try fileContainer(directory)
      : try ModelContainer(
        for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    context.insert(Note(key: "b", text: "2"))
    try context.save()
    let observer = try ResultsObserver(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]), modelContext: context)
    #expect(observer.results.map(\.key) == ["b"])
    #expect(observer.version == 0)

    context.insert(Note(key: "a", text: "1"))
    try context.save()
    observer.waitForPendingUpdates()
    #expect(observer.results.map(\.key) == ["a", "b"])

    let other = ModelContext(container)
    let b = try #require(
      try other.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.key == "b" })).first)
    b.key = "0"
    other.insert(Note(key: "c", text: "3"))
    try other.save()
    observer.waitForPendingUpdates()
    #expect(observer.results.map(\.key) == ["0", "a", "c"])
    try other.delete(model: Note.self, where: #Predicate { $0.key == "a" })
    try other.save()
    observer.waitForPendingUpdates()
    #expect(observer.results.map(\.key) == ["0", "c"])
    #expect(observer.version == 3)
  }

  @Test(
    "patches results in the descriptor's order, with a predicate, like a fresh fetch",
    arguments: TestEngine.allCases)
  func patchesLikeAFetch(engine: TestEngine) throws {
    let container = try engineContainer(engine, Sample.self)
    let context = ModelContext(container)
    let predicate = #Predicate<Sample> { $0.small > -5 && $0.name.contains("a") }
    let sorts = [SortDescriptor(\Sample.name, order: .reverse), SortDescriptor(\Sample.small)]
    let observer = try ResultsObserver(
      FetchDescriptor(predicate: predicate, sortBy: sorts), sectionBy: \Sample.name,
      container: container)
    var generator = SeededGenerator(seed: 99)
    var live: [Sample] = []
    // PostgreSQL refuses text with a NUL character (a clear error, tested elsewhere).
    func storable(_ text: String) -> String {
      engine == .postgreSQL ? text.replacingOccurrences(of: "\u{0}", with: "\u{1}") : text
    }
    for round in 0..<30 {
      for sample in SampleData.make(count: 10, seed: UInt64(round)) {
        sample.name = storable(sample.name)
        sample.note = sample.note.map(storable)
        context.insert(sample)
        live.append(sample)
      }
      for _ in 0..<5 where !live.isEmpty {
        let sample = live[Int.random(in: 0..<live.count, using: &generator)]
        sample.small = Int.random(in: -10...10, using: &generator)
        sample.name = storable(SampleData.strings.randomElement(using: &generator)!)
      }
      for _ in 0..<3 where !live.isEmpty {
        context.delete(live.remove(at: Int.random(in: 0..<live.count, using: &generator)))
      }
      try context.save()
      observer.waitForPendingUpdates()
      let fresh = try ModelContext(container).fetch(
        FetchDescriptor(predicate: predicate, sortBy: sorts), sectionBy: \Sample.name)
      let expected = fresh.flatMap { $0.map(\.id) }
      #expect(observer.results.map(\.id) == expected, "round \(round)")
      #expect(observer.sections.map(\.id) == fresh.map(\.id))
      #expect(observer.sections.map { $0.map(\.id) } == fresh.map { $0.map(\.id) })
    }
  }

  @Test(
    "publishes nothing for a rolled-back, empty, read-only or unrelated save",
    arguments: TestEngine.allCases)
  func noSpuriousUpdates(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self, Sample.self)
    let context = ModelContext(container)
    let observer = try ResultsObserver(
      FetchDescriptor<Note>(predicate: #Predicate { $0.group == "shown" }), container: container)
    let seen = Mutex<Set<Int>>([])
    let token = withContinuousObservation {
      _ = observer.results
      let version = observer.version
      seen.withLock { _ = $0.insert(version) }
    }
    #expect(eventually { seen.withLock { $0 } == [0] })
    context.insert(Note(key: "x", text: ""))
    context.rollback()
    try context.save()
    _ = try context.fetch(FetchDescriptor<Note>())
    context.insert(Note(key: "hidden", text: "", group: "other"))
    context.insert(Sample())
    try context.save()
    observer.waitForPendingUpdates()
    #expect(observer.version == 0)
    context.insert(Note(key: "shown", text: "", group: "shown"))
    try context.save()
    #expect(eventually { seen.withLock { $0 } == [0, 1] })
    #expect(observer.results.map(\.key) == ["shown"])
    token.cancel()
  }

  @Test(
    "hands out snapshots: a changed row arrives as a new instance", arguments: TestEngine.allCases)
  func snapshots(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    let note = Note(key: "a", text: "old")
    context.insert(note)
    try context.save()
    let observer = try ResultsObserver(FetchDescriptor<Note>(), container: container)
    let before = try #require(observer.results.first)
    note.text = "new"
    try context.save()
    observer.waitForPendingUpdates()
    #expect(before.text == "old")
    #expect(observer.results.first?.text == "new")
    let change = try #require(observer.changes(after: 0)?.first)
    #expect(change.removed.first === before && change.inserted.first === observer.results.first)
    let identifier = try #require(observer.identifier(for: observer.results[0]))
    #expect(try context.model(for: identifier, as: Note.self) === note)
  }

  @Test("refetches a window (fetchLimit) instead of patching it", arguments: TestEngine.allCases)
  func window(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let context = ModelContext(container)
    var descriptor = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)])
    descriptor.fetchLimit = 2
    let observer = try ResultsObserver(descriptor, container: container)
    for key in ["c", "b", "a"] {
      context.insert(Note(key: key, text: ""))
      try context.save()
    }
    observer.waitForPendingUpdates()
    #expect(observer.results.map(\.key) == ["a", "b"])
  }

  @Test("works with Observations", arguments: TestEngine.allCases)
  func observations(engine: TestEngine) async throws {
    let container = try engineContainer(engine, Note.self)
    let observer = try ResultsObserver(FetchDescriptor<Note>(), container: container)
    let counts = Observations { observer.results.count }
    var iterator = counts.makeAsyncIterator()
    #expect(await iterator.next() == 0)
    let context = ModelContext(container)
    context.insert(Note(key: "a", text: ""))
    try context.save()
    #expect(await iterator.next() == 1)
  }
}

@Suite("HistoryObserver")
struct HistoryObserverTests {
  @Test(
    "counts transactions by author and model type, and the seed's pattern works",
    arguments: TestEngine.allCases)
  func countsAndSeedPattern(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self, Sample.self)
    let observer = try HistoryObserver(
      container: container, authors: ["App"], modelTypes: [Note.self])
    let app = ModelContext(container)
    app.author = "App"
    let server = ModelContext(container)
    server.author = "Server"

    // The seed: observe eventCounter, then fetch the history after the last token, upload it.
    let uploaded = Mutex<[String]>([])
    let lastToken = Mutex<DefaultHistoryToken?>(nil)
    let reader = ModelContext(container)
    let readerBox = UncheckedSendable(reader)
    let lock = NSLock()
    let token = withContinuousObservation {
      _ = observer.eventCounter
      lock.lock()
      defer { lock.unlock() }
      let context = readerBox.value
      let descriptor = HistoryDescriptor(
        after: lastToken.withLock { $0 }, authors: ["App"], modelTypes: [Note.self])
      guard let transactions = try? context.fetchHistory(descriptor) else { return }
      for transaction in transactions {
        uploaded.withLock {
          $0.append("\(transaction.changes.count) by \(transaction.author ?? "")")
        }
        lastToken.withLock { $0 = transaction.token }
      }
    }
    server.insert(Note(key: "s", text: ""))
    try server.save()
    app.insert(Sample())
    try app.save()
    #expect(observer.eventCounter == 0)
    app.insert(Note(key: "a", text: ""))
    app.insert(Note(key: "b", text: ""))
    try app.save()
    #expect(observer.eventCounter == 1)
    #expect(eventually { uploaded.withLock { $0 } == ["2 by App"] })
    token.cancel()
  }
}

extension HistoryObserverTests {
  @Test(
    "counts each local save once while its store monitor reads the same commits",
    arguments: TestEngine.allCases)
  func localSavesCountedOnce(engine: TestEngine) throws {
    let store = try engine.makeStore()
    let container = try store.container(Note.self)
    let observer = try HistoryObserver(container: container)
    let context = ModelContext(container)
    // Saves of many rows: the longer the bookkeeping after a commit, the likelier the monitor
    // reads the commit before the save announces it.
    let saves = 20
    for save in 0..<saves {
      for row in 0..<400 { context.insert(Note(key: "\(save).\(row)", text: "")) }
      try context.save()
    }
    // A commit from another container is read by the monitor after every earlier one, so once
    // it is counted the monitor has passed every local save: none may have been counted twice.
    let other = ModelContext(try store.container(Note.self))
    other.insert(Note(key: "other", text: ""))
    try other.save()
    #expect(eventually { observer.eventCounter >= saves + 1 })
    #expect(observer.eventCounter == saves + 1)
  }
}

@Suite("Continuous observation")
struct ContinuousObservationTests {
  @Test(
    "sees the value after the change, never stopping at a stale one", arguments: TestEngine.allCases
  )
  func seesLatest(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self)
    let observer = try ResultsObserver(FetchDescriptor<Note>(), container: container)
    let seen = Mutex<[Int]>([])
    let token = withContinuousObservation { seen.withLock { $0.append(observer.version) } }
    let context = ModelContext(container)
    for index in 0..<50 {
      context.insert(Note(key: "k\(index)", text: ""))
      try context.save()
    }
    #expect(eventually { observer.results.count == 50 })
    let final = observer.version
    #expect(eventually { seen.withLock { $0.last } == final }, "the body saw the last version")
    let values = seen.withLock { $0 }
    #expect(values == values.sorted(), "versions only go up")
    token.cancel()
    let count = seen.withLock { $0.count }
    context.insert(Note(key: "after", text: ""))
    try context.save()
    // Deterministic: a token started now sees a later version; by then the cancelled one would
    // have run for the earlier commit, had it still been subscribed.
    let later = Mutex<[Int]>([])
    let probe = withContinuousObservation { [observer] in
      let version = observer.version
      later.withLock { $0.append(version) }
    }
    context.insert(Note(key: "later", text: ""))
    try context.save()
    observer.waitForPendingUpdates()
    let last = observer.version
    #expect(eventually { later.withLock { $0.last } == last })
    probe.cancel()
    #expect(seen.withLock { $0.count } == count, "a cancelled token runs no more")
  }
}

@Suite("Observers report failures")
struct ObserverFailureTests {
  /// A store of two samples with place tokens, an observer on it, and a raw connection to write
  /// around the library as another process would.
  func setUp(_ directory: TemporaryDirectory) throws -> (
    ModelContainer, ResultsObserver<Sample>, Database
  ) {
    let url = directory.file("store.sqlite")
    let container = try ModelContainer(for: Sample.self, configurations: .init(url: url))
    let context = ModelContext(container)
    for name in ["a", "b"] {
      let sample = Sample()
      sample.name = name
      sample.place = PlaceToken(raw: name)
      context.insert(sample)
    }
    try context.save()
    let observer = try ResultsObserver(
      FetchDescriptor<Sample>(sortBy: [SortDescriptor(\.name)]), container: container)
    let outside = try Database(path: url.path, flags: 2)
    try outside.execute("PRAGMA busy_timeout = 5000")
    return (container, observer, outside)
  }

  /// Commits `sql` with a history transaction saying row `key` was updated, as a writer in
  /// another process would.
  func outsideUpdate(_ database: Database, key: Int, _ sql: String) throws {
    try database.execute(
      """
      BEGIN IMMEDIATE;
      \(sql);
      INSERT INTO _history_transactions (author, timestamp) VALUES ('outside', 0);
      INSERT INTO _history_changes (token, entity, pk, kind, attributes)
        VALUES (last_insert_rowid(), 'samples', \(key), 1, 'place');
      COMMIT;
      """)
  }

  @Test("a row that can no longer be read: lastError names it, results stay, then recover")
  func damagedRow() throws {
    let directory = TemporaryDirectory()
    let (_, observer, outside) = try setUp(directory)
    #expect(observer.lastError == nil)
    let seen = Mutex<[String?]>([])
    let token = withContinuousObservation {
      let error = observer.lastError
      seen.withLock { $0.append(error?.row) }
    }
    defer { token.cancel() }
    try outsideUpdate(
      outside, key: 1, "UPDATE samples SET place = CAST('{{' AS BLOB) WHERE _pk = 1")
    #expect(eventually { observer.lastError != nil })
    let error = try #require(observer.lastError)
    #expect(error.code == .invalidValue)
    #expect(error.row?.contains("row 1") == true, "\(error)")
    #expect(observer.results.map(\.name) == ["a", "b"], "the last good results are kept")
    // Repaired by the outside writer: the observer catches up and clears the error.
    try outsideUpdate(
      outside, key: 1,
      "UPDATE samples SET place = CAST('{\"raw\":\"fixed\"}' AS BLOB), name = 'c' WHERE _pk = 1")
    #expect(eventually { observer.lastError == nil && observer.results.map(\.name) == ["b", "c"] })
    #expect(seen.withLock { $0.contains { $0?.contains("row 1") == true } })
    // The continuous observation runs on its own queue after the change: it sees the cleared
    // error soon after, not necessarily before the line above returns (a CI run under load
    // read the list before that run).
    #expect(eventually { seen.withLock { $0.last! == nil } })
  }

  @Test("history that cannot be read: the monitor reports it, backs off, and catches up")
  func unreadableHistory() throws {
    let directory = TemporaryDirectory()
    let (container, observer, outside) = try setUp(directory)
    // Another process's commit lands while the history table cannot be read.
    try outside.execute(
      "ALTER TABLE _history_transactions RENAME TO _history_away; UPDATE samples SET name = 'z' WHERE _pk = 1"
    )
    #expect(eventually { observer.lastError != nil }, "the failure is visible")
    #expect(observer.results.map(\.name) == ["a", "b"])
    try outside.execute("ALTER TABLE _history_away RENAME TO _history_transactions")
    // A commit after the repair is seen, and so is the one made while it failed (refetched).
    let context = ModelContext(container)
    let sample = Sample()
    sample.name = "m"
    context.insert(sample)
    try context.save()
    #expect(
      eventually { observer.lastError == nil && observer.results.map(\.name) == ["b", "m", "z"] },
      "\(observer.results.map(\.name)) \(String(describing: observer.lastError))")
  }
}

@Suite("Observed results in chunks")
struct ObservedResultsTests {
  /// The chunks' invariants: no empty chunk, none over the limit, `starts` the running sum,
  /// `count` the total, and the elements those of `reference` in order.
  static func check(_ results: ObservedResults<Int>, _ reference: [Int], limit: Int) -> Bool {
    var start = 0
    for (index, chunk) in results.chunks.enumerated() {
      guard !chunk.isEmpty, chunk.count <= limit, results.starts[index] == start else {
        return false
      }
      start += chunk.count
    }
    guard results.chunks.count == results.starts.count, start == results.count,
      results.count == reference.count, results.array == reference
    else { return false }
    return reference.indices.allSatisfy { results[$0] == reference[$0] }
  }

  @Test(
    "random inserts and removes keep every invariant, with chunks of 2 to 8",
    arguments: [2, 3, 4, 8])
  func splits(limit: Int) {
    var generator = SeededGenerator(seed: UInt64(limit))
    var reference = Array(0..<Int.random(in: 0...20, using: &generator))
    var results = ObservedResults(reference, chunkLimit: limit)
    #expect(Self.check(results, reference, limit: limit))
    for step in 0..<2_000 {
      if reference.isEmpty || Int.random(in: 0..<3, using: &generator) > 0 {
        let position = Int.random(in: 0...reference.count, using: &generator)
        reference.insert(step, at: position)
        results.insert(step, at: position)
      } else {
        let position = Int.random(in: 0..<reference.count, using: &generator)
        reference.remove(at: position)
        results.remove(at: position)
      }
      guard Self.check(results, reference, limit: limit) else {
        Issue.record("invariants broken at step \(step) with chunks of \(limit)")
        return
      }
    }
    // Empty it completely, then grow again from nothing.
    while !reference.isEmpty {
      reference.removeFirst()
      results.remove(at: 0)
      #expect(Self.check(results, reference, limit: limit))
    }
    results.insert(7, at: 0)
    #expect(Self.check(results, [7], limit: limit))
  }
}

extension HistoryObserverTests {
  @Test(
    "SwiftData's initializer: tokens by store count what waits after them, observed models and authors filter, a token of another kind is refused",
    arguments: TestEngine.allCases)
  func swiftDataInitializer(engine: TestEngine) throws {
    let container = try engineContainer(engine, Note.self, Sample.self)
    let app = ModelContext(container)
    app.author = "App"
    app.insert(Note(key: "a", text: ""))
    try app.save()
    let start = try app.currentHistoryToken()
    app.insert(Note(key: "b", text: ""))
    try app.save()
    app.insert(Sample())
    try app.save()
    let server = ModelContext(container)
    server.author = "Server"
    server.insert(Note(key: "s", text: ""))
    try server.save()

    let fromNow = try HistoryObserver(observedModels: [Note.self], modelContainer: container)
    #expect(fromNow.eventCounter == 0 && fromNow.observedModels.count == 1)
    #expect(fromNow.modelContainer === container)
    let tokens: [String: any HistoryToken] = [container.storeIdentifier.uuidString: start]
    let waiting = try HistoryObserver(
      historyTokens: tokens, observedModels: [Note.self], authors: ["App"],
      modelContainer: container)
    #expect(waiting.eventCounter == 1, "b's insert; not the Sample's, not Server's")
    let everything = try HistoryObserver(historyTokens: tokens, modelContainer: container)
    #expect(everything.eventCounter == 3)
    let id = container.storeIdentifier.uuidString
    let mixedCase = String(id.prefix(4)).lowercased() + id.dropFirst(4)
    #expect(
      try HistoryObserver(historyTokens: [mixedCase: start], modelContainer: container)
        .eventCounter == 3, "a store identifier in any case")
    let otherStore = try HistoryObserver(
      historyTokens: [UUID().uuidString: start], modelContainer: container)
    #expect(otherStore.eventCounter == 0, "no token for this store: from now on")

    app.insert(Note(key: "c", text: ""))
    try app.save()
    #expect(eventually { waiting.eventCounter == 2 && fromNow.eventCounter == 1 })

    struct OtherToken: HistoryToken {
      var value = 0
      static func < (lhs: OtherToken, rhs: OtherToken) -> Bool { lhs.value < rhs.value }
    }
    #expect {
      try HistoryObserver(
        historyTokens: [container.storeIdentifier.uuidString: OtherToken()],
        modelContainer: container)
    } throws: {
      ($0 as? PersistenceError)?.code == .historyTokenForeign
    }
    let expiredStore = ModelContext(container)
    try expiredStore.deleteHistory(before: try expiredStore.currentHistoryToken())
    #expect {
      try HistoryObserver(historyTokens: tokens, modelContainer: container)
    } throws: {
      ($0 as? PersistenceError)?.code == .historyTokenExpired
    }
  }
}
