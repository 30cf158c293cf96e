/// A `LIKE` pattern of CQL2: `%` matches any run of characters (none too), `_` exactly one
/// character, and `\` makes the next character stand for itself. Characters are Swift's
/// (extended grapheme clusters), compared as `Character`s are.
public struct CQL2LikePattern: Sendable, Hashable {
  enum Part: Hashable {
    case character(Character)
    case one
    case any
  }
  let parts: [Part]

  /// The pattern `text`; a `\` at its very end stands for itself.
  public init(_ text: String) {
    var parts: [Part] = []
    var escaped = false
    for character in text {
      if escaped {
        parts.append(.character(character))
        escaped = false
      } else if character == "\\" {
        escaped = true
      } else if character == "%" {
        if parts.last != .any { parts.append(.any) }
      } else if character == "_" {
        parts.append(.one)
      } else {
        parts.append(.character(character))
      }
    }
    if escaped { parts.append(.character("\\")) }
    self.parts = parts
  }

  /// Whether `text` matches. Cost: O(characters × parts) at worst, O(characters) for a
  /// pattern with at most one `%`.
  public func matches(_ text: String) -> Bool {
    let characters = Array(text)
    // The classic wildcard match with one backtrack point (the last `%` seen).
    var t = 0
    var p = 0
    var star: Int?
    var resume = 0
    while t < characters.count {
      if p < parts.count {
        switch parts[p] {
        case .any:
          star = p
          resume = t
          p += 1
          continue
        case .one:
          t += 1
          p += 1
          continue
        case .character(let c) where c == characters[t]:
          t += 1
          p += 1
          continue
        case .character:
          break
        }
      }
      guard let star else { return false }
      p = star + 1
      resume += 1
      t = resume
    }
    while p < parts.count, parts[p] == .any { p += 1 }
    return p == parts.count
  }
}

/// A geometry literal as a set of points of the plane, for tests of a point against it.
public struct CQL2PlanarShape: Sendable {
  private let points: [CQL2Position]
  private let lines: [[CQL2Position]]
  private let polygons: [[[CQL2Position]]]
  private let boxes: [(west: Double, south: Double, east: Double, north: Double)]

  /// The shape of `geometry`; a `BBOX` whose west is greater than its east crosses the
  /// antimeridian (two boxes), as in CRS84.
  public init(_ geometry: CQL2Geometry) {
    var points: [CQL2Position] = []
    var lines: [[CQL2Position]] = []
    var polygons: [[[CQL2Position]]] = []
    var boxes: [(Double, Double, Double, Double)] = []
    func add(_ geometry: CQL2Geometry) {
      switch geometry {
      case .point(let p): points.append(p)
      case .multiPoint(let ps): points += ps
      case .lineString(let line): lines.append(line)
      case .multiLineString(let more): lines += more
      case .polygon(let rings): polygons.append(rings)
      case .multiPolygon(let more): polygons += more
      case .collection(let members): members.forEach(add)
      case .box(let west, let south, let east, let north):
        if west > east {
          boxes.append((west, south, 180, north))
          boxes.append((-180, south, east, north))
        } else {
          boxes.append((west, south, east, north))
        }
      }
    }
    add(geometry)
    self.points = points
    self.lines = lines
    self.polygons = polygons
    self.boxes = boxes
  }

  /// The smallest box holding the shape (plain: west ≤ east), or nil when it is empty.
  public var envelope: (west: Double, south: Double, east: Double, north: Double)? {
    var all = points + lines.flatMap { $0 } + polygons.flatMap { $0.first ?? [] }
    for box in boxes {
      all.append(CQL2Position(x: box.west, y: box.south))
      all.append(CQL2Position(x: box.east, y: box.north))
    }
    guard let first = all.first else { return nil }
    var envelope = (west: first.x, south: first.y, east: first.x, north: first.y)
    for p in all.dropFirst() {
      envelope.west = min(envelope.west, p.x)
      envelope.east = max(envelope.east, p.x)
      envelope.south = min(envelope.south, p.y)
      envelope.north = max(envelope.north, p.y)
    }
    return envelope
  }

  /// Whether the point (x, y) is in the shape: equal to one of its points, on one of its
  /// lines, in one of its boxes (edges included), or in one of its polygons (inside its outer
  /// ring and not strictly inside a hole; boundaries included). Planar: coordinates are
  /// numbers of the plane. Cost: O(positions of the shape).
  public func contains(x: Double, y: Double) -> Bool {
    if points.contains(where: { $0.x == x && $0.y == y }) { return true }
    if boxes.contains(where: { x >= $0.west && x <= $0.east && y >= $0.south && y <= $0.north }) {
      return true
    }
    for line in lines where Self.onLine(line, x: x, y: y) { return true }
    for rings in polygons {
      guard let outer = rings.first else { continue }
      if Self.onLine(outer, x: x, y: y) { return true }
      guard Self.inside(outer, x: x, y: y) else { continue }
      let inHole = rings.dropFirst().contains { hole in
        !Self.onLine(hole, x: x, y: y) && Self.inside(hole, x: x, y: y)
      }
      if !inHole { return true }
    }
    return false
  }

  /// Whether (x, y) lies on a segment of `line` (exactly, by the sign of a cross product).
  static func onLine(_ line: [CQL2Position], x: Double, y: Double) -> Bool {
    for (a, b) in zip(line, line.dropFirst()) {
      guard x >= min(a.x, b.x), x <= max(a.x, b.x), y >= min(a.y, b.y), y <= max(a.y, b.y)
      else { continue }
      if (b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x) == 0 { return true }
    }
    return false
  }

  /// Whether (x, y) is inside the closed `ring` (even–odd rule; a point on the ring is
  /// decided by ``onLine(_:x:y:)`` first).
  static func inside(_ ring: [CQL2Position], x: Double, y: Double) -> Bool {
    var inside = false
    for (a, b) in zip(ring, ring.dropFirst()) where (a.y > y) != (b.y > y) {
      let crossing = a.x + (y - a.y) * (b.x - a.x) / (b.y - a.y)
      if x < crossing { inside.toggle() }
    }
    return inside
  }
}
