import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// A model that refers to its own kind, as SwiftData's users write it: a place's parent and its
// children. Trees of any depth are saved a level at a time, cascades terminate, children are
// deleted before their parents, predicates and sorts through the parent read the parent's row.

@Model final class SrPlace {
  var name: String
  var parent: SrPlace?
  @Relationship(deleteRule: .cascade, inverse: \SrPlace.parent) var children: [SrPlace] = []
  init(name: String, parent: SrPlace? = nil) {
    self.name = name
    self.parent = parent
  }
}

/// A tree whose children are nullified when their parent goes, and whose preserved names are
/// in history's tombstones.
@Model final class SrFolder {
  @Attribute(.preserveValueOnDeletion) var name: String
  var parent: SrFolder?
  @Relationship(inverse: \SrFolder.parent) var children: [SrFolder] = []
  init(name: String, parent: SrFolder? = nil) {
    self.name = name
    self.parent = parent
  }
}

/// A tree whose nodes also point to another node of it (a second self-reference).
@Model final class SrStep {
  var name: String
  var parent: SrStep?
  var previous: SrStep?
  @Relationship(deleteRule: .cascade, inverse: \SrStep.parent) var children: [SrStep] = []
  @Relationship(inverse: \SrStep.previous) var nexts: [SrStep] = []
  init(name: String, parent: SrStep? = nil) {
    self.name = name
    self.parent = parent
  }
}

@Suite("A model that refers to its own kind: trees")
struct SelfReferenceTests {
  /// Japan → Kansai → Kyoto → Gion, and Japan → Kanto → Tokyo.
  func japan() -> SrPlace {
    let japan = SrPlace(name: "Japan")
    let kansai = SrPlace(name: "Kansai", parent: japan)
    let kyoto = SrPlace(name: "Kyoto", parent: kansai)
    _ = SrPlace(name: "Gion", parent: kyoto)
    let kanto = SrPlace(name: "Kanto", parent: japan)
    _ = SrPlace(name: "Tokyo", parent: kanto)
    return japan
  }

  func names(_ context: ModelContext, _ predicate: Predicate<SrPlace>? = nil) throws -> [String] {
    try context.fetch(
      FetchDescriptor<SrPlace>(predicate: predicate, sortBy: [SortDescriptor(\.name)])
    ).map(\.name)
  }

  @Test(
    "a tree inserted in one save, its deepest node inserted first, reads back level by level",
    arguments: TestEngine.allCases)
  func insertAndRead(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrPlace.self)
    let context = ModelContext(container)
    let root = japan()
    // The deepest first: the save orders the rows, parents before children.
    let gion = root.children[0].children[0].children[0]
    context.insert(gion)
    #expect(root.modelContext === context)
    try context.save()
    let reader = ModelContext(container)
    let japan = try #require(
      try reader.fetch(FetchDescriptor<SrPlace>(predicate: #Predicate { $0.parent == nil })).first)
    #expect(japan.name == "Japan")
    #expect(Set(japan.children.map(\.name)) == ["Kansai", "Kanto"])
    let kansai = try #require(japan.children.first { $0.name == "Kansai" })
    #expect(kansai.children.map(\.name) == ["Kyoto"])
    #expect(kansai.children[0].children.map(\.name) == ["Gion"])
    #expect(kansai.children[0].children[0].parent === kansai.children[0])
    #expect(kansai.parent === japan)
  }

  @Test(
    "a deep chain (a thousand levels) saves and cascades without a deep stack",
    arguments: TestEngine.allCases)
  func deepChain(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrPlace.self)
    let context = ModelContext(container)
    let root = SrPlace(name: "0")
    var last = root
    for level in 1..<1000 { last = SrPlace(name: "\(level)", parent: last) }
    context.insert(last)
    try context.save()
    #expect(try context.fetchCount(FetchDescriptor<SrPlace>()) == 1000)
    let reader = ModelContext(container)
    let deepest = try #require(
      try reader.fetch(FetchDescriptor<SrPlace>(predicate: #Predicate { $0.name == "999" })).first)
    #expect(deepest.parent?.parent?.name == "997")
    context.delete(root)
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<SrPlace>()) == 0)
  }

