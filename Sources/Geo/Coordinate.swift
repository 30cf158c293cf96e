/// A WGS 84 position in degrees.
public struct Coordinate: Hashable, Sendable, Codable {
  /// Degrees north, in [-90, 90].
  public var latitude: Double
  /// Degrees east, in [-180, 180].
  public var longitude: Double

  /// Creates a coordinate (not checked; see ``validated(latitude:longitude:)``).
  public init(latitude: Double, longitude: Double) {
    self.latitude = latitude
    self.longitude = longitude
  }

  /// Creates a coordinate, throwing ``GeoError/Code/invalidCoordinate`` when a value is not
  /// finite or out of range.
  public static func validated(latitude: Double, longitude: Double) throws -> Coordinate {
    guard latitude.isFinite, (-90...90).contains(latitude) else {
      throw GeoError(
        code: .invalidCoordinate,
        message: "latitude \(latitude) is not a number between -90 and 90")
    }
    guard longitude.isFinite, (-180...180).contains(longitude) else {
      throw GeoError(
        code: .invalidCoordinate,
        message: "longitude \(longitude) is not a number between -180 and 180")
    }
    return Coordinate(latitude: latitude, longitude: longitude)
  }

  /// Whether the point is a pole (|latitude| = 90), where longitude means nothing.
  public var isPole: Bool { abs(latitude) == 90 }
}

/// Normalises a longitude to [-180, 180).
public func normalizedLongitude(_ longitude: Double) -> Double {
  var value = longitude.truncatingRemainder(dividingBy: 360)
  if value >= 180 { value -= 360 }
  if value < -180 { value += 360 }
  return value
}
