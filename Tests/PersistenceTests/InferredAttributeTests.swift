import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

/// A model as SwiftData's users declare one, with enums, a struct and arrays as attributes and
/// no `.codable` on any of them (WWDC 2025's `PersonalTrip.Reason`).
@Model final class Outing {
  enum Reason: String, CaseIterable, Codable { case family, reunion, wellness, unknown }
  /// Not `CaseIterable`, raw values that are not the empty value: its empty value is its first
  /// declared case.
  enum Priority: Int, Codable, Comparable {
    case low = 10
    case high = 20
    static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }
  }
  struct Address: Codable, Hashable {
    var street: String
    var zip: Int
    var note: String?
  }

  var name: String
  var reason: Reason
  var priority: Priority
  var fallback: Reason?
  var address: Address
  var stops: [String]
  var second: Address?
  var tags: [String]? = nil

  init(
    name: String, reason: Reason, priority: Priority = .low, fallback: Reason? = nil,
    address: Address, stops: [String] = [], second: Address? = nil, tags: [String]? = nil
  ) {
    self.name = name
    self.reason = reason
    self.priority = priority
    self.address = address
    self.stops = stops
    self.tags = tags
    // An optional of a type the macro cannot see (a model, or a value) is set once the stored
    // properties are, as a to-one is.
    self.fallback = fallback
    self.second = second
  }
}

@Suite("Enums, structs and arrays as attributes, without .codable")
struct InferredAttributeTests {
  static let home = Outing.Address(street: "1 Main St", zip: 12_345, note: nil)

  static func fill(_ context: ModelContext) throws {
    context.insert(
      Outing(
        name: "a", reason: .family, priority: .high, address: home, stops: ["x", "y"],
        second: Outing.Address(street: "2 Side St", zip: 1, note: "back"), tags: ["t"]))
    context.insert(Outing(name: "b", reason: .wellness, fallback: .reunion, address: home))
    context.insert(Outing(name: "c", reason: .unknown, priority: .high, address: home))
    try context.save()
  }

