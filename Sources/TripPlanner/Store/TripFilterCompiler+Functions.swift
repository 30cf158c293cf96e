import CQL2
import Foundation
import Geo
import Persistence

// The CQL2 functions a filter compiles to: those evaluated in Swift, temporal and spatial.

extension TripFilterCompiler {
  // MARK: Functions evaluated in Swift

  func call<A: Sendable & Codable, Output: Sendable & Codable>(
    _ name: String, _ a: Expression<A>, _ function: @escaping @Sendable (A) -> Output
  ) -> Expression<Output> {
    func open<E: StandardPredicateExpression<A>>(_ e: E) -> Expression<Output> {
      PredicateExpressions.SwiftFunction(name, e, function)
    }
    return open(a)
  }

  func call2<A: Sendable & Codable, B: Sendable & Codable, Output: Sendable & Codable>(
    _ name: String, _ a: Expression<A>, _ b: Expression<B>,
    _ function: @escaping @Sendable (A, B) -> Output
  ) -> Expression<Output> {
    func open<L: StandardPredicateExpression<A>, R: StandardPredicateExpression<B>>(
      _ l: L, _ r: R
    ) -> Expression<Output> { PredicateExpressions.SwiftFunction2(name, l, r, function) }
    return open(a, b)
  }

  func arithmetic(
    _ op: CQL2Expression.ArithmeticOperator, _ a: Expression<Double>, _ b: Expression<Double>
  ) -> Expression<Double> {
    func open<L: StandardPredicateExpression<Double>, R: StandardPredicateExpression<Double>>(
      _ l: L, _ r: R
    ) -> Expression<Double> {
      switch op {
      case .add: PredicateExpressions.Arithmetic(lhs: l, rhs: r, op: .add)
      case .subtract: PredicateExpressions.Arithmetic(lhs: l, rhs: r, op: .subtract)
      case .multiply: PredicateExpressions.Arithmetic(lhs: l, rhs: r, op: .multiply)
      // Division and what follows in Swift: the same answer on every engine, and a division
      // by zero is infinite (or not a number), as in Swift, not an error of the server.
      case .divide: PredicateExpressions.SwiftFunction2("/", l, r) { $0 / $1 }
      case .remainder:
        PredicateExpressions.SwiftFunction2("%", l, r) { $0.truncatingRemainder(dividingBy: $1) }
      case .integerDivide:
        PredicateExpressions.SwiftFunction2("div", l, r) { ($0 / $1).rounded(.towardZero) }
      case .power: PredicateExpressions.SwiftFunction2("^", l, r) { Foundation.pow($0, $1) }
      }
    }
    return open(a, b)
  }

  func negate(_ a: Expression<Double>) -> Expression<Double> {
    func open<E: StandardPredicateExpression<Double>>(_ e: E) -> Expression<Double> {
      PredicateExpressions.UnaryMinus(e)
    }
    return open(a)
  }

  // MARK: Temporal functions

  /// An operand as an interval: an instant is one that starts and ends at once; an
  /// unbounded end is the distant past or future.
  func interval(_ node: CQL2Expression) throws -> (Expression<Date>, Expression<Date>) {
    switch try value(node) {
    case .instant(let instant): return (instant, instant)
    case .interval(let start, let end):
      return (
        start ?? PredicateExpressions.Value(Date.distantPast),
        end ?? PredicateExpressions.Value(Date.distantFuture)
      )
    case let other:
      throw fail(
        "A temporal function takes instants and intervals; this is \(other.typeName).", node)
    }
  }

  func temporal(
    _ function: CQL2Expression.TemporalFunction, _ a: CQL2Expression, _ b: CQL2Expression
  ) throws -> Expression<Bool> {
    let (a1, a2) = try interval(a)
    let (b1, b2) = try interval(b)
    func all(_ tests: Expression<Bool>...) -> Expression<Bool> {
      tests.dropFirst().reduce(tests[0]) { and($0, $1) }
    }
    switch function {
    case .after: return comparison(.greater, a1, b2)
    case .before: return comparison(.less, a2, b1)
    case .contains: return all(comparison(.less, a1, b1), comparison(.greater, a2, b2))
    case .disjoint: return or(comparison(.greater, a1, b2), comparison(.less, a2, b1))
    case .during: return all(comparison(.greater, a1, b1), comparison(.less, a2, b2))
    case .equals: return all(comparison(.equal, a1, b1), comparison(.equal, a2, b2))
    case .finishedBy: return all(comparison(.less, a1, b1), comparison(.equal, a2, b2))
    case .finishes: return all(comparison(.greater, a1, b1), comparison(.equal, a2, b2))
    case .intersects:
      return all(comparison(.lessOrEqual, a1, b2), comparison(.greaterOrEqual, a2, b1))
    case .meets: return comparison(.equal, a2, b1)
    case .metBy: return comparison(.equal, a1, b2)
    case .overlappedBy:
      return all(
        comparison(.greater, a1, b1), comparison(.less, a1, b2), comparison(.greater, a2, b2))
    case .overlaps:
      return all(comparison(.less, a1, b1), comparison(.greater, a2, b1), comparison(.less, a2, b2))
    case .startedBy: return all(comparison(.equal, a1, b1), comparison(.greater, a2, b2))
    case .starts: return all(comparison(.equal, a1, b1), comparison(.less, a2, b2))
    }
  }

