import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

/// A model as SwiftData's users declare one, with enums, a struct and arrays as attributes and
/// no `.codable` on any of them (WWDC 2025's `PersonalTrip.Reason`).
@Model final class Outing {
  enum Reason: String, CaseIterable, Codable, Comparable {
    case family, reunion, wellness, unknown
    /// Declaration order, which is not the raw values' (`"unknown" < "wellness"`).
    static func < (lhs: Reason, rhs: Reason) -> Bool {
      allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
  }
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

/// An enum of one case: no bytes at all.
enum OneCase: String, Codable { case only }

/// A struct of fixed-width integers and a one-case enum, without initial values.
@Model final class Measured {
  struct Size: Codable, Equatable {
    var width: Int32
    var depth: UInt8
  }
  var size: Size
  @Attribute(.preserveValueOnDeletion) var only: OneCase
  init(size: Size, only: OneCase) {
    self.size = size
    self.only = only
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
    // An ordering comparison is refused: SQL would order raw values, which an enum's own `<`
    // need not follow (Swift's evaluation, an observer's, would answer otherwise).
    let high = Outing.Priority.high
    let ordering = #expect(throws: PersistenceError.self) {
      try context.fetchCount(FetchDescriptor<Outing>(predicate: #Predicate { $0.priority >= high }))
    }
    #expect(ordering?.code == .unsupportedPredicate)
    #expect(ordering?.message.contains("stored as its raw value") == true)
    // Sorted by the raw value, as SQL orders the column; Swift's order of the same sorts (what
    // an observer patches its results with) agrees, whatever the enum's own `<` says.
    let descriptor = FetchDescriptor<Outing>(
      sortBy: [SortDescriptor(\.reason, order: .reverse), SortDescriptor(\.name)])
    let sorted = try context.fetch(descriptor)
    #expect(sorted.map(\.name) == ["b", "c", "a"])
    #expect(Outing.Reason.wellness < .unknown, "declaration order")
    #expect(Outing.Reason.unknown.rawValue < Outing.Reason.wellness.rawValue)
    for (first, second) in zip(sorted, sorted.dropFirst()) {
      #expect(descriptor.precedes(first, 0, second, 1))
      #expect(!descriptor.precedes(second, 1, first, 0))
    }
    let optional = FetchDescriptor<Outing>(sortBy: [SortDescriptor(\.fallback)])
    let byFallback = try context.fetch(optional)
    #expect(byFallback.map(\.fallback) == [nil, nil, .reunion])
    #expect(optional.precedes(byFallback[1], 1, byFallback[2], 2))
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
    let nested = try EmptyDecoder.empty(Nested.self, at: [], depth: 0)
    #expect(nested.list == [] && nested.map == [:] && nested.maybe == nil)
    #expect(nested.date == Date(timeIntervalSinceReferenceDate: 0))
    #expect(throws: DecodingError.self) {
      try EmptyDecoder.empty(Outing.Reason.self, at: [], depth: 0)
    }
    #expect(throws: DecodingError.self) { try EmptyDecoder.empty(UUID.self, at: [], depth: 0) }
    // Every integer type, and a type that asks for its own kind again (an enum of Int8 raw
    // values reads an Int8; one that reads itself would ask forever): a value or an error,
    // never a loop.
    struct Widths: Codable, Equatable {
      var a: Int8, b: Int16, c: Int32, d: Int64, e: UInt, f: UInt8, g: UInt16, h: UInt32
      var i: UInt64
    }
    #expect(
      try EmptyDecoder.empty(Widths.self, at: [], depth: 0)
        == Widths(a: 0, b: 0, c: 0, d: 0, e: 0, f: 0, g: 0, h: 0, i: 0))
    enum Level: Int8, Codable {
      case low = 1
      case high = 2
    }
    #expect(throws: DecodingError.self) { try EmptyDecoder.empty(Level.self, at: [], depth: 0) }
    struct Itself: Codable {
      var value: Int
      init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(Itself.self).value
      }
    }
    #expect(throws: DecodingError.self) { try EmptyDecoder.empty(Itself.self, at: [], depth: 0) }
    final class Chain: Codable {
      var next: Chain
      init(from decoder: any Decoder) throws {
        next = try decoder.container(keyedBy: CodingKeys.self).decode(Chain.self, forKey: .next)
      }
    }
    #expect(throws: DecodingError.self) { try EmptyDecoder.empty(Chain.self, at: [], depth: 0) }
  }

  @Test("a one-case enum's empty value is its case; a struct of integers is all zeros")
  func emptyEdgeValues() throws {
    #expect(ModelDefaults.value() as OneCase == .only)
    let container = try ModelContainer(
      for: [Measured.self], configuration: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    context.insert(Measured(size: .init(width: 3, depth: 4), only: .only))
    try context.save()
    #expect(try context.fetch(FetchDescriptor<Measured>()).map(\.size.width) == [3])
    #expect(Measured().size == Measured.Size(width: 0, depth: 0))
    // A deleted row's preserved enum, read back from its tombstone.
    for model in try context.fetch(FetchDescriptor<Measured>()) { context.delete(model) }
    try context.save()
    let tombstone = try #require(
      context.fetchHistory().last?.changes.first?.tombstone(as: Measured.self))
    #expect(tombstone[\.only] as? OneCase == .only)
  }
}
