import Foundation

extension ModelContext {
  /// One page of the models matching `descriptor` (its `fetchOffset` and `fetchLimit`), in its
  /// order, and how many models match in all, both from one pass over the matching rows in one
  /// snapshot of the store: what a paged API answers with (`numberMatched` beside a page).
  ///
  /// The query selects the primary key and the sort columns of every matching row without
  /// SQL's `ORDER BY`, and keeps the `offset + limit` first rows in a bounded heap. That suits
  /// a filter whose index does not follow the order (a box over longitude and latitude, sorted
  /// by date): SQL would scan the same rows once to count them and again to sort them. When
  /// an index does follow the order and matches are many, ``fetchIdentifiers(_:)`` and
  /// ``fetchCount(_:)`` read less.
  ///
  /// Without a `fetchLimit`, or with a sort that uses a string comparator or a
  /// ``FetchDescriptor/localizedStandardSorts`` order (collations that call back into Swift),
  /// it answers with those two queries instead.
  ///
  /// A page is of stored models: the context's unsaved inserts are not in it, whatever
  /// ``FetchDescriptor/includePendingChanges`` says.
  ///
  /// Cost: O(m log k) time for m matching rows and k = offset + limit, O(k) memory; a row that
  /// sorts after the page is dismissed on its first sort column alone in most cases.
  ///
  /// - Throws: ``PersistenceError`` as a fetch does (a sort by a `.codable` or unknown
  ///   attribute is `unsupportedPredicate`).
  public func fetchPage<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>) throws -> (
    identifiers: [PersistentIdentifier], matched: Int
  ) {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    if let page = try pageKeys(descriptor, entity: entity) {
      return (
        page.keys.map {
          PersistentIdentifier(
            storeIdentifier: container.storeIdentifier, entityName: entity.name, primaryKey: $0)
        }, page.matched
      )
    }
    var stored = descriptor
    stored.includePendingChanges = false
    var unpaged = stored
    unpaged.fetchLimit = nil
    unpaged.fetchOffset = nil
    return (try fetchIdentifiers(stored), try fetchCount(unpaged))
  }

  /// One page of the models matching `descriptor` and how many match in all, as
  /// ``fetchPage(_:)`` chooses them, with the page's rows read by primary key in the same
  /// snapshot of the store as the count (one query for the whole page, not one per model).
  /// Registered models are refreshed as ``fetch(_:)`` refreshes them.
  ///
  /// Cost: as ``fetchPage(_:)``, plus O(k log n) to read the page's k rows by key.
  ///
  /// - Throws: ``PersistenceError`` as ``fetchPage(_:)`` and ``fetch(_:)`` do.
  public func fetchModelsPage<Model: PersistentModel>(_ descriptor: FetchDescriptor<Model>)
    throws -> (models: [Model], matched: Int)
  {
    let entity = try entity(for: Model.self)
    // One read transaction for the count and the rows, so that both see one snapshot on
    // every engine.
    return try withSnapshot {
      if let page = try pageKeys(descriptor, entity: entity) {
        return (try models(primaryKeys: page.keys, entity: entity), page.matched)
      }
      var stored = descriptor
      stored.includePendingChanges = false
      var unpaged = stored
      unpaged.fetchLimit = nil
      unpaged.fetchOffset = nil
      return (try fetch(stored), try fetchCount(unpaged))
    }
  }

  /// The page's primary keys in order and the number of matches, from one pass (see
  /// ``fetchPage(_:)``); nil when the descriptor needs the two-query form (no limit, a sort
  /// that calls back into Swift, or a predicate finished in Swift).
  func pageKeys<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, entity: Entity<Model>
  ) throws -> (keys: [Int64], matched: Int)? {
    let database = try connection()
    let offset = max(descriptor.fetchOffset ?? 0, 0)
    guard let limit = descriptor.fetchLimit,
      descriptor.sortBy.allSatisfy({
        $0.stringComparator == nil && descriptor.localizedStandardKeyPath($0) == nil
      }),
      try (database.evaluatesSwiftFunctions && !descriptor.callsSwiftFunctions())
        || !Query(descriptor, schema: entity.schema, database: database).finishesInSwift
    else { return nil }
    var columns = ["\"_pk\""]
    var descending: [Bool] = []
    for sort in descriptor.sortBy {
      // What the SQL path orders by (a column, or a value through relationships), with the
      // same errors.
      columns.append(try Query.sortExpression(sort, schema: entity.schema).sql)
      descending.append(sort.order == .reverse)
    }
    var unordered = descriptor
    unordered.fetchLimit = nil
    unordered.fetchOffset = nil
    let query = try Query(
      unordered, schema: entity.schema, select: columns.joined(separator: ", "),
      database: database, ordered: false)
    let statement = try database.cachedStatement(query.sql)
    statement.returnsTableColumns()
    statement.bindValues(query.bindings)
    defer { statement.reset() }  // ends the read transaction, even after an error
    let (capacity, overflow) = offset.addingReportingOverflow(max(limit, 0))
    var heap = PageHeap(capacity: overflow ? Int.max : capacity, descending: descending)
    var matched = 0
    let firstDescending = descending.first ?? false
    while try statement.step() {
      matched += 1
      // Most rows sort after the page on their first column: dismiss them without a copy.
      if let bound = heap.firstBound, statement.storage(at: 1) == .real {
        let value = statement.double(at: 1)
        if firstDescending ? value < bound : value > bound { continue }
      }
      heap.offer(statement)
    }
    return (Array(heap.sorted().dropFirst(offset)), matched)
  }

  /// The models of `primaryKeys`, in that order (a key with no row is left out), read in
  /// batches (``KeyBatches``); registered models are refreshed as a fetch refreshes them.
  ///
  /// Cost: O(k log n) for k keys in a table of n rows, one query per 500 keys.
  func models<Model: PersistentModel>(primaryKeys: [Int64], entity: Entity<Model>) throws
    -> [Model]
  {
    let cache = LoadCache()
    var loaded: [Int64: Model] = [:]
    loaded.reserveCapacity(primaryKeys.count)
    try KeyBatches.forEachRow(
      keys: primaryKeys, database: try connection(), select: entity.statements.selectRowsWhereKey
    ) { row in
      loaded[row.int64(at: 0)] = try materialize(row, entity: entity, cache: cache)
    }
    return primaryKeys.compactMap { loaded[$0] }
  }
}

