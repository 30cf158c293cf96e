import Foundation

/// One version of an app's models, as SwiftData declares it: the version, and the model types
/// at that version (often declared inside the versioned schema, `SampleTripsSchemaV1.Trip`,
/// beside `SampleTripsSchemaV2.Trip`: classes of one name at two versions, stored in one
/// table).
///
/// ```swift
/// enum SampleTripsSchemaV1: VersionedSchema {
///   static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
///   static var models: [any PersistentModel.Type] { [Trip.self] }
///   @Model final class Trip { … }
/// }
/// ```
public protocol VersionedSchema: SendableMetatype {
  /// The version of these declarations.
  static var versionIdentifier: Schema.Version { get }
  /// The model types at this version.
  static var models: [any PersistentModel.Type] { get }
}

/// How a store written by an older version of the models becomes one of the newest: every
/// version (``schemas``) and the stages between them (``stages``), as SwiftData declares it.
/// Given to ``ModelContainer`` with `migrationPlan:`.
///
/// Two versions next to each other that no stage joins are joined by a lightweight stage.
public protocol SchemaMigrationPlan: SendableMetatype {
  /// Every version of the models, oldest first.
  static var schemas: [any VersionedSchema.Type] { get }
  /// The stages from one version to the next.
  static var stages: [MigrationStage] { get }
}

/// A stage of a ``SchemaMigrationPlan``: from one version of the models to the next.
///
/// - `lightweight`: the tables are moved to the new version's declarations: new tables, new
///   columns (their rows given the property's initial value, `NULL` for an optional), new
///   indexes and unique constraints; the columns of properties the new version removed are
///   dropped, with their indexes, and so are the indexes and unique constraints it no longer
///   declares. A renamed property keeps its column through `@Attribute(originalName:)`. The
///   table of a model the new version removed is dropped, with its rows. A property whose type
///   or optionality changes needs a custom stage around a new property (the stage that would
///   change it in place fails, naming the column).
/// - `custom`: as `lightweight`, with `willMigrate` run before, on a context of the old
///   version's models (to remove the repeats a new `#Unique` would refuse, say), and
///   `didMigrate` after, on a context of the new version's (to fill a new property from
///   others). A context's changes are saved when the closure returns, if it did not save them.
///
/// Every stage a store needs runs in one transaction: if one fails, the store is left as it
/// was, at its version, and the error (``PersistenceError/Code/migrationFailed``) names the
/// stage and the step.
public enum MigrationStage: Sendable, CustomStringConvertible {
  /// The tables moved to `toVersion`'s declarations, with no code of yours.
  case lightweight(fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type)
  /// The tables moved to `toVersion`'s declarations between your `willMigrate` (on the old
  /// version's models) and `didMigrate` (on the new version's).
  case custom(
    fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type,
    willMigrate: (@Sendable (ModelContext) throws -> Void)?,
    didMigrate: (@Sendable (ModelContext) throws -> Void)?)

  /// The versions the stage joins.
  var versions: (from: any VersionedSchema.Type, to: any VersionedSchema.Type) {
    switch self {
    case .lightweight(let from, let to), .custom(let from, let to, _, _): (from, to)
    }
  }

  /// `the custom stage 1.0.0 → 2.0.0`.
  public var description: String {
    let kind = if case .custom = self { "custom" } else { "lightweight" }
    return
      "the \(kind) stage \(versions.from.versionIdentifier) → \(versions.to.versionIdentifier)"
  }
}

extension Schema {
  /// The schema of `versionedSchema`: its models at its version.
  public convenience init(versionedSchema: any VersionedSchema.Type) {
    self.init(versionedSchema.models, version: versionedSchema.versionIdentifier)
  }
}

/// What a store's engine gives a migration: its schema check over a connection the migration
/// holds in a transaction. The engines of this package conform; a store that does not cannot
/// be migrated by a plan.
package protocol MigratableStore: OpenStore {
  /// The schema check of the store over `connection`, one of this store's.
  func catalog(on connection: any StoreConnection) -> any SchemaCatalog
}

/// Runs a ``SchemaMigrationPlan`` on a store before a container opens it.
///
/// Cost: a read of the store's version when it is at the program's; else each stage's
/// closures and the statements that move the tables, all in one write transaction, which
/// holds the store's write lock until the last stage is done.
enum SchemaMigration {
  /// The key of the store's schema version in ``StoreLayout/metaTable``.
  static let versionKey = "schema_version"

