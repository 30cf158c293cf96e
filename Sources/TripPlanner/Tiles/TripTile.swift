import Foundation
import Geo
import Persistence

/// The trips of one WebMercatorQuad tile, as a vector tile draws them: each trip a point, or,
/// where the tile would hold more than ``featureBudget`` points (or ``byteBudget`` bytes), a
/// cluster per occupied cell of a ``clusterGrid`` × ``clusterGrid`` grid over the tile, with
/// how many trips it holds, their bounds and their most common destination.
///
/// A tile is deterministic: the same trips give the same features in the same order and the
/// same bytes (``encoded()``). Trips are ordered by start date, name and key; clusters by
/// id. A cluster's position is the mean of its trips' positions in tile units (integer
/// sums), its destination the most common one (the least by code points among equals).
///
/// Points are drawn with a buffer of ``buffer`` tile units around the tile (the points just
/// outside it, so that a symbol on an edge is drawn whole; across the antimeridian too);
/// clusters hold only the trips inside the tile, so the counts of a zoom level's tiles add up
/// to the number of trips. Latitudes beyond ±85.0511° (the edge of Web Mercator) are drawn on
/// the edge.
public struct TripTile: Sendable {
  /// A trip drawn as a point.
  public struct Point: Sendable, Hashable {
    /// The trip's key in its store (the feature's id).
    public var key: Int64
    /// Where it is in tile units (outside 0..<extent in the buffer).
    public var x: Int
    /// Where it is in tile units, down from the tile's top.
    public var y: Int
    /// The trip.
    public var record: TripRecord
  }

  /// Trips drawn as one point: those in one cell of the tile's cluster grid.
  public struct Cluster: Sendable, Hashable {
    /// The cell's number at this zoom (row × cells across the world + column): unique
    /// among the clusters of a zoom level.
    public var id: UInt64
    /// The mean of its trips' positions, in tile units.
    public var x: Int
    /// The mean of its trips' positions, in tile units.
    public var y: Int
    /// How many trips it holds.
    public var count: Int
    /// The smallest box over its trips (never across the antimeridian: a cell is inside one
    /// tile).
    public var bounds: GeographicBox
    /// The most common destination of its trips.
    public var destination: String
  }

  /// What the tile draws.
  public enum Content: Sendable, Hashable {
    /// Every trip in the tile and its buffer.
    case points([Point])
    /// Clusters of the trips in the tile.
    case clusters([Cluster])
  }

  /// The most features a tile holds before it holds clusters instead.
  public static let featureBudget = 2_000
  /// The most bytes a tile of points takes before it holds clusters instead.
  public static let byteBudget = 512_000
  /// The buffer around a tile, in tile units, from which points are drawn.
  public static let buffer = 64
  /// Cells across a tile for clusters: at most 32 × 32 = 1,024 clusters.
  public static let clusterGrid = 32
  /// The MVT layer of points.
  public static let pointsLayer = "trips"
  /// The MVT layer of clusters.
  public static let clustersLayer = "clusters"

  /// The tile.
  public let tile: WebMercatorTile
  /// How many trips are inside the tile (not its buffer).
  public let matched: Int
  /// What it draws.
  public let content: Content
  /// The history token of the tile's last change, or a later one: when it is the same for
  /// two answers of the same tile and query, their content is the same.
  public let version: DefaultHistoryToken

  /// The tile as MVT 2.1: a `trips` layer of points (their key as the id; `id`, `name`,
  /// `destination`, `startDate`, `endDate` and `placeIdentifier` as properties) or a
  /// `clusters` layer (the cell as the id; `count`, `west`, `south`, `east`, `north` and
  /// `destination`). An empty tile is zero bytes. Cost: O(features).
  public func encoded() -> [UInt8] {
    switch content {
    case .points(let points): Self.encode(points)
    case .clusters(let clusters): Self.encode(clusters)
    }
  }

  /// The trip's fields that a point's geometry gives: not properties.
  public static let pointGeometry: Set<String> = ["latitude", "longitude"]

  /// A field's value as a tile's property: ids and dates as text (as JSON writes them), none
  /// left out.
  static func tileValue(_ value: FieldValue) -> VectorTileWriter.Value? {
    switch value {
    case .null: nil
    case .text(let text): .string(text)
    case .number(let number): .double(number)
    case .integer(let integer): integer >= 0 ? .unsigned(UInt64(integer)) : .double(Double(integer))
    case .flag(let flag): .bool(flag)
    case .uuid, .date, .json:
      if case .string(let text) = value.jsonValue {
        .string(text)
      } else {
        .string(value.jsonValue.rendered())
      }
    }
  }

  static func encode(_ points: [Point]) -> [UInt8] {
    var layer = VectorTileWriter.Layer(name: pointsLayer, extent: WebMercatorTile.extent)
    for point in points {
      let record = point.record
      layer.addPoint(
        id: UInt64(bitPattern: point.key), x: point.x, y: point.y,
        properties: record.values.fieldValues(leaving: pointGeometry).map { name, value in
          (name, value.flatMap(tileValue))
        })
    }
    return VectorTileWriter.tile([layer])
  }

  static func encode(_ clusters: [Cluster]) -> [UInt8] {
    var layer = VectorTileWriter.Layer(name: clustersLayer, extent: WebMercatorTile.extent)
    for cluster in clusters {
      layer.addPoint(
        id: cluster.id, x: cluster.x, y: cluster.y,
        properties: [
          ("count", .unsigned(UInt64(cluster.count))), ("west", .double(cluster.bounds.west)),
          ("south", .double(cluster.bounds.south)), ("east", .double(cluster.bounds.east)),
          ("north", .double(cluster.bounds.north)),
          ("destination", .string(cluster.destination)),
        ])
    }
    return VectorTileWriter.tile([layer])
  }
}

