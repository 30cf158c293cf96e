import Foundation
import TestSupport
import Testing

@testable import Geo

@Suite("Projections")
struct ProjectionTests {
  @Test("projects Web Mercator by its closed form, clamping latitude")
  func webMercatorClosedForm() throws {
    let box = GeographicBox(west: -10, south: -89, east: 30, north: 60)
    let extent = ProjectedExtent.webMercator(box)
    let r = 6_378_137.0
    #expect(abs(extent.minX - r * -10 * .pi / 180) < 1e-6)
    #expect(abs(extent.maxX - r * 30 * .pi / 180) < 1e-6)
    #expect(abs(extent.maxY - r * log(tan(.pi / 4 + 60 * .pi / 360))) < 1e-6)
    #expect(abs(extent.minY - -20037508.342789244) < 1e-6, "clamped at -85.0511287798066°")
    let projection = try Projection(to: "EPSG:3857")
    let corner = try projection.project(Coordinate(latitude: 60, longitude: 30))
    #expect(abs(corner.x - extent.maxX) < 1e-6 && abs(corner.y - extent.maxY) < 1e-6)
  }

  @Test("reports continuous x for a Web Mercator box across the antimeridian")
  func webMercatorCrossing() throws {
    let box = GeographicBox(west: 178.4, south: -18.1, east: -171.8, north: -13.8)
    let extent = try Projection(to: "EPSG:3857").extent(of: box)
    #expect(extent.maxX > 20037508.34)
    #expect(abs(extent.maxX - ProjectedExtent.mercatorX(188.2)) < 1e-6)
    #expect(extent.minX < extent.maxX)
  }

  /// The extent cs2cs gives for a box's edges, sampled densely.
  func cs2csExtent(_ crs: String, west: Double, south: Double, east: Double, north: Double) throws
    -> (Double, Double, Double, Double)
  {
    var points: [(Double, Double)] = []
    for step in 0...200 {
      let t = Double(step) / 200
      let longitude = west + (east - west) * t
      let latitude = south + (north - south) * t
      points += [(south, longitude), (north, longitude), (latitude, west), (latitude, east)]
    }
    let projected = try cs2cs(crs, points)
    return (
      projected.map(\.0).min()!, projected.map(\.1).min()!, projected.map(\.0).max()!,
      projected.map(\.1).max()!
    )
  }

  @Test(
    "transforms a box to UTM as PROJ's cs2cs does",
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/cs2cs")))
  func utmAgainstCS2CS() throws {
    let box = GeographicBox(west: 12, south: 45, east: 16, north: 50)
    let extent = try Projection(to: "EPSG:32633").extent(of: box)
    let oracle = try cs2csExtent("EPSG:32633", west: 12, south: 45, east: 16, north: 50)
    // The lowest point of the southern edge is on the central meridian (15°E), between PROJ's
    // default 21 samples: the extent must still reach it.
    #expect(abs(extent.minX - oracle.0) < 0.05)
    #expect(abs(extent.minY - oracle.1) < 0.05)
    #expect(abs(extent.maxX - oracle.2) < 0.05)
    #expect(abs(extent.maxY - oracle.3) < 0.05)
  }

  @Test(
    "splits a box across the antimeridian for other CRSs, matching cs2cs",
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/cs2cs")))
  func pacificAgainstCS2CS() throws {
    // EPSG:3832, a Mercator centred on the Pacific, where Fiji-to-Samoa is one piece.
    let box = GeographicBox(west: 178, south: -19, east: -171, north: -13)
    let extent = try Projection(to: "EPSG:3832").extent(of: box)
    let west = try cs2csExtent("EPSG:3832", west: 178, south: -19, east: 180, north: -13)
    let east = try cs2csExtent("EPSG:3832", west: -180, south: -19, east: -171, north: -13)
    #expect(abs(extent.minX - min(west.0, east.0)) < 1)
    #expect(abs(extent.maxX - max(west.2, east.2)) < 1)
    #expect(abs(extent.minY - min(west.1, east.1)) < 1)
    #expect(abs(extent.maxY - max(west.3, east.3)) < 1)
  }

  @Test(
    "refuses unknown CRSs with PROJ's message",
    arguments: ["EPSG:999999", "garbage", "", "+proj=merc +ellps=nope"])
  func unknownCRS(crs: String) throws {
    let error = try #require(throws: GeoError.self) { try Projection(to: crs) }
    #expect(error.code == .unknownCRS)
    #expect(error.message.contains("'\(crs)'"))
  }

  @Test("is usable from many threads at once")
  func concurrentUse() async throws {
    let projection = try Projection(to: "EPSG:32633")
    func coordinate(_ index: Int) -> Coordinate {
      Coordinate(latitude: 45 + Double(index) / 10, longitude: 10 + Double(index % 7))
    }
    // The single-threaded answers, from a projection of its own.
    let alone = try Projection(to: "EPSG:32633")
    let expected = try (0..<256).map { try alone.project(coordinate($0)) }
    try await withThrowingTaskGroup(of: (Int, Double, Double).self) { group in
      for index in 0..<256 {
        group.addTask {
          let (x, y) = try projection.project(coordinate(index))
          return (index, x, y)
        }
      }
      var seen = 0
      for try await (index, x, y) in group {
        #expect(x == expected[index].x && y == expected[index].y, "point \(index)")
        seen += 1
      }
      #expect(seen == 256)
    }
  }

  @Test("fits a camera: the whole world in 512 px is zoom 0, a point gets the maximum")
  func camera() throws {
    let world = GeographicBox(
      west: -180, south: -85.0511287798066, east: 180, north: 85.0511287798066)
    let fit = try CameraFit(box: world, width: 512, height: 512)
    #expect(abs(fit.zoom) < 1e-9)
    let half = GeographicBox(west: 0, south: 0, east: 90, north: 0)
    #expect(abs(try CameraFit(box: half, width: 1024, height: 300).zoom - 3) < 1e-9)
    let point = GeographicBox(west: 10, south: 20, east: 10, north: 20)
    #expect(try CameraFit(box: point, width: 800, height: 600).zoom == 20)
    #expect(try CameraFit(box: point, width: 800, height: 600, maxZoom: 15).zoom == 15)
    let fiji = GeographicBox(west: 178.4, south: -18.1, east: -171.8, north: -13.8)
    let fitted = try CameraFit(box: fiji, width: 800, height: 600)
    #expect(abs(fitted.center.longitude - -176.7) < 1e-9)
    let mercatorMiddle = ProjectedExtent.latitude(
      mercatorY: (ProjectedExtent.mercatorY(-18.1) + ProjectedExtent.mercatorY(-13.8)) / 2)
    #expect(abs(fitted.center.latitude - mercatorMiddle) < 1e-9)
    #expect(throws: GeoError.self) { try CameraFit(box: fiji, width: 0, height: 600) }
  }
}
