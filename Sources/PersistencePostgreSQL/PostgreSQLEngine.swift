internal import CLibPQ
import Foundation
import PersistenceCore

/// The shared engine: a store is a PostgreSQL database that several processes on several
/// machines open at once, through libpq.
///
/// A configuration's URL names the database as libpq does: `postgresql://user@host:port/db`
/// (or `postgres://`, with libpq's query parameters such as `sslmode=require`). The store's
/// tables live in the connection's current schema (`search_path`); a database whose tables were
/// made by something else, or by a newer version, is refused and left untouched.
public struct PostgreSQLEngine: StoreEngine {
  /// The engine.
  public init() {}

  /// Whether `url` names a PostgreSQL store (`postgresql:` or `postgres:`).
  public static func handles(_ url: URL) -> Bool {
    ["postgresql", "postgres"].contains(url.scheme?.lowercased() ?? "")
  }

  /// Connects to the database the configuration's URL names, checks it, and creates or
  /// migrates the store's tables in one transaction when saves are allowed.
  ///
  /// - Throws: `PersistenceError` with `cannotOpen` when the server cannot be reached or the
  ///   URL is not a PostgreSQL URL, `notAStore` for a database holding other tables,
  ///   `newerStore` for one a newer version wrote, `schemaMismatch` for a store missing tables
  ///   or columns that a read-only configuration cannot add.
  public func openStore(
    _ configuration: ModelConfiguration, entities: [EntityDescription]
  ) throws -> any OpenStore {
    guard let url = configuration.storeURL, Self.handles(url) else {
      throw PersistenceError(
        code: .cannotOpen,
        message:
          "The PostgreSQL engine opens postgresql:// URLs only, not \(configuration.storeURL?.absoluteString ?? "a store in memory")."
      )
    }
    let location = Self.displayName(of: url)
    // A URL's scheme is case-insensitive; libpq knows the lowercase ones only (it would read
    // `POSTGRESQL://…` as key=value settings).
    var conninfo = url.absoluteString
    if let colon = conninfo.firstIndex(of: ":") {
      conninfo = conninfo[..<colon].lowercased() + conninfo[colon...]
    }
    let connection = try Connection(conninfo: conninfo, location: location)
    let identifier = try StoreSchema.open(
      connection, entities: entities, allowsSave: configuration.allowsSave)
    return PostgreSQLStore(
      conninfo: conninfo, location: location, identifier: identifier,
      allowsSave: configuration.allowsSave)
  }

  /// The URL without its password, for messages.
  public static func displayName(of url: URL) -> String {
    guard url.password != nil, var parts = URLComponents(url: url, resolvingAgainstBaseURL: false)
    else { return url.absoluteString }
    parts.password = "…"
    return parts.string ?? url.absoluteString
  }
}

/// An open PostgreSQL store: where new connections go.
final class PostgreSQLStore: MigratableStore {
  let conninfo: String
  let location: String
  let identifier: UUID
  let allowsSave: Bool
  /// Idle sessions for the next connections (see ``ConnectionPool``).
  let pool = ConnectionPool()

  init(conninfo: String, location: String, identifier: UUID, allowsSave: Bool) {
    self.conninfo = conninfo
    self.location = location
    self.identifier = identifier
    self.allowsSave = allowsSave
  }

  /// Never: other servers' commits are always seen.
  var isImmutable: Bool { false }

  /// A new connection; read-only sessions when saves are not allowed. `cacheSizeKiB` has no
  /// meaning here (the server keeps the cache).
  func makeConnection(cacheSizeKiB: Int?) throws -> any StoreConnection {
    try Connection(conninfo: conninfo, location: location, readOnly: !allowsSave, pool: pool)
  }

  /// The schema check over `connection`, one of this store's (a migration's).
  func catalog(on connection: any StoreConnection) -> any SchemaCatalog {
    StoreSchema.Catalog(connection: connection as! Connection)
  }

