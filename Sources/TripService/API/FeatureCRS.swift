import Foundation
import Geo
import TripPlanner

/// A coordinate reference system the trips' items are offered in (OGC API – Features Part 2,
/// CRS by reference): CRS84 (longitude, latitude: the storage CRS), EPSG:4326 (latitude,
/// longitude, the axis order EPSG gives it) and EPSG:3857 (Web Mercator metres, projected by
/// PROJ). Each is named by its URI; another CRS is a 400 listing these.
struct FeatureCRS: Sendable {
  /// The CRS's URI.
  let uri: String
  private let kind: Kind
  private enum Kind { case crs84, epsg4326, projected }
  /// The projection for a projected CRS.
  private let projection: Projection?

  static let crs84URI = FeaturesAPI.crs84
  static let epsg4326URI = "http://www.opengis.net/def/crs/EPSG/0/4326"
  static let epsg3857URI = "http://www.opengis.net/def/crs/EPSG/0/3857"
  /// The URIs offered, the storage CRS first (the collection's `crs` list).
  static let offered = [crs84URI, epsg4326URI, epsg3857URI]

  static let crs84 = FeatureCRS(uri: crs84URI, kind: .crs84, projection: nil)

  /// One Web Mercator projection for the service (PROJ objects are made once; a
  /// `Projection` is thread-safe).
  private static let webMercator = Result { try Projection(to: "EPSG:3857") }

  /// The CRS `uri` names, or a 400 naming `parameter` and the CRSs offered.
  static func named(_ uri: String, parameter: String) throws -> FeatureCRS {
    switch uri {
    case crs84URI: return .crs84
    case epsg4326URI: return FeatureCRS(uri: uri, kind: .epsg4326, projection: nil)
    case epsg3857URI:
      do {
        return FeatureCRS(uri: uri, kind: .projected, projection: try webMercator.get())
      } catch {
        throw ServiceError.request(500, "PROJ cannot make EPSG:3857 here: \(error)")
      }
    default:
      throw ServiceError.request(
        400,
        "Invalid value '\(HTTPServer.loggable(uri))' for '\(parameter)': this collection offers \(offered.joined(separator: ", "))."
      )
    }
  }

  /// A trip's position in this CRS, in its axis order.
  func position(longitude: Double, latitude: Double) throws -> (Double, Double) {
    switch kind {
    case .crs84: return (longitude, latitude)
    case .epsg4326: return (latitude, longitude)
    case .projected:
      let (x, y) = try projection!.project(Coordinate(latitude: latitude, longitude: longitude))
      return (x, y)
    }
  }

  /// `record` with its position in this CRS: the first axis in `longitude`, the second in
  /// `latitude`, as `TripGeoJSON.writeFeature` writes them (`[longitude, latitude]`).
  func placed(_ record: TripRecord) throws -> TripRecord {
    guard kind != .crs84 else { return record }
    var moved = record
    (moved.longitude, moved.latitude) = try position(
      longitude: record.longitude, latitude: record.latitude)
    return moved
  }

