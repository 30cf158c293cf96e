import Foundation
import Geo
import TestSupport
import Testing

@testable import TripPlanner

@Suite("Bounds reports: the projected extent holds every trip")
struct ProjectedExtentTests {
  /// Whether every point that projects lies inside `extent`.
  static func holdsAll(_ extent: ProjectedExtent, _ points: [Coordinate], _ projection: Projection)
    -> Bool
  {
    points.allSatisfy { point in
      guard let (x, y) = projection.projectIfPossible(point) else { return true }
      return x >= extent.minX && x <= extent.maxX && y >= extent.minY && y <= extent.maxY
    }
  }

  @Test(
    "random wide sets: the extent holds each trip's own projection",
    arguments: [
      ("EPSG:32633", -60.0...90.0, -80.0...84.0), ("EPSG:3035", -60.0...80.0, 0.0...85.0),
    ])
  func randomSets(crs: String, longitudes: ClosedRange<Double>, latitudes: ClosedRange<Double>)
    throws
  {
    let projection = try Projection(to: crs)
    var generator = SeededGenerator(seed: 40)
    for _ in 0..<40 {
      // Half the trips share the lowest latitude, so that they lie on the box's southern edge,
      // between the points PROJ samples along it (where densified edges can miss them).
      let shared = Double.random(in: latitudes, using: &generator)
      let points = (0..<Int.random(in: 4...12, using: &generator)).map { index in
        Coordinate(
          latitude: index % 2 == 0
            ? shared : Double.random(in: shared...latitudes.upperBound, using: &generator),
          longitude: Double.random(in: longitudes, using: &generator))
      }
      let box = try #require(GeographicBox.enclosing(points))
      let report = try BoundsReport(
        count: points.count, box: box, projection: projection,
        points: projection.pointCover(points))
      let extent = try #require(report.projected)
      #expect(Self.holdsAll(extent, points, projection), "\(points)")
    }
  }

  @Test("six trips on the equator in EPSG:3035: the one at 10°E is inside the extent")
  func equator() throws {
    let projection = try Projection(to: "EPSG:3035")
    let points = stride(from: 0.0, through: 50.0, by: 10.0).map {
      Coordinate(latitude: 0, longitude: $0)
    }
    let box = try #require(GeographicBox.enclosing(points))
    let edgesOnly = try projection.extent(of: box)
    let lowest = try projection.project(Coordinate(latitude: 0, longitude: 10))
    #expect(edgesOnly.minY > lowest.y, "the densified edge alone misses it")
    let report = try BoundsReport(
      count: points.count, box: box, projection: projection,
      points: projection.pointCover(points))
    #expect(try #require(report.projected).minY == lowest.y)
  }

  @Test("trips a CRS cannot project are counted, not dropped silently")
  func unprojected() throws {
    let projection = try Projection(to: "EPSG:32633")
    let points = [
      Coordinate(latitude: 45, longitude: 15), Coordinate(latitude: 45, longitude: -165),
    ]
    let cover = projection.pointCover(points)
    let report = try BoundsReport(
      count: 2, box: GeographicBox.enclosing(points), projection: projection, points: cover)
    let far = projection.projectIfPossible(points[1])
    #expect(report.unprojectedCount == (far == nil ? 1 : 0))
    if far == nil {
      #expect(report.text.contains("Not projected:  1 trip outside the area of EPSG:32633"))
      #expect(report.json.rendered().contains("\"unprojected\":1"))
    }
  }

  @Test("the controller's incremental extent equals a report made from scratch")
  func controllerMatchesScratch() throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    let controller = try BoundsController(container: store.container, crs: "EPSG:3035")
    var generator = SeededGenerator(seed: 7)
    var trips: [Trip] = []
    for index in 0..<30 {
      trips.append(
        try store.add(
          TripRecord(
            name: "T\(index)", destination: "D", startDate: TripDates.parse("2027-01-01")!,
            endDate: TripDates.parse("2027-01-02")!,
            latitude: Double.random(in: 0...60, using: &generator).rounded(),
            longitude: Double.random(in: -20...50, using: &generator).rounded())))
      if index % 5 == 4 { _ = try store.delete([trips.removeFirst().id.uuidString]) }
    }
    controller.waitForPendingUpdates()
    let coordinates = try store.coordinates()
    let projection = try Projection(to: "EPSG:3035")
    let scratch = try BoundsReport(
      count: coordinates.count, box: GeographicBox.enclosing(coordinates), projection: projection,
      points: projection.pointCover(coordinates))
    #expect(controller.report == scratch)
  }
}

@Suite("BoundsController on every engine")
struct BoundsControllerEngineTests {
  enum Engine: String, CaseIterable, Sendable { case sqlite, postgreSQL }