  /// The server keeps its own consistency: checks that every table of the store can be read.
  func checkIntegrity() throws -> [String] {
    let connection = try Connection(conninfo: conninfo, location: location)
    var problems: [String] = []
    for table in try StoreSchema.tableNames(connection).sorted() {
      do {
        _ = try connection.scalarInt("SELECT count(*) FROM \(quoted(table))")
      } catch {
        problems.append("\(table): \(error)")
      }
    }
    return problems
  }
}

/// Checking, creating and migrating a store's tables in a database.
enum StoreSchema {
  static let metaTable = StoreLayout.metaTable
  /// The layout this version writes (meta key `format_version`).
  static let formatVersion: Int64 = 1
  /// Meta key `application`: marks the database's tables as a store of this library.
  static let application = "TRPS"

  /// Opens the store in `connection`'s database: checks it, then creates or migrates it (when
  /// `allowsSave`), and returns its identifier. A database that fails a check is not written.
  static func open(
    _ connection: Connection, entities: [EntityDescription], allowsSave: Bool
  ) throws -> UUID {
    // Read before writing anything: a foreign or newer database must stay as it is. Two
    // servers opening a new database at once take turns on the write lock below.
    for attempt in 0..<2 {
      let tables = try tableNames(connection)
      let isFresh: Bool
      if tables.contains(metaTable) {
        let marker = try connection.scalarText(
          "SELECT value FROM \(metaTable) WHERE key = 'application'")
        guard marker == application else {
          throw foreign(connection, tables)
        }
        let version =
          try connection.scalarText("SELECT value FROM \(metaTable) WHERE key = 'format_version'")
          .flatMap { Int64($0) } ?? 0
        guard version <= formatVersion else {
          throw PersistenceError(
            code: .newerStore,
            message:
              "The store at \(connection.location) was written by a newer version of this library (format \(version), this version reads up to \(formatVersion)). Update the library; the database was left untouched."
          )
        }
        isFresh = false
      } else if tables.isEmpty {
        isFresh = true
      } else {
        throw foreign(connection, tables)
      }
      if !isFresh, try isCurrent(connection, entities, tables: tables) {
        return try storeIdentifier(connection)
      }
      guard allowsSave else {
        if isFresh {
          throw PersistenceError(
            code: .schemaMismatch,
            message:
              "The database at \(connection.location) has no store yet; open it writable once to create it."
          )
        }
        try check(connection, entities: entities, migrate: false)
        return try storeIdentifier(connection)
      }
      try connection.beginWriting()
      do {
        // Another server may have made the store since the check: look again under the lock.
        let now = try tableNames(connection)
        if now != tables && attempt == 0 {
          try connection.rollback()
          continue
        }
        try create(connection, entities: entities)
        try connection.commit()
      } catch {
        try? connection.rollback()
        throw error
      }
      return try storeIdentifier(connection)
    }
    return try storeIdentifier(connection)
  }

  static func foreign(_ connection: Connection, _ tables: Set<String>) -> PersistenceError {
    PersistenceError(
      code: .notAStore,
      message:
        "The database at \(connection.location) holds tables that are not a store of this library (\(tables.sorted().prefix(5).joined(separator: ", "))). It was left untouched; give an empty database."
    )
  }

  /// Creates what is missing: the core's tables, the entities' tables, columns and indexes.
  static func create(_ connection: Connection, entities: [EntityDescription]) throws {
    try connection.execute(PostgreSQLDialect().coreTables)
    try connection.execute(
      """
      CREATE OR REPLACE FUNCTION instr(text, text) RETURNS integer
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS 'SELECT strpos($1, $2)';
      INSERT INTO \(metaTable) (key, value) VALUES ('application', '\(application)')
        ON CONFLICT (key) DO NOTHING;
      INSERT INTO \(metaTable) (key, value) VALUES ('format_version', '\(formatVersion)')
        ON CONFLICT (key) DO UPDATE SET value = excluded.value;
      """)
    let insertID = try connection.prepare(
      "INSERT INTO \(metaTable) (key, value) VALUES ('store_identifier', ?) ON CONFLICT (key) DO NOTHING"
    )
    insertID.bindText(UUID().uuidString, at: 1)
    try insertID.run()
    try check(connection, entities: entities, migrate: true)
  }

