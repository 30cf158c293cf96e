import Foundation
import Synchronization

/// Owns a store and the schema of its models; hands out connections to ``ModelContext``s.
///
/// The store is kept by a ``StoreEngine``; `ModelContainer(for:configurations:)` from the
/// `Persistence` module picks SQLite for a file URL or an in-memory store. Opening a container
/// creates the store, or checks and migrates an existing one:
/// - a file that is not a store of this library is refused with
///   ``PersistenceError/Code/notAStore`` and left untouched;
/// - a store written by a newer version of this library, or with columns the models do not
///   declare (a newer schema), is refused with ``PersistenceError/Code/newerStore``, untouched;
/// - an attribute added to a model is added to the table in place, existing rows taking the
///   model's default value (`nil` for optionals).
///
/// `ModelContainer` is `Sendable`; share it between tasks and give each its own context.
public final class ModelContainer: Sendable {
  /// The configuration the store was opened with.
  public let configuration: ModelConfiguration
  /// The configurations of the container's stores, as SwiftData's: here always the one
  /// (``configuration``).
  public var configurations: Set<ModelConfiguration> { [configuration] }
  /// The models the store holds: those given, those of the configuration's schema, and
  /// every model their relationships reach; at the version given (1.0.0 without one).
  public let schema: Schema
  /// The identity of the store, kept in it; history tokens carry it.
  public let storeIdentifier: UUID
  /// The plan the store was migrated by when it opened, if one was given.
  public let migrationPlan: (any SchemaMigrationPlan.Type)?
  let entities: [ObjectIdentifier: EntityDescription]
  /// The store's tables, one per root model: its columns, and those of the subclasses kept in
  /// it (``EntityDescription/tables(_:)``).
  let tables: [EntityDescription]
  /// The subclasses kept in each table, by table name, then by the path their rows carry in
  /// `"_entity"`: what a fetch of a root model makes each row with.
  let subentities: [String: [String: any EntityOperations]]
  /// Each root model type by its table name (history names a change's model by its table).
  let modelTypesByEntity: [String: any PersistentModel.Type]
  /// Each subclass model type by its table name, then by its path in `"_entity"` (history
  /// names a subclass's change by both).
  let modelTypesBySubentity: [String: [String: any PersistentModel.Type]]
  /// Each table's rank: 0 for a model whose table has no foreign key, else one more than the
  /// highest rank of the tables it points to. A save inserts rows in rank order, so that no
  /// row is written before the rows it points to, and deletes in the reverse.
  let ranks: [String: Int]
  /// Whether any model declares a relationship (else saves skip the relationships' work).
  let hasRelationships: Bool
  /// Whether a model of the container bounds a relationship's count (a save then checks).
  let hasCountedRelationships: Bool
  /// Whether a model declares a many-to-many (a save then writes join tables' links).
  let hasJoinTables: Bool
  /// The store the engine opened (it keeps an in-memory store alive while the container lives).
  let store: any OpenStore
  let broadcaster = ChangeBroadcaster()
  /// Where ``mainContext`` is kept once made.
  let mainContextStorage = MainContextStorage()
  /// Connections of released contexts, for the next contexts: their page caches and prepared
  /// statements stay warm (a context per request or per task is the common use). Each is
  /// handed to one context at a time, through the mutex.
  private let idleConnections = Mutex<[UncheckedSendable<any StoreConnection>]>([])
  /// How many idle connections are kept; more are closed.
  static var idleConnectionLimit: Int { 4 }
  /// Each model type's operations and layouts (``Entity``), made once for the container and
  /// shared by its contexts: immutable, and about 200k instructions to make, which a context
  /// per request would otherwise pay on its first use of each type.
  private let operations = Mutex<[ObjectIdentifier: any EntityOperations]>([:])

  /// Opens (creating if needed) a store for the given model types with `engine`: the one
  /// configuration given, or without one the persistent default store (as SwiftData's).
  ///
  /// - Throws: ``PersistenceError`` when the store cannot be opened, is not a store, or was
  ///   written by a newer schema (the store is not modified in those cases), and
  ///   ``PersistenceError/Code/cannotOpen`` when several different configurations are given.
  public convenience init(
    for types: any PersistentModel.Type..., engine: any StoreEngine,
    configurations: ModelConfiguration...
  ) throws {
    try self.init(
      for: types, configuration: try Self.onlyConfiguration(configurations), engine: engine)
  }

  /// The one store `configurations` describe: the default store without one; an error for
  /// several different ones (a container here keeps one store, where SwiftData may split the
  /// models among several: using only the first would lose the others' data without a word).
  public static func onlyConfiguration(_ configurations: [ModelConfiguration]) throws
    -> ModelConfiguration
  {
    guard let first = configurations.first else { return ModelConfiguration() }
    guard configurations.allSatisfy({ $0 == first }) else {
      throw PersistenceError(
        code: .cannotOpen,
        message:
          "A container keeps one store, and \(configurations.count) different configurations were given: give one (put the models in one store), or make one container for each."
      )
    }
    return first
  }

