import Foundation
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import PersistenceCore

// Three versions of one model, declared as SwiftData's users declare them (WWDC 2025's
// SampleTripsSchemaV1…): classes of one name inside each versioned schema, one table.

enum VoyageSchemaV1: VersionedSchema {
  static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
  static var models: [any PersistentModel.Type] { [Voyage.self] }

  @Model final class Voyage {
    var name: String
    var destination: String
    init(name: String, destination: String) {
      self.name = name
      self.destination = destination
    }
  }
}

enum VoyageSchemaV2: VersionedSchema {
  static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
  static var models: [any PersistentModel.Type] { [Voyage.self] }

  @Model final class Voyage {
    #Unique<Voyage>([\.name])
    #Index<Voyage>([\.notes])
    var name: String
    var destination: String
    var notes: String?
    init(name: String, destination: String) {
      self.name = name
      self.destination = destination
    }
  }
}

enum VoyageSchemaV3: VersionedSchema {
  static var versionIdentifier: Schema.Version { Schema.Version(3, 0, 0) }
  static var models: [any PersistentModel.Type] { [Voyage.self] }

  @Model final class Voyage {
    #Unique<Voyage>([\.name])
    var name: String
    @Attribute(originalName: "destination") var place: String
    var nameLength = 0
    init(name: String, place: String) {
      self.name = name
      self.place = place
    }
  }
}

/// How many times each closure of the plans ran.
let migrationRuns = Mutex<[String: Int]>([:])

enum VoyageMigrationPlan: SchemaMigrationPlan {
  static var schemas: [any VersionedSchema.Type] {
    [VoyageSchemaV1.self, VoyageSchemaV2.self, VoyageSchemaV3.self]
  }
  static var stages: [MigrationStage] { [migrateV1toV2, migrateV2toV3] }

  /// Removes the repeats the new `#Unique` would refuse, keeping the first of each name.
  static let migrateV1toV2 = MigrationStage.custom(
    fromVersion: VoyageSchemaV1.self, toVersion: VoyageSchemaV2.self,
    willMigrate: { context in
      migrationRuns.withLock { $0["v1-v2", default: 0] += 1 }
      let voyages = try context.fetch(
        FetchDescriptor<VoyageSchemaV1.Voyage>(sortBy: [SortDescriptor(\.name)]))
      var seen = Set<String>()
      for voyage in voyages where !seen.insert(voyage.name).inserted {
        context.delete(voyage)
      }
      try context.save()
    }, didMigrate: nil)

  /// Fills the new property from another.
  static let migrateV2toV3 = MigrationStage.custom(
    fromVersion: VoyageSchemaV2.self, toVersion: VoyageSchemaV3.self, willMigrate: nil,
    didMigrate: { context in
      migrationRuns.withLock { $0["v2-v3", default: 0] += 1 }
      for voyage in try context.fetch(FetchDescriptor<VoyageSchemaV3.Voyage>()) {
        voyage.nameLength = voyage.name.count
      }
    })
}

/// What the failing plan's closure throws.
struct PlanFailure: Error {}

/// The plan with its second stage failing in `didMigrate`.
enum FailingVoyagePlan: SchemaMigrationPlan {
  static var schemas: [any VersionedSchema.Type] { VoyageMigrationPlan.schemas }
  static var stages: [MigrationStage] {
    [
      VoyageMigrationPlan.migrateV1toV2,
      .custom(
        fromVersion: VoyageSchemaV2.self, toVersion: VoyageSchemaV3.self, willMigrate: nil,
        didMigrate: { context in
          for voyage in try context.fetch(FetchDescriptor<VoyageSchemaV3.Voyage>()) {
            voyage.nameLength = -1
          }
          try context.save()
          throw PlanFailure()
        }),
    ]
  }
}

/// Lightweight stages only: the repeats stay, and the unique constraint cannot be made.
enum LightweightVoyagePlan: SchemaMigrationPlan {
  static var schemas: [any VersionedSchema.Type] { VoyageMigrationPlan.schemas }
  static var stages: [MigrationStage] {
    [.lightweight(fromVersion: VoyageSchemaV1.self, toVersion: VoyageSchemaV2.self)]
  }
}

