import Foundation

/// A tile of OGC's WebMercatorQuad tile matrix set (the XYZ tiles of web maps): tile matrix
/// ``zoom`` has 2^zoom × 2^zoom tiles over the spherical Mercator square (EPSG:3857, latitudes
/// within ±``maximumLatitude``), ``column`` counted east from 180° W and ``row`` south from
/// the top.
///
/// Positions inside a tile are in tile units: 0 to ``extent`` from its west (and north) edge,
/// as Mapbox Vector Tiles write them. The projection is the spherical formula EPSG:3857
/// defines, the same that PROJ computes (tested against it).
public struct WebMercatorTile: Hashable, Sendable, CustomStringConvertible {
  /// The tile matrix (zoom level), 0 to ``maximumZoom``.
  public let zoom: Int
  /// The column, 0 to 2^zoom − 1, from the west.
  public let column: Int
  /// The row, 0 to 2^zoom − 1, from the north.
  public let row: Int

  /// The deepest tile matrix of WebMercatorQuad (its definition stops at 24).
  public static let maximumZoom = 24
  /// The latitude of the square's edges: arctan(sinh(π)), about 85.0511°.
  public static let maximumLatitude = atan(sinh(Double.pi)) * 180 / .pi
  /// Tile units across a tile (MVT's default extent).
  public static let extent = 4096

  /// The tile at `zoom`, `column` and `row`, or nil when `zoom` is outside
  /// 0...``maximumZoom`` or the column or row is outside that matrix.
  public init?(zoom: Int, column: Int, row: Int) {
    guard (0...Self.maximumZoom).contains(zoom) else { return nil }
    let size = 1 << zoom
    guard (0..<size).contains(column), (0..<size).contains(row) else { return nil }
    self.zoom = zoom
    self.column = column
    self.row = row
  }

  /// `zoom/row/column`, the order of OGC API – Tiles' paths.
  public var description: String { "\(zoom)/\(row)/\(column)" }

  /// Tiles across the matrix: 2^zoom.
  public var matrixSize: Int { 1 << zoom }

  /// The tile's edges in degrees (north and south within ±``maximumLatitude``).
  public var bounds: GeographicBox {
    let size = Double(matrixSize)
    return GeographicBox(
      west: Double(column) / size * 360 - 180, south: Self.latitude(y: Double(row + 1) / size),
      east: Double(column + 1) / size * 360 - 180, north: Self.latitude(y: Double(row) / size))
  }

  /// The latitude at `y` of the square, from 0 at the top to 1 at the bottom.
  static func latitude(y: Double) -> Double {
    atan(sinh(.pi * (1 - 2 * y))) * 180 / .pi
  }

  /// Where `longitude` lies across the square: 0 at 180° W to 1 at 180° E.
  public static func x(longitude: Double) -> Double { (longitude + 180) / 360 }

  /// Where `latitude` lies down the square: 0 at the top, 1 at the bottom; latitudes beyond
  /// ±``maximumLatitude`` are put on its edge.
  public static func y(latitude: Double) -> Double {
    let clamped = min(max(latitude, -maximumLatitude), maximumLatitude)
    let sine = sin(clamped * .pi / 180)
    return min(max(0.5 - log((1 + sine) / (1 - sine)) / (4 * .pi), 0), 1)
  }

  /// The position of `longitude`, `latitude` in this tile's units (``extent`` across), after
  /// adding `shift` degrees to the longitude (±360 for a point drawn across the antimeridian
  /// in a tile's buffer). Floors, so that a point inside the tile is in 0..<extent; a point
  /// on 180° E is on the east edge of the last column, outside it (the first column holds it).
  public func position(longitude: Double, latitude: Double, shift: Double = 0) -> (
    x: Int, y: Int
  ) {
    let scale = Double(matrixSize) * Double(Self.extent)
    let x = (Self.x(longitude: longitude + shift) * scale).rounded(.down)
    // The bottom edge (and the latitudes beyond it) belongs to the bottom row.
    let y = min((Self.y(latitude: latitude) * scale).rounded(.down), scale - 1)
    let origin = Double(Self.extent)
    return (Int(x - Double(column) * origin), Int(y - Double(row) * origin))
  }

  /// The tile of `zoom` that holds `longitude`, `latitude` (180° E is 180° W; latitudes beyond
  /// the square are on its edge rows), or nil for coordinates that are not finite numbers.
  public static func holding(longitude: Double, latitude: Double, zoom: Int) -> WebMercatorTile? {
    guard longitude.isFinite, latitude.isFinite, (0...maximumZoom).contains(zoom) else {
      return nil
    }
    let size = 1 << zoom
    var x = Int((Self.x(longitude: longitude) * Double(size)).rounded(.down))
    if x >= size { x -= size }
    let y = min(Int((Self.y(latitude: latitude) * Double(size)).rounded(.down)), size - 1)
    return WebMercatorTile(zoom: zoom, column: min(max(x, 0), size - 1), row: max(y, 0))
  }

  /// A range of longitudes and latitudes to look for points in, with the shift (0 or ±360)
  /// their longitudes take to be drawn in the tile.
  public struct Window: Hashable, Sendable {
    /// The range's western longitude, within [-180, 180].
    public var west: Double
    /// The range's eastern longitude, within [-180, 180].
    public var east: Double
    /// The southern latitude.
    public var south: Double
    /// The northern latitude.
    public var north: Double
    /// Degrees to add to a longitude found here before ``position(longitude:latitude:shift:)``.
    public var shift: Double
  }

  /// Where to look for the points this tile draws: the tile and a `buffer` around it, in tile
  /// units. The first window is the tile's own longitudes; a buffer past 180° W or E adds the
  /// longitudes across the antimeridian, shifted by ±360. The top row reaches to 90° N and the
  /// bottom to 90° S (the square's edges hold the points beyond them).
  public func windows(buffer: Int) -> [Window] {
    let size = Double(matrixSize)
    let margin = Double(buffer) / Double(Self.extent)
    let left = Double(column) - margin
    let right = Double(column + 1) + margin
    let north = row == 0 ? 90 : Self.latitude(y: (Double(row) - margin) / size)
    let south = row == matrixSize - 1 ? -90 : Self.latitude(y: (Double(row + 1) + margin) / size)
    func longitude(_ x: Double) -> Double { x / size * 360 - 180 }
    var windows = [
      Window(
        west: max(longitude(left), -180), east: min(longitude(right), 180), south: south,
        north: north, shift: 0)
    ]
    if left < 0 {
      windows.append(
        Window(
          west: max(longitude(left + size), -180), east: 180, south: south, north: north,
          shift: -360))
    }
    if right > size {
      windows.append(
        Window(
          west: -180, east: min(longitude(right - size), 180), south: south, north: north,
          shift: 360))
    }
    return windows
  }
}
