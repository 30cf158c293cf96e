internal import CLibPQ
import Foundation
import PersistenceCore

/// A statement of the core's SQL on a PostgreSQL connection: parameters are kept until the
/// first ``step()``, which runs it (`PQexecParams`, integers, floats and bytes sent in binary,
/// text as text) and keeps the whole result; further steps move through its rows.
///
/// The result (`PGresult`) is this object's alone: cleared once, when the statement is reset,
/// rewound, runs again or goes away.
///
/// Its mutable properties skip Swift's dynamic exclusivity checks (`@exclusivity(unchecked)`:
/// about 75 instructions each, eight to fourteen a run): a statement is used by its
/// connection's one owner, on one thread at a time, and no access to a property overlaps
/// another access to it (the test suite runs with the checks on everywhere else).
final class Statement: StoreStatement {
  unowned let connection: Connection
  /// The SQL with `$N` parameters.
  let sql: String
  @exclusivity(unchecked) private var parameters: [Parameter]
  /// The current result and the position in it, behind a pointer this statement owns
  /// (allocated in `init`, freed in `deinit`): read for every value, and a class's stored
  /// properties would cost a dynamic exclusivity check (about 75 instructions) at each read.
  private let cursor: UnsafeMutablePointer<Cursor>
  private var result: OpaquePointer? {
    get { cursor.pointee.result }
    set { cursor.pointee.result = newValue }
  }
  private var rowCount: Int32 {
    get { cursor.pointee.rowCount }
    set { cursor.pointee.rowCount = newValue }
  }
  private var row: Int32 {
    get { cursor.pointee.row }
    set { cursor.pointee.row = newValue }
  }
  /// A problem found while binding (bind functions cannot throw), reported by ``step()``.
  @exclusivity(unchecked) private var bindingError: PersistenceError?
  /// Per column, a buffer the decoded bytes of its `bytea` values are written into: grown as
  /// needed, reused from row to row, freed when the statement goes (no allocation per row).
  @exclusivity(unchecked) private var scratch: [UnsafeMutableRawBufferPointer] = []
  /// Per column, the row whose bytes ``scratch`` holds and how many (row -1: none).
  @exclusivity(unchecked) private var scratchRow: [(row: Int32, count: Int)] = []

  enum Parameter {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case bytes([UInt8])
  }

  /// Whether the statement is kept by its connection (`cachedStatement`): it is then prepared
  /// on the server once per kind of parameters (`PQprepare`), and runs without being parsed
  /// and planned again.
  private let isCached: Bool
  /// The server-side names of this statement, by the types of its parameters, and the
  /// connection's session they were prepared in (a reconnect loses them).
  @exclusivity(unchecked) private var prepared: [[Oid]: (name: String, binaryResults: Bool)] = [:]
  @exclusivity(unchecked) private(set) var preparedSession = -1
  /// The entry of ``prepared`` used last.
  @exclusivity(unchecked) private var lastPrepared:
    (types: [Oid], statement: (name: String, binaryResults: Bool))?
  /// The server-side names of this statement in ``preparedSession``.
  var preparedNames: [String] { prepared.values.map(\.name) }
  /// Whether the SQL is an `INSERT` that returns the new row's key (`RETURNING`, added here
  /// for ``Connection/cachedInsert(_:keyColumn:)``); its one row is read as
  /// ``Connection/lastInsertedKey`` and not shown to the caller, who expects none.
  private let returnsKey: Bool
  /// The transaction command the SQL is, if any (``Connection/send(_:verb:_:)``): read once,
  /// not on every run (about 350 instructions).
  private let verb: TransactionVerb

  /// A statement for `sql`; with `keyColumn`, an `INSERT` that returns that column of its new
  /// row.
  init(sql: String, connection: Connection, cached: Bool = false, keyColumn: String? = nil) {
    var (rewritten, count) = Placeholders.rewrite(sql)
    if let keyColumn {
      rewritten += " RETURNING \(keyColumn)"
    }
    returnsKey = keyColumn != nil
    isCached = cached
    self.sql = rewritten
    verb = TransactionVerb(rewritten)
    self.connection = connection
    parameters = Array(repeating: .null, count: count)
    cursor = .allocate(capacity: 1)
    cursor.initialize(to: Cursor())
  }