/// A stage from the first version to the third, skipping the second.
enum SkippingVoyagePlan: SchemaMigrationPlan {
  static var schemas: [any VersionedSchema.Type] { VoyageMigrationPlan.schemas }
  static var stages: [MigrationStage] {
    [.lightweight(fromVersion: VoyageSchemaV1.self, toVersion: VoyageSchemaV3.self)]
  }
}

@Suite("Versioned schemas and a migration plan", .serialized)
struct MigrationTests {
  /// A store of the first version with a repeated name, written without a plan (no version
  /// recorded, as a store from before the app had one) or with one (1.0.0 recorded).
  static func versionOne(_ engine: TestEngine, withPlan: Bool = false) throws -> TestStore {
    let store = try engine.makeStore()
    let container =
      withPlan
      ? try ModelContainer(
        for: VoyageSchemaV1.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
        configurations: ModelConfiguration(url: store.url))
      : try ModelContainer(
        for: Schema(versionedSchema: VoyageSchemaV1.self),
        configurations: ModelConfiguration(url: store.url))
    let context = ModelContext(container)
    for (name, destination) in [("Fiji", "Suva"), ("Kyoto", "Kyoto"), ("Fiji", "Nadi")] {
      context.insert(VoyageSchemaV1.Voyage(name: name, destination: destination))
    }
    try context.save()
    return store
  }

  /// What the store holds, read with the first version's model: names and destinations.
  static func rows(_ store: TestStore) throws -> [String] {
    let container = try ModelContainer(
      for: VoyageSchemaV1.Voyage.self, configurations: ModelConfiguration(url: store.url))
    return try ModelContext(container).fetch(
      FetchDescriptor<VoyageSchemaV1.Voyage>(
        sortBy: [SortDescriptor(\.name), SortDescriptor(\.destination)])
    ).map { "\($0.name) \($0.destination)" }
  }

  @Test(
    "a custom stage removes repeats before #Unique arrives, a rename keeps its column, a removed property's indexed column goes, a new property is filled; the version is recorded",
    arguments: TestEngine.allCases)
  func migrates(engine: TestEngine) throws {
    for withPlan in [false, true] {
      let store = try Self.versionOne(engine, withPlan: withPlan)
      let before = migrationRuns.withLock { $0 }
      let container = try ModelContainer(
        for: VoyageSchemaV3.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
        configurations: ModelConfiguration(url: store.url))
      #expect(container.schema.version == Schema.Version(3, 0, 0))
      #expect(container.migrationPlan == VoyageMigrationPlan.self)
      let context = ModelContext(container)
      let voyages = try context.fetch(
        FetchDescriptor<VoyageSchemaV3.Voyage>(sortBy: [SortDescriptor(\.name)]))
      #expect(voyages.map(\.name) == ["Fiji", "Kyoto"])
      #expect(voyages.map(\.place) == ["Suva", "Kyoto"])
      #expect(voyages.map(\.nameLength) == [4, 5])
      // The unique constraint is in force.
      context.insert(VoyageSchemaV3.Voyage(name: "Kyoto", place: "Uji"))
      try context.save()
      #expect(try context.fetchCount(FetchDescriptor<VoyageSchemaV3.Voyage>()) == 2)
      let connection = try container.makeConnection()
      #expect(try SchemaMigration.storedVersion(connection) == Schema.Version(3, 0, 0))
      // The migration's saves are in the history, by their author.
      let authors = try context.fetchHistory().map(\.author)
      #expect(authors.contains("migration"), "\(authors)")

      // Each stage ran once; opening again runs none.
      let after = migrationRuns.withLock { $0 }
      #expect(after["v1-v2", default: 0] == before["v1-v2", default: 0] + 1)
      #expect(after["v2-v3", default: 0] == before["v2-v3", default: 0] + 1)
      _ = try ModelContainer(
        for: VoyageSchemaV3.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
        configurations: ModelConfiguration(url: store.url))
      #expect(migrationRuns.withLock { $0 } == after)
    }
  }

