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
  /// Bytes of the state's text arena: `length` is `UInt32.max` for none (a trip without a
  /// place identifier).
  struct TextSpan {
    var offset: UInt32
    var length: UInt32

    static let none = TextSpan(offset: 0, length: .max)
    var isNone: Bool { length == .max }
    /// How many bytes of the arena it holds.
    var byteCount: Int { isNone ? 0 : Int(length) }
  }

  /// A trip as the index's cells keep it: what a page is chosen by, and its destination's
  /// number (for a tile's clusters), in 48 bytes.
  struct Entry {
    var longitude: Double
    var latitude: Double
    var start: Double
    var key: Int64
    var name: TextSpan
    /// The destination's place in ``State/destinations``.
    var destination: UInt32
  }

  /// Where a trip is and the rest of its record, by primary key: 48 bytes.
  struct Slot {
    /// Its cell, or -1 for a key without a trip.
    var cell: Int32
    var end: Double
    var id: UUID
    var destination: TextSpan
    var place: TextSpan

    static let empty = Slot(
      cell: -1, end: 0, id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
      destination: .none, place: .none)
  }

  /// Where a trip's record keeps the fields the index lays out itself (``Entry``, ``Slot``):
  /// their indexes in the trip's field table, found by key path once. Any other field
  /// declared on ``Trip`` is kept with its trip in ``State/otherValues``.
  struct Layout {
    let id: Int
    let name: Int
    let destination: Int
    let start: Int
    let end: Int
    let latitude: Int
    let longitude: Int
    let place: Int
    /// Whether the trip has fields beyond these.
    let hasOthers: Bool

    static let trip = Layout()

    private init() {
      func at(_ keyPath: PartialKeyPath<Trip>) -> Int {
        guard let index = FieldValues<Trip>.index(of: keyPath) else {
          preconditionFailure("\(keyPath) is not a field of a trip")
        }
        return index
      }
      (id, name, destination) = (at(\.id), at(\.name), at(\.destination))
      (start, end) = (at(\.startDate), at(\.endDate))
      (latitude, longitude, place) = (at(\.latitude), at(\.longitude), at(\.placeIdentifier))
      let laidOut: Set = [id, name, destination, start, end, latitude, longitude, place]
      hasOthers = FieldValues<Trip>.table.entries.count > laidOut.count
    }
  }

  /// The fields of a trip the index lays out itself (``Layout``), typed.
  struct LaidOut {
    var id: UUID?
    var name: String
    var destination: String
    /// Seconds since the reference date.
    var start: Double
    var end: Double
    var latitude: Double
    var longitude: Double
    var place: String?

    init(_ values: FieldValues<Trip>) {
      let layout = Layout.trip
      id = values[field: layout.id]?.uuid
      name = values[field: layout.name]?.text ?? ""
      destination = values[field: layout.destination]?.text ?? ""
      start = (values[field: layout.start]?.date ?? .distantPast).timeIntervalSinceReferenceDate
      end = (values[field: layout.end]?.date ?? .distantPast).timeIntervalSinceReferenceDate
      latitude = values[field: layout.latitude]?.number ?? 0
      longitude = values[field: layout.longitude]?.number ?? 0
      place = values[field: layout.place]?.text
    }

    /// The fields of a value row of ``TripBoxIndex/keyPaths`` (the trip's fields in order, so
    /// that a field's index is its column), each read as its type from its column. O(fields
    /// laid out): a build reads a million rows this way.
    init(_ row: borrowing ValueRow<Trip>) throws {
      let layout = Layout.trip
      id = try row.value(UUID.self, at: layout.id)
      name = try row.value(String.self, at: layout.name)
      destination = try row.value(String.self, at: layout.destination)
      start = try row.value(Date.self, at: layout.start).timeIntervalSinceReferenceDate
      end = try row.value(Date.self, at: layout.end).timeIntervalSinceReferenceDate
      latitude = try row.value(Double.self, at: layout.latitude)
      longitude = try row.value(Double.self, at: layout.longitude)
      place = try row.decoded(PlaceIdentifier.self, at: layout.place)?.rawValue
    }
  }

  struct State {
    var token: HistoryToken
    /// Row-major: `row * columns + column`, row 0 from latitude −90, column 0 from longitude
    /// −180. A trip whose coordinates are not finite numbers is kept in cell 0 (no box selects
    /// it; SQL's comparisons do not either).
    var cells: [[Entry]] = Array(repeating: [], count: TripBoxIndex.rows * TripBoxIndex.columns)
    /// The names', destinations' and place identifiers' UTF-8 bytes, one after another; a
    /// removed trip's bytes stay until ``compactText()`` (when they are over half of it).
    var text: [UInt8] = []
    var unusedTextBytes = 0
    /// Each trip's slot by primary key: an array for the keys a store hands out (dense from
    /// 1), a dictionary for any far beyond them.
    var denseSlots: [Slot] = []
    var sparseSlots: [Int64: Slot] = [:]
    /// Every destination the index has seen, once each, and its place there: a tile counts
    /// its clusters' destinations by number. Kept while the index lives (one string per
    /// distinct destination).
    var destinations: [String] = []
    var destinationNumbers: [String: UInt32] = [:]
    private(set) var count = 0
    /// The values of each trip's fields beyond those the index lays out itself (``Layout``),
    /// by primary key; empty while ``Trip`` has none.
    var otherValues: [Int64: FieldValues<Trip>] = [:]
    /// The history position of the last change in each cell (tiles' versions).
    var stamps: ChangeStamps

    init(token: HistoryToken) {
      self.token = token
      stamps = ChangeStamps(base: token.value)
    }

    func slot(of key: Int64) -> Slot? {
      if key >= 0, key < denseSlots.count {
        return denseSlots[Int(key)].cell >= 0 ? denseSlots[Int(key)] : nil
      }
      return sparseSlots[key]
    }

    func cell(of key: Int64) -> Int32? { slot(of: key)?.cell }

    private mutating func setSlot(_ slot: Slot?, of key: Int64) {
      if key >= 0, key < denseSlots.count {
        denseSlots[Int(key)] = slot ?? .empty
      } else if let slot, key >= 0, key < 4 * (count + 1) + 65_536 {
        denseSlots.append(contentsOf: repeatElement(.empty, count: Int(key) + 1 - denseSlots.count))
        denseSlots[Int(key)] = slot
      } else {
        sparseSlots[key] = slot
      }
    }

    private mutating func append(_ string: String) -> TextSpan {
      var string = string
      let span = string.withUTF8 { bytes in
        text.append(contentsOf: bytes)
        return TextSpan(
          offset: UInt32(truncatingIfNeeded: text.count - bytes.count), length: UInt32(bytes.count))
      }
      precondition(text.count <= Int(UInt32.max), "TripBoxIndex: text over 4 GiB")
      return span
    }

    /// The number of `destination` in ``destinations``, given it if it has none.
    private mutating func number(of destination: String) -> UInt32 {
      if let number = destinationNumbers[destination] { return number }
      let number = UInt32(truncatingIfNeeded: destinations.count)
      destinations.append(destination)
      destinationNumbers[destination] = number
      return number
    }

    /// Adds the trip `record` (whose `id` is set) stored under `key`.
    mutating func insert(key: Int64, _ record: TripRecord) {
      let (cell, entry) = add(key: key, LaidOut(record.values), others: record.values)
      cells[Int(cell)].append(entry)
    }

    /// Adds the trip of a value row of ``TripBoxIndex/keyPaths``.
    mutating func insert(_ row: borrowing ValueRow<Trip>) throws {
      let (cell, entry) = try add(row)
      cells[Int(cell)].append(entry)
    }

    /// Records the trip of a value row of ``TripBoxIndex/keyPaths`` by its key, its laid-out
    /// fields read straight from their columns (no record made), and returns its cell and the
    /// entry that goes into it, which the caller puts there (``place(_:)`` for a build).
    mutating func add(_ row: borrowing ValueRow<Trip>) throws -> (cell: Int32, entry: Entry) {
      let key = row.identifier.primaryKey
      return add(
        key: key, try LaidOut(row),
        others: Layout.trip.hasOthers ? try FieldValues(row: row, from: 0) : nil)
    }

    /// Records a trip's fields under `key`: its entry's and slot's from `laidOut`, the rest
    /// from `others` when the trip has more (``Layout/hasOthers``).
    private mutating func add(key: Int64, _ laidOut: LaidOut, others: FieldValues<Trip>?) -> (
      cell: Int32, entry: Entry
    ) {
      let entry = Entry(
        longitude: laidOut.longitude, latitude: laidOut.latitude, start: laidOut.start, key: key,
        name: append(laidOut.name), destination: number(of: laidOut.destination))
      let cell = TripBoxIndex.cell(latitude: laidOut.latitude, longitude: laidOut.longitude)
      setSlot(
        Slot(
          cell: Int32(cell), end: laidOut.end, id: laidOut.id ?? UUID(),
          destination: append(laidOut.destination),
          place: laidOut.place.map { append($0) } ?? .none),
        of: key)
      if Layout.trip.hasOthers { otherValues[key] = others }
      count += 1
      return (Int32(cell), entry)
    }

    /// Puts the entries of a build into their cells, each cell's array made once at its size,
    /// in the order given: a counting sort by cell. Appending them one by one, each append
    /// touches a random cell's array, a cache miss each (a tenth of a build at a million
    /// trips). O(n + cells).
    mutating func place(_ pending: [(cell: Int32, entry: Entry)]) {
      var counts = [Int32](repeating: 0, count: cells.count + 1)
      for item in pending { counts[Int(item.cell) + 1] += 1 }
      for cell in 0..<cells.count { counts[cell + 1] += counts[cell] }
      // counts[c] is now where cell c's entries start in `sorted`.
      var next = counts
      let sorted = [Entry](unsafeUninitializedCapacity: pending.count) { buffer, initialized in
        for item in pending {
          let position = Int(next[Int(item.cell)])
          (buffer.baseAddress! + position).initialize(to: item.entry)
          next[Int(item.cell)] += 1
        }
        initialized = pending.count
      }
      sorted.withUnsafeBufferPointer { sorted in
        for cell in 0..<cells.count where counts[cell + 1] > counts[cell] {
          let slice = UnsafeBufferPointer(
            rebasing: sorted[Int(counts[cell])..<Int(counts[cell + 1])])
          if cells[cell].isEmpty {
            cells[cell] = Array(slice)
          } else {
            cells[cell].append(contentsOf: slice)
          }
        }
      }
    }

    mutating func remove(_ key: Int64) {
      guard let slot = slot(of: key) else { return }
      let cell = Int(slot.cell)
      setSlot(nil, of: key)
      if Layout.trip.hasOthers { otherValues[key] = nil }
      count -= 1
      unusedTextBytes += slot.destination.byteCount + slot.place.byteCount
      guard let index = cells[cell].firstIndex(where: { $0.key == key }) else { return }
      unusedTextBytes += cells[cell][index].name.byteCount
      cells[cell].swapAt(index, cells[cell].count - 1)
      cells[cell].removeLast()
      if unusedTextBytes > 1 << 20, unusedTextBytes > text.count / 2 { compactText() }
    }

    /// The text's bytes without those of removed trips. O(n).
    mutating func compactText() {
      var compact: [UInt8] = []
      compact.reserveCapacity(text.count - unusedTextBytes)
      text.withUnsafeBufferPointer { old in
        func move(_ span: inout TextSpan) {
          guard !span.isNone else { return }
          let start = Int(span.offset)
          span.offset = UInt32(compact.count)
          compact.append(contentsOf: old[start..<start + Int(span.length)])
        }
        for cell in cells.indices where !cells[cell].isEmpty {
          for index in cells[cell].indices {
            move(&cells[cell][index].name)
            let key = cells[cell][index].key
            guard var slot = slot(of: key) else { continue }
            move(&slot.destination)
            move(&slot.place)
            setSlot(slot, of: key)
          }
        }
      }
      text = compact
      unusedTextBytes = 0
    }

    /// The text and the slots with the capacity they need and no more (after a build, whose
    /// cells ``place(_:)`` made at their sizes). O(n).
    mutating func shrink() {
      text = Self.exact(text)
      denseSlots = Self.exact(denseSlots)
    }

    private static func exact<Element>(_ array: [Element]) -> [Element] {
      array.withUnsafeBufferPointer { source in
        [Element](unsafeUninitializedCapacity: source.count) { target, count in
          _ = target.initialize(fromContentsOf: source)
          count = source.count
        }
      }
    }

    /// The text of `span`.
    func string(_ span: TextSpan) -> String {
      text.withUnsafeBufferPointer { text in
        String(
          decoding: UnsafeBufferPointer(
            rebasing: text[Int(span.offset)..<Int(span.offset) + Int(span.length)]),
          as: UTF8.self)
      }
    }

    /// The record of the trip `entry` is, from memory. O(1).
    func record(_ entry: Entry) -> TripRecord {
      let slot = slot(of: entry.key) ?? .empty
      let layout = Layout.trip
      var values = otherValues[entry.key] ?? State.noValues
      values[field: layout.id] = .uuid(slot.id)
      values[field: layout.name] = .text(string(entry.name))
      values[field: layout.destination] = .text(string(slot.destination))
      values[field: layout.start] = .date(Date(timeIntervalSinceReferenceDate: entry.start))
      values[field: layout.end] = .date(Date(timeIntervalSinceReferenceDate: slot.end))
      values[field: layout.latitude] = .number(entry.latitude)
      values[field: layout.longitude] = .number(entry.longitude)
      values[field: layout.place] = slot.place.isNone ? .null : .text(string(slot.place))
      return TripRecord(given: values)
    }

    /// No field given: what ``record(_:)`` fills in when the trip has no other fields.
    private static let noValues = FieldValues<Trip>(none: ())
  }

  enum Condition {
    case empty
    case ready(State)
    /// The build failed at this token (a row the index cannot read): the store answers pages
    /// until the store changes.
    case failed(HistoryToken)

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
    box: GeographicBox, reverse: Bool, offset: Int, limit: Int, token: HistoryToken,
    context: ModelContext
  ) -> (records: [TripRecord], keys: [Int64], matched: Int)? {
    answer(box: box, reverse: reverse, offset: offset, limit: limit, token: token, context: context)
    {
      state, entries in (entries.map { state.record($0) }, entries.map(\.key))
    }.map { ($0.0.0, $0.0.1, $0.matched) }
  }

  /// The page's entries, made into an answer by `make` under the index's lock.
  private func answer<Answer>(
    box: GeographicBox, reverse: Bool, offset: Int, limit: Int, token: HistoryToken,
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
    token: HistoryToken, context: ModelContext, _ body: (borrowing State) -> Answer
  ) -> Answer? {
    condition.withLock { condition in
      var state: State
      if case .failed(let failedToken) = condition, failedToken == token { return nil }
      // The state is taken out of the condition, so that it is unique while it changes: a
      // binding of it kept meanwhile would make every change copy its arrays (tens of
      // megabytes at a million trips).
      var readyToken: HistoryToken?
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
  static func built(token: HistoryToken, context: ModelContext) throws -> State {
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
    var lastChange: [Int64: Int64] = [:]
    for transaction in transactions {
      for change in transaction.changes {
        let key = change.changedIdentifier.primaryKey
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

  /// The index's cells and text, borrowed for one page.
  struct Cells {
    let cells: UnsafeBufferPointer<[TripBoxIndex.Entry]>
    let text: UnsafeBufferPointer<UInt8>

    subscript(_ item: Item) -> TripBoxIndex.Entry { cells[Int(item.cell)][Int(item.slot)] }

    /// The name of `entry`'s bytes against `other`'s: negative, zero or positive.
    func compareNames(_ entry: TripBoxIndex.Entry, _ other: TripBoxIndex.Entry) -> Int {
      let left = UnsafeBufferPointer(
        rebasing: text[Int(entry.name.offset)..<Int(entry.name.offset) + Int(entry.name.length)])
      let right = UnsafeBufferPointer(
        rebasing: text[Int(other.name.offset)..<Int(other.name.offset) + Int(other.name.length)])
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

  func sorted(in cells: Cells) -> [TripBoxIndex.Entry] {
    items.sorted { precedes($0, $1, cells) }.map { cells[$0] }
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