  /// Takes the store `configuration` names from its recorded version to `version`, through
  /// `plan`'s stages, in one transaction.
  ///
  /// A new store (no table of any of the plan's versions) is left to the container, which
  /// creates it at `version`. A store with tables and no recorded version (written before it
  /// had a plan) is taken to be at the plan's first version.
  ///
  /// - Throws: ``PersistenceError/Code/migrationFailed`` naming the stage and step that
  ///   failed, a version the plan does not list, or a stage that does not join two versions
  ///   next to each other; ``PersistenceError/Code/newerStore`` for a store at a version
  ///   newer than `version`; ``PersistenceError/Code/schemaMismatch`` for a read-only store
  ///   that is not at `version`. The store is left as it was in each case.
  static func run(
    _ plan: any SchemaMigrationPlan.Type, to version: Schema.Version,
    configuration: ModelConfiguration, engine: any StoreEngine
  ) throws {
    let schemas = try ordered(plan, version: version)
    // A store in memory is always new.
    guard configuration.storeURL != nil else { return }
    let store = try engine.openStore(configuration, entities: [])
    guard let migratable = store as? any MigratableStore else {
      throw failure(plan, "its store's engine cannot run a migration plan")
    }
    let connection = try store.makeConnection(cacheSizeKiB: nil)
    let catalog = migratable.catalog(on: connection)
    try connection.beginWriting()
    do {
      let stored = try storedVersion(connection, location: catalog.location)
      let tables = try catalog.tableNames()
      let known = Set(schemas.flatMap { Schema(versionedSchema: $0).entityNames })
      if stored == nil && tables.isDisjoint(with: known) {
        try connection.rollback()
        return
      }
      let from = stored ?? schemas[0].versionIdentifier
      guard from != version else {
        try connection.rollback()
        return
      }
      guard from < version else {
        throw PersistenceError(
          code: .newerStore,
          message:
            "The store at \(catalog.location) is at schema version \(from), newer than this program's \(version): open it with the newer program. It was not changed."
        )
      }
      let recorded =
        stored == nil
        ? "records no schema version (taken to be the plan's first, \(from))"
        : "is at schema version \(from)"
      guard configuration.allowsSave else {
        throw PersistenceError(
          code: .schemaMismatch,
          message:
            "The store at \(catalog.location) \(recorded), older than this program's \(version): open it writable once to migrate it."
        )
      }
      guard let start = schemas.firstIndex(where: { $0.versionIdentifier == from }) else {
        throw failure(
          plan,
          "the store at \(catalog.location) is at schema version \(from), which the plan does not list (\(schemas.map { "\($0.versionIdentifier)" }.joined(separator: ", ")))"
        )
      }
      let target = schemas.firstIndex { $0.versionIdentifier == version } ?? schemas.count - 1
      let base = MigrationEngine(
        store: store, connection: SavepointConnection(connection), catalog: catalog)
      for index in start..<target {
        let (old, new) = (schemas[index], schemas[index + 1])
        let stage =
          plan.stages.first {
            $0.versions.from.versionIdentifier == old.versionIdentifier
          } ?? .lightweight(fromVersion: old, toVersion: new)
        try run(
          stage, from: old, to: new, storeVersion: from, configuration: configuration,
          engine: base)
      }
      try connection.commit()
    } catch {
      if connection.isInTransaction { try? connection.rollback() }
      throw error
    }
  }

  /// `schema` at its version in `plan`: that of the plan's schema whose models include all of
  /// `schema`'s and whose version is `schema`'s, else that of the newest one whose models
  /// include them (a schema made of model types alone has the default version).
  ///
  /// - Throws: ``PersistenceError/Code/migrationFailed`` when no schema of the plan has them.
  static func versioned(_ schema: Schema, in plan: any SchemaMigrationPlan.Type) throws -> Schema {
    let wanted = Set(schema.types.map { ObjectIdentifier($0) })
    let candidates = plan.schemas.sorted { $0.versionIdentifier < $1.versionIdentifier }.filter {
      wanted.isSubset(of: $0.models.map { ObjectIdentifier($0) })
    }
    guard let newest = candidates.last else {
      throw failure(
        plan,
        "no version of it has the container's models (\(schema.types.map { "\($0)" }.joined(separator: ", ")))"
      )
    }
    if candidates.contains(where: { $0.versionIdentifier == schema.version }) { return schema }
    return Schema(schema.types, version: newest.versionIdentifier)
  }

