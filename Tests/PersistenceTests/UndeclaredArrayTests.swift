import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// An array property declared without `@Relationship` or `@Attribute`, as SwiftData's users
// write them: an array of models is a to-many, an array of `Codable` values is kept as JSON,
// whatever the element (equatable or not, an enum, spelled `Array<…>`, with a default).

struct UaStop: Codable, Equatable, Sendable {
  var name = ""
}

/// Not `Equatable`: every assignment tells observers.
struct UaNote: Codable, Sendable {
  var text = ""
}

enum UaMood: String, Codable, Sendable {
  case calm, busy
}

@Model final class UaPlan {
  var name: String
  var stops: [UaStop] = []
  // The long spelling, as some users write it.
  // swift-format-ignore: UseShorthandTypeNames
  var notes: Array<UaNote> = [UaNote(text: "first")]
  var moods: [UaMood] = [.calm]
  var tags: [UaTag] = []
  init(name: String) { self.name = name }
}

@Model final class UaTag {
  var label: String
  @Relationship(inverse: \UaPlan.tags) var plans: [UaPlan] = []
  init(label: String) { self.label = label }
}

/// Sets a to-many in its initializer before its other stored properties: what cannot be kept.
@Model final class UaEarly {
  var tags: [UaTag] = []
  var title: String
  init(title: String, tags: [UaTag]) {
    self.tags = tags
    self.title = title
  }
}

@Suite("Arrays declared without @Relationship or @Attribute")
struct UndeclaredArrayTests {
  @Test(
    "arrays of Codable values are kept as JSON, arrays of models are to-manys",
    arguments: TestEngine.allCases)
  func roundTrip(engine: TestEngine) throws {
    let container = try engineContainer(engine, UaPlan.self, UaTag.self)
    let schema = try #require(Schema([UaPlan.self]).entity(for: UaPlan.self))
    #expect(schema.attributes.map(\.name).sorted() == ["moods", "name", "notes", "stops"])
    #expect(schema.relationships.map(\.name) == ["tags"])
    let context = ModelContext(container)
    let plan = UaPlan(name: "Kyoto")
    #expect(plan.notes.map(\.text) == ["first"] && plan.moods == [.calm])
    plan.stops = [UaStop(name: "Gion"), UaStop(name: "Arashiyama")]
    plan.notes.append(UaNote(text: "second"))
    plan.moods = [.busy, .calm]
    context.insert(plan)
    plan.tags = [UaTag(label: "temples")]
    try context.save()
    let reader = ModelContext(container)
    let read = try #require(try reader.fetch(FetchDescriptor<UaPlan>()).first)
    #expect(read.stops.map(\.name) == ["Gion", "Arashiyama"])
    #expect(read.notes.map(\.text) == ["first", "second"])
    #expect(read.moods == [.busy, .calm])
    #expect(read.tags.map(\.label) == ["temples"])
    #expect(read.tags.first?.plans.map(\.name) == ["Kyoto"])
    // A change to an array of values is a change to save.
    read.stops.removeFirst()
    #expect(reader.hasChanges)
    try reader.save()
    let again = try #require(try ModelContext(container).fetch(FetchDescriptor<UaPlan>()).first)
    #expect(again.stops.map(\.name) == ["Arashiyama"])
  }

  @Test("a to-many set before the model's other stored properties traps, saying so")
  func setTooEarlyTraps() async {
    await #expect(processExitsWith: .failure) {
      _ = UaEarly(title: "Post", tags: [UaTag(label: "a")])
    }
  }

  @Test("a to-many set after them, or left empty, is kept")
  func setAfterIsKept() throws {
    let empty = UaEarly(title: "Post", tags: [])
    #expect(empty.tags.isEmpty && empty.title == "Post")
  }
}