  /// Whether the store has everything ``create(_:entities:)`` makes. Reads only.
  static func isCurrent(
    _ connection: Connection, _ entities: [EntityDescription], tables: Set<String>
  ) throws -> Bool {
    let required = [metaTable] + StoreLayout.historyTables
    guard required.allSatisfy(tables.contains) else { return false }
    guard (try? storeIdentifier(connection)) != nil else { return false }
    guard try Catalog(connection: connection).hasEverything(entities) else { return false }
    let functions = try names(
      connection,
      "SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace")
    // Swift's own functions (StoreFunctions) are never asked of this engine (see
    // `evaluatesSwiftFunctions`); `instr` is the one the core's SQL needs.
    return functions.contains("instr")
  }

  /// The tables of the connection's current schema.
  static func tableNames(_ connection: Connection) throws -> Set<String> {
    try names(connection, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
  }

  static func names(_ connection: Connection, _ sql: String) throws -> Set<String> {
    let statement = try connection.prepare(sql)
    var names = Set<String>()
    while try statement.step() { names.insert(statement.text(at: 0)) }
    return names
  }

  static func storeIdentifier(_ connection: Connection) throws -> UUID {
    guard
      let text = try connection.scalarText(
        "SELECT value FROM \(metaTable) WHERE key = 'store_identifier'"),
      let identifier = UUID(uuidString: text)
    else {
      throw PersistenceError(
        code: .notAStore,
        message: "The store at \(connection.location) has no identifier; it is damaged.")
    }
    return identifier
  }

  /// Compares each entity's table with its declaration; creates missing tables and adds
  /// missing columns and indexes when `migrate` is true (``SchemaCatalog/reconcile(_:migrate:)``).
  static func check(_ connection: Connection, entities: [EntityDescription], migrate: Bool) throws {
    try Catalog(connection: connection).reconcile(entities, migrate: migrate)
  }

  /// The schema check's view of a PostgreSQL store: the connection's current schema.
  struct Catalog: SchemaCatalog {
    let connection: Connection
    var location: String { connection.location }

    func tableNames() throws -> Set<String> { try StoreSchema.tableNames(connection) }

    func indexNames() throws -> Set<String> {
      try StoreSchema.names(
        connection, "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
    }

    func columnTypes(of table: String) throws -> [String: String] {
      let info = try connection.prepare(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?"
      )
      info.bindText(table, at: 1)
      var types: [String: String] = [:]
      while try info.step() { types[info.text(at: 0)] = info.text(at: 1) }
      return types
    }

    var dialect: any SQLDialect { PostgreSQLDialect() }

    func execute(_ sql: String) throws { try connection.execute(sql) }

    func indexNames(of table: String) throws -> Set<String> {
      let statement = try connection.prepare(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ? AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE contype = 'p')"
      )
      statement.bindText(table, at: 1)
      var names = Set<String>()
      while try statement.step() { names.insert(statement.text(at: 0)) }
      return names
    }

    func texts(_ sql: String) throws -> [String] {
      let statement = try connection.prepare(sql)
      var texts: [String] = []
      while try statement.step() { texts.append(statement.text(at: 0)) }
      return texts
    }

    func notNullColumns(of table: String) throws -> Set<String> {
      let statement = try connection.prepare(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? AND is_nullable = 'NO'"
      )
      statement.bindText(table, at: 1)
      var names = Set<String>()
      while try statement.step() { names.insert(statement.text(at: 0)) }
      return names
    }

    /// PostgreSQL drops the indexes over the column with it.
    func dropColumn(_ column: String, of table: String) throws {
      try connection.execute("ALTER TABLE \(quoted(table)) DROP COLUMN \(quoted(column))")
    }
  }
}
