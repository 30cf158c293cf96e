import Foundation
import PersistenceNativeTypes

// The other value types SwiftData's models declare: the fixed-width integers a column holds
// (`INTEGER`, a signed 64-bit value), `Float` (`REAL`) and `URL` (`TEXT`). `UInt64` and `UInt`
// are not among them: half their values have no `INTEGER` form that keeps their order, so a
// sort or a comparison in SQL would answer wrongly; store such a value as `Int64`, or
// `.codable`. Nor is `Decimal`: SQLite has no exact decimal column that also sorts, and a
// `REAL` would round it; store it `.codable` (opaque to predicates), or in minor units as an
// integer.

extension PersistableValue where Self: FixedWidthInteger {
  /// `INTEGER`.
  public static var storageType: StorageType { .integer }
  /// The integer, as the column's 64 bits.
  public var sqlValue: SQLValue { .integer(Int64(self)) }
  /// Reads `INTEGER`; a value out of the type's range (an outside writer's) is an error.
  public init(sqlValue: SQLValue) throws {
    guard case .integer(let value) = sqlValue, let exact = Self(exactly: value) else {
      throw invalid(sqlValue, Self.self)
    }
    self = exact
  }
  /// Reads the column directly; a value out of the type's range is an error.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Self {
    try expectStorage(statement, index, .integer, as: Self.self)
    guard let exact = Self(exactly: statement.int64(at: index)) else {
      throw invalid(statement.value(at: index), Self.self)
    }
    return exact
  }
  /// Binds the value directly.
  public func bind(to statement: any StoreStatement, at index: Int32) {
    statement.bindInt64(Int64(self), at: index)
  }
}

extension Int8: PersistableValue {}
extension Int16: PersistableValue {}
extension Int32: PersistableValue {}
extension Int64: PersistableValue {}
extension UInt8: PersistableValue {}
extension UInt16: PersistableValue {}
extension UInt32: PersistableValue {}

extension Float: PersistableValue {
  /// `REAL`: the `Double` of the same value, exact.
  public static var storageType: StorageType { .real }
  /// The value as a `Double`.
  public var sqlValue: SQLValue { .real(Double(self)) }
  /// Reads `REAL` (or `INTEGER`), rounded to the nearest `Float`; a finite value beyond
  /// `Float`'s range (an outside writer's) is an error, not infinity.
  public init(sqlValue: SQLValue) throws {
    guard let value = Float(fitting: try Double(sqlValue: sqlValue)) else {
      throw invalid(sqlValue, Float.self)
    }
    self = value
  }
  /// Reads the column directly.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Float {
    try expectStorage(statement, index, .real, or: .integer, as: Float.self)
    guard let value = Float(fitting: statement.double(at: index)) else {
      throw invalid(statement.value(at: index), Float.self)
    }
    return value
  }
  /// Binds the value directly; NaN is an error, as a `Double`'s.
  public func bind(to statement: any StoreStatement, at index: Int32) throws {
    try Double(self).bind(to: statement, at: index)
  }

  /// `value` rounded to a `Float`, nil when a finite `value` is beyond its range.
  private init?(fitting value: Double) {
    let rounded = Float(value)
    guard rounded.isFinite || !value.isFinite else { return nil }
    self = rounded
  }
}

extension URL: PersistableValue {
  /// `TEXT`: the URL's absolute string.
  public static var storageType: StorageType { .text }
  /// `absoluteString` (a URL relative to a base is stored, and read back, absolute: equal by
  /// `absoluteString`, not by `==`).
  public var sqlValue: SQLValue { .text(absoluteString) }
  /// Reads `TEXT` that is a URL as written (an outside writer's `not a url` is an error, not
  /// a URL with its spaces percent-encoded).
  public init(sqlValue: SQLValue) throws {
    guard case .text(let text) = sqlValue,
      let url = URL(string: text, encodingInvalidCharacters: false)
    else {
      throw invalid(sqlValue, URL.self)
    }
    self = url
  }
}

/// Each native value type's conformance, by the name ``nativeTypeNames`` gives it (a test
/// checks that the two agree, so that `@Model`, which reads the names, never takes a native
/// attribute for something else).
let nativePersistableTypes: [String: any PersistableValue.Type] = [
  "String": String.self, "Int": Int.self, "Int8": Int8.self, "Int16": Int16.self,
  "Int32": Int32.self, "Int64": Int64.self, "UInt8": UInt8.self, "UInt16": UInt16.self,
  "UInt32": UInt32.self, "Double": Double.self, "Float": Float.self, "Bool": Bool.self,
  "Date": Date.self, "UUID": UUID.self, "Data": Data.self, "URL": URL.self,
]

/// The native value types' names, as `@Model` reads them (`PersistenceNativeTypes`).
package let nativeTypeNames = NativeTypes.names
