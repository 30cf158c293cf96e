import Foundation
import Observation
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

@Suite("`.codable` values decoded on first access")
struct CodableFaultTests {
  static func tile(_ index: Int) -> Tile {
    Tile(corner: SIMD4(Float(index % 3), 1, 2, 3), label: "tile \(index % 3)")
  }

  /// A store file of three filled rows, changed by `sql` through another connection (as an
  /// outside writer would): the container, that connection, and the folder that holds them.
  static func alteredStore(_ sql: String) throws -> (
    directory: TemporaryDirectory, container: ModelContainer, outside: Database
  ) {
    let directory = TemporaryDirectory()
    let url = directory.file("pinned.store")
    let container = try ModelContainer(for: Pinned.self, configurations: .init(url: url))
    try fill(ModelContext(container), count: 3)
    let outside = try Database(path: url.path, flags: 2)
    try outside.execute(sql)
    return (directory, container, outside)
  }

  static func fill(_ context: ModelContext, count: Int = 30) throws {
    for index in 0..<count {
      let tile = index % 5 == 4 ? nil : Self.tile(index)
      let token = index % 7 == 6 ? nil : PlaceToken(raw: "place-\(index % 4)")
      context.insert(Pinned(key: "k\(index)", tile: tile, token: token))
    }
    try context.save()
  }

  /// What a model's eager and lazy values say, side by side.
  static func pairs(_ models: [Pinned]) -> [String] {
    models.map { model in
      "\(model.key) \(String(describing: model.eagerTile)) \(String(describing: model.lazyTile)) \(model.eagerToken?.raw ?? "-") \(model.lazyToken?.raw ?? "-")"
    }
  }

  @Test(
    "lazy values equal eager ones, are not decoded until read, and equal bytes share one",
    arguments: TestEngine.allCases)
  func equalToEager(engine: TestEngine) throws {
    let container = try engineContainer(engine, Pinned.self)
    try Self.fill(ModelContext(container))
    let models = try ModelContext(container).fetch(
      FetchDescriptor<Pinned>(sortBy: [SortDescriptor(\.key)]))
    #expect(models.count == 30)
    #expect(models.filter { $0._tileFault.isFault }.count == 24)  // NULLs load as nil values
    #expect(models.allSatisfy { $0.eagerTile == $0.lazyTile })
    #expect(models.allSatisfy { $0.eagerToken?.raw == $0.lazyToken?.raw })
    #expect(models.allSatisfy { !$0._tileFault.isFault || $0.lazyTile != nil })
    // One decoded instance per distinct stored value.
    let tokens = models.compactMap(\.lazyToken)
    #expect(Set(tokens.map { ObjectIdentifier($0) }).count == 4)
    #expect(tokens.filter { $0.raw == "place-1" }.allSatisfy { $0 === tokens[1] })
  }

  @Test("threads reading lazy values at once get one instance per distinct stored value")
  func concurrentFirstReads() throws {
    let container = try engineContainer(.sqlite, Pinned.self)
    let context = ModelContext(container)
    for index in 0..<8 {
      context.insert(Pinned(key: "k\(index)", tile: nil, token: PlaceToken(raw: "p\(index % 4)")))
    }
    try context.save()
    var split = 0
    for _ in 0..<500 {
      let shared = UncheckedModels(
        models: try ModelContext(container).fetch(
          FetchDescriptor<Pinned>(sortBy: [SortDescriptor(\.key)])))
      let seen = Mutex<[String: Set<ObjectIdentifier>]>([:])
      let arrived = Atomic(0)
      // Two threads start together, one at row 0 and one at row 4: rows k and k + 4 hold
      // equal bytes, so each value is decoded for the first time, for two different rows,
      // on both threads at once.
      runOnThreads(2) { thread in
        arrived.add(1, ordering: .relaxed)
        while arrived.load(ordering: .relaxed) < 2 {}
        var mine: [String: Set<ObjectIdentifier>] = [:]
        for step in 0..<8 {
          if let token = shared.models[(step + thread * 4) % 8].lazyToken {
            mine[token.raw, default: []].insert(ObjectIdentifier(token))
          }
        }
        seen.withLock { $0.merge(mine) { $0.union($1) } }
      }
      let found = seen.withLock { $0 }
      #expect(found.keys.sorted() == ["p0", "p1", "p2", "p3"])
      if !found.values.allSatisfy({ $0.count == 1 }) { split += 1 }
    }
    #expect(split == 0)
  }

