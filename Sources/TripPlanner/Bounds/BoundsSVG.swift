import Foundation
import Geo

/// A bounds report as a picture for reports: the world's outlines, the trips as points with
/// their names, the box (one rectangle, also across the antimeridian) and a panel with the
/// count and the box in its three dialects, in Web Mercator framed as a map camera would
/// frame it (`CameraFit` with 512-pixel tiles, the padding kept clear on every side). The
/// same picture as the service's map page (`/map`).
///
/// Longitudes are unwrapped around the camera's centre, so a box across 180° is drawn as one
/// rectangle the short way, never as one around the world.
public struct BoundsSVG {
  /// A trip to draw.
  public struct Mark: Sendable {
    /// Where.
    public var coordinate: Coordinate
    /// Its label (the trip's name).
    public var label: String

    /// A trip at `coordinate` labelled `label`.
    public init(coordinate: Coordinate, label: String) {
      self.coordinate = coordinate
      self.label = label
    }
  }

  /// Labels are drawn beside the points up to this many trips; beyond, names are in each
  /// point's tooltip (`<title>`) only.
  public static let labelLimit = 40
  /// The deepest zoom the picture frames a small box or one trip with (a city, about).
  public static let maximumZoom = 12.0

  let report: BoundsReport
  let marks: [Mark]
  let world: WorldOutlines?
  let width: Double
  let height: Double
  let centerLongitude: Double
  let centerY: Double
  let worldPixels: Double
  /// The camera that frames the picture; nil without trips.
  let camera: CameraFit?

  /// Frames `report`'s box in `size` less `padding` pixels on each side (the whole world when
  /// there are no trips).
  ///
  /// - Throws: `GeoError` with the code `invalidViewport` when the padding leaves
  ///   no room.
  public init(
    report: BoundsReport, marks: [Mark], world: WorldOutlines?, size: Viewport, padding: Double
  ) throws {
    self.report = report
    self.marks = marks
    self.world = world
    width = size.width
    height = size.height
    let zoom: Double
    let center: Coordinate
    if let box = report.geographic {
      let fit = try CameraFit(
        box: box, width: size.width - 2 * padding, height: size.height - 2 * padding,
        maxZoom: Self.maximumZoom)
      camera = fit
      zoom = fit.zoom
      center = fit.center
    } else {
      camera = nil
      zoom = log2(min(size.width, size.height) / 512)
      center = Coordinate(latitude: 0, longitude: 0)
    }
    worldPixels = 512 * pow(2, zoom)
    centerLongitude = center.longitude
    centerY = Self.mercator(center.latitude)
  }

  /// Web Mercator's y of a latitude as a share of the world's height (±0.5 at the edges).
  static func mercator(_ latitude: Double) -> Double {
    let limit = ProjectedExtent.maxMercatorLatitude
    let phi = min(max(latitude, -limit), limit) * .pi / 180
    return log(tan(.pi / 4 + phi / 2)) / (2 * .pi)
  }

  /// The pixel of an (unwrapped) longitude and a latitude.
  func pixel(longitude: Double, latitude: Double) -> (x: Double, y: Double) {
    (
      width / 2 + (longitude - centerLongitude) / 360 * worldPixels,
      height / 2 - (Self.mercator(latitude) - centerY) * worldPixels
    )
  }

  /// A longitude moved by whole turns to within 180° of the camera's centre.
  func unwrapped(_ longitude: Double) -> Double {
    var offset = (longitude - centerLongitude).truncatingRemainder(dividingBy: 360)
    if offset >= 180 { offset -= 360 }
    if offset < -180 { offset += 360 }
    return centerLongitude + offset
  }

