import Foundation

/// The SQL for a fetch: `SELECT … FROM table WHERE … ORDER BY … LIMIT … OFFSET …`.
struct Query {
  var sql: String
  var bindings: [SQLValue]
  /// Whether Swift must finish the query: the engine cannot run a Swift-only function of the
  /// predicate (the SQL is narrowed: evaluate the predicate on its rows) or sort (the SQL's
  /// order is not final: sort in Swift); the SQL then has no `LIMIT` or `OFFSET`, which apply
  /// after (see ``StoreFunctions``).
  var finishesInSwift = false

  /// Builds the query for `descriptor`.
  ///
  /// - Parameters:
  ///   - columns: What to select; nil selects the primary key and every attribute, in order.
  ///   - sectionColumn: A column to order by first (sectioned fetches).
  ///   - sectionExpression: Instead, SQL to order by first, `NULL` first: a value read through
  ///     relationships (see ``RelatedKeyPath``).
  ///   - database: Where string comparators become collations.
  init<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, schema: ModelSchema<Model>, select columns: String? = nil,
    sectionColumn: String? = nil, sectionExpression: String? = nil,
    database: any StoreConnection, ordered: Bool = true
  ) throws {
    let narrowing = !database.evaluatesSwiftFunctions
    try self.init(
      descriptor, schema: schema,
      condition: try descriptor.whereClause(schema: schema, narrowing: narrowing),
      select: columns, sectionColumn: sectionColumn, sectionExpression: sectionExpression,
      database: database, ordered: ordered)
  }

  /// Builds the query for `descriptor` around `condition`, its predicate's translation.
  init<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, schema: ModelSchema<Model>, condition: SQLFragment?,
    select columns: String? = nil, sectionColumn: String? = nil, sectionExpression: String? = nil,
    database: any StoreConnection, ordered: Bool = true
  ) throws {
    let narrowing = !database.evaluatesSwiftFunctions
    // Appended in place into one buffer of the right size: interpolations and joined arrays
    // cost about 5k instructions a query, as much as a cached predicate's translation.
    let select = columns ?? schema.selectList
    var sql = ""
    sql.reserveCapacity(
      select.utf8.count + schema.quotedName.utf8.count + (condition?.sql.utf8.count ?? 0)
        + 48 * (descriptor.sortBy.count + 1) + (sectionExpression?.utf8.count ?? 0) + 64)
    sql += "SELECT "
    sql += select
    sql += " FROM "
    sql += schema.quotedName
    var bindings: [SQLValue] = []
    // A subclass's rows only, in its root model's table.
    if let inheritance = schema.inheritance {
      sql += " WHERE "
      sql += inheritance.condition
      if condition != nil { sql += " AND " }
    }
    if let condition {
      if schema.inheritance == nil {
        sql += " WHERE "
        sql += condition.sql
      } else {
        sql += "("
        sql += condition.sql
        sql += ")"
      }
      bindings = condition.bindings.values
      if condition.isNarrowed { finishesInSwift = true }
    }
    if ordered {
      sql += " ORDER BY "
      if let sectionColumn {
        // nil sorts first, as in Swift (SQLite's default, not PostgreSQL's).
        let isOptional = schema.attributes.first { $0.name == sectionColumn }?.isOptional ?? false
        sql += quoted(sectionColumn)
        if isOptional { sql += " NULLS FIRST" }
        sql += ", "
      } else if let sectionExpression {
        sql += sectionExpression
        sql += " NULLS FIRST, "
      }
      for sort in descriptor.sortBy {
        let localized = descriptor.localizedStandardKeyPath(sort) != nil
        // A sort the engine cannot run exactly is done in Swift; SQL orders by code point.
        let inSwift =
          narrowing
          && (localized || (sort.stringComparator.map { $0 != .lexical } ?? false))
        if inSwift { finishesInSwift = true }
        sql += try Self.orderTerm(
          sort, schema: schema, database: database, localizedStandard: localized, plain: inSwift)
        sql += ", "
      }
      sql += "\"_pk\""
    }
    if !finishesInSwift && (descriptor.fetchLimit != nil || descriptor.fetchOffset != nil) {
      sql += " LIMIT ? OFFSET ?"
      bindings += Self.window(descriptor)
    }
    self.sql = sql
    self.bindings = bindings
  }

  /// The values of `LIMIT ? OFFSET ?` for `descriptor`, or none when it has no window. No
  /// limit (nil or negative) is the largest one: SQLite reads -1 as none, PostgreSQL refuses a
  /// negative limit.
  static func window<Model>(_ descriptor: FetchDescriptor<Model>) -> [SQLValue] {
    guard descriptor.fetchLimit != nil || descriptor.fetchOffset != nil else { return [] }
    return [
      .integer(descriptor.fetchLimit.flatMap { $0 >= 0 ? Int64($0) : nil } ?? Int64.max),
      .integer(Int64(max(descriptor.fetchOffset ?? 0, 0))),
    ]
  }

  /// One `ORDER BY` term. Strings with a comparator sort with a collation that calls that very
  /// comparator; without one, by code point (SQLite `BINARY` on NFC text), as Swift's `<`.
  static func orderTerm<Model: PersistentModel>(
    _ sort: SortDescriptor<Model>, schema: ModelSchema<Model>, database: any StoreConnection,
    localizedStandard: Bool = false, plain: Bool = false
  ) throws -> String {
    let sorted = try sortExpression(sort, schema: schema)
    var term = sorted.sql
    if plain {
      // Ordered by code point; the caller sorts in Swift.
    } else if localizedStandard {
      term += " COLLATE \(StoreFunctions.localizedStandardCollation)"
    } else if let comparator = sort.stringComparator {
      term += " COLLATE \(try database.collation(for: comparator))"
    }
    if sort.order == .reverse { term += " DESC" }
    // Swift puts nil before any value; SQLite does too, PostgreSQL the other way round.
    if sorted.isOptional { term += sort.order == .reverse ? " NULLS LAST" : " NULLS FIRST" }
    return term
  }

  /// What `sort` orders by, as SQL, and whether it can be `NULL`: a stored attribute's column,
  /// or an attribute reached through to-one relationships (`\Room.hotel?.name`, see
  /// ``RelatedKeyPath``): a subquery by key per relationship, `NULL` (first, as Swift's `nil`)
  /// where one points to no row.
  ///
  /// Cost in the query: a column costs nothing more; each relationship on the path one lookup
  /// of a primary key (or of the unique key column of a one-to-one) per row sorted.
  static func sortExpression<Model: PersistentModel>(
    _ sort: SortDescriptor<Model>, schema: ModelSchema<Model>
  ) throws -> (sql: String, isOptional: Bool) {
    guard let keyPath = sort.keyPath else {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "A SortDescriptor on \(Model.self) has no key path (it sorts with a custom comparator), so it cannot be translated to SQL. Sort by a stored attribute."
      )
    }
    guard let attribute = schema.attribute(for: keyPath) else {
      if !schema.relationships.isEmpty,
        let related = RelatedKeyPath.resolve(keyPath, in: PredicateTable(schema))
      {
        return (try related.sql(schema: schema).sql, true)
      }
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "A SortDescriptor on \(Model.self) sorts by \(schema.describe(keyPath)), which is not a stored attribute nor one reached through to-one relationships."
      )
    }
    guard !attribute.isCodable else {
      throw PersistenceError(
        code: .unsupportedPredicate,
        message:
          "The attribute '\(attribute.name)' of \(Model.self) is kept as JSON (.codable, or a Codable type that is no enum of raw values), which is opaque: it cannot be used in a sort, as in SwiftData."
      )
    }
    return (quoted(attribute.name), attribute.isOptional)
  }
}
