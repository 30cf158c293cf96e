import Foundation
import Geo
import Persistence
import Synchronization

/// Every trip, kept in memory beside a store in cells of a quarter degree by its position, so
/// that a page of a bounding box sorted by start date (``TripStore/page(_:index:)``,
/// ``TripStore/pageRecords(_:index:)``) and its count are answered without visiting the box's
/// rows or index entries in the store, and a page of records without reading a row: what a
/// map service answers most (OGC API – Features' `items?bbox=…&limit=…`).
///
/// The index follows the store through its history: before each answer it reads, in the
/// request's snapshot, the transactions after the token it was last brought to, and moves,
/// adds or removes the trips they name (reading the changed trips' rows). An answer therefore
/// describes exactly the snapshot of the request. Like every reader of the store's history,
/// it does not see what an outside program writes to the store's tables without it.
///
/// Cost:
/// - built before first use (``prepare(_:)``) or on it: one pass over the trips' columns, O(n)
///   time; O(n) memory, about 150 bytes a trip at a million (a 48-byte entry in its cell,
///   48 bytes of the rest by primary key, the three strings' bytes, a share of the 8 MB table
///   of cells);
/// - a page: O(c + m log k) for the c cells the box covers (1,440 × 720 over the globe), the
///   m trips in them and k = offset + limit, under a lock that other pages wait for; its
///   records are made from memory, O(limit);
/// - catching up: O(t + changes × log n) for t transactions since the last answer; when
///   history after its token was deleted (`ModelContext.deleteHistory(before:)`), a rebuild.
///
/// One index serves one store, from many threads (each with its own ``TripStore``).
public final class TripBoxIndex: Sendable {
  enum Condition {
    case empty
    case ready(State)
    /// The build failed at this token (a row the index cannot read): the store answers pages
    /// until the store changes.
    case failed(DefaultHistoryToken)

    /// The ready state, leaving the condition empty (the caller then holds the only copy), or
    /// nil when it is not ready.
    mutating func take() -> State? {
      guard case .ready(let state) = self else { return nil }
      self = .empty
      return state
    }
  }

