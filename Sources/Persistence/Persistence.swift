@_exported import PersistenceCore
@_exported import PersistencePostgreSQL
@_exported import PersistenceSQLite

extension ModelContainer {
  /// Opens (creating if needed) a store for the given model types, with the engine its
  /// configuration calls for (see `ModelConfiguration.defaultEngine()`): the one configuration
  /// given, or without one the persistent default store, `default.store` in the user's data
  /// folder, as SwiftData's (`ModelConfiguration(isStoredInMemoryOnly: true)` for one in
  /// memory). Several different configurations are an error.
  ///
  /// - Throws: `PersistenceError` when the store cannot be opened, is not a store, or was
  ///   written by a newer schema; the store is not modified in those cases.
  public convenience init(
    for types: any PersistentModel.Type...,
    migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
    configurations: ModelConfiguration...
  ) throws {
    let configuration = try ModelContainer.onlyConfiguration(configurations)
    try self.init(
      for: Schema(types), migrationPlan: migrationPlan, configuration: configuration,
      engine: configuration.defaultEngine())
  }

  /// Opens (creating if needed) a store for `schema`'s models, as Xcode's template does
  /// (`ModelContainer(for: schema, configurations: [modelConfiguration])`): the one
  /// configuration given, or without one the persistent default store. Several different
  /// configurations are an error. With `migrationPlan`, a store of an older version is first
  /// migrated (see `MigrationStage`).
  public convenience init(
    for schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
    configurations: [ModelConfiguration]
  ) throws {
    let configuration = try ModelContainer.onlyConfiguration(configurations)
    try self.init(
      for: schema, migrationPlan: migrationPlan, configuration: configuration,
      engine: configuration.defaultEngine())
  }

  /// `init(for:migrationPlan:configurations:)` with the configurations as arguments.
  public convenience init(
    for schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
    configurations: ModelConfiguration...
  ) throws {
    try self.init(for: schema, migrationPlan: migrationPlan, configurations: configurations)
  }

  /// Opens (creating if needed) a store for the given model types with one configuration and
  /// the engine it calls for (see `ModelConfiguration.defaultEngine()`).
  public convenience init(
    for types: [any PersistentModel.Type], configuration: ModelConfiguration
  ) throws {
    try self.init(for: types, configuration: configuration, engine: configuration.defaultEngine())
  }
}

extension ModelConfiguration {
  /// The engine for this configuration's store: PostgreSQL (`PostgreSQLEngine`) for a
  /// `postgresql://` or `postgres://` URL, SQLite (`SQLiteEngine`) for a file URL and for a
  /// store in memory.
  ///
  /// - Throws: `cannotOpen` for a URL of another scheme, naming it.
  public func defaultEngine() throws -> any StoreEngine {
    guard let url = storeURL, !url.isFileURL else { return SQLiteEngine() }
    if PostgreSQLEngine.handles(url) { return PostgreSQLEngine() }
    throw PersistenceError(
      code: .cannotOpen,
      message:
        "No store engine opens \(url.scheme ?? "")://… URLs; give the path of a SQLite store file or a postgresql:// URL."
    )
  }
}
