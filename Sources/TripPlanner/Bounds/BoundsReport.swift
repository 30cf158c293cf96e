import Foundation
import Geo

/// A viewport in pixels, for camera fits: `800x600`.
public struct Viewport: Hashable, Sendable, CustomStringConvertible {
  /// Width in pixels.
  public var width: Double
  /// Height in pixels.
  public var height: Double

  /// Creates a viewport.
  public init(width: Double, height: Double) {
    self.width = width
    self.height = height
  }

  /// The largest width or height accepted, in pixels.
  public static let maximumSide = 100_000

  /// Parses `WIDTHxHEIGHT` with whole numbers from 1 to ``maximumSide``; nil otherwise.
  public init?(_ text: String) {
    let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
    guard parts.count == 2, parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
      let width = Int(parts[0]), let height = Int(parts[1]), width > 0,
      height > 0, width <= Self.maximumSide, height <= Self.maximumSide
    else { return nil }
    self.init(width: Double(width), height: Double(height))
  }

  /// `WIDTHxHEIGHT`.
  public var description: String { "\(Int(width))x\(Int(height))" }
}

/// The bounding region of a set of trips, for map tools: the geographic box, its centre, its
/// extent in a projected CRS, and optionally a camera fit.
public struct BoundsReport: Hashable, Sendable {
  /// How many trips.
  public var count: Int
  /// The smallest box over the trips; nil when there are none.
  public var geographic: GeographicBox?
  /// The middle of the box.
  public var center: Coordinate?
  /// The box in the projected CRS.
  public var projected: ProjectedExtent?
  /// How many trips could not be projected to the CRS (outside its area of use); they are
  /// still in the geographic box. Always 0 for Web Mercator.
  public var unprojectedCount = 0
  /// The camera fit, when a viewport was given and there are trips.
  public var camera: CameraFit?
  /// The viewport of the camera fit.
  public var viewport: Viewport?
  /// How many of the ``count`` points are the trips' stays, for a report that covers them
  /// (nil for one of the trips alone).
  public var stayCount: Int?

  /// Makes the report for `count` trips covered by `box`.
  ///
  /// - Parameters:
  ///   - count: How many trips.
  ///   - box: The smallest box over them; nil when there are none.
  ///   - projection: The projected CRS of ``projected``.
  ///   - viewport: Fit ``camera`` to this many pixels; nil for no camera.
  ///   - points: For CRSs other than Web Mercator, the trips' own projections: the
  ///     projected extent is the box's (edges densified by PROJ) joined with them, so it
  ///     holds every trip even where the densified edges miss one. Points that do not project
  ///     are counted in ``unprojectedCount``.
  public init(
    count: Int, box: GeographicBox?, projection: Projection, viewport: Viewport? = nil,
    points: ProjectedPointCover? = nil
  ) throws {
    self.count = count
    self.geographic = box
    self.viewport = viewport
    guard let box else { return }
    center = box.center
    if let points, !projection.isWebMercator {
      unprojectedCount = points.unprojectedCount
      // A box whose densified edges PROJ cannot transform (a UTM zone's far side) still has
      // the extent of the trips that do project.
      let edges = try? projection.extent(of: box)
      switch (edges, points.extent(crs: projection.crs)) {
      case (let edges?, let own?): projected = edges.union(own)
      case (let edges?, nil): projected = edges
      case (nil, let own?): projected = own
      case (nil, nil): projected = try projection.extent(of: box)
      }
    } else {
      projected = try projection.extent(of: box)
    }
    if let viewport {
      camera = try CameraFit(box: box, width: viewport.width, height: viewport.height)
    }
  }

  /// The report as JSON: `count`, `stays` (how many of `count` are stays, for a report that
  /// covers them), `geographic`, `bbox`, `center`, `projected`, and `camera` when a viewport
  /// was given; every member but `count` is `null` when there are no trips.
  public var json: JSONValue {
    var members: [(String, JSONValue)] = [("count", .number(Double(count)))]
    if let stayCount { members.append(("stays", .number(Double(stayCount)))) }
    if let box = geographic {
      members.append(
        (
          "geographic",
          .object([
            ("west", .number(box.west)), ("south", .number(box.south)), ("east", .number(box.east)),
            ("north", .number(box.north)), ("crossesAntimeridian", .bool(box.crossesAntimeridian)),
          ])
        ))
      members.append(("bbox", .array(box.bbox.map(JSONValue.number))))
    } else {
      members += [("geographic", .null), ("bbox", .null)]
    }
    members.append(("center", center.map(Self.coordinate) ?? .null))
    if let projected {
      members.append(
        (
          "projected",
          .object([
            ("crs", .string(projected.crs)), ("minX", .number(projected.minX)),
            ("minY", .number(projected.minY)), ("maxX", .number(projected.maxX)),
            ("maxY", .number(projected.maxY)),
          ])
        ))
    } else {
      members.append(("projected", .null))
    }
    if unprojectedCount > 0 { members.append(("unprojected", .number(Double(unprojectedCount)))) }
    if viewport != nil {
      members.append(
        (
          "camera",
          camera.map {
            .object([("center", Self.coordinate($0.center)), ("zoom", .number($0.zoom))])
          } ?? .null
        ))
    }
    return .object(members)
  }

  private static func coordinate(_ coordinate: Coordinate) -> JSONValue {
    .object([
      ("longitude", .number(coordinate.longitude)), ("latitude", .number(coordinate.latitude)),
    ])
  }

  /// The report for people.
  public var text: String {
    guard let box = geographic, let center, let projected else {
      return "No trips: no bounds.\n"
    }
    func degrees(_ value: Double) -> String { String(format: "%.5f", value) }
    func metres(_ value: Double) -> String { String(format: "%.2f", value) }
    var lines = [("Trips:", "\(count - (stayCount ?? 0))")]
    if let stayCount { lines.append(("Stays:", "\(stayCount)")) }
    lines += [
      (
        "Box:",
        "west \(degrees(box.west)), south \(degrees(box.south)), east \(degrees(box.east)), north \(degrees(box.north))"
          + (box.crossesAntimeridian ? " (crosses the antimeridian)" : "")
      ),
      ("Center:", "latitude \(degrees(center.latitude)), longitude \(degrees(center.longitude))"),
      (
        "\(projected.crs):",
        "x \(metres(projected.minX)) to \(metres(projected.maxX)), y \(metres(projected.minY)) to \(metres(projected.maxY))"
      ),
    ]
    if unprojectedCount > 0 {
      lines.append(
        (
          "Not projected:",
          "\(unprojectedCount) trip\(unprojectedCount == 1 ? "" : "s") outside the area of \(projected.crs)"
        ))
    }
    if let camera, let viewport {
      lines.append(
        (
          "Camera:",
          "zoom \(String(format: "%.2f", camera.zoom)) at latitude \(degrees(camera.center.latitude)), longitude \(degrees(camera.center.longitude)) for \(viewport)"
        ))
    }
    let width = lines.map(\.0.count).max() ?? 0
    return lines.map { $0.0.padding(toLength: width + 2, withPad: " ", startingAt: 0) + $0.1 }
      .joined(separator: "\n") + "\n"
  }
}
