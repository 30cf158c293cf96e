/// A longitude/latitude box, following RFC 7946 §5.2: when ``west`` is greater than ``east``
/// the box crosses the antimeridian.
public struct GeographicBox: Hashable, Sendable {
  /// The western edge, in [-180, 180).
  public var west: Double
  /// The southern edge.
  public var south: Double
  /// The eastern edge, in [-180, 180]; an edge on the antimeridian is written +180.
  public var east: Double
  /// The northern edge.
  public var north: Double

  /// Creates a box.
  public init(west: Double, south: Double, east: Double, north: Double) {
    self.west = west
    self.south = south
    self.east = east
    self.north = north
  }

  /// Whether the box crosses the antimeridian (`west > east`).
  public var crossesAntimeridian: Bool { west > east }

  /// The box's width in degrees of longitude, in [0, 360].
  public var longitudeSpan: Double { crossesAntimeridian ? east + 360 - west : east - west }

  /// `[west, south, east, north]`, GeoJSON's `bbox`.
  public var bbox: [Double] { [west, south, east, north] }

  /// The middle of the box: the middle longitude (normalised) and latitude.
  public var center: Coordinate {
    Coordinate(
      latitude: (south + north) / 2, longitude: normalizedLongitude(west + longitudeSpan / 2))
  }

  /// The smallest box covering `coordinates`: the smallest longitude interval on the circle
  /// (the complement of the largest gap between consecutive longitudes), with the latitude
  /// range. Nil for no coordinates.
  ///
  /// Longitudes are normalised to [-180, 180). Poles contribute their latitude but no
  /// longitude; if every point is a pole the box spans all longitudes. Ties between gaps go to
  /// the box that does not cross the antimeridian, else to the first largest gap in ascending
  /// longitude. A zero-width box keeps its one longitude on both edges.
  ///
  /// Cost: O(n log n) for n coordinates (a sort).
  public static func enclosing(_ coordinates: some Sequence<Coordinate>) -> GeographicBox? {
    var south = Double.infinity
    var north = -Double.infinity
    var longitudes: [Double] = []
    for coordinate in coordinates {
      south = min(south, coordinate.latitude)
      north = max(north, coordinate.latitude)
      if !coordinate.isPole { longitudes.append(normalizedLongitude(coordinate.longitude)) }
    }
    guard south <= north else { return nil }
    longitudes.sort()
    guard let interval = LongitudeInterval.smallest(sortedLongitudes: longitudes) else {
      return GeographicBox(west: -180, south: south, east: 180, north: north)
    }
    return GeographicBox(west: interval.west, south: south, east: interval.east, north: north)
  }
}

/// The longitude part of a box.
struct LongitudeInterval: Equatable {
  var west: Double
  var east: Double

  /// The smallest interval covering sorted, normalised longitudes (nil when empty).
  static func smallest(sortedLongitudes longitudes: [Double]) -> LongitudeInterval? {
    guard let first = longitudes.first, let last = longitudes.last else { return nil }
    // The wrap-around gap, from the last longitude east to the first: a box that does not
    // cross the antimeridian. It wins ties.
    var largest = first + 360 - last
    var interval = from(west: first, east: last)
    for index in longitudes.indices.dropLast() {
      let gap = longitudes[index + 1] - longitudes[index]
      if gap > largest {
        largest = gap
        interval = from(west: longitudes[index + 1], east: longitudes[index])
      }
    }
    return interval
  }

  /// Writes an east edge on the antimeridian as +180, except for a zero-width interval.
  static func from(west: Double, east: Double) -> LongitudeInterval {
    if east == -180 && west != east { return LongitudeInterval(west: west, east: 180) }
    return LongitudeInterval(west: west, east: east)
  }
}
