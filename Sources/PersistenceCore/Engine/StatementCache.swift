/// The prepared statements of one connection, by SQL, at most ``capacity`` of them: an engine's
/// `cachedStatement(_:)` keeps its statements here.
///
/// Without a bound, a long-running server grows a statement per distinct SQL text for as long
/// as its connections live (a predicate's `IN` list of each length, every combination of
/// filters); with it, preparing one more than ``capacity`` drops the least recently used
/// statement that no one else holds. A dropped statement is finalized when its last holder lets
/// it go; a statement still held (a fetch mid-step, a writer's kept insert) is never dropped, so
/// the cache may exceed its capacity while all of its statements are in use.
///
/// Cost: a lookup is one hash lookup (and a write of its use in place); an insert into a full
/// cache scans it once for the least recently used, O(capacity), which happens only when a
/// statement is prepared.
package struct StatementCache<Statement: AnyObject> {
  /// How many statements are kept before the least recently used is dropped.
  package let capacity: Int
  private var entries: [String: Entry] = [:]
  private var clock: UInt64 = 0

  private struct Entry {
    var statement: Statement
    var lastUse: UInt64
  }

  /// An empty cache that keeps up to `capacity` statements (at least one).
  package init(capacity: Int = StatementCache.defaultCapacity) {
    self.capacity = max(capacity, 1)
  }

  /// The number of statements a connection keeps by default: far more than the statements a
  /// store's own operations use (its entities' inserts, updates and deletes, history, batches
  /// by key), so that those stay prepared.
  package static var defaultCapacity: Int { 256 }

  /// How many statements are kept.
  package var count: Int { entries.count }

  /// The statement kept for `sql`, marked as the most recently used; nil when none is.
  package mutating func statement(for sql: String) -> Statement? {
    guard let index = entries.index(forKey: sql) else { return nil }
    clock &+= 1
    entries.values[index].lastUse = clock
    return entries.values[index].statement
  }

  /// Keeps `statement` for `sql` and returns the statements dropped to stay within
  /// ``capacity`` (each held by no one else now: its engine may release what it holds on the
  /// server).
  package mutating func insert(_ statement: Statement, for sql: String) -> [Statement] {
    clock &+= 1
    entries[sql] = Entry(statement: statement, lastUse: clock)
    var dropped: [Statement] = []
    var inUse: Set<String> = [sql]
    while entries.count > capacity {
      // The least recently used, other than the new one and those found in use.
      var oldest: (sql: String, lastUse: UInt64)?
      for (key, entry) in entries where !inUse.contains(key) {
        if oldest.map({ entry.lastUse < $0.lastUse }) ?? true { oldest = (key, entry.lastUse) }
      }
      guard let oldest, var entry = entries.removeValue(forKey: oldest.sql) else { break }
      if isKnownUniquelyReferenced(&entry.statement) {
        dropped.append(entry.statement)
      } else {
        entries[oldest.sql] = entry
        inUse.insert(oldest.sql)
      }
    }
    return dropped
  }

  /// Drops every statement.
  package mutating func removeAll() { entries.removeAll() }
}
