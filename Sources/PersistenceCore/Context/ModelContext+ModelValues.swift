import Foundation

extension ModelContext {
  /// Fetches the rows matching `descriptor`, in its order, as `Value`s: `Sendable` values made
  /// straight from the rows (see ``ModelValue``), for reads that change nothing (a page to
  /// serialize, an export, a report, a snapshot for another thread). No model is made or
  /// registered, and nothing is kept in the context.
  ///
  /// The descriptor is a model fetch's: its predicate and sorts run as SQL, with its limit and
  /// offset, and the values are the rows ``fetch(_:)`` would load, in the same order. A
  /// predicate SQL cannot finish alone (see ``StoreFunctions``) is finished in Swift on models,
  /// as a model fetch finishes it; the matching rows are then read again by key.
  ///
  /// Values are what the store holds: this context's unsaved inserts, changes and deletions
  /// are not in them (with ``autosaveEnabled`` they are saved first, as for any fetch).
  ///
  /// Cost: the SQL query, then O(rows × attributes) to read, one allocation per string or
  /// byte buffer a value keeps and none per row besides the array's growth. A fetch whose
  /// predicate shape, sorts and window this context ran before binds the statement it kept.
  ///
  /// - Throws: ``PersistenceError`` with ``PersistenceError/Code/unsupportedPredicate`` for a
  ///   predicate or sort with no SQL translation; with ``PersistenceError/Code/invalidValue``
  ///   naming the row and the column for a stored value `Value` cannot read, or for a
  ///   `Value` whose initializer does not read the schema's attributes in order (its first
  ///   fetch checks it).
  @inlinable
  public func fetch<Value: ModelValue>(
    _ descriptor: FetchDescriptor<Value.Model>, as _: Value.Type
  ) throws -> [Value] {
    var values: [Value] = []
    let order = try forEachValueRow(
      descriptor, valueType: Value.self, check: { _ = try Value(row: &$0) },
      { try $0.read(into: &values) })
    guard let order else { return values }
    return order.map { values[$0] }
  }

  /// Fetches the rows matching `descriptor` as `Value`s grouped into sections by the value at
  /// `sectionBy`, as ``fetch(_:sectionBy:)->[ResultsSection<String,Model>]`` groups models:
  /// sections in ascending key order (code-point order), each holding its values in the
  /// descriptor's order, every section a slice of one array. `Sendable` as the values are.
  ///
  /// Cost: as `fetch(_:as:)`, with one comparison of the key's stored bytes per row.
  @inlinable
  public func fetch<Value: ModelValue>(
    _ descriptor: FetchDescriptor<Value.Model>, as _: Value.Type,
    sectionBy keyPath: KeyPath<Value.Model, String> & Sendable
  ) throws -> [ResultsSection<String, Value>] {
    var values: [Value] = []
    let sections = try forEachSectionedValueRow(
      descriptor, keyPath, valueType: Value.self, check: { _ = try Value(row: &$0) },
      key: { $0.text(at: $1) },
      { try $0.read(into: &values) })
    return ResultsSection.slices(of: values, sections)
  }

  /// Fetches sections of `Value`s keyed by an optional string, the `nil` section first; the
  /// key may be read through to-one relationships, as for
  /// ``fetch(_:sectionBy:)->[ResultsSection<String?,Model>]``.
  ///
  /// Cost: as the other `sectionBy`, plus, for a key through relationships, one lookup by key
  /// per relationship and row in SQL.
  @inlinable
  public func fetch<Value: ModelValue>(
    _ descriptor: FetchDescriptor<Value.Model>, as _: Value.Type,
    sectionBy keyPath: KeyPath<Value.Model, String?> & Sendable
  ) throws -> [ResultsSection<String?, Value>] {
    var values: [Value] = []
    let sections = try forEachSectionedValueRow(
      descriptor, keyPath, valueType: Value.self, check: { _ = try Value(row: &$0) },
      key: { $0.isNull(at: $1) ? nil : $0.text(at: $1) },
      { try $0.read(into: &values) })
    return ResultsSection.slices(of: values, sections)
  }

