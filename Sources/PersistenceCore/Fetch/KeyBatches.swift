/// Reading rows by primary key in batches: `WHERE "_pk" IN (?, …)` with a batch's keys, shared
/// by a context's pages (`ModelContext.fetchModelsPage`) and a results observer's changed rows.
enum KeyBatches {
  /// The numbers of keys one query takes: a batch is padded to the next of these by repeating
  /// its last key (equal keys in `IN` select a row once), so that a connection prepares at most
  /// this many statements per kind of query, whatever the batches' sizes.
  static let sizes = [1, 8, 32, 128, 500]

  /// `?, ?, …` for each of ``sizes``.
  private static let placeholders: [Int: String] = Dictionary(
    uniqueKeysWithValues: sizes.map {
      ($0, Array(repeating: "?", count: $0).joined(separator: ", "))
    }
  )

  /// Runs `select + " IN (?, …)" + filter` once per batch of at most 500 of `keys` (`select`
  /// ends with the key column; the batch's keys are bound first, then `bindings`) and calls
  /// `row` with each row it returns, in the store's order.
  ///
  /// Cost: O(k log n) for k keys in a table of n rows, one query per 500 keys.
  static func forEachRow(
    keys: [Int64], database: any StoreConnection, select: String, filter: String = "",
    bindings: [SQLValue] = [], _ row: (any StoreRow) throws -> Void
  ) throws {
    try forEachStatement(
      keys: keys, database: database, select: select, filter: filter, bindings: bindings
    ) { statement in
      while try statement.step() { try row(statement) }
    }
  }

  /// As ``forEachRow(keys:database:select:filter:bindings:_:)``, calling `body` once per
  /// batch with the bound statement, which `body` steps through.
  static func forEachStatement(
    keys: [Int64], database: any StoreConnection, select: String, filter: String = "",
    bindings: [SQLValue] = [], _ body: (any StoreStatement) throws -> Void
  ) throws {
    let largest = sizes.last!
    for start in stride(from: 0, to: keys.count, by: largest) {
      let batch = keys[start..<min(start + largest, keys.count)]
      let size = sizes.first { $0 >= batch.count } ?? largest
      let statement = try database.cachedStatement(
        select + " IN (" + placeholders[size]! + ")" + filter)
      statement.returnsTableColumns()
      defer { statement.reset() }
      for index in 0..<size {
        statement.bindInt64(
          batch[batch.startIndex + min(index, batch.count - 1)], at: Int32(index + 1))
      }
      for (offset, value) in bindings.enumerated() {
        statement.bindValue(value, at: Int32(size + offset + 1))
      }
      try body(statement)
    }
  }
}