  /// The plan's versions, oldest first, after checking that they are distinct, that `version`
  /// is among them, and that each stage joins two versions next to each other.
  static func ordered(_ plan: any SchemaMigrationPlan.Type, version: Schema.Version) throws
    -> [any VersionedSchema.Type]
  {
    let schemas = plan.schemas.sorted { $0.versionIdentifier < $1.versionIdentifier }
    let versions = schemas.map { $0.versionIdentifier }
    guard !schemas.isEmpty else { throw failure(plan, "it lists no schema") }
    guard Set(versions).count == versions.count else {
      throw failure(plan, "it lists a version twice (\(versions.map(\.description)))")
    }
    guard versions.contains(version) else {
      throw failure(
        plan,
        "it does not list the container's schema version \(version) (\(versions.map(\.description).joined(separator: ", ")))"
      )
    }
    var from = Set<Schema.Version>()
    for stage in plan.stages {
      let (old, new) = (stage.versions.from.versionIdentifier, stage.versions.to.versionIdentifier)
      guard let index = versions.firstIndex(of: old), index + 1 < versions.count,
        versions[index + 1] == new
      else {
        throw failure(
          plan, "\(stage) does not join two of its versions next to each other (\(versions))")
      }
      guard from.insert(old).inserted else {
        throw failure(plan, "two of its stages start at \(old)")
      }
    }
    return schemas
  }

  /// Runs one stage on the migration's connection: `willMigrate`, the tables moved to
  /// `new`'s declarations, the version recorded, `didMigrate`. `storeVersion` is the version
  /// the store was at before the migration, which a failure leaves it at.
  private static func run(
    _ stage: MigrationStage, from old: any VersionedSchema.Type,
    to new: any VersionedSchema.Type, storeVersion: Schema.Version,
    configuration: ModelConfiguration, engine: MigrationEngine
  ) throws {
    func step(_ name: String, _ body: () throws -> Void) throws {
      do {
        try body()
      } catch {
        throw PersistenceError(
          code: .migrationFailed,
          message:
            "The migration failed in \(stage), \(name), and the store was left as it was, at \(storeVersion): \(error)",
          cause: error)
      }
    }
    /// A context on `schema`'s models over the migration's connection; what `body` leaves
    /// unsaved is saved.
    @discardableResult
    func withContext(
      _ schema: any VersionedSchema.Type, moving: Bool, _ body: (ModelContext) throws -> Void
    ) throws -> [String] {
      let container = try ModelContainer(
        for: Schema(versionedSchema: schema), configuration: configuration,
        engine: engine.moving(moving))
      let context = ModelContext(container)
      context.author = "migration"
      try body(context)
      if context.hasChanges { try context.save() }
      return container.schema.entityNames
    }
    if case .custom(_, _, let willMigrate?, _) = stage {
      try step("willMigrate") { try withContext(old, moving: false, willMigrate) }
    }
    try step("moving the tables to \(new.versionIdentifier)") {
      let kept = Set(try withContext(new, moving: true) { _ in })
      // The tables of models the new version removed go, with their rows.
      let tables = try engine.catalog.tableNames()
      for name in Schema(versionedSchema: old).entityNames
      where !kept.contains(name) && tables.contains(name) {
        try engine.catalog.execute("DROP TABLE \(quoted(name))")
      }
      try record(new.versionIdentifier, engine.connection.base)
    }
    if case .custom(_, _, _, let didMigrate?) = stage {
      try step("didMigrate") { try withContext(new, moving: false, didMigrate) }
    }
  }

  /// The version the store records, nil when it records none.
  static func storedVersion(_ connection: any StoreConnection, location: String = "")
    throws -> Schema.Version?
  {
    guard
      let text = try connection.scalarText(
        "SELECT value FROM \(StoreLayout.metaTable) WHERE key = '\(versionKey)'")
    else { return nil }
    let parts = text.split(separator: ".").map { Int($0) }
    guard parts.count == 3, let major = parts[0], let minor = parts[1], let patch = parts[2]
    else {
      throw PersistenceError(
        code: .notAStore,
        message:
          "The store\(location.isEmpty ? "" : " at \(location)") records the schema version '\(text)' (key '\(versionKey)' of \(StoreLayout.metaTable)), which is not major.minor.patch: it was written by something else, or edited by hand."
      )
    }
    return Schema.Version(major, minor, patch)
  }

  /// Records `version` as the store's, in the connection's transaction if one is open.
  static func record(_ version: Schema.Version, _ connection: any StoreConnection) throws {
    let statement = try connection.prepare(
      "INSERT INTO \(StoreLayout.metaTable) (key, value) VALUES ('\(versionKey)', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )
    statement.bindText(version.description, at: 1)
    try statement.run()
  }

  static func failure(_ plan: any SchemaMigrationPlan.Type, _ reason: String)
    -> PersistenceError
  {
    PersistenceError(
      code: .migrationFailed,
      message:
        "The migration plan \(plan) cannot migrate the store: \(reason). The store was not changed."
    )
  }
}

/// The engine of the containers a migration makes, one per version and step: each opens the
/// migrating store over the migration's one connection, checking its tables against the
/// version's declarations, or moving them to those (`moving`).
struct MigrationEngine: StoreEngine {
  let store: any OpenStore
  // SAFETY (UncheckedSendable): the connection is the migration's, used by one thread (the
  // one opening the container) for the migration's length.
  private let shared: UncheckedSendable<SavepointConnection>
  private let checker: UncheckedSendable<any SchemaCatalog>
  let isMoving: Bool

