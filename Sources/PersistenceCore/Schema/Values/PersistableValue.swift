import Foundation

/// How a store keeps a value: the class of its column.
public enum StorageType: String, Sendable {
  /// `INTEGER`: `Int`, `Int8`…`Int64`, `UInt8`…`UInt32`, `Bool`.
  case integer = "INTEGER"
  /// `REAL`: `Double`, `Float`, `Date` (seconds since the reference date, exactly as `Date`
  /// holds them).
  case real = "REAL"
  /// `TEXT`: `String`, stored NFC-normalised; `URL`, as its absolute string.
  case text = "TEXT"
  /// `BLOB`: `Data`, `UUID` (16 bytes), and `.codable` attributes (JSON).
  case blob = "BLOB"
}

/// A value type that maps to one column: `String`, `Int`, `Int8`…`Int64`, `UInt8`…`UInt32`,
/// `Double`, `Float`, `Bool`, `Date`, `UUID`, `Data`, `URL`, and optionals of each.
///
/// Values convert through ``SQLValue``. The library's own conformances also read and bind
/// columns directly (``read(from:at:)``, ``bind(to:at:)``), without an ``SQLValue`` per row.
public protocol PersistableValue: Equatable, Sendable {
  /// The storage class of the column.
  static var storageType: StorageType { get }
  /// Whether `nil` is a valid value (the column allows `NULL`).
  static var isOptional: Bool { get }
  /// The value as stored. Strings are NFC-normalised.
  var sqlValue: SQLValue { get }
  /// Reads a stored value; throws ``PersistenceError/Code/invalidValue`` when it cannot.
  init(sqlValue: SQLValue) throws
  /// Reads column `index` of the statement's current row.
  static func read(from statement: any StoreRow, at index: Int32) throws -> Self
  /// Binds the value to parameter `index` (1-based).
  func bind(to statement: any StoreStatement, at index: Int32) throws
}

extension PersistableValue {
  /// Non-optional by default.
  public static var isOptional: Bool { false }

  /// Reads through ``SQLValue``.
  public static func read(from statement: any StoreRow, at index: Int32) throws -> Self {
    try Self(sqlValue: statement.value(at: index))
  }

  /// Binds through ``SQLValue``.
  public func bind(to statement: any StoreStatement, at index: Int32) throws {
    statement.bindValue(sqlValue, at: index)
  }
}

@usableFromInline
func invalid(_ value: SQLValue, _ type: Any.Type) -> PersistenceError {
  PersistenceError(
    code: .invalidValue,
    message:
      "The stored value \(value) cannot be read as \(type). The store may have been edited by hand."
  )
}

extension String {
  /// The canonical composition (NFC) of the string. A string whose scalars are all below
  /// U+0300 is returned as it is (see ``isBelowCombiningMarks``); only others go through
  /// Foundation's normalization (about 10k instructions each).
  var nfc: String {
    var copy = self
    if copy.withUTF8(Self.isBelowCombiningMarks) { return self }
    return precomposedStringWithCanonicalMapping
  }

  /// Whether valid UTF-8 holds only scalars below U+0300 (ASCII, Latin-1, Latin Extended-A
  /// and -B, IPA, spacing modifiers), which makes it NFC already: none of those scalars changes
  /// under NFC, none combines (canonical combining class 0) and none is the second scalar of a
  /// canonical composition (checked against the Unicode data; `PersistableValueTests` checks
  /// them against Foundation). Their UTF-8 uses no byte from 0xCC up (U+0300 starts 0xCC 0x80).
  static func isBelowCombiningMarks(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    for byte in bytes where byte >= 0xCC { return false }
    return true
  }
}

extension String: PersistableValue {
  /// `TEXT`.
  public static var storageType: StorageType { .text }
  /// The NFC-normalised text.
  public var sqlValue: SQLValue { .text(nfc) }
  /// Reads `TEXT`.
  public init(sqlValue: SQLValue) throws {
    guard case .text(let value) = sqlValue else { throw invalid(sqlValue, String.self) }
    self = value
  }
}

extension Int: PersistableValue {
  /// `INTEGER`.
  public static var storageType: StorageType { .integer }
  /// The integer.
  public var sqlValue: SQLValue { .integer(Int64(self)) }
  /// Reads `INTEGER`.
  public init(sqlValue: SQLValue) throws {
    guard case .integer(let value) = sqlValue else { throw invalid(sqlValue, Int.self) }
    self = Int(value)
  }
}

extension Double: PersistableValue {
  /// `REAL`.
  public static var storageType: StorageType { .real }
  /// The double.
  public var sqlValue: SQLValue { .real(self) }
  /// Reads `REAL` (or an `INTEGER`, which SQLite may store for integral reals).
  public init(sqlValue: SQLValue) throws {
    switch sqlValue {
    case .real(let value): self = value
    case .integer(let value): self = Double(value)
    default: throw invalid(sqlValue, Double.self)
    }
  }
}

extension Bool: PersistableValue {
  /// `INTEGER` 0 or 1.
  public static var storageType: StorageType { .integer }
  /// 1 for true, 0 for false.
  public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
  /// Reads `INTEGER`; any non-zero value is true.
  public init(sqlValue: SQLValue) throws {
    guard case .integer(let value) = sqlValue else { throw invalid(sqlValue, Bool.self) }
    self = value != 0
  }
}

extension Date: PersistableValue {
  /// `REAL` seconds since 2001-01-01 UTC, the value `Date` holds, so it round-trips exactly.
  public static var storageType: StorageType { .real }
  /// `timeIntervalSinceReferenceDate`.
  public var sqlValue: SQLValue { .real(timeIntervalSinceReferenceDate) }
  /// Reads `REAL` seconds since the reference date.
  public init(sqlValue: SQLValue) throws {
    self = Date(timeIntervalSinceReferenceDate: try Double(sqlValue: sqlValue))
  }
}

extension UUID: PersistableValue {
  /// `BLOB` of 16 bytes, which sorts like the UUID's bytes.
  public static var storageType: StorageType { .blob }
  /// The 16 bytes.
  public var sqlValue: SQLValue { .blob(withUnsafeBytes(of: uuid) { Data($0) }) }
  /// Reads a 16-byte `BLOB`.
  public init(sqlValue: SQLValue) throws {
    guard case .blob(let data) = sqlValue, data.count == 16 else {
      throw invalid(sqlValue, UUID.self)
    }
    self = UUID(bytes16: data)
  }
  init(bytes16 data: Data) {
    var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    withUnsafeMutableBytes(of: &raw) { target in
      data.withUnsafeBytes { target.copyMemory(from: $0) }
    }
    self = UUID(uuid: raw)
  }
}

extension Data: PersistableValue {
  /// `BLOB`.
  public static var storageType: StorageType { .blob }
  /// The bytes.
  public var sqlValue: SQLValue { .blob(self) }
  /// Reads `BLOB` (an empty blob may come back as `NULL`-free empty data).
  public init(sqlValue: SQLValue) throws {
    guard case .blob(let value) = sqlValue else { throw invalid(sqlValue, Data.self) }
    self = value
  }
}

extension Optional: PersistableValue where Wrapped: PersistableValue {
  /// The wrapped type's storage.
  public static var storageType: StorageType { Wrapped.storageType }
  /// True.
  public static var isOptional: Bool { true }
  /// `NULL` for nil, else the wrapped value's.
  public var sqlValue: SQLValue { self?.sqlValue ?? .null }
  /// `NULL` reads as nil.
  public init(sqlValue: SQLValue) throws {
    if case .null = sqlValue { self = nil } else { self = try Wrapped(sqlValue: sqlValue) }
  }
}