  /// One page of the rows matching `descriptor` (its `fetchOffset` and `fetchLimit`) as
  /// `Value`s, and how many rows match in all, from one snapshot of the store: the page
  /// ``fetchModelsPage(_:)`` chooses (in one pass with a bounded heap where it can), read as
  /// values.
  ///
  /// Cost: as ``fetchPage(_:)``, plus O(k log n) to read the page's k rows by key.
  @inlinable
  public func fetchPage<Value: ModelValue>(
    _ descriptor: FetchDescriptor<Value.Model>, as _: Value.Type
  ) throws -> (values: [Value], matched: Int) {
    var values: [Value] = []
    let (order, matched) = try forEachValuePageRow(
      descriptor, valueType: Value.self, check: { _ = try Value(row: &$0) },
      { try $0.read(into: &values) })
    guard let order else { return (values, matched) }
    return (order.map { values[$0] }, matched)
  }

  /// The rows of `identifiers` as `Value`s, in that order (an identifier of another store or
  /// model, or of a row that no longer exists, is left out): what follows history's changes,
  /// or a page whose keys an index chose.
  ///
  /// Cost: O(k log n) for k identifiers in a table of n rows, one query per 500 of them.
  @inlinable
  public func fetch<Value: ModelValue>(
    _ identifiers: [PersistentIdentifier], as _: Value.Type
  ) throws -> [Value] {
    var values: [Value] = []
    let order = try forEachValueRow(
      identifiers, model: Value.Model.self, valueType: Value.self,
      check: { _ = try Value(row: &$0) }, { try $0.read(into: &values) })
    return order.map { values[$0] }
  }

  /// Calls `body` with each row matching `descriptor` as a `Value`, in its order, as the rows
  /// are read: the first values arrive before the whole result is read, and none is held
  /// (an export of a million rows in O(1) memory). The query has a statement of its own, so
  /// `body` may fetch and save through this context. A predicate finished in Swift holds the
  /// matching values before the first call.
  ///
  /// Cost: as `fetch(_:as:)`, O(1) memory.
  ///
  /// - Throws: the errors of `fetch(_:as:)`, and `body`'s, which end the enumeration.
  @inlinable
  public func enumerate<Value: ModelValue>(
    _ descriptor: FetchDescriptor<Value.Model>, as _: Value.Type,
    _ body: (Value) throws -> Void
  ) throws {
    var held: [Value] = []
    let order = try forEachValueRow(
      descriptor, valueType: Value.self, check: { _ = try Value(row: &$0) },
      hold: { try $0.read(into: &held) },
      { try $0.forEach(Value.self, body) })
    for position in order ?? [] { try body(held[position]) }
  }

  // MARK: Internals

