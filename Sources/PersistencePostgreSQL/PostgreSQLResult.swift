/// A PostgreSQL error with the server's own words, used as the `cause` of a `PersistenceError`.
public struct PostgreSQLResult: Error, Sendable, CustomStringConvertible {
  /// The five-character SQLSTATE (`23505` for a unique violation), or empty when the error did
  /// not come from the server (the connection failed or was lost).
  public var sqlState: String
  /// The message libpq gave (`PQresultErrorMessage` or `PQerrorMessage`), without its final
  /// line break.
  public var message: String

  /// Creates a result.
  public init(sqlState: String, message: String) {
    self.sqlState = sqlState
    self.message = message
  }

  /// `PostgreSQL error <SQLSTATE>: <message>`.
  public var description: String {
    sqlState.isEmpty ? "PostgreSQL: \(message)" : "PostgreSQL error \(sqlState): \(message)"
  }
}
