import Foundation
import Observation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

/// `Note` with a row loader: rows become new notes through an initializer.
@Observable final class LoadedNote: PersistentModel {
  var key = ""
  var text = ""
  var group = ""
  var priority = 3
  init() {}
  init(key: String, text: String, group: String, priority: Int) {
    self.key = key
    self.text = text
    self.group = group
    self.priority = priority
  }
  static let schema = ModelSchema<LoadedNote>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text"),
    .attribute(\.group, "grp", .indexed),
    .attribute(\.priority, "priority")
  )
  .loading { row in
    try LoadedNote(
      key: row.next(\.key), text: row.next(\.text), group: row.next(\.group),
      priority: row.next(\.priority))
  }
  .saving { note, row in
    try row.bind(\.key, note.key)
    try row.bind(\.text, note.text)
    try row.bind(\.group, note.group)
    try row.bind(\.priority, note.priority)
  }
}

/// `LoadedNote` without a loader: rows load attribute by attribute through key paths.
@Observable final class PlainNote: PersistentModel {
  var key = ""
  var text = ""
  var group = ""
  var priority = 3
  init() {}
  static let schema = ModelSchema<PlainNote>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text"),
    .attribute(\.group, "grp", .indexed),
    .attribute(\.priority, "priority"))
}

/// A loader that reads the attributes out of order (text before key).
@Observable final class MisorderedNote: PersistentModel {
  var key = ""
  var text = ""
  init() {}
  init(key: String, text: String) {
    self.key = key
    self.text = text
  }
  static let schema = ModelSchema<MisorderedNote>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text"),
    .attribute(\.priority, "priority")
  )
  .loading { row in
    let text = try row.next(\.text)
    return MisorderedNote(key: try row.next(\.key), text: text)
  }
  var priority = 0
}

/// A loader that reads the wrong type: a `String` where the schema declares an `Int`.
@Observable final class MistypedNote: PersistentModel {
  var key = ""
  var text = ""
  var priority = 0
  init() {}
  static let schema = ModelSchema<MistypedNote>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.priority, "priority"),
    .attribute(\.text, "text")
  )
  .loading { row in
    let note = MistypedNote()
    note.key = try row.next(\.key)
    note.text = try row.next(\.text)
    return note
  }
}

/// A loader that stops before the last attribute.
@Observable final class ShortNote: PersistentModel {
  var key = ""
  var text = ""
  init() {}
  static let schema = ModelSchema<ShortNote>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text")
  )
  .loading { row in
    let note = ShortNote()
    note.key = try row.next(\.key)
    return note
  }
}

/// A binder over a `Double`, which cannot store NaN.
@Observable final class ScoredNote: PersistentModel {
  var key = ""
  var score = 0.0
  init() {}
  static let schema = ModelSchema<ScoredNote>(
    "scored",
    .attribute(\.key, "key", .unique),
    .attribute(\.score, "score")
  )
  .saving { note, row in
    try row.bind(\.key, note.key)
    try row.bind(\.score, note.score)
  }
}

/// A binder that binds the attributes out of order (text before key).
@Observable final class MisboundNote: PersistentModel {
  var key = ""
  var text = ""
  init() {}
  static let schema = ModelSchema<MisboundNote>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text")
  )
  .saving { note, row in
    try row.bind(\.text, note.text)
    try row.bind(\.key, note.key)
  }
}

/// A binder that binds the wrong type: a `String` where the schema declares an `Int`.
@Observable final class MistypedBoundNote: PersistentModel {
  var key = ""
  var text = ""
  var priority = 0
  init() {}
  static let schema = ModelSchema<MistypedBoundNote>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.priority, "priority"),
    .attribute(\.text, "text")
  )
  .saving { note, row in
    try row.bind(\.key, note.key)
    try row.bind(\.text, note.text)
  }
}

/// A binder that stops before the last attribute.
@Observable final class ShortBoundNote: PersistentModel {
  var key = ""
  var text = ""
  init() {}
  static let schema = ModelSchema<ShortBoundNote>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text")
  )
  .saving { note, row in try row.bind(\.key, note.key) }
}

