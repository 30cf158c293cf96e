import Foundation
import Geo
import Persistence
import Synchronization

/// Every trip's position, start date and name, kept in memory beside a store in cells of a
/// quarter degree, so that a page of a bounding box sorted by start date
/// (``TripStore/page(_:index:)``) and its count are answered without visiting the box's rows
/// or index entries in the store: what a map service answers most (OGC API – Features'
/// `items?bbox=…&limit=…`).
///
/// The index follows the store through its history: before each answer it reads, in the
/// request's snapshot, the transactions after the token it was last brought to, and moves,
/// adds or removes the trips they name. An answer therefore describes exactly the snapshot
/// the page's rows are then read in.
///
/// Cost:
/// - built before first use (``prepare(_:)``) or on it: one pass over the trips' columns, O(n)
///   time (1.9 s at a million trips); O(n) memory, about 75 bytes a trip at a million (a
///   40-byte entry, the name's bytes, a share of the 8 MB table of cells);
/// - a page: O(c + m log k) for the c cells the box covers (1,440 × 720 over the globe), the
///   m trips in them and k = offset + limit, under a lock that other pages wait for;
/// - catching up: O(t + changes × log n) for t transactions since the last answer; when
///   history after its token was deleted (`ModelContext.deleteHistory(before:)`), a rebuild.
///
/// One index serves one store, from many threads (each with its own ``TripStore``).
public final class TripBoxIndex: Sendable {
  /// A trip as the index keeps it: 40 bytes, its name's bytes in the state's arena.
  struct Entry {
    var longitude: Double
    var latitude: Double
    var start: Double
    var key: Int64
    var nameOffset: UInt32
    var nameLength: UInt32
  }

  struct State {
    var token: HistoryToken
    /// Row-major: `row * columns + column`, row 0 from latitude −90, column 0 from longitude
    /// −180. A trip whose coordinates are not finite numbers is kept in cell 0 (no box selects
    /// it; SQL's comparisons do not either).
    var cells: [[Entry]] = Array(repeating: [], count: TripBoxIndex.rows * TripBoxIndex.columns)
    /// The names' UTF-8 bytes, one after another; a removed trip's bytes stay until
    /// ``compactNames()`` (when they are over half of it).
    var names: [UInt8] = []
    var unusedNameBytes = 0
    /// The cell of each trip by primary key: an array for the keys a store hands out (dense
    /// from 1), a dictionary for any far beyond them.
    var denseCells: [Int32] = []
    var sparseCells: [Int64: Int32] = [:]
    private(set) var count = 0

    init(token: HistoryToken) { self.token = token }

    func cell(of key: Int64) -> Int32? {
      if key >= 0, key < denseCells.count {
        return denseCells[Int(key)] >= 0 ? denseCells[Int(key)] : nil
      }
      return sparseCells[key]
    }

    private mutating func setCell(_ cell: Int32?, of key: Int64) {
      if key >= 0, key < denseCells.count {
        denseCells[Int(key)] = cell ?? -1
      } else if cell != nil, key >= 0, key < 4 * (count + 1) + 65_536 {
        denseCells.append(contentsOf: repeatElement(-1, count: Int(key) + 1 - denseCells.count))
        denseCells[Int(key)] = cell!
      } else {
        sparseCells[key] = cell
      }
    }

    mutating func insert(
      key: Int64, longitude: Double, latitude: Double, start: Double, name: String
    ) {
      var name = name
      let length = name.withUTF8 { bytes in
        names.append(contentsOf: bytes)
        return bytes.count
      }
      precondition(names.count <= Int(UInt32.max), "TripBoxIndex: names over 4 GiB")
      let entry = Entry(
        longitude: longitude, latitude: latitude, start: start, key: key,
        nameOffset: UInt32(names.count - length), nameLength: UInt32(length))
      let cell = TripBoxIndex.cell(latitude: latitude, longitude: longitude)
      cells[cell].append(entry)
      setCell(Int32(cell), of: key)
      count += 1
    }

    mutating func remove(_ key: Int64) {
      guard let cell = cell(of: key).map(Int.init) else { return }
      setCell(nil, of: key)
      count -= 1
      guard let slot = cells[cell].firstIndex(where: { $0.key == key }) else { return }
      unusedNameBytes += Int(cells[cell][slot].nameLength)
      cells[cell].swapAt(slot, cells[cell].count - 1)
      cells[cell].removeLast()
      if unusedNameBytes > 1 << 20, unusedNameBytes > names.count / 2 { compactNames() }
    }

