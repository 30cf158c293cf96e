internal import CLibPQ

/// Where a connection's session stands: one value, moved by libpq's own transaction status
/// (`PQtransactionStatus`) after every command, with the two things only this side knows —
/// whether the open transaction writes (its commit notifies other processes' monitors), and
/// whether the connection was lost inside a transaction (which did not complete).
///
/// | state | libpq | commands accepted |
/// |---|---|---|
/// | `idle` | `PQTRANS_IDLE` | any; a lost connection is reconnected and the command sent again |
/// | `inTransaction` | `PQTRANS_INTRANS` | any |
/// | `failedTransaction` | `PQTRANS_INERROR` | `ROLLBACK` (the server refuses the rest) |
/// | `lostTransaction` | connection bad | `ROLLBACK`, which reconnects; the rest fail |
/// | `broken` | — | none: the session could not be set up, and is finished, never pooled |
///
/// A connection is given back to the pool only `idle` (see `Connection.deinit`).
enum SessionState: Equatable {
  case idle
  case inTransaction(writing: Bool)
  case failedTransaction(writing: Bool)
  case lostTransaction
  case broken

  /// Whether a transaction is open (or failed, or lost with its connection) and not yet
  /// rolled back.
  var isInTransaction: Bool {
    switch self {
    case .inTransaction, .failedTransaction, .lostTransaction: true
    case .idle, .broken: false
    }
  }

  /// Whether the open transaction writes.
  var isWriting: Bool {
    switch self {
    case .inTransaction(let writing), .failedTransaction(let writing): writing
    case .idle, .lostTransaction, .broken: false
    }
  }

  /// The state once a command completed and libpq reports `status`. A bad connection
  /// (`PQTRANS_UNKNOWN`) loses an open transaction; between transactions it stays `idle`
  /// (the next command reconnects).
  func after(_ status: PGTransactionStatusType) -> SessionState {
    switch status {
    case PQTRANS_IDLE: .idle
    case PQTRANS_INTRANS: .inTransaction(writing: isWriting)
    case PQTRANS_INERROR: .failedTransaction(writing: isWriting)
    case PQTRANS_ACTIVE: self
    default: isInTransaction ? .lostTransaction : self
    }
  }

  /// The open transaction, marked as one that writes.
  var writing: SessionState {
    switch self {
    case .inTransaction: .inTransaction(writing: true)
    case .failedTransaction: .failedTransaction(writing: true)
    case .idle, .lostTransaction, .broken: self
    }
  }
}

/// The transaction command a statement starts with, if any: what
/// ``Connection/send(_:verb:_:)`` needs to know of each command, read from its first bytes
/// without copying the SQL.
enum TransactionVerb: Equatable {
  case begin, commit, rollback, other

  init(_ sql: String) {
    // The first word's ASCII letters, upper-cased, packed into an integer (a word of more than
    // eight letters is none of these).
    var packed: UInt64 = 0
    var length = 0
    for byte in sql.utf8 {
      let upper = byte & ~0x20
      guard upper >= UInt8(ascii: "A"), upper <= UInt8(ascii: "Z") else { break }
      length += 1
      guard length <= 8 else { break }
      packed = packed << 8 | UInt64(upper)
    }
    switch length <= 8 ? packed : 0 {
    case TransactionVerb.pack("BEGIN"): self = .begin
    case TransactionVerb.pack("COMMIT"), TransactionVerb.pack("END"): self = .commit
    case TransactionVerb.pack("ROLLBACK"), TransactionVerb.pack("ABORT"): self = .rollback
    default: self = .other
    }
  }

  private static func pack(_ word: StaticString) -> UInt64 {
    word.withUTF8Buffer { $0.reduce(0) { $0 << 8 | UInt64($1) } }
  }
}
