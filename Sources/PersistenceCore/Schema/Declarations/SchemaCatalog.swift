/// What the core's schema check asks of an engine: the tables, columns and indexes its store
/// has, and its dialect (``SQLDialect``), in which the core writes what a model declares. Each
/// engine implements it over one connection; ``reconcile(_:migrate:)`` and ``hasEverything(_:)`` are then the same
/// check on every engine (a store made by something else, or by a newer schema, is refused the
/// same way on each).
package protocol SchemaCatalog {
  /// The store as messages name it (a path, or a URL without its password).
  var location: String { get }
  /// The names of the store's tables.
  func tableNames() throws -> Set<String>
  /// The names of the store's indexes.
  func indexNames() throws -> Set<String>
  /// The columns of `table` (its primary key `_pk` included or not), by name, each with its
  /// type as the dialect's ``SQLDialect/typeName(of:)`` names it.
  func columnTypes(of table: String) throws -> [String: String]
  /// How the engine spells the statements that create tables and indexes and add columns.
  var dialect: any SQLDialect { get }
  /// Runs a statement that returns no rows.
  func execute(_ sql: String) throws
  /// Removes `column` from `table`, with the indexes over it: what a migration does with a
  /// column the new version of a model no longer declares.
  func dropColumn(_ column: String, of table: String) throws
  /// The names of the indexes of `table` that can be dropped (not its primary key's).
  func indexNames(of table: String) throws -> Set<String>
  /// The columns of `table` that are `NOT NULL`.
  func notNullColumns(of table: String) throws -> Set<String>
  /// The first column of each row `sql` (a query taking no parameters) returns, as text.
  func texts(_ sql: String) throws -> [String]
}

extension SchemaCatalog {
  /// Compares each entity's table with its declaration, in table-name order with the tables a
  /// foreign key points to before it (``EntityDescription/referenceOrder(_:)``); with
  /// `migrate`, creates missing tables and adds missing columns and indexes.
  ///
  /// Cost: one query for the tables, one per entity for its columns, and the statements that
  /// add what is missing.
  ///
  /// - Throws: ``PersistenceError`` with ``PersistenceError/Code/schemaMismatch`` when a table
  ///   or column is missing and `migrate` is false, or a column's type differs from the
  ///   declared one; ``PersistenceError/Code/newerStore`` when a table has columns the entity
  ///   does not declare. Nothing is changed before the check of an entity has passed.
  ///
  /// With `dropsUndeclared` (a migration plan's stage moving the tables to a new version),
  /// columns an entity no longer declares are removed instead of refused.
  package func reconcile(
    _ entities: [EntityDescription], migrate: Bool, dropsUndeclared: Bool = false
  ) throws {
    let tables = try tableNames()
    try reconcileHistoryColumns(tables: tables, migrate: migrate)
    for entity in EntityDescription.referenceOrder(entities) {
      guard tables.contains(entity.name) else {
        guard migrate else {
          throw PersistenceError(
            code: .schemaMismatch,
            message:
              "The store at \(location) has no table \(entity.name); open it writable once to create it."
          )
        }
        try execute(dialect.createTable(entity))
        for sql in dialect.createIndexes(entity) { try execute(sql) }
        continue
      }
      var stored = try columnTypes(of: entity.name)
      stored["_pk"] = nil
      if dropsUndeclared {
        try dropUndeclared(entity, stored: &stored)
      }
      let missing: [EntityDescription.Column]
      do {
        missing = try entity.missingColumns(
          stored: stored, typeName: dialect.typeName(of:), location: location, migrate: migrate)
      } catch let error as PersistenceError
        where error.code == .newerStore && stored[EntityDescription.entityColumn] != nil
      {
        throw try namingSubclasses(error, of: entity)
      }
      for column in missing {
        try execute(dialect.addColumn(column, to: entity))
      }
      if migrate {
        try addIndexes(of: entity)
      }
    }
  }

  /// `refusal` of a table holding subclasses the container does not list, with the unlisted
  /// classes the table's rows are of named (the last component of each path in `"_entity"`
  /// that `entity` does not list). One query over the table's `"_entity"` index. A subclass
  /// whose rows are all gone leaves no name.
  private func namingSubclasses(_ refusal: PersistenceError, of entity: EntityDescription)
    throws -> PersistenceError
  {
    let column = quoted(EntityDescription.entityColumn)
    let paths = try texts(
      "SELECT DISTINCT \(column) FROM \(quoted(entity.name)) WHERE \(column) <> '' ORDER BY 1")
    let classes = paths.filter { !entity.subclassPaths.contains($0) }.compactMap {
      $0.split(separator: "/").last.map(String.init)
    }
    guard !classes.isEmpty else { return refusal }
    return PersistenceError(
      code: refusal.code,
      message:
        "\(refusal.message) Its rows are of these subclasses it does not list: \(classes.joined(separator: ", "))."
    )
  }

