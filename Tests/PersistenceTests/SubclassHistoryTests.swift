import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// History across a model hierarchy, and the program each transaction records: a subclass's
// changes typed by the subclass, on both engines; bundle and process identifiers; a store made
// before those columns existed, upgraded when opened writable and refused read-only.

/// An owner whose items (of three classes, each preserving a value of its own) cascade.
@Model final class HhOwner {
  var name: String
  @Relationship(deleteRule: .cascade, inverse: \HhItem.owner) var items: [HhItem] = []
  init(name: String) { self.name = name }
}

@Model class HhItem {
  @Attribute(.preserveValueOnDeletion) var label: String
  var owner: HhOwner?
  init(label: String) { self.label = label }
}

@Model class HhHeavy: HhItem {
  @Attribute(.preserveValueOnDeletion) var weight: Int = 0
}

@Model class HhFragile: HhHeavy {
  @Attribute(.preserveValueOnDeletion) var fragile: Bool = false
}

@Suite("History of model subclasses, and of the program that saved")
struct SubclassHistoryTests {
  /// The model type each change of `transactions` is typed by, with its kind.
  func typed(_ transactions: [DefaultHistoryTransaction]) -> [String] {
    transactions.flatMap(\.changes).map { change in
      switch change {
      case .insert(let inserted): "insert \(type(of: inserted))"
      case .update(let updated): "update \(type(of: updated))"
      case .delete(let deleted): "delete \(type(of: deleted))"
      }
    }
  }