  // MARK: Spatial functions

  func intersects(_ a: CQL2Expression, _ b: CQL2Expression, at node: CQL2Expression) throws
    -> Expression<Bool>
  {
    switch (try value(a), try value(b)) {
    case (.position, .geometry(let geometry)), (.geometry(let geometry), .position):
      return try intersects(geometry, at: node)
    case (.geometry(let first), .geometry(let second)):
      // Two literals: decided now when one of them is made of points (a planar test).
      return PredicateExpressions.Value(try literalsIntersect(first, second, at: node))
    case (.position, .position):
      return PredicateExpressions.Value(true)
    case (let l, let r):
      throw fail("S_INTERSECTS takes geometries, not \(l.typeName) and \(r.typeName).", node)
    }
  }

  /// Whether two literals intersect, when either is a point or points; otherwise refused (no
  /// trip is needed to decide it, and a filter has no reason to ask).
  func literalsIntersect(_ a: CQL2Geometry, _ b: CQL2Geometry, at node: CQL2Expression) throws
    -> Bool
  {
    func points(_ geometry: CQL2Geometry) -> [CQL2Position]? {
      switch geometry {
      case .point(let p): [p]
      case .multiPoint(let ps): ps
      default: nil
      }
    }
    if let ps = points(a) { return ps.contains { CQL2PlanarShape(b).contains(x: $0.x, y: $0.y) } }
    if let ps = points(b) { return ps.contains { CQL2PlanarShape(a).contains(x: $0.x, y: $0.y) } }
    throw fail("S_INTERSECTS of two literals is supported when one is a point or points.", node)
  }

  var longitude: Expression<Double> {
    PredicateExpressions.KeyPath(root: variable, keyPath: \Trip.longitude)
  }
  var latitude: Expression<Double> {
    PredicateExpressions.KeyPath(root: variable, keyPath: \Trip.latitude)
  }

  func range(_ value: Expression<Double>, _ low: Double, _ high: Double) -> Expression<Bool> {
    and(
      comparison(.greaterOrEqual, value, PredicateExpressions.Value(low)),
      comparison(.lessOrEqual, value, PredicateExpressions.Value(high)))
  }

  /// Whether the trip's point intersects `geometry` (in CRS84).
  func intersects(_ geometry: CQL2Geometry, at node: CQL2Expression) throws -> Expression<Bool> {
    switch geometry {
    case .point(let p):
      return and(
        comparison(.equal, longitude, PredicateExpressions.Value(p.x)),
        comparison(.equal, latitude, PredicateExpressions.Value(p.y)))
    case .multiPoint(let points):
      return balanced(try points.map { try intersects(.point($0), at: node) }, or)
    case .box(let west, let south, let east, let north):
      guard (-180...180).contains(west), (-180...180).contains(east), south >= -90, north <= 90
      else {
        throw fail(
          "A BBOX in CRS84 has longitudes within -180…180 and latitudes within -90…90.", node)
      }
      let latitudes = range(latitude, south, north)
      if west > east {
        return and(or(range(longitude, west, 180), range(longitude, -180, east)), latitudes)
      }
      return and(range(longitude, west, east), latitudes)
    case .collection(let members):
      guard !members.isEmpty else { return PredicateExpressions.Value(false) }
      return balanced(try members.map { try intersects($0, at: node) }, or)
    case .lineString, .multiLineString, .polygon, .multiPolygon:
      let shape = CQL2PlanarShape(geometry)
      guard let envelope = shape.envelope else { return PredicateExpressions.Value(false) }
      // The envelope in SQL (the index on longitude), the exact test in Swift.
      let inEnvelope = and(
        range(longitude, envelope.west, envelope.east),
        range(latitude, envelope.south, envelope.north))
      let exact = call2("s_intersects", longitude, latitude) { shape.contains(x: $0, y: $1) }
      return and(inEnvelope, exact)
    }
  }
}