  /// Opens (creating if needed) a store for the given model types, and the types their
  /// relationships reach, with one configuration and `engine`.
  public convenience init(
    for types: [any PersistentModel.Type], configuration: ModelConfiguration,
    engine: any StoreEngine
  ) throws {
    try self.init(for: Schema(types), configuration: configuration, engine: engine)
  }

  /// Opens (creating if needed) a store for `schema`'s models, those of the configuration's
  /// schema, and the types their relationships reach, with one configuration and `engine`.
  ///
  /// With `migrationPlan`, a store written at an older version of the models is first taken
  /// to this one through the plan's stages, in one transaction (see ``MigrationStage``), and
  /// the store records its version. The version is `schema`'s, or, for a schema at the
  /// default version, that of the plan's schema whose models include `schema`'s.
  ///
  /// - Throws: ``PersistenceError/Code/migrationFailed`` when a stage fails (naming it and
  ///   its step) or the plan cannot take the store to this version;
  ///   ``PersistenceError/Code/newerStore`` for a store at a newer version. The store is left
  ///   as it was in each case.
  public init(
    for schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
    configuration: ModelConfiguration, engine: any StoreEngine
  ) throws {
    let schema = try migrationPlan.map { try SchemaMigration.versioned(schema, in: $0) } ?? schema
    self.migrationPlan = migrationPlan
    if configuration.isStoredInMemoryOnly, !configuration.allowsSave {
      throw PersistenceError(
        code: .cannotOpen,
        message:
          "A store in memory only starts empty, so it cannot be opened read-only (allowsSave: false): give allowsSave: true, or the URL of a store to read."
      )
    }
    self.configuration = configuration
    // The types given and every type their relationships reach, as SwiftData's container
    // finds them: a container for trips alone stores their bucket lists too. O(types +
    // relationships).
    var types = schema.types
    for type in configuration.schema?.types ?? []
    where !types.contains(where: { $0 == type }) {
      types.append(type)
    }
    var reached = Set(types.map { ObjectIdentifier($0) })
    // The models a model's relationships reach, and a subclass's superclass.
    func targets<Model: PersistentModel>(_: Model.Type) -> [any PersistentModel.Type] {
      let schema = Model.modelSchema
      return schema.relationships.map(\.target) + [schema.inheritance?.superclass].compactMap { $0 }
    }
    var next = 0
    while next < types.count {
      let type: any PersistentModel.Type = types[next]
      let found = targets(type)
      for target in found where reached.insert(ObjectIdentifier(target)).inserted {
        types.append(target)
      }
      next += 1
    }
    var entities: [ObjectIdentifier: EntityDescription] = [:]
    var made: [ObjectIdentifier: any EntityOperations] = [:]
    var names = Set<String>()
    for type in types {
      let entity = try EntityDescription(type)
      guard entity.inheritancePath != nil || names.insert(entity.name.lowercased()).inserted else {
        throw PersistenceError(
          code: .invalidValue, message: "Two model types use the table name '\(entity.name)'.")
      }
      entities[entity.modelType] = entity
    }
    let tables = try EntityDescription.tables(Array(entities.values))
    let tablesByName = Dictionary(uniqueKeysWithValues: tables.map { ($0.name, $0) })
    func makeOperations<Model: PersistentModel>(_: Model.Type) throws {
      guard let entity = entities[ObjectIdentifier(Model.self)] else { return }
      let operations = Entity<Model>(table: tablesByName[entity.name])
      try operations.checkRowCode(defaultValues: entity.columns.map(\.defaultValue))
      made[ObjectIdentifier(Model.self)] = operations
    }
    for type in types { try makeOperations(type) }
    // Each entity of a table that holds subclasses reads its subclasses' rows from its own
    // (every column of the table is in its select list).
    for case let entity as any SubclassReading in made.values where entity.entityColumn != nil {
      var readers: [String: SubclassReader] = [:]
      for other in made.values
      where other.name == entity.name && other.inheritancePath != entity.inheritancePath
        && other.inheritancePath.hasPrefix(entity.inheritancePath)
      {
        let columns = other.columnNames.map { name in
          Int32(1 + (entity.readColumns.firstIndex(of: name) ?? 0))
        }
        readers[other.inheritancePath] = SubclassReader(operations: other, columns: [0] + columns)
      }
      entity.setSubclassReaders(readers)
    }
    let identifiers = types.map { ObjectIdentifier($0) }
    var relates = false
    var counts = false
    func validate<Model: PersistentModel>(_: Model.Type) throws {
      try Model.modelSchema.validateRelationships(in: identifiers)
      if !Model.modelSchema.relationships.isEmpty { relates = true }
      if Model.modelSchema.relationships.contains(where: \.isCounted) { counts = true }
    }
    for type in types { try validate(type) }
    // The join tables of the many-to-manys, one per pair, named by the side that owns it.
    var joins: [String: EntityDescription] = [:]
    func joinTables<Model: PersistentModel>(_: Model.Type) throws {
      for relationship in Model.modelSchema.relationships {
        guard let join = relationship.joinTable(), join.isOwner else { continue }
        let references = [relationship.ownerTable(), relationship.targetTable()]
        if let known = joins[join.name], known.columns.compactMap(\.reference?.table) != references
        {
          throw PersistenceError(
            code: .invalidValue,
            message:
              "Two many-to-manys would keep their links in one join table, '\(join.name)': rename the relationship '\(relationship.name)' of \(Model.self)."
          )
        }
        joins[join.name] = EntityDescription(
          join: join, ownerTable: relationship.ownerTable(),
          targetTable: relationship.targetTable())
      }
    }
    for type in types { try joinTables(type) }
    // A model's table never starts with '_' (the schema's check): no join table's name is one.
    self.schema = Schema(types, version: schema.version)
    ranks = try Self.ranks(tables)
    hasRelationships = relates
    hasCountedRelationships = counts
    self.entities = entities
    self.tables = tables
    var subentities: [String: [String: any EntityOperations]] = [:]
    for entity in entities.values {
      guard let path = entity.inheritancePath, let operations = made[entity.modelType] else {
        continue
      }
      subentities[entity.name, default: [:]][path] = operations
    }
    self.subentities = subentities
    // A table's root model (its subclasses' rows are recorded under its table).
    modelTypesByEntity = Dictionary(
      types.filter { entities[ObjectIdentifier($0)]?.inheritancePath == nil }.map {
        ($0.entityName, $0)
      }, uniquingKeysWith: { first, _ in first })
    var subclassTypes: [String: [String: any PersistentModel.Type]] = [:]
    for type in types {
      guard let entity = entities[ObjectIdentifier(type)], let path = entity.inheritancePath,
        !path.isEmpty
      else { continue }
      subclassTypes[entity.name, default: [:]][path] = type
    }
    modelTypesBySubentity = subclassTypes
    if let migrationPlan {
      try SchemaMigration.run(
        migrationPlan, to: schema.version, configuration: configuration, engine: engine)
    }
    hasJoinTables = !joins.isEmpty
    store = try engine.openStore(
      configuration, entities: tables + joins.keys.sorted().map { joins[$0]! })
    storeIdentifier = store.identifier
    if migrationPlan != nil, configuration.allowsSave {
      let connection = try store.makeConnection(cacheSizeKiB: nil)
      if try SchemaMigration.storedVersion(connection) != schema.version {
        try SchemaMigration.record(schema.version, connection)
      }
    }
    operations.withLock { $0 = made }
  }