  /// Runs the descriptor's query and calls `body` with each row, read through a ``ModelRow``
  /// with no snapshot, after checking the value type once (`check` makes one value from a
  /// probe row). Returns nil when `body` saw the rows in the descriptor's order; else the
  /// order to put the values it made in (the positions of the rows it saw), after a predicate
  /// finished in Swift: matches are read again by key, in the store's order. With `hold`,
  /// the query has a statement of its own and `hold` takes those rows instead of `body`.
  @usableFromInline
  func forEachValueRow<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, valueType: Any.Type,
    check: (inout ModelRow<Model>) throws -> Void,
    hold: ((ValueRows) throws -> Void)? = nil,
    _ body: (ValueRows) throws -> Void
  ) throws -> [Int]? {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    try entity.checkValueCode(valueType, check)
    let database = try connection()
    if hold == nil, let kept = try keptRows(descriptor, entity: entity, database: database) {
      try readValues(kept.statement, bindings: kept.bindings, entity: entity, body)
      return nil
    }
    let query = try Query(descriptor, schema: entity.schema, database: database)
    if let finished = try finishedInSwift(descriptor, query: query) {
      let keys = finished.map(\.key)
      let positions =
        if let hold {
          try valuesByKey(keys, entity: entity, hold)
        } else {
          try valuesByKey(keys, entity: entity, body)
        }
      return positions.compactMap { $0 }
    }
    let statement =
      hold == nil ? try database.cachedStatement(query.sql) : try database.prepare(query.sql)
    try readValues(statement, bindings: query.bindings, entity: entity, body)
    return nil
  }

  /// The rows of the identifiers of `Model` in this store, read with `body` in the store's
  /// order; returns the order to put the values in.
  @usableFromInline
  func forEachValueRow<Model: PersistentModel>(
    _ identifiers: [PersistentIdentifier], model _: Model.Type, valueType: Any.Type,
    check: (inout ModelRow<Model>) throws -> Void, _ body: (ValueRows) throws -> Void
  ) throws -> [Int] {
    let entity = try entity(for: Model.self)
    try entity.checkValueCode(valueType, check)
    let keys = identifiers.compactMap {
      $0.storeIdentifier == container.storeIdentifier && $0.entityName == entity.name
        ? $0.primaryKey : nil
    }
    // One query for up to 500 keys; more in one snapshot.
    guard keys.count > 500 else {
      return try valuesByKey(keys, entity: entity, body).compactMap { $0 }
    }
    return try withSnapshot { try valuesByKey(keys, entity: entity, body).compactMap { $0 } }
  }

  /// The page ``fetchPage(_:as:)`` reads: its rows read with `body` and the order to put the
  /// values in (nil: as made), and the number of matches, in one snapshot.
  @usableFromInline
  func forEachValuePageRow<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, valueType: Any.Type,
    check: (inout ModelRow<Model>) throws -> Void, _ body: (ValueRows) throws -> Void
  ) throws -> (order: [Int]?, matched: Int) {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    try entity.checkValueCode(valueType, check)
    return try withSnapshot {
      if let page = try pageKeys(descriptor, entity: entity) {
        let positions = try valuesByKey(page.keys, entity: entity, body)
        return (positions.compactMap { $0 }, page.matched)
      }
      var unpaged = descriptor
      unpaged.fetchLimit = nil
      unpaged.fetchOffset = nil
      let order = try forEachValueRow(descriptor, valueType: valueType, check: check, body)
      return (order, try fetchCount(unpaged))
    }
  }

  /// As ``forEachValueRow(_:valueType:check:hold:_:)``, grouped by the value at `keyPath`
  /// (the query ordered by it first): where each section starts in the values `body` made,
  /// in the order to put them in, and its key, read once per section.
  @usableFromInline
  func forEachSectionedValueRow<Model: PersistentModel, Key: Hashable & Sendable>(
    _ descriptor: FetchDescriptor<Model>, _ keyPath: KeyPath<Model, Key> & Sendable,
    valueType: Any.Type, check: (inout ModelRow<Model>) throws -> Void,
    key makeKey: (any StoreRow, Int32) -> Key, _ body: (ValueRows) throws -> Void
  ) throws -> ValueSections<Key> {
    try autosaveIfNeeded()
    let entity = try entity(for: Model.self)
    try entity.checkValueCode(valueType, check)
    if let finished = try finishedInSwift(
      descriptor, sectionKey: { $0[keyPath: keyPath] as Any as? String })
    {
      var sections = ValueSections<Key>()
      let positions = try valuesByKey(finished.map(\.key), entity: entity, body)
      // Keys from the models (a row deleted since is left out).
      var previous: Key?
      for (index, (model, _)) in finished.enumerated() where positions[index] != nil {
        let key = model[keyPath: keyPath]
        if sections.starts.isEmpty || previous != key {
          sections.starts.append(sections.count)
          sections.keys.append(key)
          previous = key
        }
        sections.count += 1
      }
      sections.order = positions.compactMap { $0 }
      return sections
    }
    let (column, query) = try sectionQuery(descriptor, keyPath, entity: entity)
    var sections = ValueSections<Key>()
    var boundary = SectionBoundary()
    try readValues(
      try connection().cachedStatement(query.sql), bindings: query.bindings, entity: entity,
      beforeEach: { row in
        if boundary.startsSection(row, column: column) {
          sections.starts.append(sections.count)
          sections.keys.append(makeKey(row, column))
        }
        sections.count += 1
      }, body)
    return sections
  }

  /// Reads the rows of `keys`, in the store's order, with `body` (once per batch); returns
  /// the position of each key's value among those made, nil for a key whose row is gone.
  /// O(k log n), one query per 500 keys.
  private func valuesByKey<Model: PersistentModel>(
    _ keys: [Int64], entity: Entity<Model>, _ body: (ValueRows) throws -> Void
  ) throws -> [Int?] {
    var positions: [Int64: Int] = [:]
    positions.reserveCapacity(keys.count)
    let cache = LoadCache()
    try KeyBatches.forEachStatement(
      keys: keys, database: try connection(), select: entity.statements.selectRowsWhereKey
    ) { statement in
      try read(
        statement, entity: entity, cache: cache,
        beforeEach: { positions[$0.int64(at: 0)] = positions.count }, body)
    }
    return keys.map { positions[$0] }
  }

  /// Runs `statement` with `bindings` and reads its rows with `body`.
  private func readValues<Model: PersistentModel>(
    _ statement: any StoreStatement, bindings: [SQLValue], entity: Entity<Model>,
    _ body: (ValueRows) throws -> Void
  ) throws {
    statement.returnsTableColumns()
    statement.bindValues(bindings)
    defer { statement.reset() }  // ends the read transaction, even after an error
    try body(ValueRows(statement, entity: entity, cache: LoadCache()))
  }

  /// As the other `readValues`, with `beforeEach` seeing each row first.
  private func readValues<Model: PersistentModel>(
    _ statement: any StoreStatement, bindings: [SQLValue], entity: Entity<Model>,
    beforeEach: (any StoreRow) -> Void, _ body: (ValueRows) throws -> Void
  ) throws {
    statement.returnsTableColumns()
    statement.bindValues(bindings)
    defer { statement.reset() }  // ends the read transaction, even after an error
    try read(statement, entity: entity, cache: LoadCache(), beforeEach: beforeEach, body)
  }

  /// Calls `body` with the rows of a statement that runs, as ``ValueRows`` whose every row
  /// `beforeEach` sees first.
  private func read<Model: PersistentModel>(
    _ statement: any StoreStatement, entity: Entity<Model>, cache: LoadCache,
    beforeEach: (any StoreRow) -> Void, _ body: (ValueRows) throws -> Void
  ) throws {
    let rows = ValueRows(statement, entity: entity, cache: cache)
    try withoutActuallyEscaping(beforeEach) { beforeEach in
      rows.beforeEach = beforeEach
      defer { rows.beforeEach = nil }
      try body(rows)
    }
  }
}