    /// The names' bytes without those of removed trips. O(n).
    mutating func compactNames() {
      var compact: [UInt8] = []
      compact.reserveCapacity(names.count - unusedNameBytes)
      names.withUnsafeBufferPointer { old in
        for cell in cells.indices where !cells[cell].isEmpty {
          for slot in cells[cell].indices {
            let entry = cells[cell][slot]
            let start = Int(entry.nameOffset)
            cells[cell][slot].nameOffset = UInt32(compact.count)
            compact.append(contentsOf: old[start..<start + Int(entry.nameLength)])
          }
        }
      }
      names = compact
      unusedNameBytes = 0
    }

    /// Each array with the capacity it needs and no more (after a build). O(n).
    mutating func shrink() {
      for cell in cells.indices where cells[cell].capacity > cells[cell].count {
        cells[cell] = Self.exact(cells[cell])
      }
      names = Self.exact(names)
      denseCells = Self.exact(denseCells)
    }

    private static func exact<Element>(_ array: [Element]) -> [Element] {
      array.withUnsafeBufferPointer { source in
        [Element](unsafeUninitializedCapacity: source.count) { target, count in
          _ = target.initialize(fromContentsOf: source)
          count = source.count
        }
      }
    }
  }

  enum Condition {
    case empty
    case ready(State)
    /// The build failed at this token (a row the index cannot read): the store answers pages
    /// until the store changes.
    case failed(HistoryToken)
  }

  static let cellSize = 0.25
  static let columns = 1440
  static let rows = 720
  /// What the index holds of a trip, in the order it reads them; an update of any of them
  /// moves the trip in the index, others leave it alone.
  private static let keyPaths: [PartialKeyPath<Trip> & Sendable] = [
    \.longitude, \.latitude, \.startDate, \.name,
  ]

  private let condition = Mutex<Condition>(.empty)
  /// How many pages the index has answered (for tests: that a page came from memory).
  let answeredPages = Atomic<Int>(0)
  private let failure = Mutex<PersistenceError?>(nil)

  /// Why the index could not be built or brought up to date the last time it tried (a row it
  /// cannot read, such as text an outside writer put in a coordinate column, or a lost
  /// connection), or nil when it answered since. Meanwhile the store answers the pages, and
  /// the index tries again once the store changes.
  public var lastError: PersistenceError? { failure.withLock { $0 } }

  /// An empty index: it is built from the store on first use.
  public init() {}

  /// How many trips the index holds (0 before its first use): for tests and diagnostics.
  public var count: Int {
    condition.withLock {
      if case .ready(let state) = $0 { return state.count }
      return 0
    }
  }

  /// Builds the index from `store` now, if it is empty, rather than on its first page (a
  /// server does this before it listens, so that its first map request does not wait, and its
  /// memory at rest includes the index). O(n).
  ///
  /// - Throws: The store's error when its trips cannot be read; the index then builds on its
  ///   first use instead.
  public func prepare(_ store: TripStore) throws {
    do {
      try store.context.withSnapshot {
        let token = try store.context.currentHistoryToken()
        let state = try Self.built(token: token, context: store.context)
        condition.withLock {
          if case .ready = $0 { return }
          $0 = .ready(state)
        }
      }
    } catch {
      record(error)
      throw TripStore.wrap(error)
    }
  }

  /// The page of trips in `box` by start date then name (then primary key), reversed with
  /// `reverse`, after `offset` of them and at most `limit`, and how many are in the box, as of
  /// `token`, which must be the current history token of the snapshot `context` reads in
  /// (`ModelContext.withSnapshot(_:)`).
  ///
  /// - Returns: nil when the index cannot answer for this snapshot: it was already brought
  ///   past it by a newer one, or it could not be built from this store. Ask the store instead.
  func page(
    box: GeographicBox, reverse: Bool, offset: Int, limit: Int, token: HistoryToken,
    context: ModelContext
  ) -> (keys: [PersistentIdentifier], matched: Int)? {
    condition.withLock { condition in
      var state: State
      switch condition {
      case .failed(let failedToken) where failedToken == token:
        return nil
      case .ready(let ready) where ready.token.storeIdentifier == token.storeIdentifier:
        if ready.token > token { return nil }
        state = ready
        condition = .empty  // the state is unique while it changes: no copy on write
        if state.token < token {
          do {
            try Self.catchUp(&state, to: token, context: context)
          } catch {
            condition = .failed(token)
            record(error)
            return nil
          }
        }
      default:
        do {
          state = try Self.built(token: token, context: context)
        } catch {
          condition = .failed(token)
          record(error)
          return nil
        }
      }
      let (keys, matched) = Self.page(
        state, box: box, reverse: reverse, offset: offset, limit: limit)
      condition = .ready(state)
      failure.withLock { $0 = nil }
      answeredPages.add(1, ordering: .relaxed)
      return (
        keys.map {
          PersistentIdentifier(
            storeIdentifier: token.storeIdentifier, entityName: Trip.schema.name, primaryKey: $0)
        }, matched
      )
    }
  }

