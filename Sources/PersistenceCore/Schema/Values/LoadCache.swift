import Foundation
import Synchronization

/// Per-fetch state shared by the rows of one fetch: decoded `.codable` values by stored bytes.
///
/// Used by one fetch on one thread and never reentered, so its properties skip the runtime's
/// exclusivity checks (`@exclusivity(unchecked)`, as in `DecodedValues` and `RowTable`): they
/// cost a thread-local lookup per access, per row.
public final class LoadCache {
  /// One ``DecodedValues`` per `.codable` column, by the column's identity.
  @usableFromInline @exclusivity(unchecked) var decoded: [ObjectIdentifier: AnyObject] = [:]
  /// The column asked last and its values: rows ask column after column, so with one
  /// `.codable` column per model every row after the first finds its values here.
  @usableFromInline @exclusivity(unchecked) var lastColumn: ObjectIdentifier?
  @usableFromInline @exclusivity(unchecked) var lastValues: AnyObject?
  init() {}

  /// The decoded values of the column `id`, made by `make` on first use.
  @inlinable
  func values(for id: ObjectIdentifier, _ make: () -> AnyObject) -> AnyObject {
    if id == lastColumn, let lastValues { return lastValues }
    let values: AnyObject
    if let known = decoded[id] {
      values = known
    } else {
      values = make()
      decoded[id] = values
    }
    lastColumn = id
    lastValues = values
    return values
  }
}

/// The values one `.codable` column decoded during a fetch, by stored bytes: an
/// open-addressing table of (hash, entry) pairs over flat arrays of bytes and values, so that
/// a hit costs a hash of the bytes, about one probe, one `memcmp` and no allocation, and
/// touches no object but the value it returns. Inlinable, so that it is specialized for the
/// value type where a schema is declared (no generic metadata lookups per row).
///
/// Cost: O(bytes) per lookup; O(values) memory for the fetch's lifetime.
@usableFromInline
final class DecodedValues<Value> {
  /// Hash and entry index per slot (`-1`: empty); the count is a power of two, at most half
  /// full.
  @usableFromInline @exclusivity(unchecked) var slots: [(hash: UInt64, entry: Int32)]
  /// Each entry's bytes are `bytes[ends[entry - 1] ..< ends[entry]]` (from 0 for the first).
  @usableFromInline @exclusivity(unchecked) var ends: [Int] = []
  @usableFromInline @exclusivity(unchecked) var bytes: [UInt8] = []
  @usableFromInline @exclusivity(unchecked) var values: [Value] = []

  @inlinable
  init() {
    slots = Array(repeating: (0, -1), count: 64)
  }

  /// A 64-bit hash of the bytes, eight at a time.
  @inlinable
  static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var hash = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
    var offset = 0
    while offset + 8 <= bytes.count {
      let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
      hash = (hash ^ word) &* 0xBF58_476D_1CE4_E5B9
      hash ^= hash >> 31
      offset += 8
    }
    var tail: UInt64 = 0
    while offset < bytes.count {
      tail = tail << 8 | UInt64(bytes[offset])
      offset += 1
    }
    hash = (hash ^ tail) &* 0x94D0_49BB_1331_11EB
    return hash ^ (hash >> 29)
  }

  @inlinable
  func value(for key: UnsafeRawBufferPointer, hash: UInt64) -> Value? {
    let mask = slots.count - 1
    var slot = Int(truncatingIfNeeded: hash) & mask
    while true {
      let (slotHash, entry) = slots[slot]
      if entry < 0 { return nil }
      if slotHash == hash && matches(Int(entry), key) { return values[Int(entry)] }
      slot = (slot + 1) & mask
    }
  }

  @inlinable
  func matches(_ entry: Int, _ key: UnsafeRawBufferPointer) -> Bool {
    let start = entry == 0 ? 0 : ends[entry - 1]
    guard ends[entry] - start == key.count else { return false }
    if key.isEmpty { return true }
    return bytes.withUnsafeBufferPointer { stored in
      memcmp(stored.baseAddress! + start, key.baseAddress!, key.count) == 0
    }
  }

  @inlinable
  func insert(_ value: Value, for key: UnsafeRawBufferPointer, hash: UInt64) {
    if (values.count + 1) * 2 > slots.count { grow() }
    let entry = Int32(values.count)
    bytes.append(contentsOf: key)
    ends.append(bytes.count)
    values.append(value)
    place(hash, entry)
  }

  @inlinable
  func place(_ hash: UInt64, _ entry: Int32) {
    let mask = slots.count - 1
    var slot = Int(truncatingIfNeeded: hash) & mask
    while slots[slot].entry >= 0 { slot = (slot + 1) & mask }
    slots[slot] = (hash, entry)
  }

  @inlinable
  func grow() {
    let old = slots
    slots = Array(repeating: (0, -1), count: old.count * 2)
    for (hash, entry) in old where entry >= 0 { place(hash, entry) }
  }
}
