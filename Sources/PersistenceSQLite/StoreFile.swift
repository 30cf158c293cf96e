internal import CSQLite
import Foundation
import PersistenceCore

/// Opening, checking, creating and migrating a store file.
enum StoreFile {
  static let metaTable = StoreLayout.metaTable
  /// The on-disk format this version writes (`PRAGMA user_version`).
  static let formatVersion: Int64 = 1
  /// `PRAGMA application_id`: 'TRPS'.
  static let applicationID: Int64 = 0x5452_5053

  /// Opens the store at `path`, checks it, creates or migrates its tables, and returns the
  /// connection used and the store's identifier. Nothing is written to a file that fails a check.
  static func open(
    path: String, url: URL?, flags: Int32, entities: [EntityDescription],
    configuration: ModelConfiguration
  ) throws -> (Database, UUID) {
    var flags = flags
    if let url {
      var isDirectory: ObjCBool = false
      if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
        if isDirectory.boolValue {
          throw PersistenceError(
            code: .cannotOpen,
            message: "The store path \(url.path) is a directory. Give a file path.")
        }
      } else if configuration.allowsSave {
        let folder = url.deletingLastPathComponent()
        do {
          try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
          throw PersistenceError(
            code: .cannotOpen,
            message:
              "Cannot create the folder \(folder.path) for the store. Check its permissions.",
            cause: error as NSError)
        }
        flags |= SQLITE_OPEN_CREATE
      } else {
        throw PersistenceError(
          code: .cannotOpen, message: "There is no store at \(url.path) to open read-only.")
      }
    }
    // Two processes creating the same new store at once can meet in SQLite's rollback mode
    // before either has switched the file to WAL, where the one holding a read lock gets
    // SQLITE_BUSY at once rather than through the busy handler (waiting could deadlock). The
    // open wrote nothing then (its transaction rolled back), so it is tried again until the
    // busy timeout has passed: by then the other process has made the store, which this one
    // opens as it is.
    let deadline = ContinuousClock.now + configuration.busyTimeout
    var pause = Duration.milliseconds(1)
    while true {
      do {
        return try openOnce(
          path: path, url: url, flags: flags, entities: entities, configuration: configuration)
      } catch let error as PersistenceError
        where error.code == .busy && url != nil && ContinuousClock.now + pause < deadline
      {
        Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) / 1e18)
        pause = min(pause * 2, .milliseconds(50))
      }
    }
  }

  /// One attempt of ``open(path:url:flags:entities:configuration:)`` once the folder exists.
  private static func openOnce(
    path: String, url: URL?, flags: Int32, entities: [EntityDescription],
    configuration: ModelConfiguration
  ) throws -> (Database, UUID) {
    let database = try Database(path: path, flags: flags)
    try configure(database, configuration: configuration)

    // Read before writing anything: a foreign or newer file must stay as it is. One read
    // transaction, so that a store another process is creating is seen before or after, never
    // half made (tables without the application id, which would read as a foreign file).
    let applicationID: Int64
    let version: Int64
    let tables: Set<String>
    try database.beginReading()
    do {
      applicationID = try database.scalarInt("PRAGMA application_id") ?? 0
      version = try database.scalarInt("PRAGMA user_version") ?? 0
      tables = try tableNames(database)
      try database.commit()
    } catch {
      try? database.rollback()
      throw error
    }
    let isFresh: Bool
    if applicationID == Self.applicationID {
      guard version <= formatVersion else {
        throw PersistenceError(
          code: .newerStore,
          message:
            "The store at \(path) was written by a newer version of this library (format \(version), this version reads up to \(formatVersion)). Update the library; the file was left untouched."
        )
      }
      isFresh = false
    } else if applicationID == 0 && tables.isEmpty {
      isFresh = true
    } else {
      throw PersistenceError(
        code: .notAStore,
        message:
          "The file at \(path) is a SQLite database but not a store of this library (it holds \(tables.isEmpty ? "no tables" : tables.sorted().prefix(5).joined(separator: ", "))). It was left untouched; choose another path."
      )
    }

    if !configuration.allowsSave {
      if isFresh {
        throw PersistenceError(
          code: .cannotOpen, message: "The file at \(path) is empty: there is no store to read.")
      }
      try check(database, entities: entities, migrate: false)
      return (database, try storeIdentifier(database))
    }

    // A store that is already current needs no write: checking it in a read transaction keeps
    // opening from taking the write lock, which busy writers would otherwise wait for.
    if !isFresh, version == formatVersion, try isCurrent(database, entities) {
      if url != nil, try database.scalarText("PRAGMA journal_mode")?.lowercased() != "wal" {
        let mode = try database.prepare("PRAGMA journal_mode=WAL")
        _ = try mode.step()
      }
      return (database, try storeIdentifier(database))
    }
    if url != nil {
      let mode = try database.prepare("PRAGMA journal_mode=WAL")
      _ = try mode.step()
    }
    try database.execute("BEGIN IMMEDIATE")
    do {
      try database.execute(SQLiteDialect().coreTables)
      let insertID = try database.prepare(
        "INSERT OR IGNORE INTO \(metaTable) (key, value) VALUES ('store_identifier', ?)")
      insertID.bindText(UUID().uuidString, at: 1)
      try insertID.run()
      try check(database, entities: entities, migrate: true)
      try database.execute(
        "PRAGMA application_id = \(Self.applicationID); PRAGMA user_version = \(formatVersion)"
      )
      try database.execute("COMMIT")
    } catch {
      try? database.execute("ROLLBACK")
      throw error
    }
    return (database, try storeIdentifier(database))
  }

  /// Removes the store file at `url`, and SQLite's files beside it, if nothing was ever
  /// committed to it: a file that is empty, or a store of this library that never issued a
  /// history token. Used to take back a store that a failed write created (as `trips` does), so
  /// that a mistyped path leaves nothing behind.
  ///
  /// The check and the removal happen under the store's write lock, so a store that another
  /// process created at the same path and wrote to is kept; a process that has it open and
  /// writes after the removal gets an error (``Database/beginWriting()`` checks the file is
  /// still at its path), not a write into a file no one can open. A foreign file, or one that
  /// cannot be read or locked within `busyTimeout`, is kept.
  ///
  /// - Returns: Whether the file was removed.
  static func removeIfUnwritten(at url: URL, busyTimeout: Duration) -> Bool {
    let path = url.path
    // A regular file only: never a device (`/dev/null` reads as an empty database), a folder
    // or a socket, whatever a caller names.
    var status = stat()
    guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG,
      let database = try? Database(path: path, flags: SQLITE_OPEN_READWRITE)
    else { return false }
    try? configure(database, configuration: ModelConfiguration(url: url, busyTimeout: busyTimeout))
    guard (try? database.execute("BEGIN IMMEDIATE")) != nil else { return false }
    defer { try? database.rollback() }
    guard !database.fileHasMoved, let tables = try? tableNames(database) else { return false }
    let unwritten: Bool
    if tables.isEmpty {
      let pages = (try? database.scalarInt("PRAGMA page_count")) ?? nil
      unwritten = (pages ?? 1) <= 1
    } else {
      let application = (try? database.scalarInt("PRAGMA application_id")) ?? nil
      let issued = try? database.lastIssuedHistoryToken()
      unwritten =
        application == applicationID && tables.contains("_history_transactions") && issued == 0
    }
    guard unwritten else { return false }
    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    return true
  }

  /// The path to open a store read-only with. WAL readers need SQLite's shared-memory file
  /// beside the store; in a folder this process cannot write, where that file cannot be made,
  /// the store is opened immutable instead (read as it is, without locks), unless its
  /// write-ahead log holds commits not yet in the file, which an immutable reader would miss.
  static func readOnlyPath(for url: URL) throws -> String {
    let path = url.path
    let folder = url.deletingLastPathComponent().path
    let manager = FileManager.default
    guard manager.fileExists(atPath: path), access(folder, W_OK) != 0,
      !manager.fileExists(atPath: path + "-shm")
    else { return path }
    let log = (try? manager.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
    guard log == 0 else {
      throw PersistenceError(
        code: .cannotOpen,
        message:
          "The store at \(path) is in a folder that cannot be written, and its write-ahead log (\(path)-wal) holds commits not yet in the file. Open it once where the folder can be written, so that SQLite folds the log in."
      )
    }
    let encoded = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path
    return "file:\(encoded)?immutable=1"
  }

  /// Whether the store already has everything `open` would create: the history tables, the
  /// store identifier, and every entity's table, columns and indexes. Reads only.
  static func isCurrent(_ database: Database, _ entities: [EntityDescription]) throws -> Bool {
    let tables = try tableNames(database)
    let required = [metaTable] + StoreLayout.historyTables
    guard required.allSatisfy(tables.contains) else { return false }
    guard (try? storeIdentifier(database)) != nil else { return false }
    return try Catalog(database: database).hasEverything(entities)
  }

  /// Sets up a connection: busy timeout, cache, synchronous mode, foreign keys enforced (so
  /// relationships hold whichever connection writes), and the SQL functions and collations
  /// predicates use.
  static func configure(_ database: Database, configuration: ModelConfiguration) throws {
    let timeout = configuration.busyTimeout.components
    let milliseconds = timeout.seconds * 1000 + timeout.attoseconds / 1_000_000_000_000_000
    sqlite3_busy_timeout(database.handle, Int32(clamping: milliseconds))
    try database.execute(
      "PRAGMA cache_size = -\(max(configuration.cacheSizeKiB, 64)); PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON"
    )
    if let pages = configuration.maximumPageCount {
      _ = try database.scalarInt("PRAGMA max_page_count = \(max(pages, 1))")
    }
    try SQLFunctions.register(on: database)
  }

  static func tableNames(_ database: Database) throws -> Set<String> {
    let statement = try database.prepare(
      "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    var names = Set<String>()
    while try statement.step() { names.insert(statement.text(at: 0)) }
    return names
  }

  static func storeIdentifier(_ database: Database) throws -> UUID {
    let statement = try database.prepare(
      "SELECT value FROM \(metaTable) WHERE key = 'store_identifier'")
    guard try statement.step(), let identifier = UUID(uuidString: statement.text(at: 0)) else {
      throw PersistenceError(
        code: .notAStore, message: "The store at \(database.path) has no identifier; it is damaged."
      )
    }
    return identifier
  }

  /// Compares each entity's table with its declaration; creates missing tables and adds
  /// missing columns and indexes when `migrate` is true (``SchemaCatalog/reconcile(_:migrate:)``).
  static func check(_ database: Database, entities: [EntityDescription], migrate: Bool) throws {
    try Catalog(database: database).reconcile(entities, migrate: migrate)
  }

  /// The schema check's view of a SQLite store.
  struct Catalog: SchemaCatalog {
    let database: Database
    var location: String { database.path }

    func tableNames() throws -> Set<String> { try StoreFile.tableNames(database) }

    func indexNames() throws -> Set<String> {
      let statement = try database.prepare("SELECT name FROM sqlite_schema WHERE type = 'index'")
      var names = Set<String>()
      while try statement.step() { names.insert(statement.text(at: 0)) }
      return names
    }

    func columnTypes(of table: String) throws -> [String: String] {
      let info = try database.prepare("PRAGMA table_info(\(quoted(table)))")
      var types: [String: String] = [:]
      while try info.step() { types[info.text(at: 1)] = info.text(at: 2).uppercased() }
      return types
    }

    var dialect: any SQLDialect { SQLiteDialect() }

    func execute(_ sql: String) throws { try database.execute(sql) }

    func indexNames(of table: String) throws -> Set<String> {
      let statement = try database.prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL"
      )
      statement.bindText(table, at: 1)
      var names = Set<String>()
      while try statement.step() { names.insert(statement.text(at: 0)) }
      return names
    }

    func texts(_ sql: String) throws -> [String] {
      let statement = try database.prepare(sql)
      var texts: [String] = []
      while try statement.step() { texts.append(statement.text(at: 0)) }
      return texts
    }

    func notNullColumns(of table: String) throws -> Set<String> {
      let info = try database.prepare("PRAGMA table_info(\(quoted(table)))")
      var names = Set<String>()
      while try info.step() {
        if info.int64(at: 3) != 0 { names.insert(info.text(at: 1)) }
      }
      return names
    }

    /// Drops the indexes over the column first: SQLite refuses to drop an indexed column.
    func dropColumn(_ column: String, of table: String) throws {
      let indexes = try database.prepare(
        "SELECT DISTINCT list.name FROM pragma_index_list(?1) AS list, pragma_index_info(list.name) AS info WHERE info.name = ?2 AND list.origin = 'c'"
      )
      indexes.bindText(table, at: 1)
      indexes.bindText(column, at: 2)
      var names: [String] = []
      while try indexes.step() { names.append(indexes.text(at: 0)) }
      for name in names { try database.execute("DROP INDEX \(quoted(name))") }
      try database.execute("ALTER TABLE \(quoted(table)) DROP COLUMN \(quoted(column))")
    }
  }
}