  deinit {
    for buffer in scratch where buffer.baseAddress != nil { buffer.deallocate() }
    if let result { PQclear(result) }
    cursor.pointee.columns.deallocate()
    cursor.deinitialize(count: 1)
    cursor.deallocate()
  }

  /// The state of reading the current result (see ``cursor``).
  private struct Cursor {
    var result: OpaquePointer?
    var rowCount: Int32 = 0
    var row: Int32 = -1
    /// The result's columns: each one's type and whether it came in binary, asked of libpq
    /// once per result rather than once per value read. Its first `columnCount` are set.
    var columns = UnsafeMutableBufferPointer<(type: Oid, binary: Bool)>(start: nil, count: 0)
    var columnCount = 0
    /// The last non-null column `raw` found, in this result (row `.min`: none): a read checks
    /// the column's type and then reads it, which finds it once.
    var lastRawRow: Int32 = .min
    var lastRawIndex: Int32 = -1
    var lastRawValue: UnsafePointer<CChar>?
    var lastRawLength = 0

    /// Takes `made`'s shape: its row count and its columns' types and formats. O(columns).
    mutating func start(_ made: OpaquePointer) {
      result = made
      rowCount = PQntuples(made)
      row = -1
      lastRawRow = .min
      let count = Int(PQnfields(made))
      if columns.count < count {
        columns.deallocate()
        columns = .allocate(capacity: max(count, 16))
      }
      for column in 0..<count {
        columns[column] = (PQftype(made, Int32(column)), PQfformat(made, Int32(column)) == 1)
      }
      columnCount = count
    }
  }

  private func clearResult() {
    if let result { PQclear(result) }
    result = nil
    cursor.pointee.lastRawRow = .min
    cursor.pointee.columnCount = 0
    rowCount = 0
    row = -1
    releaseDecodedBytes()
  }

  /// Marks every column's decoded bytes stale (a new result).
  private func releaseDecodedBytes() {
    for index in scratchRow.indices { scratchRow[index] = (-1, 0) }
  }

  func returnsTableColumns() { tableColumns = true }

  func reset() {
    clearResult()
    bindingError = nil
    for index in parameters.indices { parameters[index] = .null }
  }

  func rewind() { clearResult() }

  // MARK: Binding

  private func bind(_ parameter: Parameter, at index: Int32) {
    guard index >= 1, Int(index) <= parameters.count else {
      bindingError = PersistenceError(
        code: .engine,
        message:
          "Parameter \(index) is out of range: the statement takes \(parameters.count) (in: \(sql))"
      )
      return
    }
    parameters[Int(index) - 1] = parameter
  }

  func bindNull(_ index: Int32) { bind(.null, at: index) }
  func bindInt64(_ value: Int64, at index: Int32) { bind(.integer(value), at: index) }
  func bindDouble(_ value: Double, at index: Int32) { bind(.real(value), at: index) }
  func bindText(_ value: String, at index: Int32) {
    if value.utf8.contains(0) {
      bindingError = PersistenceError(
        code: .invalidValue,
        message:
          "Text with a NUL character (U+0000) cannot be stored in PostgreSQL (parameter \(index))."
      )
    }
    bind(.text(value), at: index)
  }
  func bindBytes(_ bytes: UnsafeRawBufferPointer, at index: Int32) {
    bind(.bytes(Array(bytes)), at: index)
  }

  // MARK: Running

  func step() throws -> Bool {
    if result == nil { try run() }
    row += 1
    // The rows are here already; what reads them may take long (models made, Swift's part of
    // a predicate): the deadline in force is checked every 1,024 rows.
    if row & 1_023 == 1_023 { try WorkDeadline.checkCurrent() }
    return row < rowCount
  }

  /// Sends the statement with its parameters and keeps the result.
  /// How many times the statement ran.
  @exclusivity(unchecked) private var runs = 0
  /// Whether the statement returns only the layer's own columns (see
  /// ``returnsTableColumns()``): its first run, before it is prepared, asks for binary rows.
  @exclusivity(unchecked) private var tableColumns = false