  /// Models handed to other threads by a test that reads them only.
  struct UncheckedModels: @unchecked Sendable {
    let models: [Pinned]
  }

  @Test("an unread lazy value is saved back byte for byte when its model changes")
  func unreadSavedAsStored() throws {
    // Bytes no encoder of ours writes (keys in another order, spaces): kept as they are.
    let odd = #"{ "label" : "odd", "corner" : [1,2,3,4] }"#
    let store = try Self.alteredStore(
      "UPDATE pinned SET lazy_tile = CAST('\(odd)' AS BLOB) WHERE key = 'k0'")
    let context = ModelContext(store.container)
    let model = try #require(
      try context.fetch(FetchDescriptor<Pinned>(predicate: #Predicate { $0.key == "k0" })).first)
    model.key = "renamed"
    #expect(context.hasChanges)
    try context.save()
    #expect(model._tileFault.isFault)
    #expect(
      try store.outside.scalarText(
        "SELECT CAST(lazy_tile AS TEXT) FROM pinned WHERE key = 'renamed'")
        == odd)
    #expect(model.lazyTile?.label == "odd")
  }

  @Test(
    "after an update from another context, and across rollback, lazy equals eager",
    arguments: TestEngine.allCases)
  func updatesAndRollback(engine: TestEngine) throws {
    let container = try engineContainer(engine, Pinned.self)
    try Self.fill(ModelContext(container), count: 6)
    let reader = ModelContext(container)
    let before = try reader.fetch(FetchDescriptor<Pinned>(sortBy: [SortDescriptor(\.key)]))
    let writer = ModelContext(container)
    for model in try writer.fetch(FetchDescriptor<Pinned>()) {
      let tile = Tile(corner: SIMD4(9, 9, 9, 9), label: "new \(model.key)")
      model.eagerTile = tile
      model.lazyTile = tile
      model.lazyToken = PlaceToken(raw: "moved")
      model.eagerToken = PlaceToken(raw: "moved")
    }
    try writer.save()
    // The reader's registered models take the new rows when fetched again.
    let after = try reader.fetch(FetchDescriptor<Pinned>(sortBy: [SortDescriptor(\.key)]))
    #expect(after.map(ObjectIdentifier.init) == before.map(ObjectIdentifier.init))
    #expect(
      after.allSatisfy { $0.lazyTile == $0.eagerTile && $0.lazyTile?.label == "new \($0.key)" })
    #expect(after.allSatisfy { $0.lazyToken?.raw == "moved" })
    #expect(!reader.hasChanges)

    // Changes rolled back: read or not, each value is the stored one again.
    let first = after[0]
    let second = after[1]
    first.lazyTile = Self.tile(1)
    first.lazyToken = nil
    second.lazyTile = nil
    #expect(reader.hasChanges)
    reader.rollback()
    #expect(!reader.hasChanges)
    #expect(first.lazyTile == first.eagerTile)
    #expect(second.lazyTile == second.eagerTile)
    #expect(first.lazyToken?.raw == "moved")
    let fresh = try ModelContext(container).fetch(
      FetchDescriptor<Pinned>(sortBy: [SortDescriptor(\.key)]))
    #expect(Self.pairs(fresh) == Self.pairs(after))
  }