  /// The rank of each table (see ``ranks``).
  ///
  /// A table's key that points to its own rows (a tree: a place's parent place) does not
  /// count: a save orders those rows itself, a parent before its children
  /// (``ModelContext/orderedByRank(_:)``).
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when foreign keys of different tables
  ///   form a cycle (A → B → A), naming it: a save could not order its rows.
  static func ranks(_ entities: [EntityDescription]) throws -> [String: Int] {
    let byName = Dictionary(uniqueKeysWithValues: entities.map { ($0.name, $0) })
    var ranks: [String: Int] = [:]
    func rank(_ name: String, path: [String]) throws -> Int {
      if let known = ranks[name] { return known }
      guard !path.contains(name) else {
        throw PersistenceError(
          code: .invalidValue,
          message:
            "The relationships form a cycle of keys (\((path.drop { $0 != name } + [name]).joined(separator: " → "))): a model cannot point to itself through other models. Make one side of the cycle a model of its own, or store the key on the other side."
        )
      }
      var result = 0
      for column in byName[name]?.columns ?? [] {
        if let table = column.reference?.table, table != name {
          result = max(result, try rank(table, path: path + [name]) + 1)
        }
      }
      ranks[name] = result
      return result
    }
    for entity in entities.sorted(by: { $0.name < $1.name }) { _ = try rank(entity.name, path: []) }
    return ranks
  }

  /// A new connection to the store; `cacheSizeKiB` overrides the configuration's page cache
  /// (observers read little and keep their own connection each).
  func makeConnection(cacheSizeKiB: Int? = nil) throws -> any StoreConnection {
    try store.makeConnection(cacheSizeKiB: cacheSizeKiB)
  }

