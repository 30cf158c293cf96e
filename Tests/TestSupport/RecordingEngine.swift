import Foundation
import PersistenceCore
import Synchronization

/// A store engine that runs another engine and records every query the core runs through it
/// (its SQL and the values bound when it first stepped), so that a test can ask the engine
/// how it plans each of them (``RecordingEngine/plans(where:)``).
///
/// Writes run one at a time (``StoreConnection/runBatch(_:count:answer:binding:)``'s default),
/// whatever the engine does; everything else goes to the engine's own connection.
public final class RecordingEngine: StoreEngine {
  /// One query as it ran.
  public struct Query: Sendable, Hashable {
    /// The SQL as the core wrote it.
    public let sql: String
    /// The values bound to `?` 1, 2, … when it ran.
    public let bindings: [SQLValue]
  }

  let inner: any StoreEngine
  let log = Mutex<[Query]>([])
  let connections = Mutex<[RecordingConnection]>([])

  /// Records what runs on `engine`.
  public init(_ engine: any StoreEngine) { inner = engine }

  public func openStore(
    _ configuration: ModelConfiguration, entities: [EntityDescription]
  ) throws -> any OpenStore {
    RecordingStore(inner: try inner.openStore(configuration, entities: entities), engine: self)
  }

  /// The queries recorded since the last ``clear()``, in the order they ran, each once.
  public var queries: [Query] {
    var seen: Set<Query> = []
    return log.withLock { $0 }.filter { seen.insert($0).inserted }
  }

  /// Forgets the queries recorded so far.
  public func clear() { log.withLock { $0.removeAll() } }

  /// The engine's plan of each recorded `SELECT` that `include` accepts, asked on a connection
  /// of the store after `SET name = value` for each of `settings` (reset afterwards): on
  /// PostgreSQL, `enable_seqscan` off makes a sequential scan in a plan mean that no index could
  /// serve it, whatever the table's size.
  public func plans(
    where include: (String) -> Bool = { _ in true }, settings: [String: String] = [:]
  ) throws -> [(sql: String, plan: [String])] {
    guard let connection = connections.withLock({ $0.last }) else { return [] }
    let selects = queries.filter { $0.sql.hasPrefix("SELECT") && include($0.sql) }
    for (name, value) in settings { try connection.inner.execute("SET \(name) = \(value)") }
    defer { for name in settings.keys { try? connection.inner.execute("RESET \(name)") } }
    return try selects.map {
      (sql: $0.sql, plan: try connection.inner.queryPlan($0.sql, bindings: $0.bindings))
    }
  }
}

final class RecordingStore: OpenStore {
  let inner: any OpenStore
  let engine: RecordingEngine

  init(inner: any OpenStore, engine: RecordingEngine) {
    self.inner = inner
    self.engine = engine
  }

  var identifier: UUID { inner.identifier }
  var isImmutable: Bool { inner.isImmutable }
  func checkIntegrity() throws -> [String] { try inner.checkIntegrity() }

  func makeConnection(cacheSizeKiB: Int?) throws -> any StoreConnection {
    let connection = RecordingConnection(
      inner: try inner.makeConnection(cacheSizeKiB: cacheSizeKiB), engine: engine)
    engine.connections.withLock { $0.append(connection) }
    return connection
  }
}

final class RecordingConnection: StoreConnection, @unchecked Sendable {
  let inner: any StoreConnection
  let engine: RecordingEngine

  init(inner: any StoreConnection, engine: RecordingEngine) {
    self.inner = inner
    self.engine = engine
  }

  func execute(_ sql: String) throws { try inner.execute(sql) }
  func prepare(_ sql: String) throws -> any StoreStatement {
    RecordingStatement(inner: try inner.prepare(sql), sql: sql, engine: engine)
  }
  func cachedStatement(_ sql: String) throws -> any StoreStatement {
    RecordingStatement(inner: try inner.cachedStatement(sql), sql: sql, engine: engine)
  }
  func cachedInsert(_ sql: String, keyColumn: String) throws -> any StoreStatement {
    RecordingStatement(
      inner: try inner.cachedInsert(sql, keyColumn: keyColumn), sql: sql, engine: engine)
  }
  var lastInsertedKey: Int64 { get throws { try inner.lastInsertedKey } }
  var changedRowCount: Int { inner.changedRowCount }
  var isInTransaction: Bool { inner.isInTransaction }
  func beginWriting() throws { try inner.beginWriting() }
  func beginReading() throws { try inner.beginReading() }
  func commit() throws { try inner.commit() }
  func rollback() throws { try inner.rollback() }
  func collation(for comparator: String.StandardComparator) throws -> String {
    try inner.collation(for: comparator)
  }
  func lastIssuedHistoryToken() throws -> Int64 { try inner.lastIssuedHistoryToken() }
  var tombstoneValueParameter: String { inner.tombstoneValueParameter }
  func keyListCondition(_ column: String) -> String { inner.keyListCondition(column) }
  func keyListText(_ keys: [Int64]) -> String { inner.keyListText(keys) }
  func queryPlan(_ sql: String, bindings: [SQLValue]) throws -> [String] {
    try inner.queryPlan(sql, bindings: bindings)
  }
  func externalChangeCounter() throws -> Int64 { try inner.externalChangeCounter() }
  var evaluatesSwiftFunctions: Bool { inner.evaluatesSwiftFunctions }
  var isReusable: Bool { inner.isReusable }
  func waitForExternalChange(timeout: Duration) { inner.waitForExternalChange(timeout: timeout) }
}

