import Foundation

/// One save, as history keeps it: SwiftData's `HistoryTransaction` protocol. This store's
/// transactions are ``DefaultHistoryTransaction``s.
public protocol HistoryTransaction: Hashable, Identifiable, Sendable {
  /// The type of the transaction's token.
  associatedtype TokenType: HistoryToken
  /// The type that identifies a transaction.
  associatedtype TransactionIdentifier: Comparable, Hashable, Sendable
  /// What the save changed.
  var changes: [HistoryChange] { get }
  /// The transaction's identity in its store.
  var transactionIdentifier: TransactionIdentifier { get }
  /// The store the transaction belongs to.
  var storeIdentifier: String { get }
  /// The author of the context that saved.
  var author: String? { get }
  /// When the save committed.
  var timestamp: Date { get }
  /// The transaction's token: history fetched after it holds only later transactions.
  var token: TokenType { get }
}

/// One save, as history keeps it: SwiftData's `DefaultHistoryTransaction`.
///
/// Two transactions are equal when they are the same transaction of the same store (their
/// tokens are).
public struct DefaultHistoryTransaction: HistoryTransaction {
  /// The transaction's token; fetch after it to see only later transactions.
  public let token: DefaultHistoryToken
  /// The author of the context that saved (``ModelContext/author``).
  public let author: String?
  /// When the save committed.
  public let timestamp: Date
  /// What the save changed, in the order it was recorded.
  public internal(set) var changes: [HistoryChange]

  /// The transaction's position in its store's history (``DefaultHistoryToken/value``).
  public var transactionIdentifier: Int64 { token.value }
  /// The transaction's position in its store's history.
  public var id: Int64 { token.value }
  /// The identifier of the store the transaction belongs to, as text (lowercase, as a token's
  /// ``DefaultHistoryToken/description`` writes it).
  public var storeIdentifier: String { token.storeIdentifier.uuidString.lowercased() }
  /// The bundle identifier of the program that saved: `Bundle.main.bundleIdentifier` where it
  /// has one, else (on Linux, for a command-line program or a server) its process name, as
  /// `ProcessInfo.processName` gives it. Empty for a transaction a store made before this was
  /// recorded.
  public let bundleIdentifier: String
  /// The process identifier of the program that saved, in decimal (`ProcessInfo`'s
  /// `processIdentifier`): with ``bundleIdentifier``, which of several servers sharing a store
  /// wrote it. Empty for a transaction a store made before this was recorded.
  public let processIdentifier: String

  init(
    token: DefaultHistoryToken, author: String?, timestamp: Date, bundleIdentifier: String,
    processIdentifier: String, changes: [HistoryChange]
  ) {
    self.token = token
    self.author = author
    self.timestamp = timestamp
    self.bundleIdentifier = bundleIdentifier
    self.processIdentifier = processIdentifier
    self.changes = changes
  }

  /// Whether both are the same transaction of the same store.
  public static func == (lhs: DefaultHistoryTransaction, rhs: DefaultHistoryTransaction) -> Bool {
    lhs.token == rhs.token
  }

  /// Hashes the token.
  public func hash(into hasher: inout Hasher) { hasher.combine(token) }
}