/// Makes a ``TripTile`` from the trips a source finds in the tile's windows
/// (``WebMercatorTile/windows(buffer:)``): the source offers each trip's position with a
/// reference it can turn into the trip's record or destination later, for the few it needs.
///
/// Cost: O(m) for the m trips offered, plus O(p log p) to order p points, or O(m) hash
/// updates of destinations for clusters.
struct TripTileBuilder<Reference, Destination: Hashable> {
  struct Candidate {
    var x: Int32
    var y: Int32
    /// The longitude as drawn (with the window's shift): inside the tile, within its edges.
    var longitude: Double
    var latitude: Double
    var key: Int64
    var reference: Reference
    var inside: Bool
  }

  let tile: WebMercatorTile
  private(set) var candidates: [Candidate] = []
  private(set) var matched = 0

  init(tile: WebMercatorTile) { self.tile = tile }

  /// Offers a trip found in `window`, if its position is within the tile or its buffer.
  mutating func offer(
    longitude: Double, latitude: Double, key: Int64, window: WebMercatorTile.Window,
    reference: Reference
  ) {
    guard longitude >= window.west, longitude <= window.east, latitude >= window.south,
      latitude <= window.north
    else { return }
    let (x, y) = tile.position(longitude: longitude, latitude: latitude, shift: window.shift)
    let extent = WebMercatorTile.extent
    let buffer = TripTile.buffer
    guard x >= -buffer, x < extent + buffer, y >= -buffer, y < extent + buffer else { return }
    let inside = x >= 0 && x < extent && y >= 0 && y < extent
    if inside { matched += 1 }
    candidates.append(
      Candidate(
        x: Int32(x), y: Int32(y), longitude: longitude + window.shift, latitude: latitude, key: key,
        reference: reference, inside: inside))
  }

  /// The tile: points when they fit the budgets, else clusters.
  /// `destination` gives a trip's destination as a key (one per text), and `text` the text of
  /// a key.
  func build(
    version: DefaultHistoryToken, record: (Reference) -> TripRecord,
    destination: (Reference) -> Destination, text: (Destination) -> String
  ) -> TripTile {
    if candidates.count <= TripTile.featureBudget {
      let points = candidates.map {
        TripTile.Point(key: $0.key, x: Int($0.x), y: Int($0.y), record: record($0.reference))
      }.sorted { lhs, rhs in
        if lhs.record.startDate != rhs.record.startDate {
          return lhs.record.startDate < rhs.record.startDate
        }
        if lhs.record.name != rhs.record.name { return lhs.record.name < rhs.record.name }
        if lhs.key != rhs.key { return lhs.key < rhs.key }
        return (lhs.x, lhs.y) < (rhs.x, rhs.y)
      }
      if TripTile.encode(points).count <= TripTile.byteBudget {
        return TripTile(tile: tile, matched: matched, content: .points(points), version: version)
      }
    }
    return TripTile(
      tile: tile, matched: matched,
      content: .clusters(clusters(destination: destination, text: text)),
      version: version)
  }

  private struct Aggregate {
    var count = 0
    var sumX = 0
    var sumY = 0
    var west = Double.infinity
    var south = Double.infinity
    var east = -Double.infinity
    var north = -Double.infinity
    var destinations: [Destination: Int] = [:]
  }

  private func clusters(
    destination: (Reference) -> Destination, text: (Destination) -> String
  ) -> [TripTile.Cluster] {
    let grid = TripTile.clusterGrid
    let cellSize = WebMercatorTile.extent / grid
    var cells = [Aggregate?](repeating: nil, count: grid * grid)
    for candidate in candidates where candidate.inside {
      let cell = Int(candidate.y) / cellSize * grid + Int(candidate.x) / cellSize
      var aggregate = cells[cell] ?? Aggregate()
      cells[cell] = nil  // unique while it changes
      aggregate.count += 1
      aggregate.sumX += Int(candidate.x)
      aggregate.sumY += Int(candidate.y)
      aggregate.west = min(aggregate.west, candidate.longitude)
      aggregate.east = max(aggregate.east, candidate.longitude)
      aggregate.south = min(aggregate.south, candidate.latitude)
      aggregate.north = max(aggregate.north, candidate.latitude)
      aggregate.destinations[destination(candidate.reference), default: 0] += 1
      cells[cell] = aggregate
    }
    let across = UInt64(tile.matrixSize * grid)
    return cells.indices.compactMap { cell in
      guard let aggregate = cells[cell] else { return nil }
      let row = UInt64(tile.row * grid + cell / grid)
      let column = UInt64(tile.column * grid + cell % grid)
      // The most common; among equals the least by code points.
      let common = aggregate.destinations.max { lhs, rhs in
        if lhs.value != rhs.value { return lhs.value < rhs.value }
        return text(rhs.key).unicodeScalars.lexicographicallyPrecedes(
          text(lhs.key).unicodeScalars
        ) { $0.value < $1.value }
      }
      return TripTile.Cluster(
        id: row * across + column, x: aggregate.sumX / aggregate.count,
        y: aggregate.sumY / aggregate.count, count: aggregate.count,
        bounds: GeographicBox(
          west: aggregate.west, south: aggregate.south, east: aggregate.east,
          north: aggregate.north),
        destination: common.map { text($0.key) } ?? "")
    }
  }
}
