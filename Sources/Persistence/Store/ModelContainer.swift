import CSQLite
import Foundation
import Synchronization

/// Owns a store and the schema of its models; hands out connections to ``ModelContext``s.
///
/// Opening a container creates the store, or checks and migrates an existing one:
/// - a file that is not SQLite, or a SQLite file that is not a store of this library, is
///   refused with ``PersistenceError/Code/notAStore`` and left untouched;
/// - a file written by a newer version of this library, or with columns the models do not
///   declare (a newer schema), is refused with ``PersistenceError/Code/newerStore``, untouched;
/// - an attribute added to a model is added to the table in place, existing rows taking the
///   model's default value (`nil` for optionals).
///
/// The store uses WAL: one writer at a time, readers never blocked, other processes welcome.
/// `ModelContainer` is `Sendable`; share it between tasks and give each its own context.
public final class ModelContainer: Sendable {
  /// The on-disk format this version writes (`PRAGMA user_version`).
  static let formatVersion: Int64 = 1
  /// `PRAGMA application_id`: 'TRPS'.
  static let applicationID: Int64 = 0x5452_5053

  /// The configuration the store was opened with.
  public let configuration: ModelConfiguration
  /// The identity of the store, kept in the file; history tokens carry it.
  public let storeIdentifier: UUID
  let entities: [ObjectIdentifier: EntityDescription]
  let openPath: String
  let openFlags: Int32
  /// Keeps an in-memory store alive while the container lives.
  private let anchor: Mutex<Database?>
  let broadcaster = ChangeBroadcaster()

  /// Opens (creating if needed) a store for the given model types.
  ///
  /// - Throws: ``PersistenceError`` when the store cannot be opened, is not a store, or was
  ///   written by a newer schema; the file is not modified in those cases.
  public convenience init(
    for types: any PersistentModel.Type..., configurations: ModelConfiguration...
  ) throws {
    try self.init(for: types, configuration: configurations.first ?? ModelConfiguration())
  }

  /// Opens (creating if needed) a store for the given model types with one configuration.
  public init(for types: [any PersistentModel.Type], configuration: ModelConfiguration) throws {
    self.configuration = configuration
    var entities: [ObjectIdentifier: EntityDescription] = [:]
    var names = Set<String>()
    for type in types {
      let entity = try EntityDescription(type)
      guard names.insert(entity.name.lowercased()).inserted else {
        throw PersistenceError(
          code: .invalidValue, message: "Two model types use the table name '\(entity.name)'.")
      }
      entities[entity.modelType] = entity
    }
    self.entities = entities
    if let url = configuration.url {
      openPath = configuration.allowsSave ? url.path : try StoreFile.readOnlyPath(for: url)
      openFlags = configuration.allowsSave ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY
    } else {
      openPath = "file:/persistence-\(UUID().uuidString)?vfs=memdb"
      openFlags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
    }
    let (database, identifier) = try StoreFile.open(
      path: openPath, url: configuration.url, flags: openFlags, entities: Array(entities.values),
      configuration: configuration)
    storeIdentifier = identifier
    anchor = Mutex(configuration.url == nil ? database : nil)
  }

  /// A new connection to the store, configured; `cacheSizeKiB` overrides the configuration's
  /// page cache (observers read little and keep their own connection each).
  func makeConnection(cacheSizeKiB: Int? = nil) throws -> Database {
    let database = try Database(path: openPath, flags: openFlags)
    var configuration = configuration
    if let cacheSizeKiB { configuration.cacheSizeKiB = cacheSizeKiB }
    try StoreFile.configure(database, configuration: configuration)
    return database
  }

  func entity<Model: PersistentModel>(for _: Model.Type) throws -> EntityDescription {
    guard let entity = entities[ObjectIdentifier(Model.self)] else {
      throw PersistenceError(
        code: .unknownModel,
        message: "\(Model.self) is not part of this container. Pass it to ModelContainer(for:).")
    }
    return entity
  }

  /// Checks the store file with SQLite's `PRAGMA integrity_check` and that every history change
  /// names an existing transaction. Returns the problems found; empty when the store is sound.
  ///
  /// Cost: reads the whole file.
  public func checkIntegrity() throws -> [String] {
    let database = try makeConnection()
    var problems: [String] = []
    let check = try database.prepare("PRAGMA integrity_check")
    while try check.step() {
      let line = check.text(at: 0)
      if line != "ok" { problems.append(line) }
    }
    let orphans =
      try database.scalarInt(
        "SELECT count(*) FROM _history_changes WHERE token NOT IN (SELECT token FROM _history_transactions)"
      ) ?? 0
    if orphans > 0 { problems.append("\(orphans) history changes have no transaction") }
    return problems
  }

  /// Whether the store was opened immutable: read-only in a folder this process cannot write,
  /// where SQLite cannot make its shared-memory file. Such a store is read as it was when
  /// opened: changes by other processes are not seen.
  public var isImmutable: Bool { openPath.hasSuffix("?immutable=1") }

  /// The table names of the container's models.
  public var entityNames: [String] { entities.values.map(\.name).sorted() }
}
