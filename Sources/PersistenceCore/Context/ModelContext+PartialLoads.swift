import Foundation

/// What a fetch with `propertiesToFetch` left to load: the attributes it did not select, and
/// the models it made without them. Each such model's ``LinkOrigin`` points here until the
/// first read or write of one of those attributes loads them for every model still waiting.
///
/// Cost: one key per model; the load is one query per 10,000 models.
final class PartialLoad {
  /// The stored attributes not selected, by index (column order).
  let missing: [Int]
  /// Their key paths, to tell whether a property read is one of them. Immutable values.
  nonisolated(unsafe) let missingKeyPaths: Set<AnyKeyPath>
  /// The keys of the models made without them.
  var keys: [Int64] = []
  /// Where a model whose context is gone loads them from.
  let container: ModelContainer

  init(missing: [Int], keyPaths: Set<AnyKeyPath>, container: ModelContainer) {
    self.missing = missing
    missingKeyPaths = keyPaths
    self.container = container
  }

  /// The SQL that reads the missing attributes of the rows `condition` selects.
  func select(_ entity: any EntityOperations, where condition: String) -> String {
    let columns = missing.map { quoted(entity.columnNames[$0]) }.joined(separator: ", ")
    return "SELECT \"_pk\", \(columns) FROM \(quoted(entity.name)) WHERE \(condition)"
  }

  /// Loads the missing attributes of `model` alone, whose context is gone (a model fetched by
  /// a context made for the fetch, `ModelContext(container).fetch(…)`), through a connection
  /// of the container: one query by its key. The model has no snapshot to fill (no context
  /// tracks its changes).
  func loadDetached<Model: LinksOnFirstUse>(_ model: Model) throws {
    guard let key = model.linkOrigin.ownerKey else { return }
    let entity = try container.operations(for: Model.self)
    let connection = try container.takeConnection()
    defer { container.giveBack(connection) }
    let statement = try connection.cachedStatement(select(entity, where: "\"_pk\" = ?"))
    statement.returnsTableColumns()
    statement.bindInt64(key, at: 1)
    defer { statement.reset() }
    guard try statement.step() else { return }
    entity.linkOrigin?.setPartial(model, nil)
    do {
      try entity.loadAttributes(
        missing, of: model, into: nil, from: statement, cache: LoadCache())
    } catch {
      entity.linkOrigin?.setPartial(model, self)
      throw error
    }
  }
}

extension LinkOrigin {
  /// Loads the attributes a fetch with `propertiesToFetch` left, when `keyPath` is one of
  /// them: for `model` and every other model of that fetch still without them, in one query
  /// per 10,000 models. What `@Model`'s accessors call when ``hasPropertiesToLoad``; not
  /// called by hand.
  ///
  /// A model whose context is gone loads its own, through a connection of its container. A
  /// read cannot throw: a row deleted since, or a failed query, traps, naming the model and
  /// the property (a value never loaded would be a wrong answer).
  public static func loadProperties<Model: LinksOnFirstUse, Value>(
    of model: Model, _ keyPath: KeyPath<Model, Value>
  ) {
    guard let partial = model.linkOrigin.partial,
      partial.missingKeyPaths.contains(keyPath as AnyKeyPath)
    else { return }
    do {
      if let context = model.linkOrigin.reference?.context {
        try context.loadProperties(partial, of: Model.self)
      } else {
        try partial.loadDetached(model)
      }
    } catch {
      preconditionFailure(
        "\(Model.self).\(keyPath) was not fetched (propertiesToFetch), and loading it failed: \(error)"
      )
    }
    guard model.linkOrigin.partial !== partial else {
      preconditionFailure(
        "\(Model.self).\(keyPath) was not fetched (propertiesToFetch), and the model's row is no longer in the store: it was deleted since the fetch."
      )
    }
  }
}