/// A loader that reads two attributes of one type in each other's place.
@Observable final class SwappedNote: PersistentModel {
  var key = ""
  var text = ""
  init() {}
  init(key: String, text: String) {
    self.key = key
    self.text = text
  }
  static let schema = ModelSchema<SwappedNote>(
    "notes",
    .attribute(\.key, "key", .unique),
    .attribute(\.text, "text")
  )
  .loading { row in
    let text = try row.next(\.key)
    return SwappedNote(key: try row.next(\.text), text: text)
  }
}

/// A loader that swaps the first and third of three strings: their columns hold the same
/// probe value in the first round (bit 0 of 1 and of 3), and differ only in the second.
@Observable final class FarSwappedNote: PersistentModel {
  var a = ""
  var b = ""
  var c = ""
  init() {}
  static let schema = ModelSchema<FarSwappedNote>(
    "notes", .attribute(\.a, "a"), .attribute(\.b, "b"), .attribute(\.c, "c")
  )
  .loading { row in
    let note = FarSwappedNote()
    note.c = try row.next(\.a)
    note.b = try row.next(\.b)
    note.a = try row.next(\.c)
    return note
  }
}

/// A binder that binds one attribute's value as another of the same type.
@Observable final class CrossBoundNote: PersistentModel {
  var key = ""
  var text = ""
  init() {}
  static let schema = ModelSchema<CrossBoundNote>(
    "notes",
    .attribute(\.key, "key", .unique),
    .attribute(\.text, "text")
  )
  .saving { note, row in
    try row.bind(\.key, note.key)
    try row.bind(\.text, note.key)
  }
}

/// A loader whose reads depend on the row: the container's probe rows pass, a row of the
/// store whose key starts with "late" reads the wrong type.
@Observable final class LateMisreadNote: PersistentModel {
  var key = "late"
  var count = 0
  init() {}
  static let schema = ModelSchema<LateMisreadNote>(
    "notes",
    .attribute(\.key, "key", .unique),
    .attribute(\.count, "count")
  )
  .loading { row in
    let note = LateMisreadNote()
    note.key = try row.next(\.key)
    if note.key.hasPrefix("late") {
      _ = try row.next(\.key)
    } else {
      note.count = try row.next(\.count)
    }
    return note
  }
}

/// Nine attributes of every storage type, optionals among them, with a loader and a binder:
/// four probe rounds.
@Observable final class WideNote: PersistentModel {
  var a = ""
  var b = ""
  var c = 0
  var d: Int? = nil
  var e = false
  var f = 0.0
  var g = Date(timeIntervalSinceReferenceDate: 0)
  var h = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
  var i: Data? = nil
  init() {}
  static let schema = ModelSchema<WideNote>(
    "wide",
    .attribute(\.a, "a"), .attribute(\.b, "b"), .attribute(\.c, "c"), .attribute(\.d, "d"),
    .attribute(\.e, "e"), .attribute(\.f, "f"), .attribute(\.g, "g"), .attribute(\.h, "h"),
    .attribute(\.i, "i")
  )
  .loading { row in
    let note = WideNote()
    note.a = try row.next(\.a)
    note.b = try row.next(\.b)
    note.c = try row.next(\.c)
    note.d = try row.next(\.d)
    note.e = try row.next(\.e)
    note.f = try row.next(\.f)
    note.g = try row.next(\.g)
    note.h = try row.next(\.h)
    note.i = try row.next(\.i)
    return note
  }
  .saving { note, row in
    try row.bind(\.a, note.a)
    try row.bind(\.b, note.b)
    try row.bind(\.c, note.c)
    try row.bind(\.d, note.d)
    try row.bind(\.e, note.e)
    try row.bind(\.f, note.f)
    try row.bind(\.g, note.g)
    try row.bind(\.h, note.h)
    try row.bind(\.i, note.i)
  }
}

