import Foundation

/// A value as a store keeps it: one of five storage classes (SQLite's; other engines map
/// their types to these).
public enum SQLValue: Hashable, Sendable {
  /// SQL `NULL`; Swift's `nil`.
  case null
  /// A 64-bit signed integer.
  case integer(Int64)
  /// A 64-bit IEEE float. NaN cannot be stored.
  case real(Double)
  /// UTF-8 text.
  case text(String)
  /// Bytes.
  case blob(Data)
}

extension SQLValue: CustomStringConvertible {
  /// A short, SQL-like rendering for messages and debugging.
  public var description: String {
    switch self {
    case .null: "NULL"
    case .integer(let value): String(value)
    case .real(let value): String(value)
    case .text(let value): "'\(value.replacingOccurrences(of: "'", with: "''"))'"
    case .blob(let value): "x'\(value.map { String(format: "%02x", $0) }.joined())'"
    }
  }
}
