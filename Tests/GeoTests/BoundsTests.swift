import Foundation
import TestSupport
import Testing

@testable import Geo

/// The smallest box by brute force: try every longitude as the western edge, measure the arc
/// eastward that covers all the others, keep the narrowest; among equals prefer a box that does
/// not cross the antimeridian, then the one whose uncovered gap starts furthest west.
func bruteForceBox(_ points: [Coordinate]) -> GeographicBox? {
  guard !points.isEmpty else { return nil }
  let south = points.map(\.latitude).min()!
  let north = points.map(\.latitude).max()!
  let longitudes = points.filter { abs($0.latitude) != 90 }.map { lon -> Double in
    var value = lon.longitude.truncatingRemainder(dividingBy: 360)
    if value >= 180 { value -= 360 }
    if value < -180 { value += 360 }
    return value
  }
  guard !longitudes.isEmpty else {
    return GeographicBox(west: -180, south: south, east: 180, north: north)
  }
  var best: (width: Double, crosses: Bool, gapStart: Double, west: Double, east: Double)?
  for west in Set(longitudes) {
    // The eastern edge is the longitude furthest east of `west`, taken as it is (no arithmetic).
    func distance(_ l: Double) -> Double {
      let d = l - west
      return d < 0 ? d + 360 : d
    }
    let east = longitudes.max { distance($0) < distance($1) }!
    let width = distance(east)
    let crosses = west > east
    let candidate = (width, crosses, east, west, east)
    if let current = best {
      if width < current.width
        || (width == current.width && !crosses && current.crosses)
        || (width == current.width && crosses == current.crosses && east < current.gapStart)
      {
        best = candidate
      }
    } else {
      best = candidate
    }
  }
  var east = best!.east
  if east == -180 && best!.west != east { east = 180 }
  return GeographicBox(west: best!.west, south: south, east: east, north: north)
}

@Suite("Smallest enclosing box")
struct EnclosingBoxTests {
  static func pointSets() -> [(String, [Coordinate])] {
    var generator = SeededGenerator(seed: 42)
    var sets: [(String, [Coordinate])] = [
      ("none", []),
      ("one", [Coordinate(latitude: 10, longitude: 20)]),
      ("one at the antimeridian", [Coordinate(latitude: 10, longitude: 180)]),
      ("duplicates", Array(repeating: Coordinate(latitude: -5, longitude: 100), count: 4)),
      (
        "poles only",
        [Coordinate(latitude: 90, longitude: 10), Coordinate(latitude: -90, longitude: 0)]
      ),
      (
        "Fiji and Samoa",
        [
          Coordinate(latitude: -18.1, longitude: 178.4),
          Coordinate(latitude: -13.8, longitude: -171.8),
        ]
      ),
      (
        "east edge on the antimeridian",
        [Coordinate(latitude: 0, longitude: 170), Coordinate(latitude: 0, longitude: -180)]
      ),
      ("tie", [Coordinate(latitude: 0, longitude: -90), Coordinate(latitude: 0, longitude: 90)]),
      (
        "three-way tie",
        [
          Coordinate(latitude: 0, longitude: -120), Coordinate(latitude: 0, longitude: 0),
          Coordinate(latitude: 0, longitude: 120),
        ]
      ),
    ]
    for index in 0..<300 {
      let count = Int.random(in: 1...12, using: &generator)
      let straddle = index % 3 == 0
      let points = (0..<count).map { _ -> Coordinate in
        let latitude =
          Int.random(in: 0..<10, using: &generator) == 0
          ? (Bool.random(using: &generator) ? 90 : -90)
          : Double(Int.random(in: -89...89, using: &generator))
        var longitude =
          straddle
          ? Double(Int.random(in: 150...210, using: &generator))
          : Double(Int.random(in: -180...180, using: &generator))
        if longitude > 180 { longitude -= 360 }
        return Coordinate(latitude: latitude, longitude: longitude)
      }
      sets.append(("random \(index)", points))
    }
    return sets
  }

  @Test("matches a brute-force search on random sets, straddling 180°, with poles and duplicates")
  func matchesBruteForce() {
    for (name, points) in Self.pointSets() {
      #expect(GeographicBox.enclosing(points) == bruteForceBox(points), "\(name): \(points)")
    }
  }

  @Test("keeps the same answer incrementally through inserts and removals")
  func incrementalMatchesScratch() {
    var generator = SeededGenerator(seed: 7)
    var cover = CoordinateCover()
    var current: [Coordinate] = []
    for step in 0..<3000 {
      if current.isEmpty || Int.random(in: 0..<3, using: &generator) > 0 {
        let coordinate = Coordinate(
          latitude: Double(Int.random(in: -90...90, using: &generator)),
          longitude: Double(Int.random(in: -180...180, using: &generator)))
        current.append(coordinate)
        cover.insert(coordinate)
      } else {
        let coordinate = current.remove(at: Int.random(in: 0..<current.count, using: &generator))
        cover.remove(coordinate)
      }
      #expect(cover.box == GeographicBox.enclosing(current), "step \(step)")
      #expect(cover.count == current.count)
    }
  }

  @Test("says what crosses, and centres across the antimeridian")
  func crossingAndCenter() throws {
    let box = try #require(
      GeographicBox.enclosing([
        Coordinate(latitude: -18.1, longitude: 178.4),
        Coordinate(latitude: -13.8, longitude: -171.8),
      ]))
    #expect(box.crossesAntimeridian)
    #expect(box.west == 178.4 && box.east == -171.8)
    #expect(abs(box.longitudeSpan - 9.8) < 1e-9)
    #expect(abs(box.center.longitude - (-176.7)) < 1e-9)
    #expect(abs(box.center.latitude - (-15.95)) < 1e-9)
  }
}
