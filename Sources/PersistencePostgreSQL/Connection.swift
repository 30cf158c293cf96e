internal import CLibPQ
import Foundation
import PersistenceCore
import Synchronization

/// One libpq connection (`PGconn`), its owner, and its statement cache.
///
/// The connection is this object's alone: made in `init`, finished once in `deinit`
/// (`PQfinish`); each result (`PGresult`) belongs to the statement that ran it. Not
/// thread-safe: each owner (a `ModelContext`, an observer) uses its own connection from one
/// thread at a time, as with SQLite. For that reason the properties every statement run
/// touches skip Swift's dynamic exclusivity checks (`@exclusivity(unchecked)`, as
/// ``Statement``'s do).
final class Connection: StoreConnection {
  let handle: OpaquePointer
  /// Where it connected, without a password, for messages.
  let location: String
  /// Where the connection goes back when this object goes, if it is idle and sound (instead of
  /// being finished): the store's pool.
  private let pool: ConnectionPool?
  /// The statements `cachedStatement(_:)` and `cachedInsert(_:keyColumn:)` keep (at most
  /// ``StatementCache/defaultCapacity``); a dropped one's server-side statements are
  /// deallocated (``deallocateDropped()``).
  @exclusivity(unchecked) private var cache = StatementCache<Statement>()
  /// Server-side statements of dropped cached statements, with the session they belong to,
  /// deallocated when no transaction is open.
  private var droppedStatements: [(session: Int, name: String)] = []
  /// The key of the last `INSERT`'s row, read on demand (`lastval()`).
  @exclusivity(unchecked) private var insertedKeyIsStale = false
  @exclusivity(unchecked) private var insertedKey: Int64 = 0
  /// Rows the last statement changed (`PQcmdTuples`).
  @exclusivity(unchecked) var changedRowCount = 0

  /// The session's settings, made on connecting and again after reconnecting.
  private let sessionSQL: String
  /// The channel writers `NOTIFY` when they commit, and monitors `LISTEN` on.
  static let channel = "\"_persistence_changes\""
  /// Whether this connection listens on ``channel`` (again after reconnecting).
  private var listening = false
  /// Where the session stands (``SessionState``), moved by libpq's transaction status after
  /// each command: a lost connection inside a transaction loses it, and the caller must hear
  /// of it; a session that could not be set up is `broken`, and `deinit` (which runs for an
  /// initializer that throws once every property is set) finishes it rather than pooling it.
  @exclusivity(unchecked) private var state = SessionState.idle

  /// Connects. `conninfo` is anything `PQconnectdb` takes: a `postgresql://` URI or
  /// `key=value` pairs (`service=name` included). A `readOnly` session refuses writes.
  ///
  /// - Throws: `PersistenceError` with `cannotOpen`, naming `location` and the server's or
  ///   libpq's reason. `setup` replaces the session's settings (tests pass a failing one).
  init(
    conninfo: String, location: String, readOnly: Bool = false, pool: ConnectionPool? = nil,
    setup: String? = nil
  ) throws {
    if let pool, let reused = pool.take(setup: Connection.sessionSQL(readOnly: readOnly)) {
      handle = reused
      self.location = location
      self.pool = pool
      sessionSQL = Connection.sessionSQL(readOnly: readOnly)
      return
    }
    guard let handle = PQconnectdb(conninfo) else {
      throw PersistenceError(
        code: .cannotOpen, message: "Cannot connect to \(location): out of memory.")
    }
    guard PQstatus(handle) == CONNECTION_OK else {
      let message = Connection.message(handle)
      PQfinish(handle)
      throw PersistenceError(
        code: .cannotOpen,
        message:
          "Cannot connect to the PostgreSQL store \(location): \(message). Check the URL, that the server runs, and the credentials.",
        cause: PostgreSQLResult(sqlState: "", message: message))
    }
    self.handle = handle
    self.location = location
    self.pool = pool
    sessionSQL = setup ?? Connection.sessionSQL(readOnly: readOnly)
    // Notices ("… already exists, skipping") would go to standard error by default.
    PQsetNoticeProcessor(handle, { _, _ in }, nil)
    do {
      try execute(sessionSQL)
    } catch {
      // Every property is set, so `deinit` runs and finishes the connection, once.
      state = .broken
      throw error
    }
  }