  /// The arrays of the last run's parameters, kept for the next: once a statement has run,
  /// running it again allocates nothing for its parameters.
  @exclusivity(unchecked) private var arguments = Arguments()

  /// The parameters as libpq takes them, by index.
  private struct Arguments {
    var types: [Oid] = []
    var formats: [Int32] = []
    var lengths: [Int32] = []
    /// Where each value starts in ``buffer`` (-1: `NULL`).
    var offsets: [Int] = []
    /// Every value's bytes; its first byte keeps it from being empty.
    var buffer: [UInt8] = []
    var values: [UnsafePointer<CChar>?] = []

    /// Empties the arrays for `count` parameters, keeping their storage.
    mutating func reset(count: Int) {
      func refill<T>(_ array: inout [T], _ value: T) {
        // A statement runs with the same number of parameters every time: filled in place.
        guard array.count != count else {
          array.withUnsafeMutableBufferPointer { $0.update(repeating: value) }
          return
        }
        array.removeAll(keepingCapacity: true)
        array.append(contentsOf: repeatElement(value, count: count))
      }
      refill(&types, 0)
      refill(&formats, 0)
      refill(&lengths, 0)
      refill(&offsets, -1)
      buffer.removeAll(keepingCapacity: true)
      buffer.append(0)
      values.removeAll(keepingCapacity: true)
    }

    /// Sets parameter `index` to the 8 bytes of `value`, big-endian, in binary format. (A
    /// method, not a local function of `run()`: a local function capturing the arguments
    /// made every access to them a dynamic exclusivity check.)
    mutating func append(_ value: UInt64, type: Oid, at index: Int) {
      types[index] = type
      formats[index] = 1
      lengths[index] = 8
      offsets[index] = buffer.count
      withUnsafeBytes(of: value.bigEndian) { buffer.append(contentsOf: $0) }
    }
  }

  /// Fills `arguments` from the bound parameters: libpq's arrays and one buffer of values.
  /// O(parameters + bytes).
  private func fill(_ arguments: inout Arguments) {
    arguments.reset(count: parameters.count)
    for (index, parameter) in parameters.enumerated() {
      switch parameter {
      case .null: break
      case .integer(let value): arguments.append(UInt64(bitPattern: value), type: 20, at: index)
      case .real(let value): arguments.append(value.bitPattern, type: 701, at: index)
      case .text(let value):
        // Type left to the server (as a literal would be), text format, NUL-terminated.
        arguments.offsets[index] = arguments.buffer.count
        arguments.buffer.append(contentsOf: value.utf8)
        arguments.lengths[index] = Int32(arguments.buffer.count - arguments.offsets[index])
        arguments.buffer.append(0)
      case .bytes(let value):
        arguments.types[index] = 17
        arguments.formats[index] = 1
        arguments.offsets[index] = arguments.buffer.count
        arguments.lengths[index] = Int32(value.count)
        arguments.buffer.append(contentsOf: value)
      }
    }
  }

