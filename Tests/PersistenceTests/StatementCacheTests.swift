import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistencePostgreSQL
@testable import PersistenceSQLite

/// The bound on the statements a connection keeps, and the `IN` lists that would otherwise
/// make one statement per length.
@Suite("Statement caches")
struct StatementCacheTests {
  final class Prepared {
    let sql: String
    init(_ sql: String) { self.sql = sql }
  }

  @Test("the least recently used statement is dropped first, never one still held")
  func leastRecentlyUsed() {
    var cache = StatementCache<Prepared>(capacity: 3)
    for sql in ["a", "b", "c"] { #expect(cache.insert(Prepared(sql), for: sql).isEmpty) }
    // "a" is used again: "b" is now the least recently used.
    #expect(cache.statement(for: "a")?.sql == "a")
    #expect(cache.insert(Prepared("d"), for: "d").map(\.sql) == ["b"])
    #expect(cache.statement(for: "b") == nil)
    #expect(cache.count == 3)
    // "c" is held by a caller (a fetch mid-step): "a" goes instead, though used later.
    do {
      let held = cache.statement(for: "c")
      _ = cache.statement(for: "a")
      _ = cache.statement(for: "d")
      #expect(cache.insert(Prepared("e"), for: "e").map(\.sql) == ["a"])
      #expect(cache.statement(for: "c") === held)
    }
    // Every statement held: the cache grows past its capacity rather than drop one in use.
    do {
      let all = ["c", "d", "e"].compactMap { cache.statement(for: $0) }
      #expect(cache.insert(Prepared("f"), for: "f").isEmpty)
      #expect(cache.count == 4)
      #expect(all.count == 3)
    }
    // Released, the oldest go on the next insert until the capacity holds again.
    #expect(Set(cache.insert(Prepared("g"), for: "g").map(\.sql)) == ["c", "d"])
    #expect(cache.count == 3)
    // Replacing a statement for the same SQL keeps one.
    _ = cache.insert(Prepared("g2"), for: "g")
    #expect(cache.statement(for: "g")?.sql == "g2")
    #expect(cache.count == 3)
  }

  @Test("a SQLite connection keeps at most its capacity; a dropped statement still held runs")
  func sqliteBound() throws {
    let folder = TemporaryDirectory()
    // SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
    let database = try Database(path: folder.file("cache.sqlite").path, flags: 2 | 4)
    let first = try database.cachedStatement("SELECT 0")
    for value in 1...1000 {
      let statement = try database.cachedStatement("SELECT \(value)")
      #expect(try statement.step())
      #expect(statement.int64(at: 0) == Int64(value))
    }
    let capacity = StatementCache<PersistenceSQLite.Statement>.defaultCapacity
    #expect(database.cachedStatementCount == capacity)
    // "SELECT 0" was dropped from the cache long ago, but its holder may still run it.
    #expect(try first.step())
    #expect(first.int64(at: 0) == 0)
    // The most recent are still the cached ones: asked again, the same statement.
    let again = try database.cachedStatement("SELECT 1000")
    #expect(again === (try database.cachedStatement("SELECT 1000")))
  }

  @Test(
    "a PostgreSQL connection keeps at most its capacity of statements and deallocates the dropped ones on the server"
  )
  func postgreSQLBound() throws {
    let cluster = try PostgreSQLCluster.shared.get()
    let url = try cluster.makeDatabase("cachebound")
    let connection = try Connection(conninfo: url, location: url)
    func preparedOnServer() throws -> Int64 {
      let count = try connection.prepare("SELECT count(*) FROM pg_prepared_statements")
      #expect(try count.step())
      return count.int64(at: 0)
    }
    let capacity = StatementCache<PersistencePostgreSQL.Statement>.defaultCapacity
    for value in 1...(capacity + 100) {
      let statement = try connection.cachedStatement("SELECT \(value)::bigint + ?")
      // Run twice: the second run prepares it on the server.
      for _ in 0..<2 {
        statement.reset()
        statement.bindInt64(1, at: 1)
        #expect(try statement.step())
        #expect(statement.int64(at: 0) == Int64(value) + 1)
      }
    }
    #expect(connection.cachedStatementCount == capacity)
    let before = try preparedOnServer()
    #expect(before <= Int64(capacity))
    // Inside a transaction the dropped ones wait for its end (an aborted one would refuse
    // the command), then go.
    try connection.beginReading()
    for value in 1...10 {
      let statement = try connection.cachedStatement("SELECT \(value)::bigint * ?")
      for _ in 0..<2 {
        statement.reset()
        statement.bindInt64(2, at: 1)
        #expect(try statement.step())
      }
    }
    #expect(try preparedOnServer() == before + 10)
    try connection.commit()
    _ = try connection.cachedStatement("SELECT 'after'")
    #expect(try preparedOnServer() <= Int64(capacity))
  }

  @Test("arrays of every length in contains make a few SQL texts, and select what Swift selects")
  func paddedLists() throws {
    let container = try ModelContainer(
      for: Note.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    let keys = (0..<40).map { "k\($0)" }
    for key in keys { context.insert(Note(key: key, text: key)) }
    try context.save()
    var texts: Set<String> = []
    for length in 0...40 {
      let wanted = Array(keys.shuffled().prefix(length)) + ["absent"]
      let predicate = #Predicate<Note> { wanted.contains($0.key) }
      let found = try context.fetch(FetchDescriptor(predicate: predicate)).map(\.key)
      #expect(Set(found) == Set(wanted).subtracting(["absent"]), "\(length)")
      #expect(found.count == Set(found).count)
      let clause = try PredicateTranslator.whereClause(predicate, schema: Note.schema)
      texts.insert(try #require(clause).sql)
    }
    // 1, 2, 4, 8, 16, 32 and 64 values.
    #expect(texts.count == 7)
  }
}