extension ModelContext {
  /// The query and the pending load of a fetch with `propertiesToFetch`; nil when it loads
  /// every attribute (the model's accessors do not load on first use, every attribute is
  /// asked for, or Swift must finish the query, which reads every attribute).
  func partialFetch<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, entity: Entity<Model>, database: any StoreConnection
  ) throws -> (query: Query, load: PartialLoad)? {
    let wanted = Set(descriptor.fetching.keyPaths)
    let stored = entity.schema.storedAttributes
    // Checked for every model, also one that loads every attribute: a key path that names no
    // attribute is the caller's mistake whatever the model.
    for keyPath in wanted where entity.schema.attributeIndex(for: keyPath) == nil {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "propertiesToFetch names \(keyPath), which is not a stored attribute of \(Model.self)."
      )
    }
    // A table that holds subclasses is read whole: a row's class decides its columns.
    guard entity.linkOrigin?.loadsOnFirstUse == true, entity.entityColumn == nil else {
      return nil
    }
    // A to-one's key is always read: its link is made with the model.
    let missing = stored.indices.filter {
      stored[$0].relationship == nil && !wanted.contains(stored[$0].keyPath)
    }
    guard !missing.isEmpty else { return nil }
    let left = Set(missing)
    let columns = try container.entity(for: Model.self).columns
    var select = "\"_pk\""
    var defaults: [SQLValue] = []
    for (index, attribute) in stored.enumerated() {
      select += ", "
      if left.contains(index) {
        // The empty value, what the model holds until it is loaded (and its snapshot).
        select += "? AS \(quoted(attribute.name))"
        defaults.append(columns[index].defaultValue)
      } else {
        select += quoted(attribute.name)
      }
    }
    var query = try Query(descriptor, schema: entity.schema, select: select, database: database)
    guard !query.finishesInSwift else { return nil }
    query.bindings = defaults + query.bindings
    let load = PartialLoad(
      missing: missing, keyPaths: Set(missing.map { stored[$0].keyPath }), container: container)
    return (query, load)
  }

  /// Loads the attributes `partial` left into every model of its fetch that is still
  /// registered here and still waiting for them, in one query per 10,000 models.
  func loadProperties<Model: PersistentModel>(_ partial: PartialLoad, of _: Model.Type) throws {
    let entity = try entity(for: Model.self)
    guard let origin = entity.linkOrigin else { return }
    let table = rowTable(entity.name)
    let waiting = partial.keys.filter { key in
      guard let registration = table[key], !registration.isDeleted else { return false }
      return origin.partial(registration.model) === partial
    }
    partial.keys = []
    let database = try connection()
    let sql = partial.select(entity, where: database.keyListCondition("\"_pk\""))
    let cache = LoadCache()
    var start = 0
    while start < waiting.count {
      let chunk = waiting[start..<min(start + 10_000, waiting.count)]
      start += chunk.count
      let statement = try database.cachedStatement(sql)
      statement.returnsTableColumns()
      statement.bindText(database.keyListText(Array(chunk)), at: 1)
      defer { statement.reset() }
      while try statement.step() {
        guard let registration = table[statement.int64(at: 0)] else { continue }
        let model = registration.model
        guard origin.partial(model) === partial else { continue }
        // Cleared first: the load may write through the model's setters, which would ask
        // for this load again.
        origin.setPartial(model, nil)
        do {
          try entity.loadAttributes(
            partial.missing, of: model, into: registration, from: statement, cache: cache)
        } catch {
          origin.setPartial(model, partial)
          throw error
        }
      }
    }
  }
}

extension Entity {
  /// Reads the stored attributes `indexes` of `model` from columns 1… of `statement`'s row,
  /// into the model's backing storage and its snapshot (when it is registered).
  func loadAttributes(
    _ indexes: [Int], of model: AnyObject, into registration: ModelContext.Registration?,
    from statement: any StoreRow, cache: LoadCache
  ) throws {
    let row = BorrowedRow(statement)
    let borrowedCache = BorrowedCache(cache)
    let snapshot = registration?.snapshot
    for (column, index) in indexes.enumerated() {
      let slot = snapshot.map { snapshotLayout.slot(index, of: $0, isInitialized: true) }
      do {
        _ = try accesses[index](model, .load(row, Int32(column + 1), borrowedCache, slot, true))
      } catch var failure as PersistenceError where failure.attribute == nil {
        failure.attribute = columnNames[index]
        throw failure
      }
    }
  }
}