  /// Sends this statement with its bound parameters into the connection's pipeline, without
  /// waiting for the answer (``Connection/runBatch(_:count:answer:binding:)`` reads it): libpq
  /// copies the values into its output buffer, so the parameters can be bound again at once.
  /// Prepared in the same pipeline when it was not in this session (with its answers in text:
  /// describing it would cost a round trip); returns the parameter types it was prepared for
  /// then, whose answer comes first. O(parameters + bytes).
  ///
  /// - Throws: a binding's error, or the connection's when libpq cannot queue the message.
  func send() throws -> [Oid]? {
    runs += 1
    if let bindingError { throw bindingError }
    clearResult()
    var arguments = Arguments()
    swap(&arguments, &self.arguments)
    defer { swap(&arguments, &self.arguments) }
    fill(&arguments)
    var preparedNow: [Oid]?
    let statement: (name: String, binaryResults: Bool)
    if let known = knownPrepared(arguments.types) {
      statement = known
    } else {
      statement = (connection.makeStatementName(), false)
      guard
        PQsendPrepare(
          connection.handle, statement.name, sql, Int32(arguments.types.count), arguments.types)
          == 1
      else { throw connection.lostError(sql: sql) }
      prepared[arguments.types] = statement
      lastPrepared = (arguments.types, statement)
      preparedNow = arguments.types
    }
    let count = Int32(parameters.count)
    // As in `run()`, written out there and here: a shared generic helper taking a closure
    // cost a count about 90 instructions more (callgrind).
    let buffer = arguments.buffer
    var values = arguments.values
    arguments.values = []
    defer { arguments.values = values }
    values.removeAll(keepingCapacity: true)
    let sent = buffer.withUnsafeBufferPointer { storage in
      let base = UnsafeRawPointer(storage.baseAddress!)
      for offset in arguments.offsets {
        values.append(offset < 0 ? nil : (base + offset).assumingMemoryBound(to: CChar.self))
      }
      return statement.name.withCString { name in
        PQsendQueryPrepared(
          connection.handle, name, count, values, arguments.lengths, arguments.formats,
          statement.binaryResults ? 1 : 0)
      }
    }
    guard sent == 1 else {
      if let preparedNow { forgetPrepared([preparedNow]) }
      throw connection.lostError(sql: sql)
    }
    return preparedNow
  }

  /// Forgets the server-side statements prepared for `types` (in a batch that failed, where
  /// the server may not have made them): the next run prepares them again, under new names.
  func forgetPrepared(_ types: [[Oid]]) {
    for forgotten in types { prepared[forgotten] = nil }
    lastPrepared = nil
  }

  /// The first column of `result`'s first row as an integer (text or binary), or nil.
  static func firstInteger(_ result: OpaquePointer) -> Int64? {
    guard PQntuples(result) > 0, PQnfields(result) > 0, PQgetisnull(result, 0, 0) == 0,
      let value = PQgetvalue(result, 0, 0)
    else { return nil }
    guard PQfformat(result, 0) == 1 else { return integer(value) }
    return binaryInteger(value, Int(PQgetlength(result, 0, 0)), type: PQftype(result, 0))
  }