@Suite("Row loaders")
struct ModelRowTests {
  /// A store of `count` notes with priorities, written through `LoadedNote`.
  func store(_ folder: TemporaryDirectory, count: Int = 5) throws -> URL {
    let url = folder.file("notes.store")
    let context = ModelContext(
      try ModelContainer(for: LoadedNote.self, configurations: ModelConfiguration(url: url)))
    for index in 0..<count {
      context.insert(
        LoadedNote(
          key: "k\(index)", text: "note \(index) ✈︎", group: index % 2 == 0 ? "even" : "odd",
          priority: index * 10))
    }
    try context.save()
    return url
  }

  @Test("rows become models through the loader with the values and snapshot the key paths give")
  func loadsLikeKeyPaths() throws {
    let folder = TemporaryDirectory()
    let url = try store(folder)
    let loaded = ModelContext(
      try ModelContainer(for: LoadedNote.self, configurations: ModelConfiguration(url: url)))
    let notes = try loaded.fetch(FetchDescriptor<LoadedNote>(sortBy: [SortDescriptor(\.key)]))
    // The same rows read attribute by attribute through key paths (no loader).
    let plain = ModelContext(
      try ModelContainer(for: PlainNote.self, configurations: ModelConfiguration(url: url)))
    let reference = try plain.fetch(FetchDescriptor<PlainNote>(sortBy: [SortDescriptor(\.key)]))
    #expect(notes.count == 5)
    #expect(notes.map(\.key) == reference.map(\.key))
    #expect(notes.map(\.text) == reference.map(\.text))
    #expect(notes.map(\.group) == reference.map(\.group))
    #expect(notes.map(\.priority) == reference.map(\.priority))
    #expect(notes.map(\.priority) == [0, 10, 20, 30, 40])
    // The snapshot holds the loaded values: nothing changed, and a change is seen and saved.
    #expect(!loaded.hasChanges)
    notes[2].text = "changed"
    #expect(loaded.hasChanges)
    try loaded.save()
    let again = ModelContext(loaded.container)
    #expect(
      try again.fetch(FetchDescriptor<LoadedNote>(predicate: #Predicate { $0.key == "k2" }))
        .first?.text == "changed")
    // rollback restores the snapshot's value.
    notes[3].priority = 99
    loaded.rollback()
    #expect(notes[3].priority == 30)
    // A registered model is refreshed in place (not through the loader): same instance.
    let refetched = try loaded.fetch(FetchDescriptor<LoadedNote>(sortBy: [SortDescriptor(\.key)]))
    #expect(refetched[0] === notes[0])
  }

  @Test("a value the loader cannot read is an error naming row and column, and nothing leaks")
  func mismatchNamesRowAndColumn() throws {
    let folder = TemporaryDirectory()
    let url = try store(folder)
    let outside = try Database(path: url.path, flags: 2)
    try outside.execute("UPDATE notes SET priority = 'high' WHERE key = 'k3'")
    let context = ModelContext(
      try ModelContainer(for: LoadedNote.self, configurations: ModelConfiguration(url: url)))
    let error = try #require(throws: PersistenceError.self) {
      try context.fetch(FetchDescriptor<LoadedNote>())
    }
    #expect(error.code == .invalidValue)
    #expect(error.attribute == "priority")
    #expect(error.row?.contains("k3") == true, "\(error)")
    // The rows before it are usable; the context is not left with a half-made model.
    let valid = try context.fetch(
      FetchDescriptor<LoadedNote>(predicate: #Predicate { $0.key != "k3" }))
    #expect(valid.count == 4)
    #expect(!context.hasChanges)
    let problems = try context.validateStoredRows(of: LoadedNote.self)
    #expect(problems.count == 1)
    #expect(problems.first?.attribute == "priority")
  }

  @Test("a results observer loads through the loader")
  func observerLoads() throws {
    let folder = TemporaryDirectory()
    let url = try store(folder)
    let container = try ModelContainer(
      for: LoadedNote.self, configurations: ModelConfiguration(url: url))
    let observer = try ResultsObserver(
      FetchDescriptor<LoadedNote>(
        predicate: #Predicate { $0.group == "even" }, sortBy: [SortDescriptor(\.key)]),
      container: container)
    #expect(observer.results.map(\.priority) == [0, 20, 40])
    let context = ModelContext(container)
    context.insert(LoadedNote(key: "k9", text: "new", group: "even", priority: 90))
    try context.save()
    observer.waitForPendingUpdates()
    #expect(observer.results.map(\.priority) == [0, 20, 40, 90])
  }

  /// Saves one `Model` to a new store at `url` and fetches it in a fresh context.
  static func saveAndFetch<Model: PersistentModel>(_: Model.Type, at url: URL) throws {
    let container = try ModelContainer(
      for: Model.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(container)
    context.insert(Model())
    try context.save()
    _ = try ModelContext(container).fetch(FetchDescriptor<Model>())
  }

  @Test(
    "the container refuses row code out of the schema's order, of another type, short or binding another value, before it makes the store"
  )
  func containerChecksRowCode() throws {
    let folder = TemporaryDirectory()
    func refusal<Model: PersistentModel>(_ type: Model.Type) -> String? {
      let url = folder.file("\(Model.self).store")
      do {
        _ = try ModelContainer(for: type, configurations: ModelConfiguration(url: url))
        return nil
      } catch let error as PersistenceError {
        #expect(error.code == .invalidValue)
        #expect(!FileManager.default.fileExists(atPath: url.path))
        return error.message
      } catch {
        Issue.record("\(error)")
        return nil
      }
    }
    // Two attributes of one type read in each other's place: before this check, silent in
    // release builds.
    #expect(
      refusal(SwappedNote.self)
        == "The schema of SwappedNote is invalid: its row loader does not fill the attribute 'key' from its own column; read the attributes in the schema's order, once each."
    )
    #expect(
      refusal(FarSwappedNote.self)
        == "The schema of FarSwappedNote is invalid: its row loader does not fill the attribute 'a' from its own column; read the attributes in the schema's order, once each."
    )
    #expect(
      refusal(MisorderedNote.self)
        == "The schema of MisorderedNote is invalid: its row loader reads 2 of its 3 attributes; read each attribute once, in the schema's order."
    )
    #expect(
      refusal(MistypedNote.self)
        == "The schema of MistypedNote is invalid: its row loader reads String as attribute 2 of 3, which the schema does not declare so; read the attributes in the schema's order, once each."
    )
    #expect(
      refusal(ShortNote.self)
        == "The schema of ShortNote is invalid: its row loader reads 1 of its 2 attributes; read each attribute once, in the schema's order."
    )
    #expect(
      refusal(MisboundNote.self)
        == "The schema of MisboundNote is invalid: its row binder does not bind the attribute 'key' as its own parameter; bind the attributes in the schema's order, once each."
    )
    #expect(
      refusal(MistypedBoundNote.self)
        == "The schema of MistypedBoundNote is invalid: its row binder binds String as attribute 2 of 3, which the schema does not declare so; bind the attributes in the schema's order, once each."
    )
    #expect(
      refusal(ShortBoundNote.self)
        == "The schema of ShortBoundNote is invalid: its row binder binds 1 of its 2 attributes; bind each attribute once, in the schema's order."
    )
    #expect(
      refusal(CrossBoundNote.self)
        == "The schema of CrossBoundNote is invalid: its row binder does not bind the attribute 'text' as its own parameter; bind the attributes in the schema's order, once each."
    )
    // Correct row code of every kind opens.
    #expect(refusal(LoadedNote.self) == nil)
    #expect(refusal(ScoredNote.self) == nil)
    #expect(refusal(WideNote.self) == nil)
  }

  @Test("a loader whose reads depend on the row's values, past the container's check, still traps")
  func misuseTraps() async throws {
    let folder = TemporaryDirectory()
    let url = folder.file("late.store")
    // Exits 0 when the fetch throws or returns instead of trapping: only a trap passes.
    await #expect(processExitsWith: .failure) { [url = url as URL] in
      try? ModelRowTests.saveAndFetch(LateMisreadNote.self, at: url)
      exit(0)
    }
    // The same path with a correct loader saves and fetches.
    try ModelRowTests.saveAndFetch(LoadedNote.self, at: folder.file("fine.store"))
  }

  @Test("a value a binder cannot bind is an error naming its attribute, and nothing is saved")
  func binderErrorNamesAttribute() throws {
    for engine in TestEngine.allCases {
      let store = try engine.makeStore()
      let container = try store.container(ScoredNote.self)
      let context = ModelContext(container)
      let fine = ScoredNote()
      fine.key = "a"
      fine.score = 1.5
      let bad = ScoredNote()
      bad.key = "b"
      bad.score = .nan
      context.insert(fine)
      context.insert(bad)
      do {
        try context.save()
        Issue.record("a NaN was saved (\(engine))")
      } catch let error as PersistenceError {
        #expect(error.code == .invalidValue, "\(engine)")
        #expect(error.attribute == "score", "\(engine)")
      }
      #expect(try ModelContext(container).fetchCount(FetchDescriptor<ScoredNote>()) == 0)
    }
  }

  @Test("a binder records the saved values in the snapshot: changes, rollback, no-op saves")
  func binderRecordsSnapshot() throws {
    for engine in TestEngine.allCases {
      let store = try engine.makeStore()
      let container = try store.container(LoadedNote.self)
      let context = ModelContext(container)
      let note = LoadedNote(key: "k", text: "first", group: "g", priority: 1)
      context.insert(note)
      try context.save()
      #expect(!context.hasChanges, "\(engine)")
      note.priority = 2
      note.text = "changed"
      #expect(context.hasChanges, "\(engine)")
      context.rollback()
      #expect([note.text, "\(note.priority)"] == ["first", "1"], "\(engine)")
      #expect(!context.hasChanges, "\(engine)")
      note.text = "second"
      try context.save()
      // Saved again, the snapshot holds the new text: nothing left to save.
      #expect(!context.hasChanges, "\(engine)")
      let fetched = try ModelContext(container).fetch(FetchDescriptor<LoadedNote>())
      #expect(fetched.map(\.text) == ["second"] && fetched.map(\.priority) == [1], "\(engine)")
    }
  }

  @Test("a binder writes the same rows as the attributes' own binds, on every engine")
  func binderMatchesAttributes() throws {
    for engine in TestEngine.allCases {
      let store = try engine.makeStore()
      // LoadedNote binds through its binder, PlainNote through each attribute: same table.
      let bound = ModelContext(try store.container(LoadedNote.self))
      let plain = ModelContext(try store.container(PlainNote.self))
      for index in 0..<20 {
        let text = index % 3 == 0 ? "e\u{301}t\u{e9} \(index)" : "note \(index)"
        bound.insert(
          LoadedNote(key: "b\(index)", text: text, group: "g\(index % 4)", priority: -index))
        let note = PlainNote()
        note.key = "p\(index)"
        note.text = text
        note.group = "g\(index % 4)"
        note.priority = -index
        plain.insert(note)
      }
      try bound.save()
      try plain.save()
      let rows = try ModelContext(try store.container(PlainNote.self)).fetch(
        FetchDescriptor<PlainNote>(sortBy: [SortDescriptor(\.key)]))
      let byKey = Dictionary(uniqueKeysWithValues: rows.map { ($0.key, $0) })
      #expect(rows.count == 40, "\(engine)")
      for index in 0..<20 {
        let (b, p) = (try #require(byKey["b\(index)"]), try #require(byKey["p\(index)"]))
        #expect(
          [b.text, b.group, "\(b.priority)"] == [p.text, p.group, "\(p.priority)"], "\(engine)")
      }
    }
  }
}