  private func record(_ error: any Error) {
    let persistence =
      error as? PersistenceError
      ?? PersistenceError(code: .engine, message: "\(error)")
    failure.withLock { $0 = persistence }
  }

  // MARK: Building and following the store

  /// The index of every trip in the snapshot `context` reads. O(n).
  static func built(token: HistoryToken, context: ModelContext) throws -> State {
    var state = State(token: token)
    try context.enumerateValues(FetchDescriptor<Trip>(), keyPaths) { row in
      try insert(row, into: &state)
    }
    state.shrink()
    return state
  }

  /// Brings `state` from its token to `token` through the history between them, or rebuilds
  /// it when that history is gone. O(t + changes × log n).
  static func catchUp(_ state: inout State, to token: HistoryToken, context: ModelContext)
    throws
  {
    let transactions: [HistoryTransaction]
    do {
      transactions = try context.fetchHistory(
        HistoryDescriptor(after: state.token, modelTypes: [Trip.self]))
    } catch let error as PersistenceError
      where [.historyTokenExpired, .historyTokenUnknown, .historyTokenForeign].contains(error.code)
    {
      state = try built(token: token, context: context)
      return
    }
    // The last change of each key decides: moved or added (read its row), or removed.
    var changed: Set<Int64> = []
    var removed: Set<Int64> = []
    for transaction in transactions {
      for change in transaction.changes {
        let key = change.changedIdentifier.primaryKey
        switch change.kind {
        case .insert:
          changed.insert(key)
          removed.remove(key)
        case .update:
          guard keyPaths.contains(where: { change.updated($0) }) else { continue }
          changed.insert(key)
          removed.remove(key)
        case .delete:
          removed.insert(key)
          changed.remove(key)
        }
      }
    }
    if changed.count + removed.count > max(state.count / 4, 1024) {
      state = try built(token: token, context: context)
      return
    }
    for key in changed.union(removed) { state.remove(key) }
    try context.enumerateValues(
      FetchDescriptor<Trip>(), keyPaths,
      identifiers: changed.map {
        PersistentIdentifier(
          storeIdentifier: token.storeIdentifier, entityName: Trip.schema.name, primaryKey: $0)
      }
    ) { row in
      try insert(row, into: &state)
    }
    state.token = token
  }

  private static func insert(_ row: borrowing ValueRow<Trip>, into state: inout State) throws {
    state.insert(
      key: row.identifier.primaryKey, longitude: try row.value(Double.self, at: 0),
      latitude: try row.value(Double.self, at: 1),
      start: try row.value(Date.self, at: 2).timeIntervalSinceReferenceDate,
      name: try row.value(String.self, at: 3))
  }

  static func cell(latitude: Double, longitude: Double) -> Int {
    guard latitude.isFinite, longitude.isFinite else { return 0 }
    return row(latitude) * columns + column(longitude)
  }

  /// The row of cells holding `latitude`, clamped to the grid (the last row holds 90).
  static func row(_ latitude: Double) -> Int {
    min(max(Int(((latitude + 90) / cellSize).rounded(.down)), 0), rows - 1)
  }

  /// The column of cells holding `longitude`, clamped to the grid (the last holds 180).
  static func column(_ longitude: Double) -> Int {
    min(max(Int(((longitude + 180) / cellSize).rounded(.down)), 0), columns - 1)
  }

  // MARK: Answering

