import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// SwiftData's option spellings that a ported model writes: `.ephemeral` (not stored),
// `.spotlight`, `.allowsCloudEncryption`, `.externalStorage` and `hashModifier:` (accepted,
// without effect here: an external value stays in its row).

@Model final class OsNote {
  @Attribute(.unique, .spotlight, .allowsCloudEncryption, hashModifier: "v2") var title: String
  @Attribute(.ephemeral) var draft = "unsaved"
  @Attribute(.externalStorage) var photo: Data? = nil
  @Relationship(deleteRule: .cascade, inverse: \OsLine.note, hashModifier: "v2")
  var lines: [OsLine] = []
  init(title: String) { self.title = title }
}

@Model final class OsLine {
  var text: String
  var note: OsNote?
  init(text: String) { self.text = text }
}

@Suite("SwiftData's option spellings")
struct OptionSpellingTests {
  @Test(
    "an .ephemeral property is not stored; .spotlight, .allowsCloudEncryption and hashModifier: change nothing",
    arguments: TestEngine.allCases)
  func options(engine: TestEngine) throws {
    let container = try engineContainer(engine, OsNote.self, OsLine.self)
    let entity = try #require(Schema([OsNote.self]).entity(for: OsNote.self))
    #expect(entity.attributes.map(\.name).sorted() == ["photo", "title"])
    #expect(try #require(entity.attributesByName["photo"]).options == [])
    let title = try #require(entity.attributesByName["title"])
    #expect(title.options == [.unique])
    let context = ModelContext(container)
    let note = OsNote(title: "Packing")
    note.draft = "typed, not saved"
    note.photo = Data(repeating: 7, count: 300_000)
    note.lines = [OsLine(text: "passport")]
    context.insert(note)
    try context.save()
    // The draft is not a change to save.
    note.draft = "again"
    #expect(!context.hasChanges)
    let reader = ModelContext(container)
    let again = try #require(try reader.fetch(FetchDescriptor<OsNote>()).first)
    #expect(again.title == "Packing" && again.draft == "unsaved")
    #expect(again.photo == Data(repeating: 7, count: 300_000))
    #expect(again.lines.map(\.text) == ["passport"])
    // Unique still upserts.
    let other = ModelContext(container)
    other.insert(OsNote(title: "Packing"))
    try other.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<OsNote>()) == 1)
  }
}

@Model final class CnTrip {
  var name: String
  @Relationship(
    deleteRule: .cascade, minimumModelCount: 0, maximumModelCount: 2, originalName: "legs",
    inverse: \CnStop.trip)
  var stops: [CnStop] = []
  init(name: String) { self.name = name }
}

@Model final class CnStop {
  var title: String
  @Relationship(minimumModelCount: 1) var trip: CnTrip?
  init(title: String) { self.title = title }
}

@Model final class CnBag {
  var name: String
  @Relationship(minimumModelCount: 1, inverse: \CnThing.bag) var things: [CnThing] = []
  init(name: String) { self.name = name }
}

@Model final class CnThing {
  var name: String
  var bag: CnBag?
  init(name: String) { self.name = name }
}

@Suite("SwiftData's relationship counts, checked at save")
struct RelationshipCountTests {
  func refusal(_ context: ModelContext, naming text: String) {
    #expect {
      try context.save()
    } throws: { error in
      let error = error as? PersistenceError
      return error?.code == .invalidValue && error?.message.contains(text) == true
    }
  }

  @Test(
    "maximumModelCount refuses a third stop, inserted or appended later; minimumModelCount refuses a stop without its trip; nothing is written",
    arguments: TestEngine.allCases)
  func counts(engine: TestEngine) throws {
    let container = try engineContainer(engine, CnTrip.self, CnStop.self)
    let context = ModelContext(container)
    let trip = CnTrip(name: "Kyoto")
    context.insert(trip)
    trip.stops = [CnStop(title: "a"), CnStop(title: "b"), CnStop(title: "c")]
    refusal(context, naming: "relates 3 through 'stops', which allows at most 2")
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<CnTrip>()) == 0)
    trip.stops.removeLast()
    try context.save()
    // A saved trip whose stops a new context loads and appends to.
    let other = ModelContext(container)
    let saved = try #require(try other.fetch(FetchDescriptor<CnTrip>()).first)
    saved.stops.append(CnStop(title: "d"))
    refusal(other, naming: "allows at most 2 (maximumModelCount)")
    other.rollback()
    // A stop with no trip: minimumModelCount 1 on the to-one.
    let lonely = CnStop(title: "alone")
    other.insert(lonely)
    refusal(other, naming: "relates 0 through 'trip', which allows at least 1")
    lonely.trip = saved
    saved.stops.removeFirst()
    try other.save()
    let stops = try ModelContext(container).fetch(
      FetchDescriptor<CnStop>(sortBy: [SortDescriptor(\.title)]))
    #expect(stops.map(\.title) == ["alone", "b"])
  }

  @Test(
    "a stop deleted in the same save does not count: a swap within the bound saves; deleting the only stop of a trip with a minimum is refused",
    arguments: TestEngine.allCases)
  func deletedModelsDoNotCount(engine: TestEngine) throws {
    let container = try engineContainer(engine, CnTrip.self, CnStop.self)
    let context = ModelContext(container)
    let trip = CnTrip(name: "Kyoto")
    context.insert(trip)
    trip.stops = [CnStop(title: "a"), CnStop(title: "b")]
    try context.save()
    context.delete(trip.stops[0])
    trip.stops.append(CnStop(title: "c"))
    try context.save()
    let titles = try ModelContext(container).fetch(
      FetchDescriptor<CnStop>(sortBy: [SortDescriptor(\.title)])
    ).map(\.title)
    #expect(titles == ["b", "c"])
  }

  @Test(
    "deleting the only thing of a bag whose things have a minimum of one is refused; deleting the bag with it saves",
    arguments: TestEngine.allCases)
  func minimumAfterDelete(engine: TestEngine) throws {
    let container = try engineContainer(engine, CnBag.self, CnThing.self)
    let context = ModelContext(container)
    let bag = CnBag(name: "bag")
    context.insert(bag)
    bag.things = [CnThing(name: "t")]
    try context.save()
    context.delete(bag.things[0])
    refusal(context, naming: "relates 0 through 'things', which allows at least 1")
    context.delete(bag)
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<CnThing>()) == 0)
  }
}