  @Test(
    "a stage that fails leaves the store as it was, at its version, naming the stage and the step",
    arguments: TestEngine.allCases)
  func failureLeavesTheStore(engine: TestEngine) throws {
    let store = try Self.versionOne(engine, withPlan: true)
    let before = try Self.rows(store)
    let error = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: VoyageSchemaV3.Voyage.self, migrationPlan: FailingVoyagePlan.self,
        configurations: ModelConfiguration(url: store.url))
    }
    #expect(error.code == .migrationFailed)
    #expect(error.message.contains("the custom stage 2.0.0 → 3.0.0, didMigrate"), "\(error)")
    #expect(error.message.contains("left as it was, at 1.0.0"), "\(error)")
    // The first stage's deletes and the new columns were undone with the second's failure.
    #expect(try Self.rows(store) == before)
    let container = try ModelContainer(
      for: VoyageSchemaV1.Voyage.self, configurations: ModelConfiguration(url: store.url))
    #expect(
      try SchemaMigration.storedVersion(container.makeConnection()) == Schema.Version(1, 0, 0))

    // A unique constraint the rows break: the step that makes it fails, nothing is changed.
    let unique = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: VoyageSchemaV3.Voyage.self, migrationPlan: LightweightVoyagePlan.self,
        configurations: ModelConfiguration(url: store.url))
    }
    #expect(unique.code == .migrationFailed)
    #expect(
      unique.message.contains("the lightweight stage 1.0.0 → 2.0.0, moving the tables to 2.0.0"),
      "\(unique)")
    #expect(unique.message.contains("repeat a value of (name)"), "\(unique)")
    #expect(try Self.rows(store) == before)

    // The right plan still migrates it.
    let migrated = try ModelContainer(
      for: VoyageSchemaV3.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
      configurations: ModelConfiguration(url: store.url))
    #expect(try ModelContext(migrated).fetchCount(FetchDescriptor<VoyageSchemaV3.Voyage>()) == 2)
  }

  @Test(
    "a store newer than the program's schema is refused, unchanged", arguments: TestEngine.allCases)
  func newerStoreRefused(engine: TestEngine) throws {
    let store = try Self.versionOne(engine)
    _ = try ModelContainer(
      for: VoyageSchemaV3.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
      configurations: ModelConfiguration(url: store.url))
    let error = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: VoyageSchemaV2.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
        configurations: ModelConfiguration(url: store.url))
    }
    #expect(error.code == .newerStore)
    #expect(error.message.contains("schema version 3.0.0, newer than this program's 2.0.0"))
    let container = try ModelContainer(
      for: VoyageSchemaV3.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
      configurations: ModelConfiguration(url: store.url))
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<VoyageSchemaV3.Voyage>()) == 2)
  }

  @Test("a new store is made at the program's version and records it")
  func newStore() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("new.store")
    let container = try ModelContainer(
      for: Schema(versionedSchema: VoyageSchemaV2.self), migrationPlan: VoyageMigrationPlan.self,
      configurations: ModelConfiguration(url: url))
    #expect(container.schema.version == Schema.Version(2, 0, 0))
    #expect(
      try SchemaMigration.storedVersion(container.makeConnection()) == Schema.Version(2, 0, 0))
    // In memory, too.
    let memory = try ModelContainer(
      for: VoyageSchemaV3.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
      configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    #expect(memory.schema.version == Schema.Version(3, 0, 0))
  }

  @Test(
    "a plan that cannot take the store to the program's version is refused before it changes anything"
  )
  func badPlans() throws {
    let store = try Self.versionOne(.sqlite)
    let before = try Self.rows(store)
    let skipping = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: VoyageSchemaV3.Voyage.self, migrationPlan: SkippingVoyagePlan.self,
        configurations: ModelConfiguration(url: store.url))
    }
    #expect(skipping.code == .migrationFailed)
    #expect(skipping.message.contains("does not join two of its versions next to each other"))
    // A model no version of the plan has.
    let stranger = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: Outing.self, migrationPlan: VoyageMigrationPlan.self,
        configurations: ModelConfiguration(url: store.url))
    }
    #expect(stranger.code == .migrationFailed)
    #expect(stranger.message.contains("no version of it has the container's models (Outing)"))
    // Read-only: an older store is not migrated.
    let readOnly = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: VoyageSchemaV3.Voyage.self, migrationPlan: VoyageMigrationPlan.self,
        configurations: ModelConfiguration(url: store.url, allowsSave: false))
    }
    #expect(readOnly.code == .schemaMismatch)
    #expect(readOnly.message.contains("open it writable once to migrate it"))
    #expect(try Self.rows(store) == before)
  }
}

// A version that removes a unique constraint and a whole model, then one that makes a
// property optional.

enum CabinSchemaV1: VersionedSchema {
  static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
  static var models: [any PersistentModel.Type] { [Cabin.self, Berth.self] }