  var connection: SavepointConnection { shared.value }
  var catalog: any SchemaCatalog { checker.value }

  init(
    store: any OpenStore, connection: SavepointConnection, catalog: any SchemaCatalog,
    isMoving: Bool = false
  ) {
    self.store = store
    shared = UncheckedSendable(connection)
    checker = UncheckedSendable(catalog)
    self.isMoving = isMoving
  }

  func moving(_ moving: Bool) -> MigrationEngine {
    MigrationEngine(
      store: store, connection: shared.value, catalog: checker.value, isMoving: moving)
  }

  func openStore(_ configuration: ModelConfiguration, entities: [EntityDescription]) throws
    -> any OpenStore
  {
    try checker.value.reconcile(entities, migrate: isMoving, dropsUndeclared: isMoving)
    return MigratingStore(store: store, connection: shared)
  }
}

/// The migrating store, as its containers see it: every connection is the migration's.
final class MigratingStore: OpenStore {
  let store: any OpenStore
  private let connection: UncheckedSendable<SavepointConnection>

  init(store: any OpenStore, connection: UncheckedSendable<SavepointConnection>) {
    self.store = store
    self.connection = connection
  }

  var identifier: UUID { store.identifier }
  var isImmutable: Bool { false }
  func makeConnection(cacheSizeKiB: Int?) throws -> any StoreConnection { connection.value }
  func checkIntegrity() throws -> [String] { try store.checkIntegrity() }
}

/// The migration's connection as a migration's contexts use it: their transactions are
/// savepoints inside the migration's one transaction, so that a save is undone with the
/// migration if a later step fails.
final class SavepointConnection: StoreConnection {
  let base: any StoreConnection
  /// How many savepoints are open.
  private var depth = 0

  init(_ base: any StoreConnection) { self.base = base }

  func execute(_ sql: String) throws { try base.execute(sql) }
  func prepare(_ sql: String) throws -> any StoreStatement { try base.prepare(sql) }
  func cachedStatement(_ sql: String) throws -> any StoreStatement {
    try base.cachedStatement(sql)
  }
  func cachedInsert(_ sql: String, keyColumn: String) throws -> any StoreStatement {
    try base.cachedInsert(sql, keyColumn: keyColumn)
  }
  var lastInsertedKey: Int64 { get throws { try base.lastInsertedKey } }
  var changedRowCount: Int { base.changedRowCount }
  var isInTransaction: Bool { depth > 0 }
  func beginWriting() throws { try open() }
  func beginReading() throws { try open() }
  func commit() throws {
    try base.execute("RELEASE SAVEPOINT \(name)")
    depth -= 1
  }
  func rollback() throws {
    try base.execute("ROLLBACK TO SAVEPOINT \(name)")
    try base.execute("RELEASE SAVEPOINT \(name)")
    depth -= 1
  }
  func collation(for comparator: String.StandardComparator) throws -> String {
    try base.collation(for: comparator)
  }
  func lastIssuedHistoryToken() throws -> Int64 { try base.lastIssuedHistoryToken() }
  var tombstoneValueParameter: String { base.tombstoneValueParameter }
  func keyListCondition(_ column: String) -> String { base.keyListCondition(column) }
  func keyListText(_ keys: [Int64]) -> String { base.keyListText(keys) }
  func queryPlan(_ sql: String, bindings: [SQLValue]) throws -> [String] {
    try base.queryPlan(sql, bindings: bindings)
  }
  func externalChangeCounter() throws -> Int64 { try base.externalChangeCounter() }
  var evaluatesSwiftFunctions: Bool { base.evaluatesSwiftFunctions }
  var isReusable: Bool { depth == 0 }
  func waitForExternalChange(timeout: Duration) { base.waitForExternalChange(timeout: timeout) }
  var batchLimit: Int { base.batchLimit }
  func runBatch(
    _ statement: any StoreStatement, count: Int, answer: BatchAnswer,
    binding: (Int) throws -> Void
  ) throws -> [Int64?] {
    try base.runBatch(statement, count: count, answer: answer, binding: binding)
  }

  /// The innermost savepoint's name.
  private var name: String { "migration_\(depth)" }
  private func open() throws {
    try base.execute("SAVEPOINT migration_\(depth + 1)")
    depth += 1
  }
}
