import Foundation

/// Where and how a ``ModelContainer`` keeps its store.
public struct ModelConfiguration: Sendable, Hashable {
  /// The store file, or nil for an in-memory store.
  public var url: URL?
  /// Whether the store lives in memory only, gone when the container is.
  public var isStoredInMemoryOnly: Bool { url == nil }
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

  /// A store in the file at `url`; its folder is created if needed.
  public init(
    url: URL, allowsSave: Bool = true, busyTimeout: Duration = .seconds(5),
    cacheSizeKiB: Int = 64 * 1024
  ) {
    self.url = url
    self.allowsSave = allowsSave
    self.busyTimeout = busyTimeout
    self.cacheSizeKiB = cacheSizeKiB
  }

  /// The persistent default store, as SwiftData's `ModelConfiguration()`: the file
  /// `default.store` in the user's data folder (`$XDG_DATA_HOME`, else `~/.local/share`), never
  /// the current directory, so that a SwiftData app ported here keeps its data across runs.
  /// With `isStoredInMemoryOnly: true`, a store in memory only, shared by the container's
  /// contexts and gone with the container.
  public init(isStoredInMemoryOnly: Bool = false) {
    self.url = isStoredInMemoryOnly ? nil : Self.defaultStoreURL()
    self.allowsSave = true
    self.busyTimeout = .seconds(5)
    self.cacheSizeKiB = 64 * 1024
  }

  /// `$XDG_DATA_HOME/default.store`, else `~/.local/share/default.store`.
  public static func defaultStoreURL(
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) -> URL {
    dataFolder(environment: environment).appendingPathComponent("default.store")
  }

  /// The user's data folder (XDG Base Directory): `$XDG_DATA_HOME`, else `~/.local/share`.
  public static func dataFolder(
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) -> URL {
    if let data = environment["XDG_DATA_HOME"], !data.isEmpty {
      return URL(fileURLWithPath: data)
    }
    let home =
      environment["HOME"].map { URL(fileURLWithPath: $0) }
      ?? FileManager.default.homeDirectoryForCurrentUser
    return home.appendingPathComponent(".local/share")
  }
}
