import Foundation
import Synchronization

/// The storage of an optional `.codable` attribute that is decoded on first access, as SwiftData
/// faults values: a fetched row keeps the value's stored bytes (in a table its fetch shares, so
/// that equal bytes are kept and decoded once when the column shares equal values), and
/// ``value`` decodes them when it is first read. A fetch then pays nothing for a value nobody
/// reads, and a save writes an unread value's bytes back as they were.
///
/// Declare it as the backing storage of a computed property that tells observers itself, and
/// pass its key path to `ModelAttribute.codable(_:_:_:fault:)`:
///
/// ```swift
/// @ObservationIgnored private var _placeFault = CodableFault<PlaceToken>()
/// var place: PlaceToken? {
///   get { access(keyPath: \.place); return _placeFault.value }
///   set { withMutation(keyPath: \.place) { _placeFault.value = newValue } }
/// }
/// ```
///
/// Stored bytes that cannot be decoded read as `nil` (and stay in the store unless the property
/// is set); `ModelContext.validateStoredRows(of:)` reports them, naming row and column.
///
/// Cost: loading O(bytes) (a hash, and a copy into the fetch's table of a value not seen yet);
/// the first read of each distinct stored value decodes it; every read takes an uncontended
/// lock and an O(1) hash lookup.
public struct CodableFault<Value: Codable & SendableMetatype> {
  @usableFromInline
  enum State {
    /// A value set by the program (or nil).
    case value(Value?)
    /// Bytes a fetch loaded: entry `entry` of `table`.
    case stored(CodableBytes<Value>, Int32)
  }
  @usableFromInline var state: State

  /// Storage holding `value` (nil by default).
  @inlinable
  public init(_ value: Value? = nil) { state = .value(value) }

  @inlinable
  init(table: CodableBytes<Value>, entry: Int32) { state = .stored(table, entry) }

  /// The value, decoded from the stored bytes on first access.
  @inlinable
  public var value: Value? {
    get {
      switch state {
      case .value(let value): value
      case .stored(let table, let entry): try? table.decoded(entry)
      }
    }
    set { state = .value(newValue) }
  }

  /// Whether the value is still the stored bytes a fetch loaded, not decoded through this
  /// storage or set since.
  public var isFault: Bool {
    if case .stored = state { return true }
    return false
  }
}

// SAFETY: its slots and spans are written only while the fetch that fills them runs, on its thread,
// before any model is handed out; after that they are only read, and decoded values live behind a
// mutex.
/// The bytes of one lazily decoded `.codable` column for the rows of one fetch: bytes kept in
/// chunks, entries found by hash (rows with equal bytes share an entry when the column shares
/// equal values: a million trips' place identifiers are a few tens of thousands of values),
/// each entry decoded at most once, on first access.
///
/// Entries are added only while the fetch runs, on its thread, before any model of it is
/// handed out; decoding may then happen on any thread that may read the models, so the decoded
/// values sit behind a mutex.
public final class CodableBytes<Value: Codable & SendableMetatype>: @unchecked Sendable {
  @usableFromInline let column: CodableColumn<Value>
  /// Hash and entry per slot (`-1`: empty), a power of two at most half full; only used when
  /// the column shares equal values.
  @usableFromInline @exclusivity(unchecked) var slots: [(hash: UInt64, entry: Int32)]
  /// Each entry's bytes, in one of `chunks`.
  @usableFromInline @exclusivity(unchecked) var spans: [UnsafeRawBufferPointer] = []
  /// The memory the entries' bytes are copied into, owned by this table and freed in `deinit`:
  /// chunks of 64 KiB (or one entry's size, when larger), never moved, so adding an entry is a
  /// copy of its bytes (an array's generic append cost about 270 instructions an entry, and
  /// growing one flat buffer about 180 more in copies).
  @usableFromInline @exclusivity(unchecked) var chunks: [UnsafeMutableRawPointer] = []
  /// Free bytes left at the end of the last chunk.
  @usableFromInline @exclusivity(unchecked) var spare = UnsafeMutableRawBufferPointer(
    start: nil, count: 0)

  /// What decoding an entry gave, once it was asked.
  @usableFromInline
  enum Decoded {
    case value(Value)
    case failed(PersistenceError)
  }
  // SAFETY: only reached inside `decodedEntries`' mutex; each value crosses threads at most once,
  // decoded.
  /// The entries decoded so far, by entry: sparse, so that a fetch pays nothing per entry for
  /// the values nobody reads (an array of pending entries cost an append under the lock per
  /// row and a generic destroy per entry when the table went, about 900 instructions a row).
  /// Values only cross threads inside the mutex, each one at most once decoded.
  @usableFromInline
  struct DecodedEntries: @unchecked Sendable {
    @usableFromInline var entries: [Int32: Decoded] = [:]
    @inlinable init() {}
  }
  @usableFromInline let decodedEntries = Mutex(DecodedEntries())

  @inlinable
  init(column: CodableColumn<Value>) {
    self.column = column
    slots = column.shares ? Array(repeating: (0, -1), count: 64) : []
  }

  deinit {
    for chunk in chunks { chunk.deallocate() }
  }

  /// The entry for `key`: an existing one with equal bytes when the column shares equal
  /// values, else a new one. Only while the fetch runs. O(bytes).
  @inlinable
  func entry(for key: UnsafeRawBufferPointer) -> Int32 {
    guard column.shares else { return append(key) }
    let hash = DecodedValues<Value>.hash(key)
    let mask = slots.count - 1
    var slot = Int(truncatingIfNeeded: hash) & mask
    while true {
      let (slotHash, entry) = slots[slot]
      if entry < 0 { break }
      if slotHash == hash && matches(entry, key) { return entry }
      slot = (slot + 1) & mask
    }
    let entry = append(key)
    if spans.count * 2 > slots.count {
      grow()
    } else {
      slots[slot] = (hash, entry)
    }
    return entry
  }

