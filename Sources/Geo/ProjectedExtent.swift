import Foundation

/// A box in a projected CRS.
public struct ProjectedExtent: Hashable, Sendable {
  /// The CRS, as given.
  public var crs: String
  /// The smallest x.
  public var minX: Double
  /// The smallest y.
  public var minY: Double
  /// The largest x.
  public var maxX: Double
  /// The largest y.
  public var maxY: Double

  /// Creates an extent.
  public init(crs: String, minX: Double, minY: Double, maxX: Double, maxY: Double) {
    self.crs = crs
    self.minX = minX
    self.minY = minY
    self.maxX = maxX
    self.maxY = maxY
  }

  /// The smallest extent covering both.
  public func union(_ other: ProjectedExtent) -> ProjectedExtent {
    ProjectedExtent(
      crs: crs, minX: min(minX, other.minX), minY: min(minY, other.minY),
      maxX: max(maxX, other.maxX), maxY: max(maxY, other.maxY))
  }

  /// Web Mercator's radius (WGS 84 semi-major axis), metres.
  public static let earthRadius = 6_378_137.0
  /// The latitude where Web Mercator's square world ends.
  public static let maxMercatorLatitude = 85.0511287798066

  /// Web Mercator x for a longitude in degrees.
  public static func mercatorX(_ longitude: Double) -> Double {
    earthRadius * longitude * .pi / 180
  }

  /// Web Mercator y for a latitude in degrees, clamped to ±``maxMercatorLatitude``.
  public static func mercatorY(_ latitude: Double) -> Double {
    let clamped = min(max(latitude, -maxMercatorLatitude), maxMercatorLatitude)
    return earthRadius * log(tan(.pi / 4 + clamped * .pi / 360))
  }

  /// The latitude for a Web Mercator y.
  public static func latitude(mercatorY y: Double) -> Double {
    (2 * atan(exp(y / earthRadius)) - .pi / 2) * 180 / .pi
  }

  /// The box in EPSG:3857 by the closed form: latitudes clamped to ±85.0511287798066°, and a
  /// box crossing the antimeridian reported with continuous x (its east edge at east + 360°,
  /// so `maxX` exceeds 20037508.34).
  public static func webMercator(_ box: GeographicBox) -> ProjectedExtent {
    let east = box.crossesAntimeridian ? box.east + 360 : box.east
    return ProjectedExtent(
      crs: "EPSG:3857", minX: mercatorX(box.west), minY: mercatorY(box.south),
      maxX: mercatorX(east), maxY: mercatorY(box.north))
  }
}

/// Where a map camera looks and how far in, to show a box in a viewport.
public struct CameraFit: Hashable, Sendable {
  /// The centre: the box's middle longitude and the Mercator midpoint of its latitudes.
  public var center: Coordinate
  /// The zoom level (GL convention, 512-pixel tiles), at most the maximum zoom.
  public var zoom: Double

  /// Fits `box` into a `width` × `height` pixel viewport:
  /// `zoom = log2(min(W / (dx·512), H / (dy·512)))`, `dx` and `dy` the box's share of the
  /// world's width in Web Mercator; a side of zero size is left out, and a point gets
  /// `maxZoom`.
  ///
  /// - Throws: ``GeoError/Code/invalidViewport`` for a size that is not positive and finite.
  public init(box: GeographicBox, width: Double, height: Double, maxZoom: Double = 20) throws {
    guard width > 0, height > 0, width.isFinite, height.isFinite else {
      throw GeoError(
        code: .invalidViewport, message: "The viewport \(width)x\(height) must be positive.")
    }
    let world = 2 * ProjectedExtent.mercatorX(180)
    let extent = ProjectedExtent.webMercator(box)
    let dx = (extent.maxX - extent.minX) / world
    let dy = (extent.maxY - extent.minY) / world
    var candidates: [Double] = []
    if dx > 0 { candidates.append(log2(width / (dx * 512))) }
    if dy > 0 { candidates.append(log2(height / (dy * 512))) }
    zoom = min(candidates.min() ?? maxZoom, maxZoom)
    let middleY = (extent.minY + extent.maxY) / 2
    // Web Mercator has no pole: a box on one latitude (all trips at the North Pole) is
    // looked at from the nearest latitude the map can show.
    let limit = ProjectedExtent.maxMercatorLatitude
    let latitude =
      box.south == box.north
      ? min(max(box.south, -limit), limit) : ProjectedExtent.latitude(mercatorY: middleY)
    center = Coordinate(latitude: latitude, longitude: box.center.longitude)
  }
}
