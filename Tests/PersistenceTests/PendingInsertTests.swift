import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

/// `FetchDescriptor.includePendingChanges`, as SwiftData's: models inserted and not saved join
/// a fetch, a count and a fetch of identifiers when they match.
@Suite("Fetches include unsaved inserts")
struct PendingInsertTests {
  /// A context of a new store on `engine` holding the saved notes "a", "c" and "e" (group
  /// "g"), with "b" and "d" inserted and not saved (group "g", then "h").
  func context(_ engine: TestEngine) throws -> ModelContext {
    let context = ModelContext(try HistoryTests().makeContainer(engine))
    for key in ["a", "c", "e"] { context.insert(Note(key: key, text: "saved", group: "g")) }
    try context.save()
    context.insert(Note(key: "d", text: "new", group: "h"))
    context.insert(Note(key: "b", text: "new", group: "g"))
    return context
  }

  @Test(
    "an unsaved insert that matches joins the stored models in the descriptor's order; one that does not, or with includePendingChanges false, does not",
    arguments: TestEngine.allCases)
  func fetchMerges(engine: TestEngine) throws {
    let context = try context(engine)
    let byKey = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)])
    #expect(try context.fetch(byKey).map(\.key) == ["a", "b", "c", "d", "e"])
    let inG = FetchDescriptor<Note>(
      predicate: #Predicate { $0.group == "g" }, sortBy: [SortDescriptor(\.key, order: .reverse)])
    #expect(try context.fetch(inG).map(\.key) == ["e", "c", "b", "a"])
    var stored = inG
    stored.includePendingChanges = false
    #expect(try context.fetch(stored).map(\.key) == ["e", "c", "a"])
    // Without a sort: the stored ones in their order, then the inserted in insertion order.
    #expect(try context.fetch(FetchDescriptor<Note>()).map(\.key) == ["a", "c", "e", "d", "b"])
    // Ties go to the stored ones first.
    let byText = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.text, order: .reverse)])
    #expect(try context.fetch(byText).map(\.key) == ["a", "c", "e", "d", "b"])
    // The same instances: fetched ones are the inserted objects themselves.
    let fetched = try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.key == "b" }))
    fetched.first?.text = "edited"
    #expect(try context.fetch(byKey)[1].text == "edited")
    // Saved, they are stored rows, fetched once.
    try context.save()
    #expect(try context.fetch(byKey).map(\.key) == ["a", "b", "c", "d", "e"])
  }

  @Test(
    "the window applies after the merge; counts and identifiers include the unsaved inserts",
    arguments: TestEngine.allCases)
  func windowsCountsAndIdentifiers(engine: TestEngine) throws {
    let context = try context(engine)
    var page = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)])
    page.fetchOffset = 1
    page.fetchLimit = 3
    #expect(try context.fetch(page).map(\.key) == ["b", "c", "d"])
    #expect(try context.fetchCount(page) == 3)
    page.fetchOffset = 4
    #expect(try context.fetch(page).map(\.key) == ["e"])
    #expect(try context.fetchCount(page) == 1)
    page.fetchOffset = 9
    #expect(try context.fetch(page).isEmpty && context.fetchCount(page) == 0)
    page.fetchOffset = nil
    page.fetchLimit = .max
    #expect(try context.fetch(page).count == 5)
    #expect(try context.fetchCount(FetchDescriptor<Note>()) == 5)
    let inH = FetchDescriptor<Note>(predicate: #Predicate { $0.group == "h" })
    #expect(try context.fetchCount(inH) == 1)

    let identifiers = try context.fetchIdentifiers(
      FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
    #expect(identifiers.map(\.isTemporary) == [false, true, false, true, false])
    let b = try #require(context.registeredModel(for: identifiers[1]) as Note?)
    #expect(b.key == "b")
  }

  @Test(
    "an insert deleted before the save is left out; a predicate Swift cannot evaluate on an unsaved insert is an error, not an empty answer",
    arguments: TestEngine.allCases)
  func deletedAndFailing(engine: TestEngine) throws {
    let context = try context(engine)
    let b = try #require(
      try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.key == "b" })).first)
    context.delete(b)
    #expect(try context.fetch(FetchDescriptor<Note>()).map(\.key) == ["a", "c", "e", "d"])
    #expect(try context.fetchCount(FetchDescriptor<Note>()) == 4)

    // An evaluation that throws is no match, as SQL's NULL is: the same answer saved or not.
    let sample = ModelContext(try HistoryTests().makeContainer(engine))
    let stored = Sample()
    stored.note = "x"
    sample.insert(stored)
    try sample.save()
    sample.insert(Sample())  // note is nil
    let unwrapping = FetchDescriptor<Sample>(predicate: #Predicate { $0.note! == "x" })
    #expect(try sample.fetch(unwrapping).map(\.note) == ["x"])
    #expect(try sample.fetchCount(unwrapping) == 1)
    // Integer arithmetic could trap in Swift where SQL answers: refused while inserts wait.
    let overflowing = Sample()
    overflowing.count = .max
    sample.insert(overflowing)
    let arithmetic = FetchDescriptor<Sample>(predicate: #Predicate { $0.count + 1 > 5 })
    #expect {
      try sample.fetch(arithmetic)
    } throws: {
      ($0 as? PersistenceError)?.code == .unsupportedPredicate
    }
    var storedOnly = arithmetic
    storedOnly.includePendingChanges = false
    #expect(try sample.fetch(storedOnly).isEmpty)
  }

  @Test(
    "negative windows read as SQL reads them; a stored model's unsaved edit does not move it; pages are of stored models",
    arguments: TestEngine.allCases)
  func windowsEditsAndPages(engine: TestEngine) throws {
    let context = try context(engine)
    var negative = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)])
    negative.fetchOffset = -1
    #expect(try context.fetch(negative).map(\.key) == ["a", "b", "c", "d", "e"])
    #expect(try context.fetchCount(negative) == 5)
    #expect(try context.fetchIdentifiers(negative).count == 5)
    negative.fetchOffset = nil
    negative.fetchLimit = -1
    #expect(try context.fetch(negative).count == 5 && context.fetchCount(negative) == 5)

    let a = try #require(
      context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)])).first)
    a.key = "z"
    // The stored ones keep the store's order (by their stored keys: a, c, e); an inserted one
    // is placed by comparing it with their current values.
    let keys = try context.fetch(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)]))
      .map(\.key)
    #expect(keys.filter { ["z", "c", "e"].contains($0) } == ["z", "c", "e"])
    #expect(keys.count == 5 && keys.filter { ["b", "d"].contains($0) } == ["b", "d"])
    // Identifiers without a sort load no model.
    let fresh = ModelContext(context.container)
    fresh.insert(Note(key: "d", text: "new"))
    fresh.insert(Note(key: "b", text: "new"))
    let identifiers = try fresh.fetchIdentifiers(FetchDescriptor<Note>())
    #expect(identifiers.map(\.isTemporary) == [false, false, false, true, true])
    #expect(fresh.registeredCount == 2, "the two inserted; no stored note loaded")

    var page = FetchDescriptor<Note>(sortBy: [SortDescriptor(\.key)])
    #expect(try fresh.fetchPage(page).matched == 3)
    page.fetchLimit = 10
    #expect(try fresh.fetchPage(page).matched == 3)
    #expect(try fresh.fetchModelsPage(page).models.map(\.key) == ["a", "c", "e"])
  }
}
