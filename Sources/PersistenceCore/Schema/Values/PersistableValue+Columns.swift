import Foundation

// The library's fast paths for ``PersistableValue``: read a column and bind a parameter
// directly, without an intermediate ``SQLValue``. A column whose storage class is not the
// attribute's (an outside writer stored 'abc' in an INTEGER column, or NULL in a non-optional
// one) is an error (`invalidValue`; the fetch names the row and the column), never a silent 0.

/// Throws unless column `index` holds one of the `accepted` storage classes.
@inline(__always)
func expectStorage<T>(
  _ statement: any StoreRow, _ index: Int32, _ accepted: ColumnStorage,
  or other: ColumnStorage? = nil, as type: T.Type
) throws {
  let stored = statement.storage(at: index)
  guard stored == accepted || stored == other else {
    throw invalid(statement.value(at: index), type)
  }
}

extension String {
  /// Reads the column directly.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> String {
    try expectStorage(statement, index, .text, as: String.self)
    return statement.text(at: index)
  }
  /// Binds the value directly.
  public func bind(to statement: any StoreStatement, at index: Int32) {
    statement.bindText(nfc, at: index)
  }
}

extension Int {
  /// Reads the column directly.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Int {
    try expectStorage(statement, index, .integer, as: Int.self)
    return Int(statement.int64(at: index))
  }
  /// Binds the value directly.
  public func bind(to statement: any StoreStatement, at index: Int32) {
    statement.bindInt64(Int64(self), at: index)
  }
}

extension Double {
  /// Reads the column directly.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Double {
    try expectStorage(statement, index, .real, or: .integer, as: Double.self)
    return statement.double(at: index)
  }
  /// Binds the value directly.
  public func bind(to statement: any StoreStatement, at index: Int32) throws {
    guard !isNaN else {
      throw PersistenceError(
        code: .invalidValue,
        message:
          "NaN cannot be stored: it equals nothing, itself included, so no predicate or sort could find it (SQLite would even turn it into NULL). Store nil or a number."
      )
    }
    statement.bindDouble(self, at: index)
  }
}

extension Bool {
  /// Reads the column directly.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Bool {
    try expectStorage(statement, index, .integer, as: Bool.self)
    return statement.int64(at: index) != 0
  }
  /// Binds the value directly.
  public func bind(to statement: any StoreStatement, at index: Int32) {
    statement.bindInt64(self ? 1 : 0, at: index)
  }
}

extension Date {
  /// Reads the column directly.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Date {
    try expectStorage(statement, index, .real, or: .integer, as: Date.self)
    return Date(timeIntervalSinceReferenceDate: statement.double(at: index))
  }
  /// Binds the value directly.
  public func bind(to statement: any StoreStatement, at index: Int32) throws {
    try timeIntervalSinceReferenceDate.bind(to: statement, at: index)
  }
}

extension UUID {
  /// Reads the column directly: its 16 bytes, copied without an intermediate `Data`.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> UUID {
    try expectStorage(statement, index, .blob, as: UUID.self)
    let bytes = statement.bytes(at: index)
    guard bytes.count == 16 else { throw invalid(statement.value(at: index), UUID.self) }
    var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: bytes) }
    return UUID(uuid: raw)
  }
  /// Binds the value directly (SQLite copies the 16 bytes).
  public func bind(to statement: any StoreStatement, at index: Int32) {
    withUnsafeBytes(of: uuid) { statement.bindBytes($0, at: index) }
  }
}

extension Data {
  /// Reads the column directly.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Data {
    try expectStorage(statement, index, .blob, as: Data.self)
    return statement.data(at: index)
  }
  /// Binds the value directly.
  public func bind(to statement: any StoreStatement, at index: Int32) {
    statement.bindData(self, at: index)
  }
}

extension Optional where Wrapped: PersistableValue {
  /// Reads the column directly.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Wrapped? {
    statement.isNull(at: index) ? nil : try Wrapped.read(from: statement, at: index)
  }
  /// Binds the value directly.
  public func bind(to statement: any StoreStatement, at index: Int32) throws {
    if let self { try self.bind(to: statement, at: index) } else { statement.bindNull(index) }
  }
}

extension Equatable {
  /// Whether `other` is a `Self` equal to this value.
  func isEqual(toAny other: Any) -> Bool { (other as? Self) == self }
}
