import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

/// History read as SwiftData's users read it: `HistoryDescriptor<DefaultHistoryTransaction>`
/// with a predicate, a sort and a limit, changes matched by casting to
/// `DefaultHistoryInsert/Update/Delete<Model>`, tombstones by key path, `deleteHistory(_:)`.
@Suite("History in SwiftData's spelling")
struct HistorySpellingTests {
  /// Three transactions on a new store: two notes inserted by "app", one updated by "sync",
  /// one deleted by "app".
  func threeTransactions(_ engine: TestEngine) throws -> (ModelContainer, [DefaultHistoryToken]) {
    let container = try HistoryTests().makeContainer(engine)
    let context = ModelContext(container)
    context.author = "app"
    let first = Note(key: "a", text: "x", group: "g")
    context.insert(first)
    context.insert(Note(key: "b", text: "y"))
    try context.save()
    context.author = "sync"
    first.text = "z"
    try context.save()
    context.author = "app"
    context.delete(first)
    try context.save()
    return (container, try context.fetchHistory().map(\.token))
  }

  @Test(
    "a predicate on the token, the author or the time, a newest-first sort and a limit select what they say",
    arguments: TestEngine.allCases)
  func predicateSortAndLimit(engine: TestEngine) throws {
    let (container, tokens) = try threeTransactions(engine)
    #expect(tokens.count == 3)
    let context = ModelContext(container)
    let first = tokens[0]
    let after = try context.fetchHistory(
      HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > first }))
    #expect(after.map(\.token) == Array(tokens[1...]))

    var latest = HistoryDescriptor<DefaultHistoryTransaction>()
    latest.sortBy = [SortDescriptor(\.token, order: .reverse)]
    latest.fetchLimit = 1
    #expect(try context.fetchHistory(latest).map(\.token) == [tokens[2]])

    let byApp = try context.fetchHistory(
      HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.author == "app" }))
    #expect(byApp.map(\.token) == [tokens[0], tokens[2]])

    let all = try context.fetchHistory()
    let secondTime = all[1].timestamp
    let sinceSecond = try context.fetchHistory(
      HistoryDescriptor(predicate: #Predicate { $0.timestamp >= secondTime }))
    #expect(sinceSecond.map(\.token) == Array(tokens[1...]))

    // Parts SQL cannot read are evaluated on each transaction, with its changes.
    let twoChanges = try context.fetchHistory(
      HistoryDescriptor(predicate: #Predicate { $0.changes.count == 2 && $0.token >= first }))
    #expect(twoChanges.map(\.token) == [tokens[0]])
    var byAuthor = HistoryDescriptor<DefaultHistoryTransaction>(
      predicate: #Predicate { $0.author != nil })
    byAuthor.sortBy = [SortDescriptor(\.timestamp, order: .reverse)]
    byAuthor.fetchLimit = 2
    #expect(try context.fetchHistory(byAuthor).map(\.token) == [tokens[2], tokens[1]])

    // The transaction's other SwiftData members.
    let transaction = try #require(all.first)
    #expect(transaction.transactionIdentifier == first.value && transaction.id == first.value)
    #expect(transaction.storeIdentifier == container.storeIdentifier.uuidString.lowercased())
  }

  @Test(
    "changes are matched by casting to their model's insert, update and delete; a tombstone reads by key path",
    arguments: TestEngine.allCases)
  func typedChanges(engine: TestEngine) throws {
    let (container, _) = try threeTransactions(engine)
    var inserted: [String] = []
    var updated: [[PartialKeyPath<Note>]] = []
    var deleted: [String] = []
    for transaction in try ModelContext(container).fetchHistory() {
      for change in transaction.changes {
        switch change {
        case .insert(let insert as DefaultHistoryInsert<Note>):
          #expect(insert.transactionIdentifier == transaction.transactionIdentifier)
          inserted.append(insert.changedPersistentIdentifier.entityName)
        case .update(let update as DefaultHistoryUpdate<Note>):
          updated.append(update.updatedAttributes.map { $0 as PartialKeyPath<Note> })
          #expect(update.updatedAttributes.contains(\.text))
          #expect(!update.updatedAttributes.contains(\.key))
        case .delete(let delete as DefaultHistoryDelete<Note>):
          deleted.append(delete.tombstone[\.key] as? String ?? "?")
          #expect(delete.tombstone[\.text] == nil, "text is not .preserveValueOnDeletion")
          let preserved = Array(delete.tombstone)
          #expect(preserved.count == 1 && preserved.first?.keyPath == \Note.key)
          #expect(preserved.first?.value as? String == "a")
        default:
          Issue.record("a change of another model: \(change)")
        }
      }
    }
    #expect(inserted == ["notes", "notes"])
    #expect(updated == [[\Note.text]])
    #expect(deleted == ["a"])
    // A change cast to another model's type does not match.
    let change = try #require(ModelContext(container).fetchHistory().first?.changes.first)
    if case .insert(_ as DefaultHistoryInsert<Sample>) = change {
      Issue.record("a Note's insert matched Sample's type")
    }
  }

  @Test(
    "deleteHistory(_:) deletes what the descriptor selects; a token before the newest deleted one expires, later ones read on",
    arguments: TestEngine.allCases)
  func deleteByDescriptor(engine: TestEngine) throws {
    let (container, tokens) = try threeTransactions(engine)
    let context = ModelContext(container)
    let second = tokens[1]
    try context.deleteHistory(
      HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token <= second }))
    #expect(try context.fetchHistory().map(\.token) == [tokens[2]])
    #expect(try context.fetchHistory(HistoryDescriptor(after: second)).map(\.token) == [tokens[2]])
    let first = tokens[0]
    for descriptor in [
      HistoryDescriptor(after: first),
      HistoryDescriptor(predicate: #Predicate { $0.token > first }),
    ] {
      #expect {
        try context.fetchHistory(descriptor)
      } throws: {
        ($0 as? PersistenceError)?.code == .historyTokenExpired
      }
    }
    // A predicate bounding from above may name an expired token: it selects what is left.
    #expect(
      try context.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.token < first }))
        .isEmpty)
    // Nothing selected, nothing deleted.
    try context.deleteHistory(
      HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.author == "none" }))
    #expect(try context.fetchHistory().count == 1)
  }

  @Test("tokens of another store, or newer than any issued, are refused in a predicate too")
  func foreignAndUnknownTokens() throws {
    let (container, tokens) = try threeTransactions(.sqlite)
    let context = ModelContext(container)
    let foreign = DefaultHistoryToken(storeIdentifier: UUID(), value: 1)
    let unknown = DefaultHistoryToken(storeIdentifier: container.storeIdentifier, value: 99)
    for (token, code) in [
      (foreign, PersistenceError.Code.historyTokenForeign), (unknown, .historyTokenUnknown),
    ] {
      #expect {
        try context.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.token > token }))
      } throws: {
        ($0 as? PersistenceError)?.code == code
      }
    }
    #expect {
      try context.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.token < foreign }))
    } throws: {
      ($0 as? PersistenceError)?.code == .historyTokenForeign
    }
    #expect(tokens.count == 3)
  }

  @Test(
    "what cannot stream is refused with a clear error: enumerateHistory with a predicate on changes or a newest-first sort, historyUpdates sorted newest first"
  )
  func streamingRefusals() async throws {
    let (container, _) = try threeTransactions(.sqlite)
    let context = ModelContext(container)
    var newestFirst = HistoryDescriptor<DefaultHistoryTransaction>()
    newestFirst.sortBy = [SortDescriptor(\.token, order: .reverse)]
    for descriptor in [
      HistoryDescriptor(predicate: #Predicate { $0.changes.count > 1 }), newestFirst,
    ] {
      var seen = 0
      #expect {
        try context.enumerateHistory(descriptor) { _, _ in seen += 1 }
      } throws: {
        ($0 as? PersistenceError)?.code == .unsupportedPredicate
      }
      #expect(seen == 0)
    }
    // A predicate SQL reads wholly streams.
    var changes = 0
    try context.enumerateHistory(
      HistoryDescriptor(predicate: #Predicate { $0.author == "app" })
    ) { _, _ in changes += 1 }
    #expect(changes == 3)
    await #expect {
      for try await _ in container.historyUpdates(newestFirst) {}
    } throws: {
      ($0 as? PersistenceError)?.code == .unsupportedPredicate
    }
  }

  @Test(
    "what of a predicate and a sort runs in SQL: comparisons of the token, time and author joined by &&, a sort by the token"
  )
  func queryPlan() {
    let token = DefaultHistoryToken(storeIdentifier: UUID(), value: 7)
    let when = Date(timeIntervalSinceReferenceDate: 5)
    let whole = HistoryQueryPlan(
      HistoryDescriptor(
        predicate: #Predicate { $0.token > token && $0.author == "app" && when < $0.timestamp }))
    #expect(whole.predicateInSQL && whole.sortInSQL && !whole.newestFirst)
    #expect(whole.conditions == ["t.token > ?", "t.author = ?", "t.timestamp > ?"])
    #expect(whole.lowerBounds == [7] && whole.sqlStart == 7 && whole.tokens == [token])
    let part = HistoryQueryPlan(
      HistoryDescriptor(predicate: #Predicate { $0.changes.count == 2 && $0.token <= token }))
    #expect(!part.predicateInSQL && part.conditions == ["t.token <= ?"] && part.lowerBounds.isEmpty)
    #expect(part.sqlStart == 0 && part.tokens == [token])
    let either = HistoryQueryPlan(
      HistoryDescriptor(predicate: #Predicate { $0.token > token || $0.author == "app" }))
    #expect(!either.predicateInSQL && either.conditions.isEmpty)
    let nobody = HistoryQueryPlan(HistoryDescriptor(predicate: #Predicate { $0.author == nil }))
    #expect(nobody.predicateInSQL && nobody.conditions == ["t.author IS NULL"])
    var sorted = HistoryDescriptor<DefaultHistoryTransaction>()
    sorted.sortBy = [SortDescriptor(\.token, order: .reverse), SortDescriptor(\.timestamp)]
    let newest = HistoryQueryPlan(sorted)
    #expect(newest.sortInSQL && newest.newestFirst)
    sorted.sortBy = [SortDescriptor(\.timestamp)]
    #expect(!HistoryQueryPlan(sorted).sortInSQL)
  }

  /// A store with `count` transactions, each inserting a note (author "app"), and their tokens.
  func transactions(_ count: Int, _ engine: TestEngine) throws -> (
    ModelContext, [DefaultHistoryToken]
  ) {
    let context = ModelContext(try HistoryTests().makeContainer(engine))
    context.author = "app"
    for index in 0..<count {
      context.insert(Note(key: "n\(index)", text: ""))
      try context.save()
    }
    return (context, try context.fetchHistory().map(\.token))
  }

  @Test(
    "tokens are checked wherever the predicate compares them: another store's under || or !, an expired lower bound Swift evaluates, >= a deleted one; the latest lower bound decides",
    arguments: TestEngine.allCases)
  func tokensCheckedEverywhere(engine: TestEngine) throws {
    let (context, tokens) = try transactions(10, engine)
    let foreign = DefaultHistoryToken(storeIdentifier: UUID(), value: 2)
    for predicate in [
      #Predicate<DefaultHistoryTransaction> { $0.token > foreign || $0.author == "zzz" },
      #Predicate<DefaultHistoryTransaction> { !($0.token <= foreign) },
    ] {
      #expect {
        try context.fetchHistory(HistoryDescriptor(predicate: predicate))
      } throws: {
        ($0 as? PersistenceError)?.code == .historyTokenForeign
      }
    }
    #expect((foreign < tokens[2]) != (tokens[2] < foreign), "tokens of two stores are ordered")
    try context.deleteHistory(before: tokens[7])  // 1–7 gone: the floor is token 8
    let (t2, t7, t8) = (tokens[1], tokens[6], tokens[7])
    for predicate in [
      #Predicate<DefaultHistoryTransaction> { $0.token > t2 || $0.author == "zzz" },
      #Predicate<DefaultHistoryTransaction> { $0.token >= t7 },
      #Predicate<DefaultHistoryTransaction> { !($0.token <= t2) },
    ] {
      #expect {
        try context.fetchHistory(HistoryDescriptor(predicate: predicate))
      } throws: {
        ($0 as? PersistenceError)?.code == .historyTokenExpired
      }
    }
    #expect(
      try context.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.token >= t8 })).count
        == 3)
    #expect(
      try context.fetchHistory(
        HistoryDescriptor(predicate: #Predicate { $0.token > t2 && $0.token > t8 })
      ).count == 2)
    var after = HistoryDescriptor(after: t8)
    after.predicate = #Predicate { $0.token > t2 }
    #expect(try context.fetchHistory(after).count == 2)
  }

  @Test(
    "a negative fetchLimit is refused everywhere, never a crash nor everything deleted; deleting before a token never issued is refused",
    arguments: TestEngine.allCases)
  func limitsAndFutureTokens(engine: TestEngine) async throws {
    let (context, tokens) = try transactions(3, engine)
    var negative = HistoryDescriptor<DefaultHistoryTransaction>()
    negative.fetchLimit = -1
    var sorted = negative
    sorted.sortBy = [SortDescriptor(\.timestamp)]
    for descriptor in [negative, sorted] {
      for run in [
        { _ = try context.fetchHistory(descriptor) },
        { try context.deleteHistory(descriptor) },
        { try context.enumerateHistory(negative) { _, _ in } },
      ] {
        #expect {
          try run()
        } throws: {
          ($0 as? PersistenceError)?.code == .invalidValue
        }
      }
    }
    await #expect {
      for try await _ in context.container.historyUpdates(negative) {}
    } throws: {
      ($0 as? PersistenceError)?.code == .invalidValue
    }
    let future = DefaultHistoryToken(
      storeIdentifier: context.container.storeIdentifier, value: 1000)
    #expect {
      try context.deleteHistory(before: future)
    } throws: {
      ($0 as? PersistenceError)?.code == .historyTokenUnknown
    }
    #expect(try context.fetchHistory().map(\.token) == tokens)
    #expect(try context.currentHistoryToken() == tokens[2])
  }

  @Test(
    "deleting the history of some models keeps the other models' changes in the same transactions",
    arguments: TestEngine.allCases)
  func deleteSomeModels(engine: TestEngine) throws {
    let context = ModelContext(try HistoryTests().makeContainer(engine))
    context.insert(Note(key: "a", text: ""))
    context.insert(Sample())
    try context.save()
    context.insert(Sample())
    try context.save()
    context.insert(Note(key: "b", text: ""))
    try context.save()
    try context.deleteHistory(HistoryDescriptor(modelTypes: [Note.self]))
    let left = try context.fetchHistory()
    #expect(
      left.map { $0.changes.map(\.changedPersistentIdentifier.entityName) } == [
        ["samples"], ["samples"],
      ])
  }

  @Test(
    "historyUpdates: a fetchLimit is a page, everything waiting is delivered; a predicate's lower bound does not end the stream when history it delivered is deleted; an author is matched as Swift matches strings",
    arguments: TestEngine.allCases)
  func streams(engine: TestEngine) async throws {
    let (context, tokens) = try transactions(6, engine)
    var paged = HistoryDescriptor(after: tokens[0])
    paged.fetchLimit = 2
    var received: [DefaultHistoryToken] = []
    for try await transaction in context.container.historyUpdates(paged) {
      received.append(transaction.token)
      if received.count == 5 { break }
    }
    #expect(received == Array(tokens[1...]))

    let first = tokens[0]
    let stream = context.container.historyUpdates(
      HistoryDescriptor(predicate: #Predicate { $0.token > first }))
    var iterator = stream.makeAsyncIterator()
    for _ in 1..<6 { _ = try await iterator.next() }
    try context.deleteHistory(before: tokens[3])
    context.insert(Note(key: "later", text: ""))
    try context.save()
    let next = try await iterator.next()
    #expect(next?.token.value == tokens[5].value + 1)

    let composed = ModelContext(context.container)
    composed.author = "cafe\u{301}"
    composed.insert(Note(key: "café", text: ""))
    try composed.save()
    #expect(
      try context.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.author == "café" }))
        .count == 1)
  }

  @Test(
    "a filtered historyUpdates reads on from the newest transaction it scanned, not the newest it delivered: history it left out may be deleted",
    arguments: TestEngine.allCases)
  func filteredStreamScansOn(engine: TestEngine) async throws {
    let context = ModelContext(try HistoryTests().makeContainer(engine))
    let start = try context.currentHistoryToken()
    let stream = context.container.historyUpdates(
      HistoryDescriptor(after: start, modelTypes: [Sample.self]))
    var iterator = stream.makeAsyncIterator()
    context.insert(Sample())
    try context.save()
    let first = try await iterator.next()
    for index in 0..<3 {
      context.insert(Note(key: "n\(index)", text: ""))
      try context.save()
    }
    // Let the stream read the notes' commits (it delivers none of them).
    try await Task.sleep(for: .seconds(2))
    // Everything before the last note's transaction goes, the delivered sample's too: a
    // stream still after that sample would find its history expired.
    try context.deleteHistory(before: try context.currentHistoryToken())
    context.insert(Sample())
    try context.save()
    let second = try await iterator.next()
    #expect(first != nil && second != nil && second!.token > first!.token)
  }
}