  deinit {
    cache.removeAll()
    // An idle, sound session goes back to the pool (which finishes it when full).
    if let pool, state == .idle, PQstatus(handle) == CONNECTION_OK,
      PQtransactionStatus(handle) == PQTRANS_IDLE
    {
      pool.give(handle, setup: sessionSQL)
    } else {
      PQfinish(handle)
    }
  }

  /// The session's settings: UTF-8 both ways, UTC, floats written with every digit a `Double`
  /// needs, and read-only transactions for a store opened without saves.
  static func sessionSQL(readOnly: Bool) -> String {
    "SET client_encoding TO 'UTF8'; SET TIME ZONE 'UTC'; SET extra_float_digits TO 3"
      + (readOnly ? "; SET default_transaction_read_only TO on" : "")
  }

  /// libpq's last message for the connection, without the final line break.
  static func message(_ handle: OpaquePointer) -> String {
    guard let text = PQerrorMessage(handle) else { return "unknown error" }
    return String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
  }

  /// Runs one or more statements that take no parameters, through the simple query protocol.
  func execute(_ sql: String) throws {
    let result = try send(sql, verb: TransactionVerb(sql)) { PQexec(handle, sql) }
    defer { PQclear(result) }
    let status = PQresultStatus(result)
    guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
      throw error(result, sql: sql)
    }
    noteCompletion(of: result, sql: sql)
  }

  /// Sends one command with `send` and returns its result, reconnecting when the connection
  /// was lost (a server restart, `pg_terminate_backend`, a network cut):
  ///
  /// - outside a transaction, the command is sent again on a new connection (once), so a lost
  ///   connection between transactions costs the caller nothing;
  /// - inside one, the transaction is gone with the connection: the command fails with an
  ///   error saying so, and so does every command but `ROLLBACK` until the caller rolls back,
  ///   which reconnects (nothing of the transaction can reach the store).
  ///
  /// The result is the caller's to clear. `verb` is `TransactionVerb(sql)`, which a statement
  /// reads once.
  func send(_ sql: String, verb: TransactionVerb, _ send: () -> OpaquePointer?) throws
    -> OpaquePointer
  {
    let ends = verb == .commit || verb == .rollback
    if !ends { try applyDeadline() }
    if PQstatus(handle) == CONNECTION_BAD {
      if state.isInTransaction && verb != .rollback {
        state = .lostTransaction
        throw lostTransaction(sql: sql)
      }
      state = .idle
      try reconnect(sql: sql)
    }
    var result = send()
    if PQstatus(handle) == CONNECTION_BAD {
      if let result { PQclear(result) }
      if state.isInTransaction || ends {
        // A COMMIT whose answer was lost may or may not have happened.
        if state.isInTransaction { state = .lostTransaction }
        throw lostTransaction(sql: sql)
      }
      try reconnect(sql: sql)
      result = send()
    }
    guard let result else { throw lostError(sql: sql) }
    state = state.after(PQtransactionStatus(handle))
    return result
  }

  /// The session's `statement_timeout` in milliseconds (0: none), as this connection set it.
  private var statementTimeout = 0

  /// Stops now when the ``WorkDeadline`` in force says so, and bounds each statement by its
  /// limit (`statement_timeout`, set when it changes: one round trip the first time a session
  /// works under a deadline, and when it works without one again). A statement the server
  /// cancels for it is ``PersistenceError/Code/timedOut``.
  private func applyDeadline() throws {
    let deadline = WorkDeadline.current
    try deadline?.check()
    var wanted = 0
    if let limit = deadline?.limit {
      let (seconds, attoseconds) = limit.components
      wanted = max(1, Int(seconds) * 1_000 + Int(attoseconds / 1_000_000_000_000_000))
    }
    guard wanted != statementTimeout, PQstatus(handle) == CONNECTION_OK else { return }
    guard let result = PQexec(handle, "SET statement_timeout = \(wanted)") else { return }
    defer { PQclear(result) }
    if PQresultStatus(result) == PGRES_COMMAND_OK { statementTimeout = wanted }
  }

  /// A new connection in place of the lost one (`PQreset`), with the session's settings.
  private func reconnect(sql: String) throws {
    PQreset(handle)
    session += 1
    statementTimeout = 0
    guard PQstatus(handle) == CONNECTION_OK else {
      throw Connection.error(
        sqlState: "", message: "reconnecting failed: \(Connection.message(handle))", sql: sql)
    }
    let setup = sessionSQL + (listening ? "; LISTEN \(Connection.channel)" : "")
    guard let result = PQexec(handle, setup) else { throw lostError(sql: sql) }
    PQclear(result)
  }

  /// Waits on the connection's socket for a notice that a writer committed (`LISTEN`, started
  /// on the first call), up to a second whatever `timeout` asks: the monitor reads the store
  /// after each wait, so a notice lost while the connection was down costs at most that second.
  /// On a broken connection it sleeps for `timeout` (the next read reconnects). Cost: no query
  /// while nothing is committed.
  func waitForExternalChange(timeout: Duration) {
    if !listening {
      guard (try? execute("LISTEN \(Connection.channel)")) != nil else { return sleep(timeout) }
      listening = true
    }
    if drainNotifications() { return }
    let socket = PQsocket(handle)
    guard socket >= 0, PQstatus(handle) == CONNECTION_OK else { return sleep(timeout) }
    var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
    _ = poll(&descriptor, 1, 1000)
    if descriptor.revents != 0 {
      // Read what arrived; a closed socket leaves the connection bad, to be replaced.
      PQconsumeInput(handle)
      _ = drainNotifications()
    }
  }

  /// Frees the notices received so far; true when there was one.
  private func drainNotifications() -> Bool {
    var found = false
    while let notice = PQnotifies(handle) {
      PQfreemem(notice)
      found = true
    }
    return found
  }

  private func sleep(_ timeout: Duration) {
    let (seconds, attoseconds) = timeout.components
    Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
  }

  /// The error for a command of a transaction whose connection was lost.
  private func lostTransaction(sql: String) -> PersistenceError {
    Connection.error(
      sqlState: "",
      message:
        "the connection was lost inside a transaction, which did not complete (\(Connection.message(handle))); it is reconnected when the transaction is rolled back",
      sql: sql)
  }

  /// Prepares a statement for one use.
  func prepare(_ sql: String) throws -> any StoreStatement { Statement(sql: sql, connection: self) }

  /// A reset statement for `sql`, made once per connection and kept.
  func cachedStatement(_ sql: String) throws -> any StoreStatement {
    if let statement = cache.statement(for: sql) {
      statement.reset()
      return statement
    }
    let statement = Statement(sql: sql, connection: self, cached: true)
    keep(statement, for: sql)
    return statement
  }

  /// The statement for an `INSERT` that returns its new row's `keyColumn` (`RETURNING`), read
  /// as ``lastInsertedKey`` without a second round trip; prepared and kept as
  /// ``cachedStatement(_:)`` is.
  func cachedInsert(_ sql: String, keyColumn: String) throws -> any StoreStatement {
    let key = sql + "\u{0}" + keyColumn
    if let statement = cache.statement(for: key) {
      statement.reset()
      return statement
    }
    let statement = Statement(sql: sql, connection: self, cached: true, keyColumn: keyColumn)
    keep(statement, for: key)
    return statement
  }

  /// Keeps `statement` in the cache; the statements it drops give up their server-side
  /// statements, deallocated now if no transaction is open.
  private func keep(_ statement: Statement, for key: String) {
    for dropped in cache.insert(statement, for: key) {
      droppedStatements += dropped.preparedNames.map { (dropped.preparedSession, $0) }
    }
    deallocateDropped()
  }

  /// Deallocates the server-side statements of dropped cached statements, in one round trip,
  /// when no transaction is open (an aborted one would refuse the command); those of an
  /// earlier session went with it. An error (the connection lost meanwhile) is ignored: the
  /// statements go with the session.
  private func deallocateDropped() {
    guard !droppedStatements.isEmpty, !state.isInTransaction else { return }
    let names = droppedStatements.filter { $0.session == session }.map(\.name)
    droppedStatements.removeAll()
    guard !names.isEmpty else { return }
    try? execute(names.map { "DEALLOCATE \($0)" }.joined(separator: "; "))
  }

  /// How many statements the cache keeps (for tests).
  var cachedStatementCount: Int { cache.count }

  /// Counts the sessions of this connection (each reconnect is a new one, which has none of
  /// the old one's prepared statements).
  @exclusivity(unchecked) private(set) var session = 0
  @exclusivity(unchecked) private var statementCount = 0

  /// A name for a new server-side prepared statement of this session.
  func makeStatementName() -> String {
    statementCount += 1
    return "s\(statementCount)"
  }

  /// Records the key an `INSERT … RETURNING` gave.
  func noteInsertedKey(_ key: Int64) {
    insertedKey = key
    insertedKeyIsStale = false
  }

  /// The key of the row the last `INSERT` made: returned by the insert itself for a statement
  /// from ``cachedInsert(_:keyColumn:)``, else `lastval()`, the last value any sequence gave
  /// this session (each table's key is an identity column).
  var lastInsertedKey: Int64 {
    get throws {
      if insertedKeyIsStale {
        guard let key = try scalarInt("SELECT lastval()") else {
          throw PersistenceError(
            code: .engine,
            message:
              "PostgreSQL gave no key for the row just inserted (lastval() answered nothing); nothing can point to it, so the save is stopped."
          )
        }
        insertedKey = key
        insertedKeyIsStale = false
      }
      return insertedKey
    }
  }

  /// Whether a transaction is open (or failed, or lost with its connection, and not yet
  /// rolled back).
  var isInTransaction: Bool { state.isInTransaction }

  /// Whether another context may use the connection: sound, idle, and not listening (a
  /// monitor's connection is its own).
  var isReusable: Bool {
    state == .idle && !listening && PQstatus(handle) == CONNECTION_OK
      && PQtransactionStatus(handle) == PQTRANS_IDLE
  }

  /// The advisory lock key writers take: 'TRPS'. One writer at a time per database, as with
  /// SQLite, so that history tokens are issued in commit order.
  static let writeLockKey: Int64 = 0x5452_5053

  /// `BEGIN`, then the store's write lock, held until commit or rollback.
  func beginWriting() throws {
    try execute("BEGIN ISOLATION LEVEL READ COMMITTED")
    state = state.writing
    do {
      try execute("SELECT pg_advisory_xact_lock(\(Connection.writeLockKey))")
    } catch {
      try? execute("ROLLBACK")
      throw error
    }
  }

  /// A read transaction that sees one state of the store.
  func beginReading() throws { try execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") }

  /// Commits; a writing transaction first queues a `NOTIFY` (sent by the server at commit, and
  /// only then), which wakes other processes' monitors.
  func commit() throws {
    if state.isWriting { try execute("NOTIFY \(Connection.channel)") }
    try execute("COMMIT")
  }

  func rollback() throws {
    // The transaction ends however the command fares.
    defer { state = .idle }
    try execute("ROLLBACK")
  }

  /// Code-point order (`"C"`) for lexical comparison, which is Swift's order of NFC text; the
  /// localized comparators have no collation here yet.
  func collation(for comparator: String.StandardComparator) throws -> String {
    if comparator == .lexical { return "\"C\"" }
    throw PersistenceError(
      code: .unsupportedPredicate,
      message:
        "Sorting by a localized comparator is not supported on PostgreSQL stores yet; sort by .lexical, or sort the fetched models."
    )
  }

  /// The newest history token issued: the token sequence's last value (0 before the first).
  func lastIssuedHistoryToken() throws -> Int64 {
    try scalarInt(
      "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM \"_history_transactions_token_seq\""
    ) ?? 0
  }

  /// `EXPLAIN`'s lines for `sql`.
  func queryPlan(_ sql: String, bindings: [SQLValue]) throws -> [String] {
    let statement = Statement(sql: "EXPLAIN " + sql, connection: self)
    statement.bindValues(bindings)
    var lines: [String] = []
    while try statement.step() { lines.append(statement.text(at: 0)) }
    return lines
  }

  /// False: the server cannot call Swift, so the core narrows queries that need Swift's string
  /// functions and finishes them in Swift (see `StoreFunctions`).
  var evaluatesSwiftFunctions: Bool { false }
  /// Tombstone values are text: a bound value is cast as the insert's assignment cast it.
  var tombstoneValueParameter: String { "CAST(? AS text)" }

  /// The keys as an array literal, cast to `bigint[]`.
  func keyListCondition(_ column: String) -> String {
    "\(column) = ANY(CAST(? AS bigint[]))"
  }

  func keyListText(_ keys: [Int64]) -> String {
    "{" + keys.map(String.init).joined(separator: ",") + "}"
  }

  /// Rows a save sends in one batch (``runBatch(_:count:answer:binding:)``): one round trip
  /// for up to this many. The answers to a batch of inserts or lookups (a key each, about
  /// 100 bytes with their messages) stay far below what the socket's buffers hold, so the
  /// server never waits for this client to read while this client is still sending, whatever
  /// the rows' size.
  var batchLimit: Int { 128 }

  /// Runs `statement` `count` times in libpq's pipeline mode: every run is sent (prepared in
  /// the same pipeline when it was not in this session), then one sync, then the answers are
  /// read in order. One round trip for the batch, against one a run; O(`count` × parameters)
  /// here. A batch of one runs as any statement does.
  ///
  /// After an error the server skips the rest of the pipeline; every answer is still read,
  /// pipeline mode is left, and the first error is thrown (the transaction is then failed, and
  /// the caller rolls it back). A connection lost meanwhile throws as a lost transaction does
  /// (the rollback reconnects).
  func runBatch(
    _ statement: any StoreStatement, count: Int, answer: BatchAnswer,
    binding: (Int) throws -> Void
  ) throws -> [Int64?] {
    // Every statement of this connection is one of ours (it made them); a foreign one is a
    // programming error, caught here in every build rather than read as ours.
    guard let statement = statement as? Statement else {
      preconditionFailure("runBatch was given a statement this PostgreSQL connection did not make")
    }
    // One run gains nothing from a pipeline: it runs as any statement does.
    guard count > 1 else {
      return try runInTurn(statement, count: count, answer: answer, binding: binding)
    }
    guard PQstatus(handle) == CONNECTION_OK else {
      throw state.isInTransaction
        ? lostTransaction(sql: statement.sql) : lostError(sql: statement.sql)
    }
    guard PQenterPipelineMode(handle) == 1 else { throw lostError(sql: statement.sql) }
    // Per answer expected, in order: whether it is a run's (true) or a prepare's (false).
    var expected: [Bool] = []
    expected.reserveCapacity(count + 1)
    var preparedNow: [[Oid]] = []
    var failure: Error?
    for index in 0..<count {
      do {
        try binding(index)
        if let types = try statement.send() {
          preparedNow.append(types)
          expected.append(false)
        }
        expected.append(true)
      } catch {
        failure = error
        break
      }
    }
    var answers: [Int64?] = []
    answers.reserveCapacity(count)
    var serverFailure: PersistenceError?
    var lost = PQpipelineSync(handle) != 1
    var position = 0
    var ends = 0
    while !lost {
      guard let result = PQgetResult(handle) else {
        // The end of one command's answer; more of them than commands: the connection failed.
        ends += 1
        if PQstatus(handle) == CONNECTION_BAD || ends > expected.count + 1 { lost = true }
        continue
      }
      let status = PQresultStatus(result)
      if status == PGRES_PIPELINE_SYNC {
        PQclear(result)
        break
      }
      let isRun = position < expected.count ? expected[position] : true
      position += 1
      switch status {
      case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
        if isRun {
          switch answer {
          case .none: answers.append(nil)
          case .changedRowCount: answers.append(Int64(Self.commandRowCount(result)))
          case .firstColumn, .insertedKey: answers.append(Statement.firstInteger(result))
          }
        }
      case PGRES_PIPELINE_ABORTED:
        break
      default:
        if serverFailure == nil { serverFailure = error(result, sql: statement.sql) }
      }
      PQclear(result)
    }
    if !lost, PQexitPipelineMode(handle) != 1 { lost = true }
    if lost || serverFailure != nil || failure != nil { statement.forgetPrepared(preparedNow) }
    if lost {
      // A session left in the middle of a pipeline is of no further use: replaced now (a
      // broken one is replaced when the transaction is rolled back), its transaction gone.
      if PQstatus(handle) == CONNECTION_OK { try? reconnect(sql: statement.sql) }
      throw lostTransaction(sql: statement.sql)
    }
    // A server's error comes from a run before the one whose binding failed, if both did.
    if let serverFailure { throw serverFailure }
    if let failure { throw failure }
    guard answers.count == count else {
      throw Connection.error(
        sqlState: "",
        message: "the server answered \(answers.count) of \(count) statements of a batch",
        sql: statement.sql)
    }
    return answers
  }

  /// The newest committed history token this connection can see.
  func externalChangeCounter() throws -> Int64 {
    try scalarInt("SELECT coalesce(max(token), 0) FROM \"_history_transactions\"") ?? 0
  }

  // MARK: Results and errors

  /// How many rows a finished command changed: its tag's decimal digits, read in place (0 for
  /// a command that changes no rows).
  static func commandRowCount(_ result: OpaquePointer) -> Int {
    var count = 0
    if var digit = PQcmdTuples(result) {
      while digit.pointee >= 0x30 && digit.pointee <= 0x39 {
        count = count &* 10 &+ Int(digit.pointee - 0x30)
        digit += 1
      }
    }
    return count
  }

  /// Records what a finished command changed, for ``changedRowCount`` and ``lastInsertedKey``.
  func noteCompletion(of result: OpaquePointer, sql: String) {
    changedRowCount = Self.commandRowCount(result)
    if let status = PQcmdStatus(result), strncmp(status, "INSERT", 6) == 0 {
      insertedKeyIsStale = true
    }
  }

  /// The error a failed result stands for, with its SQLSTATE mapped to the core's codes.
  func error(_ result: OpaquePointer, sql: String?) -> PersistenceError {
    let sqlState = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map {
      String(cString: $0)
    }
    let message =
      PQresultErrorMessage(result).map {
        String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines)
      } ?? Connection.message(handle)
    return Connection.error(sqlState: sqlState ?? "", message: message, sql: sql)
  }

  /// The error for a connection that gave no result at all (lost, or out of memory).
  func lostError(sql: String?) -> PersistenceError {
    Connection.error(sqlState: "", message: Connection.message(handle), sql: sql)
  }

  static func error(sqlState: String, message: String, sql: String?) -> PersistenceError {
    let cause = PostgreSQLResult(sqlState: sqlState, message: message)
    let code: PersistenceError.Code
    switch sqlState {
    case "23505": code = .uniqueConstraint
    case "23503": code = .relationshipConstraint
    case "40001", "40P01", "55P03": code = .busy
    case "25006": code = .readOnly
    case "53100": code = .storeFull
    case "0A000": code = .unsupportedPredicate
    case "22003": code = .outOfRange
    case "57014" where WorkDeadline.current?.shouldStop == true:
      // Cancelled by statement_timeout (applyDeadline): the deadline's own error.
      let stopped = WorkDeadline.current!.error
      return PersistenceError(code: stopped.code, message: stopped.message, cause: cause)
    default: code = .engine
    }
    let text =
      sqlState.isEmpty
      ? "The connection to the PostgreSQL store failed: \(message)" : message
    return PersistenceError(
      code: code, message: sql.map { "\(text) (in: \($0))" } ?? text, cause: cause)
  }
}