/// The first `capacity` rows of a query by sort columns (SQLite's order for each: NULL, then
/// numbers, then text by bytes, then blobs) and then primary key: a max-heap whose top is the
/// last row kept, so that a row that sorts after it is dismissed with one comparison.
struct PageHeap {
  struct Entry {
    var keys: [SQLValue]
    var primaryKey: Int64
    /// The first key when it is a number (as a `Double`), else NaN: most comparisons end on
    /// it, without a switch over two `SQLValue`s and the retains of copying them out.
    var first: Double

    init(keys: [SQLValue], primaryKey: Int64) {
      self.keys = keys
      self.primaryKey = primaryKey
      switch keys.first {
      case .real(let value): first = value
      case .integer(let value): first = Double(value)
      default: first = .nan
      }
    }
  }
  let capacity: Int
  let descending: [Bool]
  private(set) var entries: [Entry] = []
  /// When the heap is full and the last row kept sorts first by a number: that number. A row
  /// whose first column is a number beyond it sorts after the page.
  private(set) var firstBound: Double?

  init(capacity: Int, descending: [Bool]) {
    self.capacity = capacity
    self.descending = descending
    entries.reserveCapacity(min(capacity, 4096))
  }

  /// Considers the statement's current row: column 0 the primary key, then the sort columns.
  mutating func offer(_ row: any StoreRow) {
    guard capacity > 0 else { return }
    if entries.count == capacity {
      guard rowPrecedes(row, entries[0]) else { return }
      entries[0] = entry(row)
      siftDown(0)
    } else {
      entries.append(entry(row))
      siftUp(entries.count - 1)
      guard entries.count == capacity else { return }
    }
    firstBound = entries[0].first.isNaN ? nil : entries[0].first
  }

  /// The primary keys kept, in order.
  func sorted() -> [Int64] {
    entries.sorted { precedes($0, $1) }.map(\.primaryKey)
  }

  private func entry(_ row: any StoreRow) -> Entry {
    Entry(
      keys: descending.indices.map { row.value(at: Int32($0 + 1)) }, primaryKey: row.int64(at: 0))
  }

  /// Whether the row sorts before `entry`, reading its columns only as far as needed.
  private func rowPrecedes(_ row: any StoreRow, _ entry: Entry) -> Bool {
    for (index, key) in entry.keys.enumerated() {
      var order = row.compare(at: Int32(index + 1), with: key)
      if descending[index] { order = -order }
      if order != 0 { return order < 0 }
    }
    return row.int64(at: 0) < entry.primaryKey
  }

  func precedes(_ lhs: Entry, _ rhs: Entry) -> Bool {
    PageHeap.precedes(lhs, rhs, descending: descending)
  }

