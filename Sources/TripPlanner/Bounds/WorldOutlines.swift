import Foundation
import Geo

/// Country outlines to draw under trips, so that a map needs no tile server: Natural Earth's
/// 1:110m countries (public domain), shipped as `Data/world-110m.geojson` and built into this
/// module's resources (see `Data/README.md`).
public struct WorldOutlines: Sendable {
  /// One country: its name and its polygons, each a list of rings (the first the outline,
  /// the others holes), each ring closed (its last point repeats its first).
  public struct Country: Sendable {
    /// The country's name in English.
    public var name: String
    /// The polygons, as rings of coordinates.
    public var polygons: [[[Coordinate]]]
  }

  /// The countries, by name.
  public var countries: [Country]

  /// Reads a GeoJSON FeatureCollection of Polygons and MultiPolygons with a `name` property.
  ///
  /// - Throws: `DecodingError` for a document of another shape.
  public init(geoJSON data: Data) throws {
    struct Document: Decodable {
      struct Feature: Decodable {
        struct Properties: Decodable { var name: String? }
        struct Geometry: Decodable {
          var type: String
          var coordinates: [[[[Double]]]]
          init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            type = try container.decode(String.self, forKey: .type)
            coordinates =
              type == "Polygon"
              ? [try container.decode([[[Double]]].self, forKey: .coordinates)]
              : try container.decode([[[[Double]]]].self, forKey: .coordinates)
          }
          enum CodingKeys: String, CodingKey { case type, coordinates }
        }
        var properties: Properties?
        var geometry: Geometry?
      }
      var features: [Feature]
    }
    let document = try JSONDecoder().decode(Document.self, from: data)
    countries = document.features.compactMap { feature in
      guard let geometry = feature.geometry else { return nil }
      return Country(
        name: feature.properties?.name ?? "",
        polygons: geometry.coordinates.map { polygon in
          polygon.map { ring in
            ring.compactMap { $0.count >= 2 ? Coordinate(latitude: $0[1], longitude: $0[0]) : nil }
          }
        })
    }
  }

  /// Where the shipped outlines are read from: `$TRIPS_DATA/world-110m.geojson`, else
  /// `share/trips/world-110m.geojson` beside the executable's folder (an installed layout),
  /// else the `Data/` folder of the source tree this module was built from.
  public static func shippedURL(
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) -> URL? {
    var candidates: [URL] = []
    if let folder = environment["TRIPS_DATA"], !folder.isEmpty {
      candidates.append(URL(fileURLWithPath: folder).appendingPathComponent(fileName))
    }
    let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "")
      .resolvingSymlinksInPath()
    candidates.append(
      executable.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("share/trips/" + fileName))
    // This file is Sources/TripPlanner/Bounds/WorldOutlines.swift in the source tree.
    candidates.append(
      URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Data/" + fileName))
    return candidates.first { FileManager.default.isReadableFile(atPath: $0.path) }
  }

  static let fileName = "world-110m.geojson"

  /// The bytes of the shipped outlines (GeoJSON, about 170 KB), read once; nil when they
  /// cannot be found (see ``shippedURL(environment:)``).
  public static let shippedGeoJSON: Data? = shippedURL().flatMap { try? Data(contentsOf: $0) }

  /// The shipped outlines, read once; nil when they cannot be found or read.
  public static let shipped: WorldOutlines? = shippedGeoJSON.flatMap {
    try? WorldOutlines(geoJSON: $0)
  }
}
