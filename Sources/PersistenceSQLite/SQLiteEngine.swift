internal import CSQLite
import Foundation
import PersistenceCore
import Synchronization

/// The embedded engine: a store is one SQLite file in WAL mode (one writer at a time, readers
/// never blocked, other processes welcome), or a database in memory.
///
/// `ModelContainer(for:configurations:)` from the `Persistence` module uses it for a file URL
/// (a path, or a `file:` URL) and for in-memory stores.
public struct SQLiteEngine: StoreEngine {
  /// The engine.
  public init() {}

  /// Opens the store file (creating its folder and the file when the configuration allows
  /// saves), or a new in-memory database.
  ///
  /// - Throws: `PersistenceError` with `notAStore` for a file that
  ///   is not SQLite or not a store of this library, `newerStore` for
  ///   one a newer version wrote, `cannotOpen` for a path that cannot
  ///   be used; the file is left untouched in each case.
  /// Removes the store file and SQLite's files beside it (`-wal`, `-shm`, `-journal`) if the
  /// file is empty or a store of this library with no transaction committed, taking the write
  /// lock first (waiting up to the configuration's `busyTimeout`); a store in memory, a
  /// foreign file or one another process is writing is kept.
  public func removeStoreIfUnwritten(_ configuration: ModelConfiguration) -> Bool {
    guard let url = configuration.storeURL else { return false }
    return StoreFile.removeIfUnwritten(at: url, busyTimeout: configuration.busyTimeout)
  }

  public func openStore(
    _ configuration: ModelConfiguration, entities: [EntityDescription]
  ) throws -> any OpenStore {
    let path: String
    let flags: Int32
    if let url = configuration.storeURL {
      path = configuration.allowsSave ? url.path : try StoreFile.readOnlyPath(for: url)
      flags = configuration.allowsSave ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY
    } else {
      path = "file:/persistence-\(UUID().uuidString)?vfs=memdb"
      flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
    }
    let (database, identifier) = try StoreFile.open(
      path: path, url: configuration.storeURL, flags: flags, entities: entities,
      configuration: configuration)
    return SQLiteStore(
      path: path, flags: flags, configuration: configuration, identifier: identifier,
      anchor: configuration.storeURL == nil ? database : nil)
  }
}

/// An open SQLite store: where new connections open, and how they are set up.
final class SQLiteStore: MigratableStore {
  let path: String
  let flags: Int32
  let configuration: ModelConfiguration
  let identifier: UUID
  /// Keeps an in-memory database alive while the store lives (it goes with its last
  /// connection). Never used after opening, only kept.
  private let anchor: Mutex<Database?>

  init(
    path: String, flags: Int32, configuration: ModelConfiguration, identifier: UUID,
    anchor: sending Database?
  ) {
    self.path = path
    self.flags = flags
    self.configuration = configuration
    self.identifier = identifier
    self.anchor = Mutex(anchor)
  }

  /// Whether the store was opened immutable: read-only in a folder this process cannot write,
  /// where SQLite cannot make its shared-memory file.
  var isImmutable: Bool { path.hasSuffix("?immutable=1") }

  func makeConnection(cacheSizeKiB: Int?) throws -> any StoreConnection {
    let database = try Database(path: path, flags: flags)
    var configuration = configuration
    if let cacheSizeKiB { configuration.cacheSizeKiB = cacheSizeKiB }
    try StoreFile.configure(database, configuration: configuration)
    return database
  }

  /// The schema check over `connection`, one of this store's (a migration's).
  func catalog(on connection: any StoreConnection) -> any SchemaCatalog {
    StoreFile.Catalog(database: connection as! Database)
  }

  /// `PRAGMA integrity_check`.
  func checkIntegrity() throws -> [String] {
    let database = try Database(path: path, flags: flags)
    try StoreFile.configure(database, configuration: configuration)
    var problems: [String] = []
    let check = try database.prepareStatement("PRAGMA integrity_check")
    while try check.step() {
      let line = check.text(at: 0)
      if line != "ok" { problems.append(line) }
    }
    return problems
  }
}