final class RecordingStatement: StoreStatement {
  let inner: any StoreStatement
  let sql: String
  let engine: RecordingEngine
  var bindings: [Int32: SQLValue] = [:]
  var recorded = false

  init(inner: any StoreStatement, sql: String, engine: RecordingEngine) {
    self.inner = inner
    self.sql = sql
    self.engine = engine
  }

  func bindNull(_ index: Int32) {
    bindings[index] = .null
    inner.bindNull(index)
  }
  func bindInt64(_ value: Int64, at index: Int32) {
    bindings[index] = .integer(value)
    inner.bindInt64(value, at: index)
  }
  func bindDouble(_ value: Double, at index: Int32) {
    bindings[index] = .real(value)
    inner.bindDouble(value, at: index)
  }
  func bindText(_ value: String, at index: Int32) {
    bindings[index] = .text(value)
    inner.bindText(value, at: index)
  }
  func bindBytes(_ bytes: UnsafeRawBufferPointer, at index: Int32) {
    bindings[index] = .blob(Data(bytes))
    inner.bindBytes(bytes, at: index)
  }
  func step() throws -> Bool {
    if !recorded {
      recorded = true
      let count = bindings.keys.max() ?? 0
      let query = RecordingEngine.Query(
        sql: sql, bindings: count == 0 ? [] : (1...count).map { bindings[$0] ?? .null })
      engine.log.withLock { $0.append(query) }
    }
    return try inner.step()
  }
  func reset() {
    bindings = [:]
    recorded = false
    inner.reset()
  }
  func rewind() {
    recorded = false
    inner.rewind()
  }
  func returnsTableColumns() { inner.returnsTableColumns() }

  func storage(at index: Int32) -> ColumnStorage { inner.storage(at: index) }
  func int64(at index: Int32) -> Int64 { inner.int64(at: index) }
  func double(at index: Int32) -> Double { inner.double(at: index) }
  func text(at index: Int32) -> String { inner.text(at: index) }
  func bytes(at index: Int32) -> UnsafeRawBufferPointer { inner.bytes(at: index) }
}

extension RecordingEngine {
  /// The tables (or aliases) a plan reads whole: SQLite's `SCAN t` (a table's rows or all of an
  /// index); PostgreSQL's `Seq Scan on t`, and an `Index Scan` or `Index Only Scan` with no
  /// `Index Cond` (all of an index). A table-valued function's rows (`json_each`) are not a
  /// table.
  public static func scannedTables(in plan: [String]) -> [String] {
    var scanned: [String] = []
    // PostgreSQL: the index scan whose node is open, until a line shows its condition.
    var openIndexScan: String?
    for line in plan {
      let words = line.split(separator: " ").map(String.init)
      if words.first == "SCAN", words.count > 1 {
        if !["json_each", "CONSTANT"].contains(words[1]) { scanned.append(words[1]) }
        continue
      }
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      let isNode = trimmed.hasPrefix("->") || !line.hasPrefix(" ")
      if isNode {
        if let table = openIndexScan { scanned.append(table) }
        openIndexScan = nil
      }
      if let range = line.range(of: "Seq Scan on ") {
        scanned += line[range.upperBound...].split(separator: " ").first.map { [String($0)] } ?? []
      } else if line.contains("Index Scan") || line.contains("Index Only Scan"),
        !line.contains("Bitmap"), let range = line.range(of: " on ")
      {
        openIndexScan = line[range.upperBound...].split(separator: " ").first.map(String.init)
      } else if trimmed.hasPrefix("Index Cond:") {
        openIndexScan = nil
      }
    }
    if let table = openIndexScan { scanned.append(table) }
    return scanned
  }
}
