import Foundation
import Geo
import Persistence

/// The index's state: its entries by cell, each trip's slot by key, the text arena, and how
/// a trip's fields are laid out in them.
extension TripBoxIndex {
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
    var token: DefaultHistoryToken
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

    init(token: DefaultHistoryToken) {
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
}