  @Test(
    "predicates and sorts through the parent read the parent's row, not the row's own",
    arguments: TestEngine.allCases)
  func predicatesThroughParent(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrPlace.self)
    let context = ModelContext(container)
    context.insert(japan())
    try context.save()
    let reader = ModelContext(container)
    #expect(try names(reader, #Predicate { $0.parent?.name == "Kansai" }) == ["Kyoto"])
    #expect(
      try names(reader, #Predicate { $0.parent?.parent?.name == "Japan" }) == ["Kyoto", "Tokyo"])
    #expect(
      try names(reader, #Predicate { $0.children.contains { $0.name == "Gion" } }) == ["Kyoto"])
    #expect(try names(reader, #Predicate { $0.children.count == 2 }) == ["Japan"])
    #expect(try names(reader, #Predicate { $0.children.isEmpty }) == ["Gion", "Tokyo"])
    let byParent = try reader.fetch(
      FetchDescriptor<SrPlace>(
        predicate: #Predicate { $0.parent != nil },
        sortBy: [SortDescriptor(\.parent?.name), SortDescriptor(\.name)]))
    // By the parent's name (Japan, Kansai, Kanto, Kyoto), then their own.
    #expect(byParent.map(\.name) == ["Kansai", "Kanto", "Kyoto", "Tokyo", "Gion"])
  }

  @Test(
    "prefetching children loads one level; deleting a subtree cascades to its end and leaves the rest, history typing each delete",
    arguments: TestEngine.allCases)
  func prefetchAndCascade(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrPlace.self)
    let context = ModelContext(container)
    context.insert(japan())
    try context.save()
    let reader = ModelContext(container)
    var descriptor = FetchDescriptor<SrPlace>(predicate: #Predicate { $0.parent == nil })
    descriptor.relationshipKeyPathsForPrefetching = [\.children]
    let roots = try reader.fetch(descriptor)
    let before = reader.relationshipQueryCount
    #expect(Set(roots[0].children.map(\.name)) == ["Kansai", "Kanto"])
    #expect(reader.relationshipQueryCount == before)
    let kansai = try #require(roots[0].children.first { $0.name == "Kansai" })
    reader.delete(kansai)
    try reader.save()
    #expect(try names(ModelContext(container)) == ["Japan", "Kanto", "Tokyo"])
    #expect(roots[0].children.map(\.name) == ["Kanto"])
    let deleted = try ModelContext(container).fetchHistory(
      HistoryDescriptor<DefaultHistoryTransaction>()
    )
    .last?.changes.filter { $0.kind == .delete }.count
    #expect(deleted == 3)
  }

  @Test(
    "a parent and its grandchild deleted in one save, each named by the user: children go first, the nullified rule keeps the rest and tombstones keep their names",
    arguments: TestEngine.allCases)
  func deleteOrderAndNullify(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrFolder.self)
    let context = ModelContext(container)
    let root = SrFolder(name: "root")
    let middle = SrFolder(name: "middle", parent: root)
    let leaf = SrFolder(name: "leaf", parent: middle)
    let other = SrFolder(name: "other", parent: root)
    context.insert(root)
    try context.save()
    _ = (leaf, other)
    // The grandchild first by key order would come after: the save orders by depth.
    context.delete(root)
    context.delete(leaf)
    try context.save()
    let reader = ModelContext(container)
    let left = try reader.fetch(FetchDescriptor<SrFolder>(sortBy: [SortDescriptor(\.name)]))
    #expect(left.map(\.name) == ["middle", "other"])
    #expect(left.allSatisfy { $0.parent == nil })
    let tombstones = try reader.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
      .last?.changes.compactMap { change -> String? in
        guard change.kind == .delete else { return nil }
        return change.tombstone(as: SrFolder.self)?[\.name] as? String
      }
    #expect(Set(tombstones ?? []) == ["root", "leaf"])
  }