  @Model final class Cabin {
    @Attribute(.unique) var code: String
    var note: String
    @Relationship(deleteRule: .deny, inverse: \Berth.cabin) var berths: [Berth] = []
    init(code: String, note: String) {
      self.code = code
      self.note = note
    }
  }

  @Model final class Berth {
    var label: String
    var cabin: Cabin?
    init(label: String) { self.label = label }
  }
}

enum CabinSchemaV2: VersionedSchema {
  static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
  static var models: [any PersistentModel.Type] { [Cabin.self] }

  @Model final class Cabin {
    var code: String
    var note: String
    init(code: String, note: String) {
      self.code = code
      self.note = note
    }
  }
}

enum CabinSchemaV3: VersionedSchema {
  static var versionIdentifier: Schema.Version { Schema.Version(3, 0, 0) }
  static var models: [any PersistentModel.Type] { [Cabin.self] }

  @Model final class Cabin {
    var code: String
    var note: String?
    init(code: String) { self.code = code }
  }
}

enum CabinPlan: SchemaMigrationPlan {
  static var schemas: [any VersionedSchema.Type] {
    [CabinSchemaV1.self, CabinSchemaV2.self, CabinSchemaV3.self]
  }
  static var stages: [MigrationStage] { [] }
}

@Suite("A migration removes what the new version no longer declares")
struct MigrationRemovalTests {
  @Test(
    "a removed unique constraint and a removed model's table (with its foreign key) go; a changed optionality is refused, naming the column",
    arguments: TestEngine.allCases)
  func removals(engine: TestEngine) throws {
    let store = try engine.makeStore()
    do {
      let container = try ModelContainer(
        for: CabinSchemaV1.Cabin.self, CabinSchemaV1.Berth.self,
        configurations: ModelConfiguration(url: store.url))
      let context = ModelContext(container)
      let cabin = CabinSchemaV1.Cabin(code: "A1", note: "sea view")
      context.insert(cabin)
      let berth = CabinSchemaV1.Berth(label: "upper")
      context.insert(berth)
      berth.cabin = cabin
      try context.save()
    }
    let container = try ModelContainer(
      for: Schema(versionedSchema: CabinSchemaV2.self), migrationPlan: CabinPlan.self,
      configurations: ModelConfiguration(url: store.url))
    let context = ModelContext(container)
    // The unique index is gone: a second cabin of the same code is a row of its own.
    context.insert(CabinSchemaV2.Cabin(code: "A1", note: "garden"))
    try context.save()
    let cabins = try context.fetch(FetchDescriptor<CabinSchemaV2.Cabin>())
    #expect(cabins.map(\.note).sorted() == ["garden", "sea view"])
    // Berth's table is gone, and with it the foreign key that kept a cabin from going.
    let connection = try container.makeConnection()
    #expect(throws: (any Error).self) { try connection.scalarInt("SELECT count(*) FROM \"Berth\"") }
    for cabin in cabins { context.delete(cabin) }
    try context.save()
    #expect(try context.fetchCount(FetchDescriptor<CabinSchemaV2.Cabin>()) == 0)

    context.insert(CabinSchemaV2.Cabin(code: "B2", note: "x"))
    try context.save()
    let optional = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: CabinSchemaV3.Cabin.self, migrationPlan: CabinPlan.self,
        configurations: ModelConfiguration(url: store.url))
    }
    #expect(optional.code == .migrationFailed)
    #expect(optional.message.contains("Cabin.note is NOT NULL in the store"), "\(optional)")
    #expect(optional.message.contains("optionality is not changed in place"), "\(optional)")
    #expect(try context.fetchCount(FetchDescriptor<CabinSchemaV2.Cabin>()) == 1)
  }

  @Test("a store with no recorded version, opened read-only, says so")
  func unversionedReadOnly() throws {
    let store = try TestEngine.sqlite.makeStore()
    _ = try ModelContainer(
      for: Schema(versionedSchema: CabinSchemaV2.self),
      configurations: ModelConfiguration(url: store.url))
    let error = try #require(throws: PersistenceError.self) {
      try ModelContainer(
        for: CabinSchemaV2.Cabin.self, migrationPlan: CabinPlan.self,
        configurations: ModelConfiguration(url: store.url, allowsSave: false))
    }
    #expect(
      error.message.contains("records no schema version (taken to be the plan's first, 1.0.0)"))
  }
}