  /// The SVG document. Cost: O(trips + outline points).
  public var document: String {
    var svg = """
      <?xml version="1.0" encoding="UTF-8"?>
      <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
      viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
      <title>\(Self.escape(title))</title>
      <rect class="ocean" width="100%" height="100%" fill="#dbe9f4"/>

      """
    svg += outlines()
    if let box = report.geographic {
      let span = box.crossesAntimeridian ? box.east + 360 - box.west : box.east - box.west
      let west = unwrapped(box.center.longitude) - span / 2
      let (x0, y0) = pixel(longitude: west, latitude: box.north)
      let (x1, y1) = pixel(longitude: west + span, latitude: box.south)
      svg +=
        "<rect class=\"box\" x=\"\(Self.number(x0))\" y=\"\(Self.number(y0))\" width=\"\(Self.number(max(x1 - x0, 0)))\" height=\"\(Self.number(max(y1 - y0, 0)))\" fill=\"#d6336c\" fill-opacity=\"0.08\" stroke=\"#d6336c\" stroke-width=\"2\"/>\n"
    }
    svg += "<g class=\"trips\" fill=\"#1c7ed6\" stroke=\"#ffffff\" stroke-width=\"1\">\n"
    for mark in marks {
      let (x, y) = pixel(
        longitude: unwrapped(mark.coordinate.longitude), latitude: mark.coordinate.latitude)
      svg +=
        "<circle cx=\"\(Self.number(x))\" cy=\"\(Self.number(y))\" r=\"4\"><title>\(Self.escape(mark.label))</title></circle>\n"
    }
    svg += "</g>\n"
    if marks.count <= Self.labelLimit {
      svg += "<g class=\"labels\" fill=\"#1a1a1a\">\n"
      for mark in marks {
        let (x, y) = pixel(
          longitude: unwrapped(mark.coordinate.longitude), latitude: mark.coordinate.latitude)
        // A label that would run off the right edge is written to the left of its point.
        let leftward = x + 6 + 7 * Double(mark.label.count) > width
        svg +=
          "<text x=\"\(Self.number(leftward ? x - 6 : x + 6))\" y=\"\(Self.number(y + 4))\"\(leftward ? " text-anchor=\"end\"" : "")>\(Self.escape(mark.label))</text>\n"
      }
      svg += "</g>\n"
    }
    svg += panel()
    svg +=
      "<text x=\"\(Int(width) - 6)\" y=\"\(Int(height) - 6)\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">Outlines: Natural Earth</text>\n"
    svg += "</svg>\n"
    return svg
  }

  var title: String {
    guard let box = report.geographic else { return "No trips" }
    return "\(report.count) trips in \(Self.boxText(box))"
  }

  static func boxText(_ box: GeographicBox) -> String {
    let parts = [box.west, box.south, box.east, box.north].map { String(format: "%.5f", $0) }
    return "[" + parts.joined(separator: ", ") + "]"
      + (box.crossesAntimeridian ? " (crosses the antimeridian)" : "")
  }

  /// The count and the box in its three dialects, in a panel at the bottom left.
  func panel() -> String {
    var lines = ["\(report.count) \(report.count == 1 ? "trip" : "trips")"]
    if marks.count < report.count { lines[0] += " (\(marks.count) drawn)" }
    if let box = report.geographic {
      lines.append("CRS84 box " + Self.boxText(box))
      if let projected = report.projected {
        lines.append(
          String(
            format: "%@ x %.0f to %.0f, y %.0f to %.0f", projected.crs, projected.minX,
            projected.maxX, projected.minY, projected.maxY))
      }
      if let camera {
        lines.append(
          String(
            format: "camera latitude %.5f, longitude %.5f, zoom %.2f (512-px tiles)",
            camera.center.latitude, camera.center.longitude, camera.zoom))
      }
    }
    let lineHeight = 16.0
    let boxHeight = Double(lines.count) * lineHeight + 10
    var svg =
      "<g class=\"panel\"><rect x=\"6\" y=\"\(Self.number(height - boxHeight - 6))\" width=\"\(Self.number(min(width - 12, 520)))\" height=\"\(Self.number(boxHeight))\" fill=\"#ffffff\" fill-opacity=\"0.85\" stroke=\"#888888\"/>\n"
    for (index, line) in lines.enumerated() {
      let y = height - boxHeight - 6 + 5 + Double(index + 1) * lineHeight - 4
      svg += "<text x=\"12\" y=\"\(Self.number(y))\">\(Self.escape(line))</text>\n"
    }
    return svg + "</g>\n"
  }

  /// The countries as paths, each drawn once for every copy of the world the view shows.
  func outlines() -> String {
    guard let world else { return "" }
    let halfSpan = width / 2 / worldPixels * 360
    let visible = (centerLongitude - halfSpan)...(centerLongitude + halfSpan)
    var svg = "<g class=\"world\" fill=\"#f4f1e8\" stroke=\"#9a9a9a\" stroke-width=\"0.6\">\n"
    for country in world.countries {
      var path = ""
      for polygon in country.polygons {
        guard let outline = polygon.first, !outline.isEmpty else { continue }
        let longitudes = outline.map(\.longitude)
        let (low, high) = (longitudes.min()!, longitudes.max()!)
        for turn in -2...2 {
          let shift = Double(turn) * 360
          guard low + shift <= visible.upperBound, high + shift >= visible.lowerBound else {
            continue
          }
          for ring in polygon {
            var last: (Int, Int)?
            for (index, point) in ring.enumerated() {
              let (x, y) = pixel(longitude: point.longitude + shift, latitude: point.latitude)
              let rounded = (Int((x * 10).rounded()), Int((y * 10).rounded()))
              if let last, last == rounded { continue }
              last = rounded
              path += (index == 0 ? "M" : "L") + Self.number(x) + " " + Self.number(y)
            }
            path += "Z"
          }
        }
      }
      if !path.isEmpty {
        svg += "<path d=\"\(path)\"><title>\(Self.escape(country.name))</title></path>\n"
      }
    }
    return svg + "</g>\n"
  }

  /// A pixel coordinate with one decimal at most.
  static func number(_ value: Double) -> String {
    let tenths = (value * 10).rounded()
    guard tenths.isFinite, abs(tenths) < 1e12 else { return "0" }
    let whole = Int64(tenths)
    return whole % 10 == 0 ? String(whole / 10) : String(format: "%.1f", tenths / 10)
  }

  /// Text for SVG: the five XML specials escaped, control characters dropped.
  static func escape(_ text: String) -> String {
    var output = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "&": output += "&amp;"
      case "<": output += "&lt;"
      case ">": output += "&gt;"
      case "\"": output += "&quot;"
      case "'": output += "&apos;"
      case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value): continue
      default: output.unicodeScalars.append(scalar)
      }
    }
    return output
  }
}
