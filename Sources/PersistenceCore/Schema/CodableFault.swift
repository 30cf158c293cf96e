import Foundation
import Synchronization

/// The storage of an optional `.codable` attribute that is decoded on first access, as SwiftData
/// faults values: a fetched row keeps the value's stored bytes (in a table its fetch shares),
/// and ``value`` decodes them when it is first read (rows with equal bytes share one decoded
/// instance when the column shares equal values). A fetch then pays nothing for a value nobody
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
/// Cost: loading O(bytes) (a copy into the fetch's table); the first read of a row's value
/// hashes its bytes and decodes them unless an equal value was decoded; every read takes an
/// uncontended lock and an O(1) hash lookup.
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

/// The bytes of one lazily decoded `.codable` column for the rows of one fetch: bytes kept
/// flat, one entry per row, each entry decoded at most once, on first access. When the column
/// shares equal values, rows with equal bytes share one decoded instance: the sharing is found
/// when a value is first read (a hash of its bytes), not while the fetch runs, so a fetch pays
/// a copy of the bytes per row and nothing else (finding equal bytes while loading cost about
/// 330 instructions a row and a cache-missing probe of a table as large as the fetch).
///
/// Entries are added only while the fetch runs, on its thread, before any model of it is
/// handed out; decoding may then happen on any thread that may read the models, so the decoded
/// values sit behind a mutex.
public final class CodableBytes<Value: Codable & SendableMetatype>: @unchecked Sendable {
  @usableFromInline let column: CodableColumn<Value>
  /// Each entry's bytes, in one of `chunks`.
  @usableFromInline @exclusivity(unchecked) var spans: [UnsafeRawBufferPointer] = []
  /// The memory the entries' bytes are copied into, owned by this table and freed in `deinit`:
  /// chunks of 64 KiB (or one entry's size, when larger), never moved, so adding an entry is a
  /// copy of its bytes (an array's generic append cost about 270 instructions a row, and
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
  /// The entries decoded so far: sparse, so that a fetch pays nothing per entry for the values
  /// nobody reads (an array of pending entries cost an append under the lock per row and a
  /// generic destroy per entry when the table went, about 900 instructions a row). Values only
  /// cross threads inside the mutex, each one at most once decoded.
  @usableFromInline
  struct DecodedEntries: @unchecked Sendable {
    /// By entry.
    @usableFromInline var entries: [Int32: Decoded] = [:]
    /// When the column shares equal values: the first decoded entry whose bytes have this
    /// hash (another entry with the same hash but other bytes decodes on its own).
    @usableFromInline var firstByHash: [UInt64: Int32] = [:]
    @inlinable init() {}
  }
  @usableFromInline let decodedEntries = Mutex(DecodedEntries())

  @inlinable
  init(column: CodableColumn<Value>) {
    self.column = column
  }

  deinit {
    for chunk in chunks { chunk.deallocate() }
  }

  /// A new entry holding a copy of `key`: O(bytes). Only while the fetch runs.
  @inlinable
  func entry(for key: UnsafeRawBufferPointer) -> Int32 {
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

  /// Whether two entries hold equal bytes.
  @inlinable
  func sameBytes(_ entry: Int32, _ other: Int32) -> Bool {
    withBytes(entry) { mine in
      withBytes(other) { theirs in
        mine.count == theirs.count
          && (mine.isEmpty || memcmp(mine.baseAddress!, theirs.baseAddress!, mine.count) == 0)
      }
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
    // First read of this entry: an equal value decoded for another row is shared.
    let hash = column.shares ? withBytes(entry) { DecodedValues<Value>.hash($0) } : 0
    if let shared = decodedEntries.withLock({ known(entry, hash, &$0) }) {
      return try answer(shared)
    }
    let result: Decoded
    do {
      result = .value(try column.decode(data(entry)))
    } catch let error as PersistenceError {
      result = .failed(error)
    } catch {
      result = .failed(PersistenceError(code: .invalidValue, message: "\(error)"))
    }
    // Two threads may decode the same entry, or equal bytes, at once; the first to store
    // wins, so every reader gets the same instance.
    let stored = decodedEntries.withLock { state in
      if known(entry, hash, &state) == nil {
        state.entries[entry] = result
        if column.shares && state.firstByHash[hash] == nil { state.firstByHash[hash] = entry }
      }
      return state.entries[entry]
    }
    guard let stored else { preconditionFailure("A decoded entry went missing.") }
    return try answer(stored)
  }

  /// What `entry` decoded to, or what an entry with equal bytes (and `hash`) decoded to when
  /// the column shares equal values (then recorded for `entry` too); nil if neither was
  /// decoded yet. Inside the lock.
  @inlinable
  func known(_ entry: Int32, _ hash: UInt64, _ state: inout DecodedEntries) -> Decoded? {
    if let known = state.entries[entry] { return known }
    guard column.shares, let first = state.firstByHash[hash], sameBytes(first, entry),
      let shared = state.entries[first]
    else { return nil }
    state.entries[entry] = shared
    return shared
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
