import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// Model subclasses at their edges: batch deletes beside unsaved inserts of other classes,
// upserts across classes, sibling columns, sections through a relationship, non-ASCII class
// names, tombstones of rows deleted unloaded, a to-one inherited, stores reopened with fewer
// subclasses.

@Model class HxTrip {
  @Attribute(.unique) var name: String
  var days = 1

  init(name: String, days: Int = 1) {
    self.name = name
    self.days = days
  }
}

@Model class HxBusiness: HxTrip {
  var perdiem: Double = 0.0

  init(name: String, perdiem: Double) {
    self.perdiem = perdiem
    super.init(name: name)
  }
}

@Model class HxPersonal: HxTrip {
  var reason: String = ""

  init(name: String, reason: String) {
    self.reason = reason
    super.init(name: name)
  }
}

/// Two subclasses declaring the same attribute name, one unique, one not.
@Model class HxKeyed: HxTrip {
  @Attribute(.unique) var code: String = ""
  init(name: String, code: String) {
    self.code = code
    super.init(name: name)
  }
}

@Model class HxLoose: HxTrip {
  var code: String = ""
  init(name: String, code: String) {
    self.code = code
    super.init(name: name)
  }
}

/// Non-ASCII class names, three levels.
@Model class HxReise {
  var name: String
  init(name: String) { self.name = name }
}

@Model class HxGeschäft: HxReise {
  var budget = 0
}

@Model class HxVorstand: HxGeschäft {
  var lounge = true
}

/// A root with a to-one that stores its key, and a subclass.
@Model final class HxCarrier {
  var name: String
  @Relationship(deleteRule: .nullify, inverse: \HxParcel.carrier) var parcels: [HxParcel] = []
  init(name: String) { self.name = name }
}

@Model class HxParcel {
  var label: String
  var carrier: HxCarrier?
  init(label: String) { self.label = label }
}

@Model class HxExpress: HxParcel {
  var fee = 5
}

@Model class HxBadgeRoot {
  var name = ""
}

@Model class HxBadged: HxBadgeRoot {
  @Attribute(.preserveValueOnDeletion) var badge = ""
}

@Suite("Model subclasses at their edges")
struct SubclassReviewTests {
  func trips(_ engine: TestEngine) throws -> ModelContainer {
    try engineContainer(engine, HxTrip.self, HxBusiness.self, HxPersonal.self)
  }

  func names<Model: PersistentModel>(
    _: Model.Type, _ container: ModelContainer, _ name: KeyPath<Model, String> & Sendable
  ) throws -> [String] {
    try ModelContext(container).fetch(FetchDescriptor<Model>()).map { $0[keyPath: name] }.sorted()
  }

  // MARK: Data loss

  @Test(
    "delete(model: Subclass.self) forgets only that subclass's unsaved inserts",
    arguments: TestEngine.allCases)
  func batchDeleteOfSubclassKeepsOtherInserts(engine: TestEngine) throws {
    let container = try trips(engine)
    let context = ModelContext(container)
    context.insert(HxTrip(name: "Plain"))
    context.insert(HxPersonal(name: "Family", reason: "x"))
    context.insert(HxBusiness(name: "Fair", perdiem: 1))
    try context.delete(model: HxBusiness.self)
    try context.save()
    let kept = try names(HxTrip.self, container, \.name)
    #expect(kept == ["Family", "Plain"])
  }