  /// A connection for a context: an idle one a released context gave back, or a new one.
  ///
  /// Cost: O(1) when one is idle; else opening a connection.
  func takeConnection() throws -> any StoreConnection {
    if let idle = idleConnections.withLock({ $0.popLast() }) { return idle.value }
    return try makeConnection()
  }

  /// How many connections are idle (for tests).
  var idleConnectionCount: Int { idleConnections.withLock { $0.count } }

  /// Takes back the connection of a released context, if it can serve another
  /// (``StoreConnection/isReusable``) and fewer than ``idleConnectionLimit`` are idle; else it
  /// is closed when the last reference goes.
  func giveBack(_ connection: any StoreConnection) {
    guard connection.isReusable else { return }
    let kept = UncheckedSendable(connection)
    idleConnections.withLock { idle in
      if idle.count < Self.idleConnectionLimit { idle.append(kept) }
    }
  }

  func entity<Model: PersistentModel>(for _: Model.Type) throws -> EntityDescription {
    guard let entity = entities[ObjectIdentifier(Model.self)] else {
      guard Model.SchemaModel.self == Model.self else {
        throw PersistenceError(
          code: .unknownModel,
          message:
            "\(Model.self) is a subclass of the model \(Model.SchemaModel.self): a subclass is not a model of its own. Fetch \(Model.SchemaModel.self), and cast."
        )
      }
      throw PersistenceError(
        code: .unknownModel,
        message: "\(Model.self) is not part of this container. Pass it to ModelContainer(for:).")
    }
    return entity
  }

  /// The operations of the model type `type` (an `ObjectIdentifier` of its metatype), when
  /// the container lists it: what a model's dynamic type is kept with. O(1), one lookup.
  func operations(ofType type: ObjectIdentifier) -> (any EntityOperations)? {
    operations.withLock { $0[type] }
  }

  /// The operations of `Model`, made on the first request for the container. O(1) after.
  ///
  /// - Throws: ``PersistenceError/Code/unknownModel`` when `Model` is not in the container.
  func operations<Model: PersistentModel>(for type: Model.Type) throws -> Entity<Model> {
    let key = ObjectIdentifier(type)
    // Only this method stores under a model type's identifier, always that model's entity.
    if let known = operations.withLock({ $0[key] }) {
      return unsafeDowncast(known as AnyObject, to: Entity<Model>.self)
    }
    _ = try entity(for: type)
    let made = Entity<Model>()
    let kept = operations.withLock { table in
      if let raced = table[key] { return raced }
      table[key] = made
      return made
    }
    return unsafeDowncast(kept as AnyObject, to: Entity<Model>.self)
  }

  /// Checks the store with its engine's own check (SQLite's `PRAGMA integrity_check`) and
  /// that every history change names an existing transaction. Returns the problems found;
  /// empty when the store is sound.
  ///
  /// Cost: reads the whole store.
  public func checkIntegrity() throws -> [String] {
    var problems = try store.checkIntegrity()
    let connection = try makeConnection()
    let orphans =
      try connection.scalarInt(
        "SELECT count(*) FROM _history_changes WHERE token NOT IN (SELECT token FROM _history_transactions)"
      ) ?? 0
    if orphans > 0 { problems.append("\(orphans) history changes have no transaction") }
    problems += try danglingReferences(connection)
    return problems
  }

  /// A problem for each row whose relationship key points to no row (a store changed with its
  /// foreign keys off, or damaged), by row: at most ten per column, then how many more.
  ///
  /// Cost: one anti-join per foreign key column over its table.
  private func danglingReferences(_ connection: any StoreConnection) throws -> [String] {
    var problems: [String] = []
    for entity in tables {
      for column in entity.columns {
        guard let reference = column.reference else { continue }
        let key = quoted(column.name)
        let statement = try connection.cachedStatement(
          "SELECT c.\"_pk\", c.\(key) FROM \(quoted(entity.name)) AS c WHERE c.\(key) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM \(quoted(reference.table)) AS p WHERE p.\"_pk\" = c.\(key)) ORDER BY c.\"_pk\""
        )
        defer { statement.reset() }
        var count = 0
        while try statement.step() {
          count += 1
          if count <= 10 {
            problems.append(
              "\(entity.name) row \(statement.int64(at: 0)): \(column.name) points to \(reference.table) row \(statement.int64(at: 1)), which does not exist"
            )
          }
        }
        if count > 10 {
          problems.append(
            "\(entity.name): \(count - 10) more rows whose \(column.name) points to no \(reference.table) row"
          )
        }
      }
    }
    return problems
  }

  /// Whether the store was opened immutable: read-only in a folder this process cannot write,
  /// where SQLite cannot make its shared-memory file. Such a store is read as it was when
  /// opened: changes by other processes are not seen.
  public var isImmutable: Bool { store.isImmutable }

  /// The table names of the container's models.
  public var entityNames: [String] { tables.map(\.name) }
}