  static let cellSize = 0.25
  static let columns = 1440
  static let rows = 720
  /// What the index holds of a trip (all of its record), in the order it reads them.
  private static let keyPaths = FieldValues<Trip>.keyPaths

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
      throw error
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
    box: GeographicBox, reverse: Bool, offset: Int, limit: Int, token: DefaultHistoryToken,
    context: ModelContext
  ) -> (keys: [PersistentIdentifier], matched: Int)? {
    answer(box: box, reverse: reverse, offset: offset, limit: limit, token: token, context: context)
    {
      _, entries in
      entries.map {
        PersistentIdentifier(
          storeIdentifier: token.storeIdentifier, entityName: Trip.schema.name, primaryKey: $0.key)
      }
    }
  }

  /// The records of the page ``page(box:reverse:offset:limit:token:context:)`` chooses, made
  /// from memory, and how many trips are in the box; nil when it would be nil.
  func pageRecords(
    box: GeographicBox, reverse: Bool, offset: Int, limit: Int, token: DefaultHistoryToken,
    context: ModelContext
  ) -> (records: [TripRecord], keys: [Int64], matched: Int)? {
    answer(box: box, reverse: reverse, offset: offset, limit: limit, token: token, context: context)
    {
      state, entries in (entries.map { state.record($0) }, entries.map(\.key))
    }.map { ($0.0.0, $0.0.1, $0.matched) }
  }

  /// The page's entries, made into an answer by `make` under the index's lock.
  private func answer<Answer>(
    box: GeographicBox, reverse: Bool, offset: Int, limit: Int, token: DefaultHistoryToken,
    context: ModelContext, _ make: (borrowing State, [Entry]) -> Answer
  ) -> (Answer, matched: Int)? {
    let answer = withState(token: token, context: context) { state in
      let (entries, matched) = Self.page(
        state, box: box, reverse: reverse, offset: offset, limit: limit)
      return (make(state, entries), matched)
    }
    if answer != nil { answeredPages.add(1, ordering: .relaxed) }
    return answer
  }

  /// What `body` makes of the index brought to `token` (the current history token of the
  /// snapshot `context` reads in), under the index's lock; nil when the index cannot answer
  /// for this snapshot (it was brought past it, or cannot be built from this store).
  func withState<Answer>(
    token: DefaultHistoryToken, context: ModelContext, _ body: (borrowing State) -> Answer
  ) -> Answer? {
    condition.withLock { condition in
      var state: State
      if case .failed(let failedToken) = condition, failedToken == token { return nil }
      // The state is taken out of the condition, so that it is unique while it changes: a
      // binding of it kept meanwhile would make every change copy its arrays (tens of
      // megabytes at a million trips).
      var readyToken: DefaultHistoryToken?
      if case .ready(let ready) = condition { readyToken = ready.token }
      if let readyToken, readyToken.storeIdentifier == token.storeIdentifier, readyToken > token {
        return nil
      }
      if let readyToken, readyToken.storeIdentifier == token.storeIdentifier,
        let taken = condition.take()
      {
        state = consume taken
        if state.token < token {
          do {
            try Self.catchUp(&state, to: token, context: context)
          } catch {
            condition = .failed(token)
            record(error)
            return nil
          }
        }
      } else {
        do {
          state = try Self.built(token: token, context: context)
        } catch {
          condition = .failed(token)
          record(error)
          return nil
        }
      }
      let answer = body(state)
      condition = .ready(state)
      failure.withLock { $0 = nil }
      return answer
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
  static func built(token: DefaultHistoryToken, context: ModelContext) throws -> State {
    var state = State(token: token)
    var pending: [(cell: Int32, entry: Entry)] = []
    try context.enumerateValues(FetchDescriptor<Trip>(), keyPaths) { row in
      pending.append(try state.add(row))
    }
    state.place(pending)
    state.shrink()
    return state
  }

  /// Brings `state` from its token to `token` through the history between them, or rebuilds
  /// it when that history is gone. O(t + changes × log n).
  static func catchUp(_ state: inout State, to token: DefaultHistoryToken, context: ModelContext)
    throws
  {
    let transactions: [DefaultHistoryTransaction]
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
    var lastChange: [Int64: Int64] = [:]
    for transaction in transactions {
      for change in transaction.changes {
        let key = change.changedPersistentIdentifier.primaryKey
        lastChange[key] = transaction.token.value
        switch change.kind {
        case .insert:
          changed.insert(key)
          removed.remove(key)
        case .update:
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
    for key in changed.union(removed) {
      if let cell = state.cell(of: key) {
        state.stamps.mark(Int(cell), lastChange[key] ?? token.value)
      }
      state.remove(key)
    }
    try context.enumerateValues(
      FetchDescriptor<Trip>(), keyPaths,
      identifiers: changed.map {
        PersistentIdentifier(
          storeIdentifier: token.storeIdentifier, entityName: Trip.schema.name, primaryKey: $0)
      }
    ) { row in
      try insert(row, into: &state)
      let key = row.identifier.primaryKey
      if let cell = state.cell(of: key) {
        state.stamps.mark(Int(cell), lastChange[key] ?? token.value)
      }
    }
    state.token = token
  }

  private static func insert(_ row: borrowing ValueRow<Trip>, into state: inout State) throws {
    try state.insert(row)
  }

  /// Calls `body` with the key and record of each trip `descriptor` matches, read from its
  /// columns without models where SQL finishes the predicate, else from models. O(rows).
  static func forEachRecord(
    _ descriptor: FetchDescriptor<Trip>, context: ModelContext,
    _ body: (Int64, TripRecord) throws -> Void
  ) throws {
    var delivered = false
    do {
      try context.enumerateValues(descriptor, keyPaths) { row in
        delivered = true
        try body(row.identifier.primaryKey, try record(row))
      }
    } catch let error as PersistenceError where error.code == .unsupportedPredicate && !delivered {
      // A predicate Swift finishes (a filter's Swift functions on PostgreSQL): from models.
      for trip in try context.fetch(descriptor) {
        try body(context.persistentIdentifier(for: trip)?.primaryKey ?? 0, trip.record)
      }
    }
  }

  /// The record of a row read with ``keyPaths``.
  private static func record(_ row: borrowing ValueRow<Trip>) throws -> TripRecord {
    TripRecord(given: try FieldValues(row: row, from: 0))
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

  /// The page's entries in order and the number of trips in `box`: the cells the box
  /// covers are visited, each trip in them checked as SQL checks it (edges included; two
  /// ranges of longitude when the box crosses 180°), and the first k kept in a bounded
  /// max-heap whose top is dismissed by one comparison of start dates in most cases.
  static func page(
    _ state: State, box: GeographicBox, reverse: Bool, offset: Int, limit: Int
  ) -> (entries: [Entry], matched: Int) {
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
      state.text.withUnsafeBufferPointer { text in
        let cells = BoxPageHeap.Cells(cells: cellBuffer, text: text)
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
