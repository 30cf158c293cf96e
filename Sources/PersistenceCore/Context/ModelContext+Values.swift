import Foundation

/// One row of ``ModelContext/enumerateValues(_:_:identifiers:_:)``: the row's identifier and
/// the values of the attributes asked for, read from their columns without making a model.
///
/// It lends the engine's current row: it cannot be copied out of the closure it is given to,
/// and its values must be read inside that closure.
public struct ValueRow<Model: PersistentModel>: ~Copyable {
  /// The row's identifier.
  public let identifier: PersistentIdentifier
  let row: any StoreRow
  /// Each key path's attribute: its name, and whether it is `.codable`.
  let attributes: [(name: String, isCodable: Bool)]

  /// The row as an error names it: `trips row 17`.
  private var rowName: String { "\(identifier.entityName) row \(identifier.primaryKey)" }

  /// The value of the `index`th key path of the enumeration (0 for the first), as `Value`.
  ///
  /// - Throws: ``PersistenceError`` naming the row and column when the stored value is not a
  ///   `Value` (a NULL for a non-optional, text in a number column), as a fetch does.
  public func value<Value: PersistableValue>(_ type: Value.Type = Value.self, at index: Int)
    throws -> Value
  {
    precondition(
      !attributes[index].isCodable, "ValueRow.value(at:) on a .codable attribute: use decoded")
    do {
      return try Value.read(from: row, at: Int32(index + 1))
    } catch var failure as PersistenceError {
      if failure.attribute == nil { failure.attribute = attributes[index].name }
      throw failure.naming(row: rowName)
    }
  }

  /// What `read` makes of the value of the `index`th key path as stored (`.codable` bytes
  /// undecoded): for code that reads columns of types it knows only at run time
  /// (`Value(sqlValue:)` of a ``PersistableValue`` reads one), with no generic type made per
  /// call. O(size of the value): text and bytes are copied.
  ///
  /// - Throws: what `read` throws; a ``PersistenceError`` named with the row and column, as
  ///   ``value(_:at:)`` names it.
  public func storedValue<Value>(at index: Int, _ read: (SQLValue) throws -> Value) throws
    -> Value
  {
    do {
      return try read(row.value(at: Int32(index + 1)))
    } catch var failure as PersistenceError {
      if failure.attribute == nil { failure.attribute = attributes[index].name }
      throw failure.naming(row: rowName)
    }
  }

  /// The value of the `index`th key path, a `.codable` attribute, decoded as `Value` from its
  /// stored bytes as a model's access decodes it; nil for `NULL`. Each call decodes (O(bytes));
  /// equal values are not shared as within a fetch.
  ///
  /// - Throws: ``PersistenceError`` when the bytes do not decode as `Value`.
  public func decoded<Value: Codable>(_ type: Value.Type = Value.self, at index: Int) throws
    -> Value?
  {
    precondition(
      attributes[index].isCodable, "ValueRow.decoded(at:) on an attribute that is not .codable")
    let column = Int32(index + 1)
    switch row.storage(at: column) {
    case .null: return nil
    case .blob:
      do {
        return try decodeStoredJSON(Value.self, bytes: row.bytes(at: column))
      } catch {
        var failure = PersistenceError(
          code: .invalidValue,
          message:
            "Cannot decode the JSON attribute \(attributes[index].name) as \(Value.self).",
          cause: error)
        failure.attribute = attributes[index].name
        throw failure.naming(row: rowName)
      }
    default:
      var failure = PersistenceError(
        code: .invalidValue,
        message:
          "No encoded value in the .codable column \(attributes[index].name).")
      failure.attribute = attributes[index].name
      throw failure.naming(row: rowName)
    }
  }
}