/// The rows of a value fetch's running statement, which the fetch's caller reads in a loop of
/// its own (``read(into:)``), specialized for its value type: no generic metadata is looked up
/// and no closure is called per row.
@usableFromInline
final class ValueRows {
  @usableFromInline let statement: any StoreStatement
  @usableFromInline let cache: LoadCache
  @usableFromInline let layout: EntityLayout
  /// How many attributes a value reads.
  @usableFromInline let declaredCount: Int
  private let columnNames: [String]
  private let entity: any EntityOperations
  /// Sees each row before it is read (where a section starts; a row's key).
  var beforeEach: ((any StoreRow) -> Void)?

  init<Model: PersistentModel>(
    _ statement: any StoreStatement, entity: Entity<Model>, cache: LoadCache
  ) {
    self.statement = statement
    self.cache = cache
    layout = entity.rowLayout
    declaredCount = entity.declaredCount
    columnNames = entity.columnNames
    self.entity = entity
  }

  /// Steps to the next row; false after the last.
  @usableFromInline
  func step() throws -> Bool {
    guard try statement.step() else { return false }
    beforeEach?(statement)
    return true
  }

  /// The current row (primary key, then every attribute), to read a value from.
  @inlinable
  func row<Model: PersistentModel>(_: Model.Type) -> ModelRow<Model> {
    ModelRow(statement, cache: cache, firstColumn: 1, snapshot: nil, entity: layout)
  }

