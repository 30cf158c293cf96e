import Observation
import Testing

@testable import PersistenceCore

@Observable private final class Holder {
  var name = ""
  var count: Int?
  var next: Holder?
}

private final class Plain {
  var number = 0
  var next: Plain?
}

private struct Value {
  var a = 0
  var pair = (1, 2)
  subscript(index: Int) -> Int { index }
}

/// The reader of key paths' components that relationships' sorts and sections stand on.
@Suite struct KeyPathComponentsTests {
  @Test func componentsOfChains() throws {
    let next = try #require(KeyPathComponents.read(\Holder.next))
    let name = try #require(KeyPathComponents.read(\Holder.name))
    let count = try #require(KeyPathComponents.read(\Holder.count))
    #expect(next.count == 1 && name.count == 1 && next != name)
    #expect(
      KeyPathComponents.read(\Holder.next?.name) == next + [.optionalChain] + name + [.optionalWrap]
    )
    #expect(KeyPathComponents.read(\Holder.next!.name) == next + [.optionalForce] + name)
    // An optional at the end is not wrapped again.
    #expect(KeyPathComponents.read(\Holder.next?.count) == next + [.optionalChain] + count)
    #expect(
      KeyPathComponents.read(\Holder.next?.next?.name)
        == next + [.optionalChain] + next + [.optionalChain] + name + [.optionalWrap])
    #expect(KeyPathComponents.read(\Holder.self) == [])
  }

  @Test func storedProperties() throws {
    let number = try #require(KeyPathComponents.read(\Plain.number))
    let next = try #require(KeyPathComponents.read(\Plain.next))
    #expect(number != next)
    guard case .stored(isClass: true, _) = number[0] else {
      Issue.record("\(number)")
      return
    }
    #expect(
      KeyPathComponents.read(\Plain.next?.number) == next + [.optionalChain] + number + [
        .optionalWrap
      ])
    #expect(KeyPathComponents.read(\Value.pair.1)?.count == 2)
    #expect(KeyPathComponents.read(\Value.a) == [.stored(isClass: false, offset: 0)])
  }

  /// A component it cannot read makes the whole key path unreadable: never a guess.
  @Test func subscriptsAreNotRead() {
    #expect(KeyPathComponents.read(\Value.[3]) == nil)
    #expect(KeyPathComponents.read(\Holder.name.count) != nil)
  }
}

/// Which key paths resolve through to-ones, on the hotels' models.
@Suite struct RelatedKeyPathTests {
  @Test func resolvesOnlyPathsThroughToOnesToStoredAttributes() {
    let rooms = PredicateTable(Room.schema)
    #expect(RelatedKeyPath.resolve(\Room.hotel?.name, in: rooms)?.relationships.count == 1)
    #expect(RelatedKeyPath.resolve(\Room.hotel!.name, in: rooms)?.relationships.count == 1)
    #expect(
      RelatedKeyPath.resolve(\Room.hotel?.manager?.name, in: rooms)?.relationships.count == 2)
    // A plain attribute, a key path of another model, a to-many in the middle, a property of a
    // stored value: none.
    #expect(RelatedKeyPath.resolve(\Room.number, in: rooms) == nil)
    #expect(RelatedKeyPath.resolve(\Hotel.name, in: rooms) == nil)
    #expect(RelatedKeyPath.resolve(\Room.hotel?.rooms.first?.number, in: rooms) == nil)
    #expect(RelatedKeyPath.resolve(\Room.hotel?.name.count, in: rooms) == nil)
    #expect(
      RelatedKeyPath.describe(\Room.hotel?.name.count, in: rooms)
        == "\\Room.hotel?.name.<a property that is not stored>")
  }
}
