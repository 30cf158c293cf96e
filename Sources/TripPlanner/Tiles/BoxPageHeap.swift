import Foundation

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
