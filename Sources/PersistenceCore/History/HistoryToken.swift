import Foundation

/// A point in a store's history, as SwiftData's `HistoryToken`: tokens of one store are
/// ordered, and `Codable`, so that a consumer can persist the last one it processed and resume
/// after a restart. This store's tokens are ``DefaultHistoryToken``s.
public protocol HistoryToken: Codable, Comparable, Hashable, Sendable {}

/// Marks a point in a store's history: the transaction of one save. SwiftData's
/// `DefaultHistoryToken`.
///
/// Tokens of one store are ordered by commit. A token carries its store's identifier; using it
/// with another store throws ``PersistenceError/Code/historyTokenForeign``.
public struct DefaultHistoryToken: HistoryToken, CustomStringConvertible {
  /// The identifier of the store the token belongs to.
  public let storeIdentifier: UUID
  /// The transaction's position in the store's history (increasing, never reused).
  public let value: Int64

  /// Creates a token. Tokens normally come from history; this is for decoding and tests.
  public init(storeIdentifier: UUID, value: Int64) {
    self.storeIdentifier = storeIdentifier
    self.value = value
  }

  /// Orders the tokens of a store by position. Tokens of different stores are ordered by
  /// their stores' identifiers, which says nothing of their history: never equal, so that the
  /// order agrees with `==` (history refuses another store's token,
  /// ``PersistenceError/Code/historyTokenForeign``).
  public static func < (lhs: DefaultHistoryToken, rhs: DefaultHistoryToken) -> Bool {
    guard lhs.storeIdentifier == rhs.storeIdentifier else {
      return lhs.storeIdentifier.uuidString < rhs.storeIdentifier.uuidString
    }
    return lhs.value < rhs.value
  }

  /// `<store>:<position>`, the form the CLI prints and accepts.
  public var description: String { "\(storeIdentifier.uuidString.lowercased()):\(value)" }

  /// Parses the ``description`` form.
  public init?(_ text: String) {
    let parts = text.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count == 2, let store = UUID(uuidString: String(parts[0])),
      let value = Int64(parts[1]), value >= 0
    else { return nil }
    self.init(storeIdentifier: store, value: value)
  }
}