  private func run() throws {
    runs += 1
    if let bindingError { throw bindingError }
    let count = parameters.count
    var arguments = Arguments()
    swap(&arguments, &self.arguments)
    defer { swap(&arguments, &self.arguments) }
    fill(&arguments)
    let made = try connection.send(sql, verb: verb) {
      // Pointers into the buffer, valid while this closure runs (made again if `send` calls
      // it again); the array of them moved out and back, so that it is not copied.
      let buffer = arguments.buffer
      var values = arguments.values
      arguments.values = []
      defer { arguments.values = values }
      values.removeAll(keepingCapacity: true)
      return buffer.withUnsafeBufferPointer { storage in
        let base = UnsafeRawPointer(storage.baseAddress!)
        for offset in arguments.offsets {
          values.append(offset < 0 ? nil : (base + offset).assumingMemoryBound(to: CChar.self))
        }
        // Prepared on its second run: a statement a session runs once is not worth the
        // round trip.
        guard isCached, runs > 1 else {
          return PQexecParams(
            connection.handle, sql, Int32(count), arguments.types, values, arguments.lengths,
            arguments.formats, tableColumns ? 1 : 0)
        }
        let statement: (name: String, binaryResults: Bool)
        switch preparedName(arguments.types) {
        case .success(let known): statement = known
        case .failure(let failed): return failed.result
        }
        // `withCString` copies a short name to the stack; an implicit conversion allocates.
        return statement.name.withCString { name in
          PQexecPrepared(
            connection.handle, name, Int32(count), values, arguments.lengths,
            arguments.formats, statement.binaryResults ? 1 : 0)
        }
      }
    }
    let status = PQresultStatus(made)
    guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
      let failure = connection.error(made, sql: sql)
      PQclear(made)
      throw failure
    }
    connection.noteCompletion(of: made, sql: sql)
    cursor.pointee.start(made)
    if returnsKey {
      // The key of the new row, for `lastInsertedKey`; the caller sees no row, as on SQLite.
      if rowCount == 1 {
        connection.noteInsertedKey(int64(at: 0, row: 0))
      }
      rowCount = 0
    }
  }

  // SAFETY: it never leaves the thread that made it: `run()` takes its result over at once.
  /// A failed `PQprepare`, whose result stands for the statement's. Unchecked: it never
  /// leaves the thread that made it (``run()`` takes the result over at once).
  private struct PrepareFailure: Error, @unchecked Sendable {
    let result: OpaquePointer?
  }

  /// The server-side name of this statement for parameters of `types` in the connection's
  /// current session, and whether its results come in binary, if it was prepared there (a new
  /// session forgets the old one's).
  private func knownPrepared(_ types: [Oid]) -> (name: String, binaryResults: Bool)? {
    if preparedSession != connection.session {
      prepared.removeAll()
      lastPrepared = nil
      preparedSession = connection.session
    }
    // The last parameter types first: an array's equality is cheaper than its hash.
    if let last = lastPrepared, last.types == types { return last.statement }
    guard let known = prepared[types] else { return nil }
    lastPrepared = (types, known)
    return known
  }

  /// The server-side name of this statement for parameters of `types`, prepared now in the
  /// connection's current session if it was not yet, and whether its results come in binary:
  /// when every column it returns has a type read here from its binary form
  /// (``binaryColumnTypes``), asked of the server once, when it is prepared. Rows of models
  /// are such: no number or date is formatted by the server and parsed here, no `bytea`
  /// written in hex and decoded.
  private func preparedName(_ types: [Oid]) -> Result<
    (name: String, binaryResults: Bool), PrepareFailure
  > {
    if let known = knownPrepared(types) { return .success(known) }
    let name = connection.makeStatementName()
    guard let made = PQprepare(connection.handle, name, sql, Int32(types.count), types) else {
      return .failure(PrepareFailure(result: nil))
    }
    guard PQresultStatus(made) == PGRES_COMMAND_OK else {
      return .failure(PrepareFailure(result: made))
    }
    PQclear(made)
    var binary = false
    if let described = PQdescribePrepared(connection.handle, name) {
      if PQresultStatus(described) == PGRES_COMMAND_OK {
        let columns = PQnfields(described)
        binary =
          columns > 0
          && (0..<columns).allSatisfy {
            Statement.binaryColumnTypes.contains(PQftype(described, $0))
          }
      }
      PQclear(described)
    }
    prepared[types] = (name, binary)
    lastPrepared = (types, (name, binary))
    return .success((name, binary))
  }

  /// Whether the current result came in binary (for tests).
  var resultIsBinary: Bool { result.map { PQfformat($0, 0) == 1 } ?? false }

  /// The column types whose binary form is read here: `bool`, `bytea`, `int8`, `int2`,
  /// `int4`, `text`, `float4`, `float8`, `varchar` (text's binary form is its text).
  static let binaryColumnTypes: Set<Oid> = [16, 17, 20, 21, 23, 25, 700, 701, 1043]

  // MARK: Reading

  /// Column `index` of the current row as libpq keeps it, and its length; nil when null or
  /// out of range. O(1): two libpq calls (three for an empty value), none when it is the
  /// column read last (a read checks the column's type and then reads it).
  private func raw(_ index: Int32) -> (UnsafePointer<CChar>, Int)? {
    let state = cursor
    let row = state.pointee.row
    if state.pointee.lastRawRow == row, state.pointee.lastRawIndex == index,
      let value = state.pointee.lastRawValue
    {
      return (value, state.pointee.lastRawLength)
    }
    guard let result = state.pointee.result, row >= 0, row < state.pointee.rowCount, index >= 0,
      Int(index) < state.pointee.columnCount, let value = PQgetvalue(result, row, index)
    else { return nil }
    let length = Int(PQgetlength(result, row, index))
    // A null has no bytes: only an empty value needs asking which it is.
    if length == 0, PQgetisnull(result, row, index) != 0 { return nil }
    state.pointee.lastRawRow = row
    state.pointee.lastRawIndex = index
    state.pointee.lastRawValue = UnsafePointer(value)
    state.pointee.lastRawLength = length
    return (UnsafePointer(value), length)
  }

  /// Column `index`'s type and format in the current result (`index` checked by ``raw(_:)``).
  private func column(_ index: Int32) -> (type: Oid, binary: Bool) {
    cursor.pointee.columns[Int(index)]
  }

  func storage(at index: Int32) -> ColumnStorage {
    guard let (value, length) = raw(index) else { return .null }
    switch column(index).type {
    case 16, 20, 21, 23, 26, 28, 5069: return .integer  // bool, int8/2/4, oid, xid, xid8
    case 700, 701: return .real
    case 1700:
      // numeric (what sum() of integers gives): an integer when written without a point.
      let text = UnsafeRawBufferPointer(start: value, count: length)
      return text.contains(UInt8(ascii: ".")) || text.contains(UInt8(ascii: "N"))
        ? .real : .integer
    case 17: return .blob
    default: return .text
    }
  }

  func int64(at index: Int32) -> Int64 {
    guard let (value, length) = raw(index) else { return 0 }
    let column = column(index)
    guard column.binary else { return Statement.integer(value) }
    return Statement.binaryInteger(value, length, type: column.type)
  }

  /// Column `index` of row `row` as an integer (the key an `INSERT … RETURNING` gave).
  private func int64(at index: Int32, row: Int32) -> Int64 {
    guard let result, PQgetisnull(result, row, index) == 0,
      let value = PQgetvalue(result, row, index)
    else { return 0 }
    guard PQfformat(result, index) == 1 else { return Statement.integer(value) }
    return Statement.binaryInteger(
      value, Int(PQgetlength(result, row, index)), type: PQftype(result, index))
  }

  /// A value in binary form (network byte order) as an integer: floats toward zero, as SQLite
  /// reads a real as an integer; text (followed by a NUL here too) parsed as in text form.
  static func binaryInteger(_ value: UnsafePointer<CChar>, _ length: Int, type: Oid) -> Int64 {
    let bytes = UnsafeRawPointer(value)
    switch (type, length) {
    case (16, 1): return bytes.load(as: UInt8.self) == 0 ? 0 : 1
    case (20, 8): return Int64(bigEndian: bytes.loadUnaligned(as: Int64.self))
    case (21, 2): return Int64(Int16(bigEndian: bytes.loadUnaligned(as: Int16.self)))
    case (23, 4): return Int64(Int32(bigEndian: bytes.loadUnaligned(as: Int32.self)))
    case (700, 4), (701, 8):
      return Int64(exactly: binaryDouble(value, length, type: type).rounded(.towardZero)) ?? 0
    default: return integer(value)
    }
  }

  /// A value in binary form as a `Double` (integers converted, text parsed).
  static func binaryDouble(_ value: UnsafePointer<CChar>, _ length: Int, type: Oid) -> Double {
    let bytes = UnsafeRawPointer(value)
    switch (type, length) {
    case (701, 8):
      return Double(bitPattern: UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self)))
    case (700, 4):
      // As its text form reads (the shortest digits of the `real`), not the `Float` widened.
      let real = Float(bitPattern: UInt32(bigEndian: bytes.loadUnaligned(as: UInt32.self)))
      return Double("\(real)") ?? Double(real)
    case (16, 1), (20, 8), (21, 2), (23, 4):
      return Double(binaryInteger(value, length, type: type))
    default: return strtod(value, nil)
    }
  }

  private static func integer(_ value: UnsafePointer<CChar>) -> Int64 {
    switch value.pointee {
    case CChar(UInt8(ascii: "t")): return 1
    case CChar(UInt8(ascii: "f")): return 0
    default:
      if let integer = Int64(String(cString: value)) { return integer }
      return Int64(exactly: strtod(value, nil).rounded(.towardZero)) ?? 0
    }
  }

  func double(at index: Int32) -> Double {
    guard let (value, length) = raw(index) else { return 0 }
    let column = column(index)
    if column.binary {
      return Statement.binaryDouble(value, length, type: column.type)
    }
    switch value.pointee {
    case CChar(UInt8(ascii: "t")): return 1
    case CChar(UInt8(ascii: "f")): return 0
    default: return strtod(value, nil)
    }
  }

  func text(at index: Int32) -> String {
    guard let (value, length) = raw(index) else { return "" }
    let column = column(index)
    if column.binary {
      // What the text form would have been, for the types that are not text.
      let type = column.type
      switch type {
      case 16: return Statement.binaryInteger(value, length, type: type) == 0 ? "f" : "t"
      case 20, 21, 23: return String(Statement.binaryInteger(value, length, type: type))
      case 700, 701:
        // As the server writes them (shortest form that reads back exactly).
        let real = Statement.binaryDouble(value, length, type: type)
        if real.isNaN { return "NaN" }
        if real.isInfinite { return real < 0 ? "-Infinity" : "Infinity" }
        return type == 700 ? "\(Float(real))" : "\(real)"
      case 17:
        let digits = Array("0123456789abcdef".utf8)
        var hex = Array("\\x".utf8)
        for byte in UnsafeRawBufferPointer(start: value, count: length) {
          hex.append(digits[Int(byte >> 4)])
          hex.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: hex, as: UTF8.self)
      default: break
      }
    }
    return value.withMemoryRebound(to: UInt8.self, capacity: length) {
      String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
    }
  }

  /// The bytes of a `bytea` column (decoded from its hex form, kept until the next step) or
  /// of a text column.
  func bytes(at index: Int32) -> UnsafeRawBufferPointer {
    guard let (value, length) = raw(index) else {
      return UnsafeRawBufferPointer(start: nil, count: 0)
    }
    let (type, binary) = column(index)
    // Text is its bytes in either form, and so is binary `bytea`.
    if type == 25 || type == 1043 || (type == 17 && binary) || (type != 17 && !binary) {
      return UnsafeRawBufferPointer(start: value, count: length)
    }
    let column = Int(index)
    while scratch.count <= column {
      scratch.append(UnsafeMutableRawBufferPointer(start: nil, count: 0))
      scratchRow.append((-1, 0))
    }
    if scratchRow[column].row == row {
      return UnsafeRawBufferPointer(
        start: scratch[column].baseAddress, count: scratchRow[column].count)
    }
    // `bytea` in text form, decoded from hex; a number in binary form, as its text form.
    var written = 0
    if type == 17 {
      let text = UnsafeRawBufferPointer(start: value, count: length)
      reserveScratch(column, max(length, 1))
      written = Statement.decodeHex(text, into: scratch[column])
    } else {
      var text = self.text(at: index)
      text.withUTF8 { utf8 in
        reserveScratch(column, max(utf8.count, 1))
        if let base = utf8.baseAddress {
          scratch[column].baseAddress!.copyMemory(from: base, byteCount: utf8.count)
        }
        written = utf8.count
      }
    }
    scratchRow[column] = (row, written)
    return UnsafeRawBufferPointer(start: scratch[column].baseAddress, count: written)
  }

  /// Makes column `column`'s scratch buffer hold at least `needed` bytes.
  private func reserveScratch(_ column: Int, _ needed: Int) {
    guard scratch[column].count < needed else { return }
    if scratch[column].baseAddress != nil { scratch[column].deallocate() }
    scratch[column] = .allocate(byteCount: max(needed, 64), alignment: 1)
  }

  /// Writes `bytea`'s text form (`\x` and two hex digits a byte; anything else copied as it
  /// is) into `target`, at most its size; the byte count.
  static func decodeHex(_ text: UnsafeRawBufferPointer, into target: UnsafeMutableRawBufferPointer)
    -> Int
  {
    guard text.count >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x") else {
      let count = min(text.count, target.count)
      if count > 0 { target.baseAddress!.copyMemory(from: text.baseAddress!, byteCount: count) }
      return count
    }
    func nibble(_ digit: UInt8) -> UInt8 {
      switch digit {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
      default: digit &- UInt8(ascii: "A") &+ 10
      }
    }
    var index = 2
    var count = 0
    while index + 1 < text.count, count < target.count {
      target[count] = nibble(text[index]) << 4 | nibble(text[index + 1])
      count += 1
      index += 2
    }
    return count
  }

}