  /// A new entry holding a copy of `key`.
  @inlinable
  func append(_ key: UnsafeRawBufferPointer) -> Int32 {
    let entry = Int32(spans.count)
    guard let source = key.baseAddress, !key.isEmpty else {
      spans.append(UnsafeRawBufferPointer(start: nil, count: 0))
      return entry
    }
    if spare.count < key.count {
      let size = max(key.count, 65_536)
      let chunk = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
      chunks.append(chunk)
      spare = UnsafeMutableRawBufferPointer(start: chunk, count: size)
    }
    let target = spare.baseAddress.unsafelyUnwrapped
    target.copyMemory(from: source, byteCount: key.count)
    spans.append(UnsafeRawBufferPointer(start: target, count: key.count))
    spare = UnsafeMutableRawBufferPointer(rebasing: spare[key.count...])
    return entry
  }

  /// Whether `entry` holds `key`'s bytes.
  @inlinable
  func matches(_ entry: Int32, _ key: UnsafeRawBufferPointer) -> Bool {
    let stored = spans[Int(entry)]
    return stored.count == key.count
      && (key.isEmpty || memcmp(stored.baseAddress!, key.baseAddress!, key.count) == 0)
  }

  /// Doubles the slots and places every entry again.
  @inlinable
  func grow() {
    slots = Array(repeating: (0, -1), count: slots.count * 2)
    let mask = slots.count - 1
    for entry in spans.indices {
      let hash = DecodedValues<Value>.hash(spans[entry])
      var slot = Int(truncatingIfNeeded: hash) & mask
      while slots[slot].entry >= 0 { slot = (slot + 1) & mask }
      slots[slot] = (hash, Int32(entry))
    }
  }

  /// Calls `body` with the stored bytes of `entry`.
  @inlinable
  func withBytes<Result>(_ entry: Int32, _ body: (UnsafeRawBufferPointer) throws -> Result)
    rethrows -> Result
  {
    try body(spans[Int(entry)])
  }

  /// The stored bytes of `entry`.
  @inlinable
  func data(_ entry: Int32) -> Data { withBytes(entry) { Data($0) } }

  /// The decoded value of `entry`, decoding it on first access.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when the bytes cannot be decoded (every
  ///   time it is asked).
  @inlinable
  func decoded(_ entry: Int32) throws -> Value {
    func answer(_ known: Decoded) throws -> Value {
      switch known {
      case .value(let value): return value
      case .failed(let error): throw error
      }
    }
    if let known = decodedEntries.withLock({ $0.entries[entry] }) { return try answer(known) }
    let result: Decoded
    do {
      result = .value(try column.decode(data(entry)))
    } catch let error as PersistenceError {
      result = .failed(error)
    } catch {
      result = .failed(PersistenceError(code: .invalidValue, message: "\(error)"))
    }
    // Two threads may decode the same entry at once; the first to store wins, so every
    // reader gets the same instance.
    let stored = decodedEntries.withLock { state in
      if state.entries[entry] == nil { state.entries[entry] = result }
      return state.entries[entry]
    }
    guard let stored else { preconditionFailure("A decoded entry went missing.") }
    return try answer(stored)
  }
}

extension CodableColumn {
  /// The stored form of a fault's value: its bytes as loaded, or the value encoded.
  @inlinable
  func stored(_ fault: CodableFault<Value>) throws -> SQLValue {
    switch fault.state {
    case .value(let value): try encode(value)
    case .stored(let table, let entry): .blob(table.data(entry))
    }
  }

  /// Binds a fault's value: its loaded bytes as they are, or the value encoded.
  @inlinable
  func bind(_ fault: CodableFault<Value>, _ statement: any StoreStatement, _ index: Int32) throws {
    switch fault.state {
    case .value(let value): try bind(value, statement, index)
    case .stored(let table, let entry):
      table.withBytes(entry) { statement.bindBytes($0, at: index) }
    }
  }

  /// Whether two faults hold the same value: the same loaded entry, or equal stored forms
  /// (encodings are canonical: equal values encode to equal bytes).
  @inlinable
  func matches(_ current: CodableFault<Value>, _ old: CodableFault<Value>) -> Bool {
    if case .stored(let table, let entry) = current.state,
      case .stored(let oldTable, let oldEntry) = old.state, table === oldTable, entry == oldEntry
    {
      return true
    }
    if case .value(let value) = current.state, case .value(let previous) = old.state, isEquatable {
      return matches(value, .value(previous))
    }
    guard let mine = try? stored(current), let theirs = try? stored(old) else { return false }
    return mine == theirs
  }

  /// Loads column `index` into a fault: `NULL` as nil, else the bytes, kept in the fetch's
  /// table for this column.
  @inlinable
  func fault(_ row: any StoreRow, _ index: Int32, _ cache: LoadCache) throws -> CodableFault<Value>
  {
    switch row.storage(at: index) {
    case .null: return CodableFault(nil)
    case .blob: break
    default: throw invalid(row.value(at: index), Value.self)
    }
    let table = unsafeDowncast(
      cache.values(for: ObjectIdentifier(self)) { CodableBytes<Value>(column: self) },
      to: CodableBytes<Value>.self)
    return CodableFault(table: table, entry: table.entry(for: row.bytes(at: index)))
  }
}