  /// A `bbox` given in this CRS (its 4 numbers in the CRS's axis order) as a box in CRS84.
  ///
  /// In EPSG:3857, x is longitude times a constant, and a web map zoomed out asks for more
  /// than the world: a box one world wide or wider (20,037,508.34 m on each side of 0) selects
  /// every longitude; an x beyond the world is unwrapped (−25,000 km is 135.4°E, one world
  /// west of −224.6°), and a box whose ends then cross 180° selects across the antimeridian.
  /// A box whose first x is greater than its second, with both within the world, crosses the
  /// antimeridian, as one in CRS84 does; one that also reaches past the world cannot be meant
  /// and is a 400. A y beyond the world is a latitude toward its pole (PROJ's inverse, up to
  /// ±90°). Cost: 2 projections.
  func geographicBox(_ numbers: [Double], text: String) throws -> GeographicBox {
    let (a, b, c, d) = (numbers[0], numbers[1], numbers[2], numbers[3])
    switch kind {
    case .crs84:
      return try ItemsQuery.checkedBox(west: a, south: b, east: c, north: d, text: text)
    case .epsg4326:
      return try ItemsQuery.checkedBox(west: b, south: a, east: d, north: c, text: text)
    case .projected:
      let half = Self.webMercatorHalfWidth
      if a > c, !(-half...half).contains(a) || !(-half...half).contains(c) {
        throw ServiceError.request(
          400,
          "Invalid value '\(HTTPServer.loggable(text))' for 'bbox' in \(uri): a box whose first x is greater than its second crosses the antimeridian, and then both are within ±20037508.34 m; to ask for more than the world, give the smaller x first."
        )
      }
      do {
        let southWest = try projection!.unproject(x: Self.unwrapped(a), y: Self.withinPoles(b))
        let northEast = try projection!.unproject(x: Self.unwrapped(c), y: Self.withinPoles(d))
        let everyLongitude = a <= c && c - a >= 2 * half
        return try ItemsQuery.checkedBox(
          west: everyLongitude ? -180 : southWest.longitude, south: southWest.latitude,
          east: everyLongitude ? 180 : northEast.longitude, north: northEast.latitude,
          text: text)
      } catch let error as GeoError {
        throw ServiceError.request(400, "Invalid value for 'bbox' in \(uri): \(error.message)")
      }
    }
  }

  /// Half the width of the world in EPSG:3857: π times the sphere's radius (the x of 180°).
  static let webMercatorHalfWidth = 20_037_508.342_789_244

  /// `x` moved by whole worlds into −half…half (unchanged when it is within).
  static func unwrapped(_ x: Double) -> Double {
    let half = webMercatorHalfWidth
    guard !(-half...half).contains(x) else { return x }
    let reduced = x - 2 * half * ((x + half) / (2 * half)).rounded(.down)
    return min(max(reduced, -half), half)
  }

  /// `y` at most as far from the equator as PROJ's inverse takes it to a finite latitude (a
  /// y of 1e30 is the pole: latitude 90° is reached, numerically, at about 1.9e8 m).
  static func withinPoles(_ y: Double) -> Double {
    min(max(y, -1e9), 1e9)
  }
}

/// What of each feature a page answers with: `properties=` (a comma-separated list of the
/// trips' properties; empty for none) and `skipGeometry=true` (a `null` geometry). Nil when
/// neither is given: the whole feature, written straight to bytes.
struct FeatureSelection {
  /// The properties a trip's feature has, in its order.
  static let names = TripGeoJSON.propertyNames
  var properties: Set<String>?
  var skipGeometry = false

  init?(_ request: HTTPRequest) throws {
    let chosen = request.queryValues("properties")
    let skip = request.queryValues("skipGeometry")
    guard !chosen.isEmpty || !skip.isEmpty else { return nil }
    guard chosen.count <= 1, skip.count <= 1 else {
      throw ServiceError.request(400, "'properties' and 'skipGeometry' are given once each.")
    }
    if let list = chosen.first {
      let names = list.split(separator: ",", omittingEmptySubsequences: true).map(String.init)
      for name in names where !Self.names.contains(name) {
        throw ServiceError.request(
          400,
          "Invalid value for 'properties': '\(HTTPServer.loggable(name))' is not a property of a trip; they are \(Self.names.joined(separator: ", "))."
        )
      }
      properties = Set(names)
    }
    if let text = skip.first {
      guard text == "true" || text == "false" else {
        throw ServiceError.request(
          400, "Invalid value '\(HTTPServer.loggable(text))' for 'skipGeometry': true or false.")
      }
      skipGeometry = text == "true"
    }
  }

  /// `record`'s feature with the chosen properties (in the feature's order) and geometry.
  func feature(_ record: TripRecord) -> JSONValue {
    guard case .object(var members) = TripGeoJSON.feature(record) else { return .null }
    for index in members.indices {
      switch members[index].0 {
      case "geometry" where skipGeometry:
        members[index].1 = .null
      case "properties":
        if let properties, case .object(let all) = members[index].1 {
          members[index].1 = .object(all.filter { properties.contains($0.0) })
        }
      default: break
      }
    }
    return .object(members)
  }
}
