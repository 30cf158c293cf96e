/// The smallest ``GeographicBox`` over a changing multiset of coordinates, kept current in
/// O(log n) per insert or removal (n distinct values), without rescanning.
///
/// It holds the longitudes in a sorted multiset and the gaps between neighbouring longitudes
/// in a max-heap whose stale entries are dropped when they surface; the box is the complement
/// of the largest gap (or of the wrap-around gap, which wins ties), exactly as
/// ``GeographicBox/enclosing(_:)`` computes it from scratch.
public struct CoordinateCover: Sendable {
  private var longitudes = SortedMultiset()
  private var latitudes = SortedMultiset()
  private var gaps = GapHeap()

  /// Creates an empty cover.
  public init() {}

  /// Creates a cover of `coordinates`.
  public init(_ coordinates: some Sequence<Coordinate>) {
    for coordinate in coordinates { insert(coordinate) }
  }

  /// How many coordinates are covered.
  public var count: Int { latitudes.count }

  /// Adds a coordinate. O(log n).
  public mutating func insert(_ coordinate: Coordinate) {
    latitudes.insert(coordinate.latitude)
    guard !coordinate.isPole else { return }
    let x = normalizedLongitude(coordinate.longitude)
    guard longitudes.insert(x) else { return }
    let before = longitudes.predecessor(x)
    let after = longitudes.successor(x)
    if let before { gaps.push(gap: x - before, from: before) }
    if let after { gaps.push(gap: after - x, from: x) }
    compactIfNeeded()
  }

  /// Removes a coordinate added before (a coordinate not covered is ignored). O(log n).
  public mutating func remove(_ coordinate: Coordinate) {
    guard latitudes.multiplicity(of: coordinate.latitude) > 0 else { return }
    if !coordinate.isPole {
      let x = normalizedLongitude(coordinate.longitude)
      guard longitudes.multiplicity(of: x) > 0 else { return }
      if longitudes.remove(x), let before = longitudes.predecessor(x),
        let after = longitudes.successor(x)
      {
        gaps.push(gap: after - before, from: before)
      }
    }
    latitudes.remove(coordinate.latitude)
    compactIfNeeded()
  }

  /// The smallest box over the coordinates, or nil when there are none. O(log n) amortised.
  public var box: GeographicBox? {
    mutating get {
      guard let south = latitudes.min, let north = latitudes.max else { return nil }
      guard let first = longitudes.min, let last = longitudes.max else {
        return GeographicBox(west: -180, south: south, east: 180, north: north)
      }
      var interval = LongitudeInterval.from(west: first, east: last)
      let wrap = first + 360 - last
      while let top = gaps.top {
        // A gap is current when its western end is still there and its eastern neighbour is
        // still the one it was measured to.
        guard longitudes.multiplicity(of: top.from) > 0,
          let next = longitudes.successor(top.from), next - top.from == top.gap
        else {
          gaps.pop()
          continue
        }
        if top.gap > wrap { interval = LongitudeInterval.from(west: next, east: top.from) }
        break
      }
      return GeographicBox(west: interval.west, south: south, east: interval.east, north: north)
    }
  }

  /// Rebuilds the heap when stale entries outnumber current ones, keeping memory O(n).
  private mutating func compactIfNeeded() {
    guard gaps.count > 4 * longitudes.distinctCount + 64 else { return }
    gaps = GapHeap()
    let keys = longitudes.sortedKeys
    for index in keys.indices.dropLast() {
      gaps.push(gap: keys[index + 1] - keys[index], from: keys[index])
    }
  }
}

/// A max-heap of gaps, largest first; equal gaps in ascending longitude.
struct GapHeap {
  struct Entry {
    var gap: Double
    var from: Double
  }
  private var entries: [Entry] = []

  var count: Int { entries.count }
  var top: Entry? { entries.first }

  private static func before(_ a: Entry, _ b: Entry) -> Bool {
    a.gap != b.gap ? a.gap > b.gap : a.from < b.from
  }

  mutating func push(gap: Double, from: Double) {
    entries.append(Entry(gap: gap, from: from))
    var child = entries.count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard Self.before(entries[child], entries[parent]) else { break }
      entries.swapAt(child, parent)
      child = parent
    }
  }

  mutating func pop() {
    guard !entries.isEmpty else { return }
    entries.swapAt(0, entries.count - 1)
    entries.removeLast()
    var parent = 0
    while true {
      let leftChild = 2 * parent + 1
      let rightChild = leftChild + 1
      var best = parent
      if leftChild < entries.count && Self.before(entries[leftChild], entries[best]) {
        best = leftChild
      }
      if rightChild < entries.count && Self.before(entries[rightChild], entries[best]) {
        best = rightChild
      }
      if best == parent { break }
      entries.swapAt(parent, best)
      parent = best
    }
  }
}
