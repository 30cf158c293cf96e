import Foundation

/// Where and how a ``ModelContainer`` keeps its store, with SwiftData's initializers:
/// `ModelConfiguration(schema: schema, isStoredInMemoryOnly: false)` as Xcode's template writes
/// it, `ModelConfiguration(url:)`, `ModelConfiguration(isStoredInMemoryOnly: true)`.
///
/// `groupContainer` and `cloudKitDatabase` are accepted, so that a SwiftData app's
/// configuration compiles, and have no effect here: a store is a file or a PostgreSQL
/// database named by ``url``, and sync between machines is `trips sync`'s, not CloudKit's.
public struct ModelConfiguration: Sendable, Hashable {
  /// Where an app group's store would be kept on Apple's systems. Accepted; no effect here.
  public enum GroupContainer: Sendable, Hashable {
    /// The app's group, if it has one.
    case automatic
    /// The group with this identifier.
    case identifier(String)
    /// No group.
    case none
  }

  /// Which CloudKit database would mirror the store on Apple's systems. Accepted; no effect
  /// here.
  public enum CloudKitDatabase: Sendable, Hashable {
    /// The app's container, if it has one.
    case automatic
    /// The private database of this container.
    case `private`(String)
    /// No CloudKit.
    case none
  }

  /// The configuration's name: `default` unless one is given. A persistent store given a
  /// name and no URL is the file `<name>.store` in the user's data folder (a `/` in the name
  /// made `_`: the name never reaches another folder).
  public var name: String
  /// The models this configuration's store holds, beside those its container is given; nil
  /// for the container's.
  public var schema: Schema?
  /// Accepted for SwiftData's sake; no effect here.
  public var groupContainer: GroupContainer
  /// Accepted for SwiftData's sake; no effect here.
  public var cloudKitDatabase: CloudKitDatabase
  /// The store file or database, as SwiftData's: `/dev/null` for a store in memory only.
  /// Set once, with ``isStoredInMemoryOnly``, so that the two never disagree.
  public private(set) var url: URL
  /// Whether the store lives in memory only, gone when the container is.
  public private(set) var isStoredInMemoryOnly: Bool
  /// Where the store is kept; nil for a store in memory only. What an engine opens.
  public var storeURL: URL? { isStoredInMemoryOnly ? nil : url }
  /// Whether contexts may save. A store opened with `false` is opened read-only.
  public var allowsSave: Bool
  /// How long a writer waits for another writer's lock before failing with
  /// ``PersistenceError/Code/busy``.
  public var busyTimeout: Duration
  /// SQLite's page cache per connection, in KiB. A large cache halves the time of bulk inserts.
  public var cacheSizeKiB: Int
  /// The most pages the store file may grow to (`PRAGMA max_page_count`); nil for SQLite's
  /// limit. A save that would exceed it fails with ``PersistenceError/Code/storeFull`` and
  /// writes nothing, as on a full disk.
  public var maximumPageCount: Int?

  /// A store in the file at `url` (its folder is created if needed), or the PostgreSQL
  /// database a `postgresql://` URL names, as SwiftData's `ModelConfiguration(url:)`.
  /// `/dev/null` is a store in memory only, as in SwiftData.
  public init(
    _ name: String? = nil, schema: Schema? = nil, url: URL, allowsSave: Bool = true,
    cloudKitDatabase: CloudKitDatabase = .automatic
  ) {
    self.name = Self.name(name)
    self.schema = schema
    self.groupContainer = .automatic
    self.cloudKitDatabase = cloudKitDatabase
    self.url = url
    self.isStoredInMemoryOnly = url.isFileURL && url.standardizedFileURL.path == "/dev/null"
    self.allowsSave = allowsSave
    self.busyTimeout = .seconds(5)
    self.cacheSizeKiB = 64 * 1024
  }

  /// A store at `url` with SQLite's settings: how long a writer waits for another's lock, and
  /// the page cache per connection.
  public init(
    url: URL, allowsSave: Bool = true, busyTimeout: Duration, cacheSizeKiB: Int = 64 * 1024
  ) {
    self.init(url: url, allowsSave: allowsSave)
    self.busyTimeout = busyTimeout
    self.cacheSizeKiB = cacheSizeKiB
  }

  /// The persistent default store, as SwiftData's `ModelConfiguration()`: the file
  /// `default.store` (`<name>.store` when a name is given) in the user's data folder
  /// (`$XDG_DATA_HOME`, else `~/.local/share`), never the current directory, so that a
  /// SwiftData app ported here keeps its data across runs. With `isStoredInMemoryOnly: true`,
  /// a store in memory only, shared by the container's contexts and gone with the container.
  public init(
    _ name: String? = nil, schema: Schema? = nil, isStoredInMemoryOnly: Bool = false,
    allowsSave: Bool = true, groupContainer: GroupContainer = .automatic,
    cloudKitDatabase: CloudKitDatabase = .automatic
  ) {
    self.name = Self.name(name)
    self.schema = schema
    self.groupContainer = groupContainer
    self.cloudKitDatabase = cloudKitDatabase
    self.url =
      isStoredInMemoryOnly
      ? URL(fileURLWithPath: "/dev/null")
      : Self.dataFolder().appendingPathComponent(
        Self.name(name).replacingOccurrences(of: "/", with: "_") + ".store")
    self.isStoredInMemoryOnly = isStoredInMemoryOnly
    self.allowsSave = allowsSave
    self.busyTimeout = .seconds(5)
    self.cacheSizeKiB = 64 * 1024
  }

  /// A configuration's name: `default` for none and for an empty one.
  private static func name(_ given: String?) -> String {
    guard let given, !given.isEmpty else { return "default" }
    return given
  }

  /// `$XDG_DATA_HOME/default.store`, else `~/.local/share/default.store`.
  public static func defaultStoreURL(
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) -> URL {
    dataFolder(environment: environment).appendingPathComponent("default.store")
  }

  /// The user's data folder (XDG Base Directory): `$XDG_DATA_HOME` when it is an absolute
  /// path (a relative one is ignored, as the specification says), else `~/.local/share`.
  public static func dataFolder(
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) -> URL {
    if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
      return URL(fileURLWithPath: data)
    }
    let home =
      environment["HOME"].map { URL(fileURLWithPath: $0) }
      ?? FileManager.default.homeDirectoryForCurrentUser
    return home.appendingPathComponent(".local/share")
  }
}