  @Test(
    "a controller follows another store's changes (another process, or another server) and equals a report from scratch",
    arguments: Engine.allCases)
  func followsAnotherStore(engine: Engine) throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "bounds-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let url =
      switch engine {
      case .sqlite: directory.appendingPathComponent("trips.sqlite")
      case .postgreSQL:
        try #require(URL(string: try PostgreSQLCluster.shared.get().makeDatabase("bounds")))
      }
    let watched = try TripStore(url: url, author: "watcher")
    let writer = try TripStore(url: url, author: "writer")
    let controller = try BoundsController(container: watched.container)
    var generator = SeededGenerator(seed: 11)
    var added: [Trip] = []
    for index in 0..<20 {
      // Around the antimeridian, on both sides of it.
      let around = Double.random(in: 160...200, using: &generator).rounded()
      added.append(
        try writer.add(
          TripRecord(
            name: "T\(index)", destination: "D", startDate: TripDates.parse("2027-01-01")!,
            endDate: TripDates.parse("2027-01-02")!,
            latitude: Double.random(in: -60...60, using: &generator).rounded(),
            longitude: around > 180 ? around - 360 : around)))
      if index % 4 == 3 { _ = try writer.delete([added.removeFirst().id.uuidString]) }
    }
    let coordinates = try writer.coordinates()
    let projection = try Projection(to: "EPSG:3857")
    let scratch = try BoundsReport(
      count: coordinates.count, box: GeographicBox.enclosing(coordinates), projection: projection,
      points: projection.pointCover(coordinates))
    let deadline = Date().addingTimeInterval(10)
    while controller.report != scratch, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
    #expect(controller.report == scratch)
    #expect(controller.report.count == 15)
  }
}

@Suite("Bounds reports: edge cases of the contract")
struct BoundsContractTests {
  @Test("a camera on trips at a pole looks from Web Mercator's last latitude")
  func cameraAtPole() throws {
    for latitude in [90.0, -90.0] {
      let box = try #require(
        GeographicBox.enclosing([Coordinate(latitude: latitude, longitude: 0)]))
      let camera = try CameraFit(box: box, width: 800, height: 600)
      #expect(
        camera.center.latitude == (latitude > 0 ? 1 : -1) * ProjectedExtent.maxMercatorLatitude)
      #expect(camera.zoom.isFinite)
    }
  }

  @Test("a tie between two boxes that do not cross: the one from the smallest longitude")
  func tie() throws {
    let box = try #require(
      GeographicBox.enclosing([
        Coordinate(latitude: 0, longitude: -180), Coordinate(latitude: 0, longitude: 0),
      ]))
    #expect(box.west == -180 && box.east == 0)
    var cover = CoordinateCover()
    cover.insert(Coordinate(latitude: 0, longitude: 0))
    cover.insert(Coordinate(latitude: 0, longitude: -180))
    #expect(cover.box == box, "incremental and from scratch agree")
  }
}

@Suite("Bounding-box queries use the index")
struct BoxQueryPlanTests {
  @Test(
    "a box, and a box across the antimeridian, are index searches on longitude",
    arguments: [
      GeographicBox(west: 10, south: -20, east: 20, north: 60),
      GeographicBox(west: 170, south: -30, east: -170, north: 0),
    ])
  func plan(box: GeographicBox) throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    var query = TripQuery()
    query.bbox = box
    let plan = try store.context.explainQueryPlan(query.fetchDescriptor)
    let searches = plan.filter {
      $0.contains("SEARCH trips USING INDEX trips_longitude_latitude_start_date_name_index")
    }
    #expect(searches.count == (box.crossesAntimeridian ? 2 : 1), "\(plan)")
    #expect(!plan.contains { $0.hasPrefix("SCAN trips") }, "\(plan)")
    // With the other filters too.
    query.search = "a"
    query.from = TripDates.parse("2027-01-01")
    let filtered = try store.context.explainQueryPlan(query.fetchDescriptor)
    #expect(
      filtered.contains { $0.contains("trips_longitude_latitude_start_date_name_index") },
      "\(filtered)")
  }
}

@Suite("Trip queries in Swift and in SQL")
struct TripQueryMatchTests {
  @Test(
    "FetchDescriptor.matches (what the items stream uses) agrees with the SQL fetch",
    arguments: [
      TripQuery(search: "a"), TripQuery(destination: "zurich"),
      TripQuery(from: TripDates.parse("2027-03-01"), to: TripDates.parse("2027-06-01")),
      {
        var query = TripQuery()
        query.bbox = GeographicBox(west: 170, south: -30, east: -170, north: 0)
        return query
      }(),
      {
        var query = TripQuery(search: "e")
        query.bbox = GeographicBox(west: -20, south: 30, east: 40, north: 70)
        return query
      }(),
    ])
  func agrees(query: TripQuery) throws {
    let store = try TripStore(inMemoryWithAuthor: "test")
    var generator = SeededGenerator(seed: 9)
    let names = ["Zürich week", "Spring in Suva", "Apia", "Oslo", "Café tour"]
    let destinations = ["Zürich", "ZURICH", "Suva", "Apia", "Oslo"]
    for index in 0..<300 {
      let start = Date(
        timeIntervalSince1970: 1_800_000_000 + Double(Int.random(in: 0..<300, using: &generator))
          * 86_400)
      _ = try store.add(
        TripRecord(
          name: names[index % names.count], destination: destinations[index % destinations.count],
          startDate: start, endDate: start.addingTimeInterval(5 * 86_400),
          latitude: Double.random(in: -80...80, using: &generator),
          longitude: Double.random(in: -180...180, using: &generator)))
    }
    let descriptor = query.fetchDescriptor
    let fetched = Set(try store.trips(query).map(\.id))
    let all = try store.trips()
    let matched = Set(try all.filter { try descriptor.matches($0) }.map(\.id))
    #expect(matched == fetched)
    #expect(!fetched.isEmpty && fetched.count < all.count, "the query selects some, not all")
  }
}