  @Test(
    "delete(model: Subclass.self, where:) forgets only matching unsaved inserts of that subclass",
    arguments: TestEngine.allCases)
  func batchDeleteWithPredicateKeepsOtherInserts(engine: TestEngine) throws {
    let container = try trips(engine)
    let context = ModelContext(container)
    context.insert(HxTrip(name: "Plain"))
    context.insert(HxPersonal(name: "Family", reason: "x"))
    context.insert(HxBusiness(name: "Fair", perdiem: 1))
    context.insert(HxBusiness(name: "Expo", perdiem: 1))
    try context.delete(model: HxBusiness.self, where: #Predicate { $0.name == "Fair" })
    try context.save()
    let kept = try names(HxTrip.self, container, \.name)
    #expect(kept == ["Expo", "Family", "Plain"])
  }

  @Test(
    "an upsert (unique name on the root) of a subclass onto a stored root row is refused, nothing written",
    arguments: TestEngine.allCases)
  func upsertSubclassOntoRootRow(engine: TestEngine) throws {
    let container = try trips(engine)
    let first = ModelContext(container)
    first.insert(HxTrip(name: "Same"))
    try first.save()
    let second = ModelContext(container)
    second.insert(HxBusiness(name: "Same", perdiem: 99))
    let error = try #require(throws: PersistenceError.self) { try second.save() }
    #expect(error.code == .uniqueConstraint)
    #expect(error.message.contains("HxBusiness") && error.message.contains("HxTrip"))
    let reader = ModelContext(container)
    let all = try reader.fetch(FetchDescriptor<HxTrip>())
    #expect(all.count == 1)
    #expect(all.allSatisfy { type(of: $0) == HxTrip.self })
    #expect(try reader.fetch(FetchDescriptor<HxBusiness>()).isEmpty)
  }

  @Test("the same, run in a child process: it must not trap")
  func upsertRootOntoSubclassRowDoesNotTrap() async {
    await #expect(processExitsWith: .success) {
      try SubclassReviewTests().upsertRootOntoSubclassRow(engine: .sqlite)
    }
  }

  @Test(
    "an upsert of a root model onto a stored subclass row, then a fetch of the subclass in that context",
    arguments: TestEngine.allCases)
  func upsertRootOntoSubclassRow(engine: TestEngine) throws {
    let container = try trips(engine)
    let first = ModelContext(container)
    first.insert(HxBusiness(name: "Same", perdiem: 5))
    try first.save()
    let second = ModelContext(container)
    let plain = HxTrip(name: "Same", days: 3)
    second.insert(plain)
    // Refused: the stored row is a business trip, which a plain trip does not update.
    #expect(throws: PersistenceError.self) { try second.save() }
    // The context now holds a plain HxTrip registered for a row whose "_entity" says
    // HxBusiness; a fetch of HxBusiness must not hand it out (or load HxBusiness's columns
    // into it).
    let business = try second.fetch(FetchDescriptor<HxBusiness>())
    #expect(business.count == 1)
    #expect(business.allSatisfy { type(of: $0) == HxBusiness.self })
    #expect(business.first.map { ObjectIdentifier($0) } != ObjectIdentifier(plain))
    let perdiem = business.first?.perdiem
    #expect(perdiem == 5)
  }