  /// The page's primary keys in order and the number of trips in `box`: the cells the box
  /// covers are visited, each trip in them checked as SQL checks it (edges included; two
  /// ranges of longitude when the box crosses 180°), and the first k kept in a bounded
  /// max-heap whose top is dismissed by one comparison of start dates in most cases.
  static func page(
    _ state: State, box: GeographicBox, reverse: Bool, offset: Int, limit: Int
  ) -> (keys: [Int64], matched: Int) {
    guard box.south.isFinite, box.north.isFinite, box.west.isFinite, box.east.isFinite,
      box.south <= box.north
    else { return ([], 0) }
    let (capacity, overflow) = max(offset, 0).addingReportingOverflow(max(limit, 0))
    var heap = BoxPageHeap(capacity: overflow ? Int.max : capacity, reverse: reverse)
    var matched = 0
    let ranges: [(west: Double, east: Double)] =
      box.crossesAntimeridian ? [(box.west, 180), (-180, box.east)] : [(box.west, box.east)]
    let south = box.south
    let north = box.north
    return state.cells.withUnsafeBufferPointer { cellBuffer in
      state.names.withUnsafeBufferPointer { names in
        let cells = BoxPageHeap.Cells(cells: cellBuffer, names: names)
        for range in ranges where range.west <= range.east {
          for row in row(south)...row(north) {
            for column in column(range.west)...column(range.east) {
              let cell = row * columns + column
              cellBuffer[cell].withUnsafeBufferPointer { entries in
                for slot in entries.indices {
                  let entry = entries[slot]
                  guard entry.longitude >= range.west, entry.longitude <= range.east,
                    entry.latitude >= south, entry.latitude <= north
                  else { continue }
                  matched += 1
                  heap.offer(start: entry.start, cell: Int32(cell), slot: Int32(slot), in: cells)
                }
              }
            }
          }
        }
        return (Array(heap.sorted(in: cells).dropFirst(offset)), matched)
      }
    }
  }
}

/// The first `capacity` trips by (start, name's bytes, key), or by (start, name) descending
/// then key, referring to the entries in place: a max-heap whose top is the last trip kept.
struct BoxPageHeap {
  struct Item {
    var start: Double
    var cell: Int32
    var slot: Int32
  }
  let capacity: Int
  let reverse: Bool
  private var items: [Item] = []

  init(capacity: Int, reverse: Bool) {
    self.capacity = capacity
    self.reverse = reverse
    items.reserveCapacity(min(capacity, 4096))
  }

  /// The index's cells and names, borrowed for one page.
  struct Cells {
    let cells: UnsafeBufferPointer<[TripBoxIndex.Entry]>
    let names: UnsafeBufferPointer<UInt8>

    subscript(_ item: Item) -> TripBoxIndex.Entry { cells[Int(item.cell)][Int(item.slot)] }

    /// The name of `entry`'s bytes against `other`'s: negative, zero or positive.
    func compareNames(_ entry: TripBoxIndex.Entry, _ other: TripBoxIndex.Entry) -> Int {
      let left = UnsafeBufferPointer(
        rebasing: names[Int(entry.nameOffset)..<Int(entry.nameOffset) + Int(entry.nameLength)])
      let right = UnsafeBufferPointer(
        rebasing: names[Int(other.nameOffset)..<Int(other.nameOffset) + Int(other.nameLength)])
      let common = min(left.count, right.count)
      if common > 0, let a = left.baseAddress, let b = right.baseAddress {
        let order = memcmp(a, b, common)
        if order != 0 { return Int(order) }
      }
      return left.count - right.count
    }
  }

  mutating func offer(start: Double, cell: Int32, slot: Int32, in cells: Cells) {
    guard capacity > 0 else { return }
    let item = Item(start: start, cell: cell, slot: slot)
    if items.count == capacity {
      // Most trips sort after the page on their start date alone.
      let top = items[0].start
      if reverse ? start < top : start > top { return }
      guard precedes(item, items[0], cells) else { return }
      items[0] = item
      siftDown(cells)
    } else {
      items.append(item)
      siftUp(cells)
    }
  }

  func sorted(in cells: Cells) -> [Int64] {
    items.sorted { precedes($0, $1, cells) }.map { cells[$0].key }
  }

  /// SQL's order of the page: start date, then name by its bytes (code points), each
  /// reversed with `reverse`, then primary key ascending.
  func precedes(_ lhs: Item, _ rhs: Item, _ cells: Cells) -> Bool {
    if lhs.start != rhs.start { return reverse ? lhs.start > rhs.start : lhs.start < rhs.start }
    let left = cells[lhs]
    let right = cells[rhs]
    let order = cells.compareNames(left, right)
    if order != 0 { return reverse ? order > 0 : order < 0 }
    return left.key < right.key
  }

  private mutating func siftUp(_ cells: Cells) {
    var child = items.count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard precedes(items[parent], items[child], cells) else { return }
      items.swapAt(parent, child)
      child = parent
    }
  }

  private mutating func siftDown(_ cells: Cells) {
    var parent = 0
    while true {
      var latest = parent
      let left = 2 * parent + 1
      if left < items.count, precedes(items[latest], items[left], cells) { latest = left }
      if left + 1 < items.count, precedes(items[latest], items[left + 1], cells) {
        latest = left + 1
      }
      if latest == parent { return }
      items.swapAt(parent, latest)
      parent = latest
    }
  }
}