  /// `error`, thrown after `count` attributes of the current row were read: when that was
  /// while reading them (not the value's own check after), named with the row and column.
  @usableFromInline
  func failure(_ error: any Error, read count: Int) -> any Error {
    guard var failure = error as? PersistenceError, count < declaredCount else { return error }
    if failure.attribute == nil { failure.attribute = columnNames[count] }
    return failure.naming(row: describeStoredRow(statement, entity: entity))
  }

  /// A value that read `count` attributes of a row, after its first fetch's check accepted
  /// it: a programming error (its reads depend on the row).
  @usableFromInline
  func misread(_ count: Int, as type: Any.Type) -> Never {
    preconditionFailure(
      "A value \(type) read \(count) of the \(declaredCount) attributes of a row.")
  }

  /// Reads every row as a `Value`, appended to `values`. O(rows × attributes).
  @inlinable
  func read<Value: ModelValue>(into values: inout [Value]) throws {
    while try step() {
      var row = self.row(Value.Model.self)
      do {
        values.append(try Value(row: &row))
      } catch {
        throw failure(error, read: row.count)
      }
      if row.count != declaredCount { misread(row.count, as: Value.self) }
    }
  }

  /// Calls `body` with every row as a `Value`; `body`'s errors pass through unchanged.
  @inlinable
  func forEach<Value: ModelValue>(_: Value.Type, _ body: (Value) throws -> Void) throws {
    while try step() {
      var row = self.row(Value.Model.self)
      let value: Value
      do {
        value = try Value(row: &row)
      } catch {
        throw failure(error, read: row.count)
      }
      if row.count != declaredCount { misread(row.count, as: Value.self) }
      try body(value)
    }
  }
}

/// Where a sectioned value fetch's sections start, and their keys; the order to put the values
/// in when a predicate was finished in Swift.
@usableFromInline
struct ValueSections<Key> {
  @usableFromInline var starts: [Int] = []
  @usableFromInline var keys: [Key] = []
  @usableFromInline var order: [Int]?
  /// The values made so far.
  var count = 0
  init() {}
}

extension ResultsSection {
  /// The sections of `values` (put in `sections.order` first, when there is one), every one
  /// a slice of one array.
  @inlinable
  static func slices(of values: [Model], _ sections: ValueSections<Key>) -> [ResultsSection] {
    let all = sections.order.map { order in order.map { values[$0] } } ?? values
    var result: [ResultsSection] = []
    result.reserveCapacity(sections.starts.count)
    for index in sections.starts.indices {
      let end = index + 1 < sections.starts.count ? sections.starts[index + 1] : all.count
      result.append(
        ResultsSection(id: sections.keys[index], models: all[sections.starts[index]..<end]))
    }
    return result
  }
}

/// Tells where a section starts in rows ordered by a key column, by the column's stored bytes
/// (stored text is NFC, so equal bytes are equal keys): one comparison a row, the key itself
/// read only where a section starts. Not generic, so that nothing per row goes through a
/// generic key's value witnesses.
struct SectionBoundary {
  private var last: [UInt8] = []
  private var lastIsNull = false
  private var started = false

  /// Whether the row's key differs from the last row's (or it is the first row). Copies the
  /// key's bytes when it does, before the caller reads the key: reading it as text may
  /// convert a value an outside writer stored with another type, which frees the bytes. Into
  /// the same buffer: one allocation for all sections, not one each.
  mutating func startsSection(_ row: any StoreRow, column: Int32) -> Bool {
    let isNull = row.isNull(at: column)
    let bytes = row.bytes(at: column)
    if started, lastIsNull == isNull, last.count == bytes.count,
      bytes.isEmpty
        || last.withUnsafeBytes({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 })
    {
      return false
    }
    started = true
    last.removeAll(keepingCapacity: true)
    last.append(contentsOf: bytes)
    lastIsNull = isNull
    return true
  }
}