  @Test(
    "two sibling subclasses that declare one column with different options are refused when the container opens, naming it",
    arguments: TestEngine.allCases)
  func siblingColumnOptions(engine: TestEngine) throws {
    let error = try #require(throws: PersistenceError.self) {
      try engineContainer(engine, HxTrip.self, HxKeyed.self, HxLoose.self)
    }
    #expect(error.code == .invalidValue)
    #expect(error.message.contains("HxTrip.code"))
  }

  @Test(
    "a fetch of a subclass with a non-ASCII name finds its own subclasses' rows",
    arguments: TestEngine.allCases)
  func nonASCIIPathPrefix(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxReise.self, HxGeschäft.self, HxVorstand.self)
    let context = ModelContext(container)
    context.insert(HxReise(name: "R"))
    context.insert(HxGeschäft(name: "G"))
    context.insert(HxVorstand(name: "V"))
    try context.save()
    let reader = ModelContext(container)
    let fetched = try reader.fetch(FetchDescriptor<HxGeschäft>()).map(\.name).sorted()
    #expect(fetched == ["G", "V"])
    #expect(try reader.fetchCount(FetchDescriptor<HxGeschäft>()) == 2)
    #expect(
      try reader.fetch(FetchDescriptor<HxReise>(predicate: #Predicate { $0 is HxGeschäft }))
        .map(\.name).sorted() == ["G", "V"])
  }

  @Test(
    "a root's to-one whose inverse only the target names is inherited by a subclass: the container opens",
    arguments: TestEngine.allCases)
  func inheritedToOneWithInverseOnTarget(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxCarrier.self, HxParcel.self, HxExpress.self)
    let context = ModelContext(container)
    let dhl = HxCarrier(name: "DHL")
    context.insert(dhl)
    let express = HxExpress(label: "b")
    context.insert(express)
    express.carrier = dhl
    try context.save()
    let carriers = ModelContext(container)
    #expect(try carriers.fetch(FetchDescriptor<HxCarrier>()).first?.parcels.count == 1)
  }

  @Test(
    "sectionBy through a to-one, on a root whose table holds subclasses, groups by the related value",
    arguments: TestEngine.allCases)
  func sectionThroughRelationship(engine: TestEngine) throws {
    // ModelSubclassTests' Voyage (one-to-one berth), Cruise and Tender.
    let container = try engineContainer(engine, Voyage.self, Cruise.self, Tender.self)
    let context = ModelContext(container)
    let voyages = [
      Voyage(name: "a"), Cruise(name: "b", ship: "S"), Voyage(name: "c"), Tender(name: "d"),
    ]
    for (offset, voyage) in voyages.enumerated() {
      context.insert(voyage)
      voyage.berth = Berth(cabin: offset < 2 ? "A1" : "B2")
    }
    try context.save()
    let reader = ModelContext(container)
    let sections = try reader.fetch(
      FetchDescriptor<Voyage>(sortBy: [SortDescriptor(\.name)]), sectionBy: \Voyage.berth?.cabin)
    let ids = sections.map(\.id)
    #expect(ids == ["A1", "B2"])
    let labels = sections.map { $0.map(\.name) }
    #expect(labels == [["a", "b"], ["c", "d"]])
  }

  @Test("a store with subclass rows reopened listing only some of the subclasses")
  func reopenWithSomeSubclasses() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("trips.store")
    do {
      let container = try ModelContainer(
        for: HxTrip.self, HxBusiness.self, HxPersonal.self,
        configurations: ModelConfiguration(url: url))
      let context = ModelContext(container)
      context.insert(HxTrip(name: "Plain"))
      context.insert(HxBusiness(name: "Fair", perdiem: 1))
      context.insert(HxPersonal(name: "Family", reason: "x"))
      try context.save()
    }
    do {
      let container = try ModelContainer(
        for: HxTrip.self, HxBusiness.self, configurations: ModelConfiguration(url: url))
      let context = ModelContext(container)
      // A fetch of the listed subclass works; one of the root names the unlisted one.
      #expect(try context.fetch(FetchDescriptor<HxBusiness>()).map(\.name) == ["Fair"])
      let error = try #require(throws: PersistenceError.self) {
        try context.fetch(FetchDescriptor<HxTrip>())
      }
      #expect(error.message.contains("HxPersonal"))
    } catch let error as PersistenceError {
      // Refused when it opens: the message says that subclasses are not listed, and where
      // their names are.
      #expect(error.code == .newerStore)
      #expect(error.message.contains("does not list") && error.message.contains("reason"))
      #expect(error.message.contains("subclasses it does not list: HxPersonal."))
    }
  }

  @Test("a subclass added to a store whose root table has rows")
  func addSubclassToExistingStore() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("trips.store")
    do {
      let container = try ModelContainer(
        for: HxTrip.self, configurations: ModelConfiguration(url: url))
      let context = ModelContext(container)
      context.insert(HxTrip(name: "Old"))
      try context.save()
    }
    do {
      let container = try ModelContainer(
        for: HxTrip.self, HxBusiness.self, configurations: ModelConfiguration(url: url))
      let context = ModelContext(container)
      context.insert(HxBusiness(name: "New", perdiem: 2))
      try context.save()
      let all = try ModelContext(container).fetch(
        FetchDescriptor<HxTrip>(sortBy: [SortDescriptor(\.name)]))
      #expect(all.map(\.name) == ["New", "Old"])
      #expect(all.map { type(of: $0) == HxBusiness.self } == [true, false])
    } catch let error as PersistenceError {
      Issue.record("opening refused: \(error.code) \(error.message)")
    }
    do {
      // And one more subclass added later.
      let container = try ModelContainer(
        for: HxTrip.self, HxBusiness.self, HxPersonal.self,
        configurations: ModelConfiguration(url: url))
      #expect(try ModelContext(container).fetchCount(FetchDescriptor<HxTrip>()) == 2)
    } catch let error as PersistenceError {
      Issue.record("opening refused: \(error.code) \(error.message)")
    }
  }

  // MARK: Probes that should pass

  @Test(
    "unsaved inserts: a subclass's fetch, count and identifiers leave out a sibling's; the root's include it as its class; rollback restores a subclass attribute",
    arguments: TestEngine.allCases)
  func pendingAndRollback(engine: TestEngine) throws {
    let container = try trips(engine)
    let context = ModelContext(container)
    context.insert(HxBusiness(name: "Saved", perdiem: 1))
    try context.save()
    context.insert(HxPersonal(name: "Pending", reason: "r"))
    let business = try context.fetch(FetchDescriptor<HxBusiness>()).map(\.name)
    #expect(business == ["Saved"])
    let ids = try context.fetchIdentifiers(FetchDescriptor<HxBusiness>())
    #expect(ids.count == 1)
    let all = try context.fetch(FetchDescriptor<HxTrip>(sortBy: [SortDescriptor(\.name)]))
    #expect(all.map { "\(type(of: $0))" } == ["HxPersonal", "HxBusiness"])
    var seen: [String] = []
    try context.enumerate(FetchDescriptor<HxTrip>(), batchSize: 1) {
      seen.append("\(type(of: $0))")
    }
    #expect(seen == ["HxBusiness"])
    let saved = try #require(all.last as? HxBusiness)
    saved.perdiem = 42
    context.rollback()
    #expect(saved.perdiem == 1)
    var paged = FetchDescriptor<HxTrip>(sortBy: [SortDescriptor(\.name)])
    paged.fetchLimit = 1
    let page = try context.fetchModelsPage(paged)
    #expect(page.models.first is HxBusiness)
  }

  @Test(
    "a batch delete (rows not loaded) of a subclass's rows keeps its preserved attribute in the tombstone",
    arguments: TestEngine.allCases)
  func batchDeleteTombstone(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxBadgeRoot.self, HxBadged.self)
    let context = ModelContext(container)
    let badged = HxBadged()
    badged.name = "b"
    badged.badge = "gold"
    context.insert(badged)
    try context.save()
    let deleter = ModelContext(container)
    try deleter.delete(model: HxBadgeRoot.self)
    try deleter.save()
    let found = try ModelContext(container).lastTombstones(
      of: HxBadged.self, where: \.badge, in: ["gold"])
    #expect(found.keys.sorted() == ["gold"])
  }

  @Test("control: deleting the loaded subclass model keeps its tombstone")
  func loadedDeleteTombstone() throws {
    let container = try engineContainer(.sqlite, HxBadgeRoot.self, HxBadged.self)
    let context = ModelContext(container)
    let badged = HxBadged()
    badged.badge = "gold"
    context.insert(badged)
    try context.save()
    let deleter = ModelContext(container)
    for model in try deleter.fetch(FetchDescriptor<HxBadgeRoot>()) { deleter.delete(model) }
    try deleter.save()
    let found = try ModelContext(container).lastTombstones(
      of: HxBadged.self, where: \.badge, in: ["gold"])
    #expect(found.keys.sorted() == ["gold"])
  }
}