  @Test("values round-trip through a store, on each engine", arguments: TestEngine.allCases)
  func roundTrip(engine: TestEngine) throws {
    let store = try engine.makeStore()
    do {
      let container = try ModelContainer(
        for: Outing.self, configurations: ModelConfiguration(url: store.url))
      try Self.fill(ModelContext(container))
    }
    let container = try ModelContainer(
      for: Outing.self, configurations: ModelConfiguration(url: store.url))
    let context = ModelContext(container)
    let all = try context.fetch(FetchDescriptor<Outing>(sortBy: [SortDescriptor(\.name)]))
    #expect(all.map(\.reason) == [.family, .wellness, .unknown])
    #expect(all.map(\.priority) == [.high, .low, .high])
    #expect(all.map(\.fallback) == [nil, .reunion, nil])
    #expect(all[0].address == Self.home)
    #expect(all[0].stops == ["x", "y"])
    #expect(all[1].stops == [])
    #expect(all[0].second?.note == "back")
    #expect(all[1].second == nil)
    #expect(all[0].tags == ["t"])
    #expect(all[1].tags == nil)

    // A change to each is saved, and only a change is.
    all[1].reason = .reunion
    all[1].fallback = nil
    all[1].address.zip = 99
    all[1].stops.append("z")
    #expect(context.hasChanges)
    try context.save()
    let again = try ModelContext(container).fetch(
      FetchDescriptor<Outing>(predicate: #Predicate { $0.name == "b" }))
    #expect(again.first?.reason == .reunion)
    #expect(again.first?.fallback == nil)
    #expect(again.first?.address.zip == 99)
    #expect(again.first?.stops == ["z"])
  }

  @Test(
    "an enum is a column of its raw value, in predicates and sorts, on each engine",
    arguments: TestEngine.allCases)
  func predicatesAndSorts(engine: TestEngine) throws {
    let container = try engineContainer(engine, Outing.self)
    let context = ModelContext(container)
    try Self.fill(context)
    let family = Outing.Reason.family
    let matched = try context.fetch(
      FetchDescriptor<Outing>(predicate: #Predicate { $0.reason == family }))
    #expect(matched.map(\.name) == ["a"])
    let wanted: [Outing.Reason] = [.wellness, .unknown]
    let listed = try context.fetch(
      FetchDescriptor<Outing>(
        predicate: #Predicate { wanted.contains($0.reason) }, sortBy: [SortDescriptor(\.name)]))
    #expect(listed.map(\.name) == ["b", "c"])
    let reunion = Outing.Reason.reunion
    #expect(
      try context.fetchCount(
        FetchDescriptor<Outing>(predicate: #Predicate { $0.fallback == reunion })) == 1)
    #expect(
      try context.fetchCount(
        FetchDescriptor<Outing>(predicate: #Predicate { $0.fallback == nil })) == 2)
    let high = Outing.Priority.high
    #expect(
      try context.fetchCount(
        FetchDescriptor<Outing>(predicate: #Predicate { $0.priority >= high })) == 2)
    // Sorted by the raw value, as SQL orders the column.
    let sorted = try context.fetch(
      FetchDescriptor<Outing>(
        sortBy: [SortDescriptor(\.priority, order: .reverse), SortDescriptor(\.name)]))
    #expect(sorted.map(\.name) == ["a", "c", "b"])
  }

  @Test("the store keeps the raw value, NULL for nil, and JSON for a struct or an array")
  func storedForms() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("outings.store")
    let container = try ModelContainer(for: Outing.self, configurations: .init(url: url))
    try Self.fill(ModelContext(container))
    let outside = try Database(path: url.path, flags: 1)
    #expect(try outside.scalarText("SELECT reason FROM outing WHERE name = 'a'") == "family")
    #expect(
      try outside.scalarText("SELECT typeof(priority) || priority FROM outing WHERE name = 'a'")
        == "integer20")
    #expect(
      try outside.scalarText("SELECT typeof(fallback) FROM outing WHERE name = 'a'") == "null")
    #expect(
      try outside.scalarText("SELECT CAST(stops AS TEXT) FROM outing WHERE name = 'a'")
        == #"["x","y"]"#)
    #expect(
      try outside.scalarText("SELECT CAST(address AS TEXT) FROM outing WHERE name = 'a'")
        == #"{"street":"1 Main St","zip":12345}"#)
  }

  @Test("a stored raw value that names no case is an error naming the value, never a default")
  func unknownRawValue() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("outings.store")
    let container = try ModelContainer(for: Outing.self, configurations: .init(url: url))
    try Self.fill(ModelContext(container))
    let outside = try Database(path: url.path, flags: 2)
    try outside.execute("UPDATE outing SET reason = 'holiday' WHERE name = 'b'")
    let error = #expect(throws: PersistenceError.self) {
      try ModelContext(container).fetch(FetchDescriptor<Outing>())
    }
    #expect(error?.code == .invalidValue)
    #expect(error?.message.contains("holiday") == true, "\(String(describing: error))")
    #expect(error?.message.contains("Reason") == true, "\(String(describing: error))")
    // Other rows still read.
    let name = "a"
    let found = try ModelContext(container).fetch(
      FetchDescriptor<Outing>(predicate: #Predicate { $0.name == name }))
    #expect(found.map(\.reason) == [.family])
  }

  @Test("a predicate on a struct's field is refused with a clear error, never read as empty")
  func structPredicateRefused() throws {
    let container = try engineContainer(.sqlite, Outing.self)
    let context = ModelContext(container)
    try Self.fill(context)
    let error = #expect(throws: PersistenceError.self) {
      try context.fetch(FetchDescriptor<Outing>(predicate: #Predicate { $0.address.zip == 1 }))
    }
    #expect(error?.code == .unsupportedPredicate)
  }

  @Test("a model made with init() holds each type's empty value")
  func emptyValues() {
    let empty = Outing()
    #expect(empty.reason == .family, "CaseIterable: the first of allCases")
    #expect(empty.priority == .low, "the first declared case")
    #expect(empty.fallback == nil)
    #expect(empty.address == Outing.Address(street: "", zip: 0, note: nil))
    #expect(empty.stops == [])
    #expect(empty.second == nil)
  }

  @Test("the empty decoder answers what a struct of plain fields needs, and refuses an enum")
  func emptyDecoder() throws {
    struct Nested: Codable, Equatable {
      var list: [Int]
      var map: [String: Double]
      var date: Date
      var inner: Outing.Address
      var maybe: Outing.Reason?
    }
    let nested = try Nested(from: EmptyDecoder())
    #expect(nested.list == [] && nested.map == [:] && nested.maybe == nil)
    #expect(nested.date == Date(timeIntervalSinceReferenceDate: 0))
    #expect(throws: DecodingError.self) { try Outing.Reason(from: EmptyDecoder()) }
    #expect(throws: DecodingError.self) { try UUID(from: EmptyDecoder()) }
  }
}