  @Test(
    "new places that are each other's parent are refused, naming one, and nothing is written",
    arguments: TestEngine.allCases)
  func cycleRefused(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrPlace.self)
    let context = ModelContext(container)
    let a = SrPlace(name: "A")
    let b = SrPlace(name: "B", parent: a)
    a.parent = b
    context.insert(a)
    #expect {
      try context.save()
    } throws: { error in
      let error = error as? PersistenceError
      return error?.code == .relationshipConstraint
        && error?.message.contains("its own ancestor") == true
    }
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<SrPlace>()) == 0)
  }

  @Test(
    "a new node that points to two new nodes through two self-references goes in after both",
    arguments: TestEngine.allCases)
  func twoSelfReferences(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrStep.self)
    let context = ModelContext(container)
    let root = SrStep(name: "root")
    let a = SrStep(name: "a", parent: root)
    let b = SrStep(name: "b", parent: a)
    let x = SrStep(name: "x", parent: root)
    x.previous = b
    context.insert(x)
    try context.save()
    let reader = ModelContext(container)
    let read = try #require(
      try reader.fetch(FetchDescriptor<SrStep>(predicate: #Predicate { $0.name == "x" })).first)
    #expect(read.previous?.name == "b" && read.parent?.name == "root")
  }

  @Test(
    "deleting part of a cycle stored by updates deletes each row of it and records each delete",
    arguments: TestEngine.allCases)
  func storedCycleDeleted(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrFolder.self)
    let context = ModelContext(container)
    let root = SrFolder(name: "r")
    let a = SrFolder(name: "a", parent: root)
    let x = SrFolder(name: "x", parent: a)
    let b = SrFolder(name: "b", parent: x)
    context.insert(root)
    try context.save()
    a.parent = b  // a → b → x → a
    try context.save()
    let other = ModelContext(container)
    let cycle = try other.fetch(
      FetchDescriptor<SrFolder>(predicate: #Predicate { $0.name != "r" }))
    for folder in cycle { other.delete(folder) }
    try other.save()
    let left = try ModelContext(container).fetch(FetchDescriptor<SrFolder>()).map(\.name)
    #expect(left == ["r"])
    let changes = try ModelContext(container).fetchHistory(
      HistoryDescriptor<DefaultHistoryTransaction>()
    ).last?.changes.compactMap { change -> String? in
      guard change.kind == .delete else { return nil }
      return change.tombstone(as: SrFolder.self)?[\.name] as? String
    }
    #expect(Set(changes ?? []) == ["a", "b", "x"])
  }

  @Test(
    "deleting every node of a long chain loaded in the context deletes them all, children first",
    arguments: TestEngine.allCases)
  func deleteLongChainLoaded(engine: TestEngine) throws {
    let container = try engineContainer(engine, SrFolder.self)
    let context = ModelContext(container)
    var last = SrFolder(name: "0")
    for level in 1..<3000 { last = SrFolder(name: "\(level)", parent: last) }
    context.insert(last)
    try context.save()
    try context.delete(model: SrFolder.self)
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<SrFolder>()) == 0)
  }

  @Test(
    "the depths of deleted rows of a tree come from one linear pass: four times the rows, about four times the time"
  )
  func treeDepthsScale() {
    /// A chain of `count` rows, each the child of the one before, all deleted.
    func chain(_ count: Int) -> (edges: [ModelContext.TreeEdge], deleting: Set<Int64>) {
      let edges = (1..<Int64(count)).map {
        ModelContext.TreeEdge(parent: $0 - 1, child: $0, column: "parent")
      }
      return (edges.shuffled(), Set(0..<Int64(count)))
    }
    let (edges, deleting) = chain(1000)
    let (depth, cyclic) = ModelContext.treeDepths(edges, deleting: deleting)
    #expect(cyclic.isEmpty)
    #expect((0..<Int64(1000)).allSatisfy { depth[$0, default: 0] == Int($0) })
    // The best of five runs at n and at 4n, taken in turn (a busy moment slows both): linear
    // work grows about 4 times, quadratic 16.
    let (smallEdges, smallDeleting) = chain(20_000)
    let (largeEdges, largeDeleting) = chain(80_000)
    func seconds(_ edges: [ModelContext.TreeEdge], _ deleting: Set<Int64>) -> Double {
      let start = ContinuousClock.now
      _ = ModelContext.treeDepths(edges, deleting: deleting)
      let elapsed = ContinuousClock.now - start
      return Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds)
    }
    var small = Double.infinity
    var large = Double.infinity
    for _ in 0..<5 {
      small = min(small, seconds(smallEdges, smallDeleting))
      large = min(large, seconds(largeEdges, largeDeleting))
    }
    #expect(large / small < 10, "n: \(small) s, 4n: \(large) s")
  }
}