  @Test("setting a lazy value tells observers, and saves it", arguments: TestEngine.allCases)
  func observed(engine: TestEngine) throws {
    let container = try engineContainer(engine, Pinned.self)
    try Self.fill(ModelContext(container), count: 2)
    let context = ModelContext(container)
    let model = try #require(try context.fetch(FetchDescriptor<Pinned>()).first)
    let told = Mutex(false)
    withObservationTracking {
      _ = model.lazyTile
    } onChange: {
      told.withLock { $0 = true }
    }
    model.lazyTile = Tile(corner: .one, label: "set")
    #expect(told.withLock { $0 })
    try context.save()
    let key = model.key
    let again = try ModelContext(container).fetch(
      FetchDescriptor<Pinned>(predicate: #Predicate { $0.key == key }))
    #expect(again.first?.lazyTile?.label == "set")
  }

  @Test(
    "lazy bytes larger than a storage chunk, filling several, or empty, read back exactly",
    arguments: TestEngine.allCases)
  func chunkEdges(engine: TestEngine) throws {
    let container = try engineContainer(engine, Pinned.self)
    let context = ModelContext(container)
    // 70,000 bytes: more than one 64 KiB chunk holds, so it gets one of its own; then 3,000
    // distinct values of about 40 bytes (about 120 KB: several chunks) and 3,000 repeats.
    let large = String(repeating: "x", count: 70_000)
    context.insert(Pinned(key: "a-large", tile: nil, token: PlaceToken(raw: large)))
    for index in 0..<6_000 {
      let raw = "place-\(index % 3_000)-" + String(repeating: "y", count: 20)
      context.insert(
        Pinned(key: "b\(String(index + 10_000))", tile: nil, token: PlaceToken(raw: raw)))
    }
    context.insert(Pinned(key: "c-empty", tile: nil, token: PlaceToken(raw: "")))
    try context.save()
    let models = try ModelContext(container).fetch(
      FetchDescriptor<Pinned>(sortBy: [SortDescriptor(\.key)]))
    #expect(models.count == 6_002)
    #expect(models.first?.lazyToken?.raw == large)
    #expect(models.last?.lazyToken?.raw == "")
    let middle = Array(models.dropFirst().dropLast())
    #expect(
      middle.enumerated().allSatisfy { index, model in
        model.lazyToken?.raw == "place-\(index % 3_000)-" + String(repeating: "y", count: 20)
      })
    // Equal bytes share one decoded instance across chunks.
    #expect(middle[0].lazyToken === middle[3_000].lazyToken)
    #expect(middle[2_999].lazyToken === middle[5_999].lazyToken)
  }

  @Test("a zero-length blob in a lazy column reads as nil and is reported, nothing lost")
  func emptyBlob() throws {
    let store = try Self.alteredStore(
      "UPDATE pinned SET lazy_tile = zeroblob(0) WHERE key = 'k1'")
    let context = ModelContext(store.container)
    let models = try context.fetch(FetchDescriptor<Pinned>(sortBy: [SortDescriptor(\.key)]))
    #expect(models.map(\.key) == ["k0", "k1", "k2"])
    #expect(models[1].lazyTile == nil)
    #expect(models[0].lazyTile != nil && models[2].lazyTile != nil)
    let problems = try context.validateStoredRows(of: Pinned.self)
    #expect(problems.map(\.attribute) == ["lazy_tile"], "\(problems)")
    // A change elsewhere in the row writes the empty bytes back as they were.
    models[1].key = "k1-renamed"
    try context.save()
    #expect(
      try store.outside.scalarText(
        "SELECT typeof(lazy_tile) || length(lazy_tile) FROM pinned WHERE key = 'k1-renamed'")
        == "blob0")
  }

  @Test("stored bytes that cannot be decoded read as nil and are reported by the row check")
  func damagedBytes() throws {
    let store = try Self.alteredStore(
      "UPDATE pinned SET lazy_tile = x'7b22' WHERE key = 'k1'")
    let context = ModelContext(store.container)
    let models = try context.fetch(FetchDescriptor<Pinned>(sortBy: [SortDescriptor(\.key)]))
    #expect(models.map(\.key) == ["k0", "k1", "k2"])
    #expect(models[1].lazyTile == nil)
    #expect(models[0].lazyTile != nil)
    let problems = try context.validateStoredRows(of: Pinned.self)
    #expect(problems.count == 1)
    #expect(problems.first?.attribute == "lazy_tile")
    #expect(problems.first?.row?.contains("k1") == true, "\(problems)")
    // Text in the BLOB column is refused when the row loads, naming it.
    try store.outside.execute("UPDATE pinned SET lazy_tile = 'text' WHERE key = 'k2'")
    let error = try #require(throws: PersistenceError.self) {
      try ModelContext(store.container).fetch(FetchDescriptor<Pinned>())
    }
    #expect(error.attribute == "lazy_tile")
  }
}
