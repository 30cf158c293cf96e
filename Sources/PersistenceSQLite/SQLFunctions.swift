internal import CSQLite
import Foundation
import PersistenceCore

/// SQL functions implemented in Swift, so that SQL gives exactly the answers Swift does.
enum SQLFunctions {
  /// `swift_count(text)`: the number of `Character`s, as `String.count`.
  static let countName = StoreFunctions.count
  /// `swift_localized_standard_contains(text, text)`: `localizedStandardContains`.
  static let localizedStandardContainsName = StoreFunctions.localizedStandardContains
  /// The collation `swift_localized_standard`: `localizedStandardCompare`.
  static let localizedStandardCollation = StoreFunctions.localizedStandardCollation

  static func register(on database: Database) throws {
    let flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC
    var result = sqlite3_create_function_v2(
      database.handle, countName, 1, flags, nil,
      { context, _, arguments in
        guard let argument = arguments?[0], let text = sqlite3_value_text(argument) else {
          sqlite3_result_null(context)
          return
        }
        let count = Int(sqlite3_value_bytes(argument))
        let buffer = UnsafeBufferPointer(start: text, count: count)
        if buffer.allSatisfy({ $0 < 0x80 }) {
          sqlite3_result_int64(context, Int64(count))
        } else {
          sqlite3_result_int64(context, Int64(String(decoding: buffer, as: UTF8.self).count))
        }
      }, nil, nil, nil)
    guard result == SQLITE_OK else { throw database.error(result) }
    result = sqlite3_create_function_v2(
      database.handle, localizedStandardContainsName, 2, flags, nil,
      { context, _, arguments in
        guard let arguments, let base = arguments[0].flatMap(SQLFunctions.textValue),
          let other = arguments[1].flatMap(SQLFunctions.textValue)
        else {
          sqlite3_result_null(context)
          return
        }
        sqlite3_result_int(context, base.localizedStandardContains(other) ? 1 : 0)
      }, nil, nil, nil)
    guard result == SQLITE_OK else { throw database.error(result) }
    // swift_call(handle, value…): a predicate's Swift function (StoreFunctions.call). Not
    // deterministic across statements (a handle number is reused by no other function while
    // its predicate lives, but the function behind it is the predicate's own).
    result = sqlite3_create_function_v2(
      database.handle, StoreFunctions.call, -1, SQLITE_UTF8, nil,
      { context, count, arguments in
        guard let arguments, count >= 1, let first = arguments[0],
          sqlite3_value_type(first) == SQLITE_INTEGER
        else {
          sqlite3_result_error(context, "swift_call needs a handle", -1)
          return
        }
        let values = (1..<Int(count)).map { SQLFunctions.value(arguments[$0]) }
        do {
          switch try StoreFunctions.callSwiftFunction(sqlite3_value_int64(first), values) {
          case .null: sqlite3_result_null(context)
          case .integer(let value): sqlite3_result_int64(context, value)
          case .real(let value): sqlite3_result_double(context, value)
          case .text(let text):
            text.utf8CString.withUnsafeBufferPointer {
              sqlite3_result_text(context, $0.baseAddress, Int32($0.count - 1), csqlite_transient())
            }
          case .blob(let data):
            data.withUnsafeBytes {
              sqlite3_result_blob(context, $0.baseAddress, Int32($0.count), csqlite_transient())
            }
          }
        } catch {
          sqlite3_result_error(context, "\(error)", -1)
        }
      }, nil, nil, nil)
    guard result == SQLITE_OK else { throw database.error(result) }
    result = sqlite3_create_collation_v2(
      database.handle, localizedStandardCollation, SQLITE_UTF8, nil,
      { _, leftCount, left, rightCount, right in
        let lhs = String(
          decoding: UnsafeRawBufferPointer(start: left, count: Int(leftCount)), as: UTF8.self)
        let rhs = String(
          decoding: UnsafeRawBufferPointer(start: right, count: Int(rightCount)), as: UTF8.self)
        switch lhs.localizedStandardCompare(rhs) {
        case .orderedAscending: return -1
        case .orderedSame: return 0
        case .orderedDescending: return 1
        }
      }, nil)
    guard result == SQLITE_OK else { throw database.error(result) }
  }

  /// An argument of a SQL function as a value.
  static func value(_ value: OpaquePointer?) -> SQLValue {
    guard let value else { return .null }
    switch sqlite3_value_type(value) {
    case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
    case SQLITE_FLOAT: return .real(sqlite3_value_double(value))
    case SQLITE_TEXT: return textValue(value).map(SQLValue.text) ?? .null
    case SQLITE_BLOB:
      let count = Int(sqlite3_value_bytes(value))
      guard let bytes = sqlite3_value_blob(value), count > 0 else { return .blob(Data()) }
      return .blob(Data(bytes: bytes, count: count))
    default: return .null
    }
  }

  static func textValue(_ value: OpaquePointer) -> String? {
    guard let text = sqlite3_value_text(value) else { return nil }
    let count = Int(sqlite3_value_bytes(value))
    return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
  }
}

/// A Swift string comparator registered as a SQLite collation.
final class CollationBox {
  let comparator: String.StandardComparator
  init(_ comparator: String.StandardComparator) { self.comparator = comparator }
}

extension Database {
  /// The name of a collation that orders text exactly as `comparator` does, registering it on
  /// this connection the first time.
  /// Tombstone values keep their storage class: compared as bound.
  var tombstoneValueParameter: String { "?" }

  func collation(for comparator: String.StandardComparator) throws -> String {
    if let name = collations[comparator] { return name }
    let name = "swift_collation_\(collations.count)"
    let box = Unmanaged.passRetained(CollationBox(comparator))
    let result = sqlite3_create_collation_v2(
      handle, name, SQLITE_UTF8, box.toOpaque(),
      { context, leftCount, left, rightCount, right in
        let box = Unmanaged<CollationBox>.fromOpaque(context!).takeUnretainedValue()
        let lhs = String(
          decoding: UnsafeRawBufferPointer(start: left, count: Int(leftCount)), as: UTF8.self)
        let rhs = String(
          decoding: UnsafeRawBufferPointer(start: right, count: Int(rightCount)), as: UTF8.self)
        switch box.comparator.compare(lhs, rhs) {
        case .orderedAscending: return -1
        case .orderedSame: return 0
        case .orderedDescending: return 1
        }
      },
      { context in Unmanaged<CollationBox>.fromOpaque(context!).release() })
    guard result == SQLITE_OK else {
      box.release()
      throw error(result)
    }
    collations[comparator] = name
    return name
  }
}