  static func precedes(_ lhs: Entry, _ rhs: Entry, descending: [Bool]) -> Bool {
    // Two numbers that differ as doubles differ the same way in SQLite's order (the
    // conversion of an integer is monotonic; equal doubles go on to the exact comparison).
    if lhs.first < rhs.first { return !descending[0] }
    if lhs.first > rhs.first { return descending[0] }
    for index in lhs.keys.indices {
      var order = PageHeap.compare(lhs.keys[index], rhs.keys[index])
      if descending[index] { order = -order }
      if order != 0 { return order < 0 }
    }
    return lhs.primaryKey < rhs.primaryKey
  }

  // The sifts compare entries in place through the buffer: reading them out of the array
  // copied each one (a retain and a release of its keys per comparison).

  private mutating func siftUp(_ start: Int) {
    let descending = self.descending
    entries.withUnsafeMutableBufferPointer { entries in
      var child = start
      while child > 0 {
        let parent = (child - 1) / 2
        guard PageHeap.precedes(entries[parent], entries[child], descending: descending) else {
          return
        }
        entries.swapAt(parent, child)
        child = parent
      }
    }
  }

  private mutating func siftDown(_ start: Int) {
    let descending = self.descending
    entries.withUnsafeMutableBufferPointer { entries in
      var parent = start
      while true {
        var latest = parent
        let left = 2 * parent + 1
        if left < entries.count,
          PageHeap.precedes(entries[latest], entries[left], descending: descending)
        {
          latest = left
        }
        if left + 1 < entries.count,
          PageHeap.precedes(entries[latest], entries[left + 1], descending: descending)
        {
          latest = left + 1
        }
        if latest == parent { return }
        entries.swapAt(parent, latest)
        parent = latest
      }
    }
  }

  /// SQLite's order of two values with the `BINARY` collation: -1, 0 or 1.
  static func compare(_ lhs: SQLValue, _ rhs: SQLValue) -> Int {
    switch (lhs, rhs) {
    case (.null, .null): return 0
    case (.null, _): return -1
    case (_, .null): return 1
    case (.integer(let a), .integer(let b)): return a < b ? -1 : a == b ? 0 : 1
    case (.integer(let a), .real(let b)): return numeric(Double(a), b)
    case (.real(let a), .integer(let b)): return numeric(a, Double(b))
    case (.real(let a), .real(let b)): return numeric(a, b)
    case (.integer, _), (.real, _): return -1
    case (_, .integer), (_, .real): return 1
    case (.text(let a), .text(let b)):
      // Native strings' UTF-8 in place: no copy (an array per side) per comparison.
      if let order = a.utf8.withContiguousStorageIfAvailable({ a in
        b.utf8.withContiguousStorageIfAvailable { b in bytes(a, b) }
      }), let order {
        return order
      }
      return bytes(a.utf8, b.utf8)
    case (.text, .blob): return -1
    case (.blob, .text): return 1
    case (.blob(let a), .blob(let b)): return bytes(a, b)
    }
  }

  static func numeric(_ a: Double, _ b: Double) -> Int { a < b ? -1 : a == b ? 0 : 1 }

  static func bytes<Bytes: Collection<UInt8>>(_ a: Bytes, _ b: some Collection<UInt8>) -> Int {
    for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
    return a.count < b.count ? -1 : a.count == b.count ? 0 : 1
  }
}

extension StoreRow {
  /// SQLite's order of column `index` of the current row and `value` (`BINARY` collation):
  /// -1, 0 or 1, without copying the column.
  func compare(at index: Int32, with value: SQLValue) -> Int {
    switch storage(at: index) {
    case .null:
      if case .null = value { return 0 }
      return -1
    case .integer:
      switch value {
      case .null: return 1
      case .integer(let other):
        let mine = int64(at: index)
        return mine < other ? -1 : mine == other ? 0 : 1
      case .real(let other): return PageHeap.numeric(Double(int64(at: index)), other)
      default: return -1
      }
    case .real:
      switch value {
      case .null: return 1
      case .integer(let other): return PageHeap.numeric(double(at: index), Double(other))
      case .real(let other): return PageHeap.numeric(double(at: index), other)
      default: return -1
      }
    case .text:
      switch value {
      case .null, .integer, .real: return 1
      case .text(var other):
        let mine = bytes(at: index)
        return other.withUTF8 { PageHeap.bytes(mine, $0) }
      case .blob: return -1
      }
    case .blob:
      guard case .blob(let other) = value else { return 1 }
      return PageHeap.bytes(bytes(at: index), other)
    }
  }
}