extension ModelContext {
  /// Calls `body` with the values of `keyPaths` for each model matching `descriptor` (its
  /// predicate, sorts, limit and offset), or with `identifiers` given, for each of those
  /// models that still exists (in the store's order), without making models: what an index
  /// kept in memory beside the store reads to build itself and to catch up with changes, and
  /// what a service writes out without keeping models. Native attributes are read with
  /// ``ValueRow/value(_:at:)``, `.codable` ones with ``ValueRow/decoded(_:at:)``; a to-one
  /// whose side stores the key reads as the related row's primary key, an `Int?` (nil when it
  /// points to none), as ``PersistentIdentifier/primaryKey`` of the related model's rows.
  ///
  /// It reads the store: unsaved changes are not included (with ``autosaveEnabled`` they are
  /// saved first, as for any fetch).
  ///
  /// Cost: one SQL query selecting the primary key and `keyPaths`' columns, O(rows) time and
  /// O(1) memory; with `identifiers`, one query per 500 of them, O(k log n).
  ///
  /// - Throws: ``PersistenceError`` with ``PersistenceError/Code/unsupportedPredicate`` for a
  ///   key path that is not a stored attribute, or for a predicate that SQL
  ///   cannot finish alone (this reads columns, never models); the errors of
  ///   ``ValueRow/value(_:at:)`` and of `body`.
  public func enumerateValues<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, _ keyPaths: [PartialKeyPath<Model> & Sendable],
    identifiers: [PersistentIdentifier]? = nil,
    _ body: (borrowing ValueRow<Model>) throws -> Void
  ) throws {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    let (columns, attributes) = try valueColumns(entity, keyPaths)
    let database = try connection()
    func deliver(_ row: any StoreRow) throws { try body(valueRow(row, entity, attributes)) }
    if let identifiers {
      try KeyBatches.forEachRow(
        keys: primaryKeys(of: identifiers, entityName: entity.name), database: database,
        select: "SELECT " + (["\"_pk\""] + columns).joined(separator: ", ") + " FROM "
          + entity.statements.table + " WHERE \"_pk\"",
        deliver)
      return
    }
    let query = try Query(
      descriptor, schema: entity.schema, select: (["\"_pk\""] + columns).joined(separator: ", "),
      database: database)
    guard !query.finishesInSwift else {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "enumerateValues needs a predicate that SQL finishes alone; this one is finished in Swift, on models."
      )
    }
    let statement = try database.cachedStatement(query.sql)
    statement.returnsTableColumns()
    statement.bindValues(query.bindings)
    defer { statement.reset() }  // ends the read transaction, even after an error
    while try statement.step() { try deliver(statement) }
  }

  /// Calls `body` with the values of `keyPaths` for each model whose to-one `relationship`
  /// points to one of `owners` (identifiers of `Owner`'s rows; others are left out), without
  /// making models: the related rows of a page of owners, read by the relationship's key column
  /// through its index, with no query on the owners' table. Values read as
  /// ``enumerateValues(_:_:identifiers:_:)`` reads them; rows come in the store's order (sort
  /// them if the order matters). It reads the store: unsaved changes are not included.
  ///
  /// Cost: one query per 500 owners, O(k log n + rows) for k owners and n related rows;
  /// O(1) memory.
  ///
  /// - Throws: ``PersistenceError`` with ``PersistenceError/Code/unsupportedPredicate`` when
  ///   `relationship` is not a to-one whose side stores the key, or a key path is not a stored
  ///   attribute; the errors of ``ValueRow/value(_:at:)`` and of `body`.
  public func enumerateValues<Model: PersistentModel, Owner: PersistentModel>(
    relatedTo owners: [PersistentIdentifier],
    through relationship: KeyPath<Model, Owner?> & Sendable,
    _ keyPaths: [PartialKeyPath<Model> & Sendable],
    _ body: (borrowing ValueRow<Model>) throws -> Void
  ) throws {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    let ownerName = try self.entity(for: Owner.self).name
    guard let link = entity.schema.relationship(for: relationship), link.storesKey else {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "enumerateValues(relatedTo:through:) needs a to-one of \(Model.self) that stores the key; \(Model.modelSchema.describe(relationship)) is not one."
      )
    }
    let (columns, attributes) = try valueColumns(entity, keyPaths)
    try KeyBatches.forEachRow(
      keys: primaryKeys(of: owners, entityName: ownerName), database: try connection(),
      select: "SELECT " + (["\"_pk\""] + columns).joined(separator: ", ") + " FROM "
        + entity.statements.table + " WHERE " + quoted(link.name)
    ) { row in try body(valueRow(row, entity, attributes)) }
  }

  /// The columns that `keyPaths` read, with each one's name and whether it is `.codable`.
  private func valueColumns<Model: PersistentModel>(
    _ entity: Entity<Model>, _ keyPaths: [PartialKeyPath<Model> & Sendable]
  ) throws -> (columns: [String], attributes: [(name: String, isCodable: Bool)]) {
    var attributes: [(name: String, isCodable: Bool)] = []
    let columns = try keyPaths.map { keyPath in
      // A to-one that stores the key reads as the related row's primary key (`Int?`).
      if let relationship = entity.schema.relationship(for: keyPath), relationship.storesKey {
        attributes.append((relationship.name, false))
        return quoted(relationship.name)
      }
      guard let attribute = entity.schema.attribute(for: keyPath) else {
        throw PersistenceError(
          code: .unsupportedPredicate,
          message:
            "enumerateValues needs stored attributes of \(Model.self); \(Model.modelSchema.describe(keyPath)) is not one."
        )
      }
      attributes.append((attribute.name, attribute.isCodable))
      return quoted(attribute.name)
    }
    return (columns, attributes)
  }

  /// `row` (its primary key first, then `attributes`' columns) as a ``ValueRow`` of `entity`.
  private func valueRow<Model: PersistentModel>(
    _ row: any StoreRow, _ entity: Entity<Model>,
    _ attributes: [(name: String, isCodable: Bool)]
  ) -> ValueRow<Model> {
    ValueRow(
      identifier: PersistentIdentifier(
        storeIdentifier: container.storeIdentifier, entityName: entity.name,
        primaryKey: row.int64(at: 0)),
      row: row, attributes: attributes)
  }

  /// Runs `body` in one read transaction, unless one is open: every fetch in it sees the same
  /// snapshot of the store, whatever other connections commit meanwhile (a page and a count,
  /// or a history token and the rows it describes). It is for reads; ``save()`` in `body`
  /// fails. Cost: a `BEGIN` and a `COMMIT`.
  public func withSnapshot<Result>(_ body: () throws -> Result) throws -> Result {
    try autosaveIfNeeded()
    let database = try connection()
    guard !database.isInTransaction else { return try body() }
    try database.beginReading()
    defer { try? database.commit() }
    return try body()
  }

  /// The models of `identifiers` that exist in the store, in that order (an identifier of
  /// another store or entity, or of a deleted row, is left out), read by key; registered
  /// models are refreshed as ``fetch(_:)`` refreshes them.
  ///
  /// Cost: O(k log n) for k identifiers in a table of n rows, one query per 500 of them.
  public func models<Model: PersistentModel>(
    for identifiers: [PersistentIdentifier], as type: Model.Type = Model.self
  ) throws -> [Model] {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    return try models(
      primaryKeys: primaryKeys(of: identifiers, entityName: entity.name), entity: entity)
  }

  /// The primary keys of those of `identifiers` that name rows of `entityName` in this store.
  private func primaryKeys(of identifiers: [PersistentIdentifier], entityName: String)
    -> [Int64]
  {
    let store = container.storeIdentifier
    return identifiers.compactMap {
      $0.storeIdentifier == store && $0.entityName == entityName ? $0.primaryKey : nil
    }
  }
}
