/// A SQLite result code with SQLite's own message, used as the `cause` of a `PersistenceError`.
public struct SQLiteResult: Error, Sendable, CustomStringConvertible {
  /// The extended SQLite result code.
  public var code: Int32
  /// The message SQLite gave (`sqlite3_errmsg`).
  public var message: String

  /// Creates a result.
  public init(code: Int32, message: String) {
    self.code = code
    self.message = message
  }

  /// `SQLite error <code>: <message>`.
  public var description: String { "SQLite error \(code): \(message)" }
}
