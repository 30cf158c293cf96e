import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// SwiftData's option spellings that a ported model writes: `.ephemeral` (not stored),
// `.spotlight`, `.allowsCloudEncryption` and `hashModifier:` (accepted, without effect here).

@Model final class OsNote {
  @Attribute(.unique, .spotlight, .allowsCloudEncryption, hashModifier: "v2") var title: String
  @Attribute(.ephemeral) var draft = "unsaved"
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
    #expect(entity.attributes.map(\.name).sorted() == ["title"])
    let title = try #require(entity.attributesByName["title"])
    #expect(title.options == [.unique])
    let context = ModelContext(container)
    let note = OsNote(title: "Packing")
    note.draft = "typed, not saved"
    note.lines = [OsLine(text: "passport")]
    context.insert(note)
    try context.save()
    // The draft is not a change to save.
    note.draft = "again"
    #expect(!context.hasChanges)
    let reader = ModelContext(container)
    let again = try #require(try reader.fetch(FetchDescriptor<OsNote>()).first)
    #expect(again.title == "Packing" && again.draft == "unsaved")
    #expect(again.lines.map(\.text) == ["passport"])
    // Unique still upserts.
    let other = ModelContext(container)
    other.insert(OsNote(title: "Packing"))
    try other.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<OsNote>()) == 1)
  }
}
