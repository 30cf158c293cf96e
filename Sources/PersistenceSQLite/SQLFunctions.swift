import CSQLite
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