  /// Adds the history columns a store made before them lacks (``StoreLayout/addedHistoryColumns``);
  /// without `migrate`, a missing one is a ``PersistenceError/Code/schemaMismatch``.
  private func reconcileHistoryColumns(tables: Set<String>, migrate: Bool) throws {
    for (table, columns) in StoreLayout.addedHistoryColumns.sorted(by: { $0.key < $1.key })
    where tables.contains(table) {
      let stored = try columnTypes(of: table)
      for column in columns where stored[column] == nil {
        guard migrate else {
          throw PersistenceError(
            code: .schemaMismatch,
            message:
              "The store at \(location) was made by an earlier version of this library: its history lacks the column \(table).\(column). Open it writable once to add it."
          )
        }
        try execute(
          "ALTER TABLE \(quoted(table)) ADD COLUMN \(quoted(column)) \(dialect.columnType(.text))")
      }
    }
  }

  /// What a migration's move to a new version does before the columns are compared: drops
  /// the columns and indexes `entity` no longer declares (a removed property, unique
  /// constraint or index), and refuses a column whose optionality changed, which is not
  /// changed in place.
  private func dropUndeclared(_ entity: EntityDescription, stored: inout [String: String])
    throws
  {
    let declared = Set(entity.columns.map(\.name))
    for column in stored.keys.sorted() where !declared.contains(column) {
      try dropColumn(column, of: entity.name)
      stored[column] = nil
    }
    let indexes = Set(entity.indexNames)
    for index in try indexNames(of: entity.name).sorted() where !indexes.contains(index) {
      try execute("DROP INDEX \(quoted(index))")
    }
    let notNull = try notNullColumns(of: entity.name)
    for column in entity.columns where stored[column.name] != nil {
      guard column.isOptional == notNull.contains(column.name) else { continue }
      throw PersistenceError(
        code: .schemaMismatch,
        message:
          "The column \(entity.name).\(column.name) is \(column.isOptional ? "NOT NULL" : "nullable") in the store, and the new version declares it \(column.isOptional ? "optional" : "not optional"): a property's optionality is not changed in place. Add a new property, copy the values to it in a custom stage's didMigrate, and remove the old one in a later version."
      )
    }
  }

  /// Creates `entity`'s indexes on its existing table. A unique one the rows already break (a
  /// constraint added to a table that has repeated values) is an error naming the table and
  /// the columns, not the engine's message alone.
  private func addIndexes(of entity: EntityDescription) throws {
    for (index, sql) in zip(entity.indexes, dialect.createIndexes(entity)) {
      do {
        try execute(sql)
      } catch let error as PersistenceError where index.isUnique && error.code == .uniqueConstraint
      {
        let columns = index.columns.joined(separator: ", ")
        throw PersistenceError(
          code: .uniqueConstraint,
          message:
            "The table \(entity.name) of the store at \(location) has rows that repeat a value of (\(columns)), which the model now declares unique: no unique index was made. Change or delete the repeated rows (with the previous model), then open the store again.",
          cause: error)
      }
    }
  }

  /// Whether every entity's table, column and index, and the history's indexes, are there as
  /// declared, so that opening the store needs no write. False when something is to be added
  /// or a column's type differs (opening it writable then says which).
  ///
  /// - Throws: ``PersistenceError`` with ``PersistenceError/Code/newerStore`` when a table has
  ///   columns its entity does not declare, and what the engine's queries throw.
  package func hasEverything(_ entities: [EntityDescription]) throws -> Bool {
    do {
      try reconcile(entities, migrate: false)
    } catch let error as PersistenceError where error.code == .schemaMismatch {
      return false
    }
    let indexes = try indexNames()
    return (StoreLayout.historyIndexes + entities.flatMap(\.indexNames)).allSatisfy(
      indexes.contains)
  }
}

extension EntityDescription {
  /// `entities` in table-name order, except that each comes after the tables its foreign keys
  /// point to (the container refuses cycles), so that a table is created after those it
  /// references. O(entities²), a few models.
  package static func referenceOrder(_ entities: [EntityDescription]) -> [EntityDescription] {
    var remaining = entities.sorted { $0.name < $1.name }
    var placed = Set<String>()
    var ordered: [EntityDescription] = []
    while !remaining.isEmpty {
      let index =
        remaining.firstIndex { entity in
          entity.columns.allSatisfy { column in
            guard let table = column.reference?.table, table != entity.name else { return true }
            return placed.contains(table) || !remaining.contains { $0.name == table }
          }
        } ?? 0
      let next = remaining.remove(at: index)
      placed.insert(next.name)
      ordered.append(next)
    }
    return ordered
  }
}
