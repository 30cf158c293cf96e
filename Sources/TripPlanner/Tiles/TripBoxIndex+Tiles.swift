import Foundation
import Geo
import Persistence

/// The history position of the last change in each of the index's cells, and in each block
/// of 2^l × 2^l cells for l up to 11 (a max-pyramid), so that the last change in a region
/// of any size is found by visiting a few dozen entries.
///
/// Cost: O(12) to mark a change; O(64) entries visited for a region's last change; memory
/// 4/3 × 8 bytes a cell, about 11 MB. A position of 0 in a level means "not since
/// ``base``", the position the index was built at.
struct ChangeStamps {
  let base: Int64
  private var levels: [[Int64]]
  private var widths: [Int]

  init(base: Int64) {
    self.base = base
    var levels: [[Int64]] = []
    var widths: [Int] = []
    var columns = TripBoxIndex.columns
    var rows = TripBoxIndex.rows
    while true {
      levels.append([Int64](repeating: 0, count: columns * rows))
      widths.append(columns)
      if columns == 1 && rows == 1 { break }
      columns = (columns + 1) / 2
      rows = (rows + 1) / 2
    }
    self.levels = levels
    self.widths = widths
  }

  /// Records a change at history position `position` in `cell` (row-major, as the index's).
  mutating func mark(_ cell: Int, _ position: Int64) {
    var row = cell / TripBoxIndex.columns
    var column = cell % TripBoxIndex.columns
    for level in levels.indices {
      let index = row * widths[level] + column
      levels[level][index] = max(levels[level][index], position)
      row /= 2
      column /= 2
    }
  }

  /// The last change in the cells of `rows` × `columns` (or in a region a little larger), at
  /// least ``base``.
  func last(rows: ClosedRange<Int>, columns: ClosedRange<Int>) -> Int64 {
    var level = 0
    while level < levels.count - 1,
      ((rows.upperBound >> level) - (rows.lowerBound >> level) + 1)
        * ((columns.upperBound >> level) - (columns.lowerBound >> level) + 1) > 64
    {
      level += 1
    }
    var last = base
    for row in (rows.lowerBound >> level)...(rows.upperBound >> level) {
      for column in (columns.lowerBound >> level)...(columns.upperBound >> level) {
        last = max(last, levels[level][row * widths[level] + column])
      }
    }
    return last
  }
}

extension TripBoxIndex {
  /// The tile's trips from memory, with its version (the history position of the last change
  /// in the cells its windows cover), as of `token`, the current history token of the
  /// snapshot `context` reads in; nil when the index cannot answer for this snapshot.
  ///
  /// Cost: catching up under the index's lock (O(t + changes)), then, outside it, O(c + m)
  /// for the c cells the tile and its buffer cover and the m trips in them, plus the points'
  /// records or the clusters' destinations from memory (``TripTileBuilder``). A change the
  /// index follows while a tile is being made copies the arrays it changes (copy on write).
  func tile(_ tile: WebMercatorTile, token: DefaultHistoryToken, context: ModelContext) -> TripTile?
  {
    // The tile is made from a copy of the state (its arrays shared, copied on write), outside
    // the lock: a tile of a million trips does not hold up the pages and tiles of others.
    guard let state = withState(token: token, context: context, { copy($0) }) else { return nil }
    return Self.tile(tile, token: token, state: state)
  }

  private func copy(_ state: borrowing State) -> State { copy state }

  private static func tile(_ tile: WebMercatorTile, token: DefaultHistoryToken, state: State)
    -> TripTile
  {
    var builder = TripTileBuilder<(cell: Int32, slot: Int32), UInt32>(tile: tile)
    for window in tile.windows(buffer: TripTile.buffer) {
      for row in Self.row(window.south)...Self.row(window.north) {
        for column in Self.column(window.west)...Self.column(window.east) {
          let cell = row * Self.columns + column
          state.cells[cell].withUnsafeBufferPointer { entries in
            for slot in entries.indices {
              let entry = entries[slot]
              builder.offer(
                longitude: entry.longitude, latitude: entry.latitude, key: entry.key,
                window: window, reference: (Int32(cell), Int32(slot)))
            }
          }
        }
      }
    }
    let version = DefaultHistoryToken(
      storeIdentifier: token.storeIdentifier, value: Self.version(of: tile, in: state))
    return builder.build(
      version: version,
      record: { state.record(state.cells[Int($0.cell)][Int($0.slot)]) },
      destination: { state.cells[Int($0.cell)][Int($0.slot)].destination },
      text: { state.destinations[Int($0)] })
  }

  /// The last change the index knows of in the cells of `tile` and its buffer, as of
  /// `token`; nil when the index cannot answer for this snapshot. O(1) after catching up.
  func version(of tile: WebMercatorTile, token: DefaultHistoryToken, context: ModelContext)
    -> DefaultHistoryToken?
  {
    withState(token: token, context: context) { state in
      DefaultHistoryToken(
        storeIdentifier: token.storeIdentifier, value: Self.version(of: tile, in: state))
    }
  }

  private static func version(of tile: WebMercatorTile, in state: borrowing State) -> Int64 {
    var last = state.stamps.base
    for window in tile.windows(buffer: TripTile.buffer) {
      last = max(
        last,
        state.stamps.last(
          rows: row(window.south)...row(window.north),
          columns: column(window.west)...column(window.east)))
    }
    return last
  }
}
