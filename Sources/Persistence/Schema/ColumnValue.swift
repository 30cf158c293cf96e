import Foundation

/// The library's fast path for ``PersistableValue``: read a column and bind a parameter
/// directly, without an intermediate ``SQLValue``.
protocol ColumnValue: PersistableValue {
  static func read(from statement: Statement, at index: Int32) throws -> Self
  func bind(to statement: Statement, at index: Int32) throws
}

extension String: ColumnValue {
  static func read(from statement: Statement, at index: Int32) -> String {
    statement.text(at: index)
  }
  func bind(to statement: Statement, at index: Int32) { statement.bindText(nfc, at: index) }
}

extension Int: ColumnValue {
  static func read(from statement: Statement, at index: Int32) -> Int {
    Int(statement.int64(at: index))
  }
  func bind(to statement: Statement, at index: Int32) {
    statement.bindInt64(Int64(self), at: index)
  }
}

extension Double: ColumnValue {
  static func read(from statement: Statement, at index: Int32) -> Double {
    statement.double(at: index)
  }
  func bind(to statement: Statement, at index: Int32) throws {
    guard !isNaN else {
      throw PersistenceError(
        code: .invalidValue,
        message: "NaN cannot be stored: SQLite would turn it into NULL. Store nil or a number.")
    }
    statement.bindDouble(self, at: index)
  }
}

extension Bool: ColumnValue {
  static func read(from statement: Statement, at index: Int32) -> Bool {
    statement.int64(at: index) != 0
  }
  func bind(to statement: Statement, at index: Int32) {
    statement.bindInt64(self ? 1 : 0, at: index)
  }
}

extension Date: ColumnValue {
  static func read(from statement: Statement, at index: Int32) -> Date {
    Date(timeIntervalSinceReferenceDate: statement.double(at: index))
  }
  func bind(to statement: Statement, at index: Int32) throws {
    try timeIntervalSinceReferenceDate.bind(to: statement, at: index)
  }
}

extension UUID: ColumnValue {
  static func read(from statement: Statement, at index: Int32) throws -> UUID {
    let data = statement.data(at: index)
    guard data.count == 16 else { throw invalid(.blob(data), UUID.self) }
    return UUID(bytes16: data)
  }
  func bind(to statement: Statement, at index: Int32) {
    var raw = uuid
    withUnsafeBytes(of: &raw) { statement.bindData(Data($0), at: index) }
  }
}

extension Data: ColumnValue {
  static func read(from statement: Statement, at index: Int32) -> Data { statement.data(at: index) }
  func bind(to statement: Statement, at index: Int32) { statement.bindData(self, at: index) }
}

extension Optional: ColumnValue where Wrapped: ColumnValue {
  static func read(from statement: Statement, at index: Int32) throws -> Wrapped? {
    statement.isNull(at: index) ? nil : try Wrapped.read(from: statement, at: index)
  }
  func bind(to statement: Statement, at index: Int32) throws {
    if let self { try self.bind(to: statement, at: index) } else { statement.bindNull(index) }
  }
}

extension Equatable {
  /// Whether `other` is a `Self` equal to this value.
  func isEqual(toAny other: Any) -> Bool { (other as? Self) == self }
}