  @Test(
    "a subclass's inserts, updates and deletes are typed by the subclass, a root's by the root; a tombstone of a subclass's preserved attribute reads by its key path",
    arguments: TestEngine.allCases)
  func changesTypedByClass(engine: TestEngine) throws {
    let container = try engineContainer(
      engine, HxTrip.self, HxBusiness.self, HxPersonal.self, HxBadgeRoot.self, HxBadged.self)
    let context = ModelContext(container)
    let start = try context.currentHistoryToken()
    let fair = HxBusiness(name: "Fair", perdiem: 10)
    let plain = HxTrip(name: "Plain")
    context.insert(fair)
    context.insert(plain)
    let badged = HxBadged()
    badged.badge = "gold"
    context.insert(badged)
    try context.save()
    fair.perdiem = 20
    plain.days = 4
    try context.save()
    context.delete(fair)
    context.delete(badged)
    try context.save()

    let history = try ModelContext(container).fetchHistory(HistoryDescriptor(after: start))
    // Each save's changes, in no promised order within the save.
    #expect(
      history.map { typed([$0]).sorted() } == [
        [
          "insert DefaultHistoryInsert<HxBadged>", "insert DefaultHistoryInsert<HxBusiness>",
          "insert DefaultHistoryInsert<HxTrip>",
        ],
        ["update DefaultHistoryUpdate<HxBusiness>", "update DefaultHistoryUpdate<HxTrip>"],
        ["delete DefaultHistoryDelete<HxBadged>", "delete DefaultHistoryDelete<HxBusiness>"],
      ])
    // As SwiftData's users match them.
    var perdiemUpdated = false
    var badge: String?
    for change in history.flatMap(\.changes) {
      switch change {
      case .update(let updated as DefaultHistoryUpdate<HxBusiness>):
        perdiemUpdated = updated.updatedAttributes.contains { $0 == \HxBusiness.perdiem }
      case .delete(let deleted as DefaultHistoryDelete<HxBadged>):
        badge = deleted.tombstone[\.badge] as? String
      default: break
      }
    }
    #expect(perdiemUpdated)
    #expect(badge == "gold")
    // A change's identifier is the model's own.
    let inserted = try #require(
      history.first?.changes.first { change in
        if case .insert(_ as DefaultHistoryInsert<HxBusiness>) = change { true } else { false }
      })
    #expect(inserted.changedPersistentIdentifier == fair.persistentModelID)
    // enumerateHistory types them the same way.
    var streamed: [DefaultHistoryTransaction] = []
    try ModelContext(container).enumerateHistory(HistoryDescriptor(after: start)) {
      transaction, change in
      var copy = transaction
      copy.changes = [change]
      streamed.append(copy)
    }
    #expect(typed(streamed) == typed(history))
  }

  @Test(
    "a subclass's row nullified by a delete rule, never loaded, is recorded as its class",
    arguments: TestEngine.allCases)
  func nullifiedSubclassRow(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxCarrier.self, HxParcel.self, HxExpress.self)
    do {
      let context = ModelContext(container)
      let carrier = HxCarrier(name: "Post")
      let parcel = HxExpress(label: "fast")
      context.insert(carrier)
      context.insert(parcel)
      parcel.carrier = carrier
      try context.save()
    }
    let context = ModelContext(container)
    let start = try context.currentHistoryToken()
    let carrier = try #require(try context.fetch(FetchDescriptor<HxCarrier>()).first)
    context.delete(carrier)
    try context.save()
    let history = try ModelContext(container).fetchHistory(HistoryDescriptor(after: start))
    #expect(
      typed(history).sorted() == [
        "delete DefaultHistoryDelete<HxCarrier>", "update DefaultHistoryUpdate<HxExpress>",
      ])
  }

  @Test(
    "rows of subclasses deleted by a cascade, loaded or not, are recorded as their classes, with their own preserved values of every type",
    arguments: TestEngine.allCases, [false, true])
  func cascadedSubclassRows(engine: TestEngine, loaded: Bool) throws {
    let container = try engineContainer(
      engine, HhOwner.self, HhItem.self, HhHeavy.self, HhFragile.self)
    do {
      let context = ModelContext(container)
      let owner = HhOwner(name: "Owner")
      context.insert(owner)
      let heavy = HhHeavy(label: "heavy")
      heavy.weight = 7
      let fragile = HhFragile(label: "fragile")
      fragile.weight = 9
      fragile.fragile = true
      owner.items = [HhItem(label: "plain"), heavy, fragile]
      try context.save()
    }
    let context = ModelContext(container)
    let start = try context.currentHistoryToken()
    let owner = try #require(try context.fetch(FetchDescriptor<HhOwner>()).first)
    if loaded { #expect(owner.items.count == 3) }
    context.delete(owner)
    try context.save()
    let changes = try ModelContext(container).fetchHistory(HistoryDescriptor(after: start))
      .flatMap(\.changes)
    var found: [String] = []
    for change in changes {
      switch change {
      case .delete(let deleted as DefaultHistoryDelete<HhFragile>):
        let tombstone = deleted.tombstone
        found.append(
          "fragile \(tombstone[\.label] as? String ?? "?") \(tombstone[\.weight] as? Int ?? -1) \(tombstone[\.fragile] as? Bool ?? false)"
        )
      case .delete(let deleted as DefaultHistoryDelete<HhHeavy>):
        found.append("heavy \(deleted.tombstone[\.weight] as? Int ?? -1)")
      case .delete(let deleted as DefaultHistoryDelete<HhItem>):
        found.append("item \(deleted.tombstone[\.label] as? String ?? "?")")
      case .delete(_ as DefaultHistoryDelete<HhOwner>):
        found.append("owner")
      default:
        found.append("other")
      }
    }
    #expect(found.sorted() == ["fragile fragile 9 true", "heavy 7", "item plain", "owner"])
    // `tombstone(as:)` reads a row of the class or of a subclass of it, not of another class.
    let fragileDelete = try #require(
      changes.first { $0.tombstone(as: HhFragile.self) != nil })
    #expect(fragileDelete.tombstone(as: HhItem.self)?[\.label] as? String == "fragile")
    #expect(fragileDelete.tombstone(as: HhHeavy.self)?[\.weight] as? Int == 9)
    #expect(changes.filter { $0.tombstone(as: HhHeavy.self) != nil }.count == 2)
    #expect(changes.filter { $0.tombstone(as: HhItem.self) != nil }.count == 3)
  }

  @Test(
    "a descriptor of a subclass's model type selects its changes only: fetchHistory and deleteHistory leave its siblings' and its root's",
    arguments: TestEngine.allCases)
  func historyOfOneSubclass(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxTrip.self, HxBusiness.self, HxPersonal.self)
    let context = ModelContext(container)
    let start = try context.currentHistoryToken()
    context.insert(HxBusiness(name: "b", perdiem: 1))
    try context.save()
    context.insert(HxPersonal(name: "p", reason: "r"))
    context.insert(HxTrip(name: "t"))
    try context.save()
    let business = HistoryDescriptor(after: start, modelTypes: [HxBusiness.self])
    #expect(
      typed(try context.fetchHistory(business)) == ["insert DefaultHistoryInsert<HxBusiness>"])
    var streamed: [String] = []
    try context.enumerateHistory(business) { _, change in
      if case .insert(let inserted) = change { streamed.append("\(type(of: inserted))") }
    }
    #expect(streamed == ["DefaultHistoryInsert<HxBusiness>"])
    // The root's model type selects the whole table.
    #expect(
      typed(try context.fetchHistory(HistoryDescriptor(after: start, modelTypes: [HxTrip.self])))
        .count == 3)
    try context.deleteHistory(HistoryDescriptor(modelTypes: [HxBusiness.self]))
    // The business trip's transaction is gone (so `start` expired); the other one is whole.
    #expect(
      typed(try context.fetchHistory()).sorted() == [
        "insert DefaultHistoryInsert<HxPersonal>", "insert DefaultHistoryInsert<HxTrip>",
      ])
  }

  @Test(
    "each transaction records the program that saved: its process name (no bundle on Linux) and its process identifier",
    arguments: TestEngine.allCases)
  func programRecorded(engine: TestEngine) throws {
    let container = try engineContainer(engine, HxTrip.self)
    let context = ModelContext(container)
    context.insert(HxTrip(name: "One"))
    try context.save()
    let transaction = try #require(try ModelContext(container).fetchHistory().last)
    #expect(
      transaction.bundleIdentifier
        == (Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName))
    #expect(!transaction.bundleIdentifier.isEmpty)
    #expect(transaction.processIdentifier == String(ProcessInfo.processInfo.processIdentifier))
    // A predicate may read them (evaluated on each transaction).
    let process = transaction.processIdentifier
    let mine = try ModelContext(container).fetchHistory(
      HistoryDescriptor(predicate: #Predicate { $0.processIdentifier == process }))
    #expect(mine.count == 1)
  }

  @Test(
    "a store made before history recorded the program and the subclass: refused read-only, naming the column; upgraded when opened writable, its old transactions kept with empty identifiers",
    arguments: TestEngine.allCases)
  func storeWithoutTheColumns(engine: TestEngine) throws {
    let store = try engine.makeStore()
    do {
      let container = try store.container(HxTrip.self, HxBusiness.self)
      let context = ModelContext(container)
      context.insert(HxBusiness(name: "Old", perdiem: 1))
      try context.save()
      // Back to the earlier layout.
      let connection = try container.store.makeConnection(cacheSizeKiB: nil)
      for (table, columns) in StoreLayout.addedHistoryColumns {
        for column in columns {
          try connection.execute("ALTER TABLE \(table) DROP COLUMN \(column)")
        }
      }
    }
    let refused = try #require(throws: PersistenceError.self) {
      _ = try store.container(HxTrip.self, HxBusiness.self, allowsSave: false)
    }
    #expect(refused.code == .schemaMismatch)
    #expect(refused.message.contains("earlier version") && refused.message.contains("writable"))

    let container = try store.container(HxTrip.self, HxBusiness.self)
    let context = ModelContext(container)
    context.insert(HxBusiness(name: "New", perdiem: 2))
    try context.save()
    let history = try ModelContext(container).fetchHistory()
    #expect(history.count == 2)
    #expect(history.first?.bundleIdentifier == "" && history.first?.processIdentifier == "")
    #expect(history.last?.processIdentifier == String(ProcessInfo.processInfo.processIdentifier))
    // The old change has no subentity: typed by the table's root; the new one by its class.
    #expect(
      typed(history) == [
        "insert DefaultHistoryInsert<HxTrip>", "insert DefaultHistoryInsert<HxBusiness>",
      ])
    // Read-only now opens.
    let reader = try store.container(HxTrip.self, HxBusiness.self, allowsSave: false)
    #expect(try ModelContext(reader).fetchCount(FetchDescriptor<HxTrip>()) == 2)
  }
}
