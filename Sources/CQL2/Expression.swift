import Foundation

/// A CQL2 filter expression (OGC 21-065r2, Common Query Language), as its two encodings,
/// CQL2 Text and CQL2 JSON, both parse to: a tree of nodes, each with the place in the filter
/// where it starts, so that a later check (an unknown property, operands of the wrong type) can
/// name it.
///
/// The tree keeps what was written, not what it means: `NOT`, `BETWEEN`, `IN`, `LIKE`,
/// `CASEI`, `ACCENTI`, the spatial and temporal functions and arithmetic are nodes of their
/// own, and a consumer gives them a meaning (a query, an evaluation). Two filters that differ
/// only in spacing, letter case of keywords or the encoding parse to equal trees but for
/// their locations.
public struct CQL2Expression: Hashable, Sendable {
  /// What the node is.
  public var node: Node
  /// Where it starts in the filter.
  public var location: CQL2Location

  /// Creates a node at `location`.
  public init(_ node: Node, at location: CQL2Location) {
    self.node = node
    self.location = location
  }

  /// A node of the tree.
  public indirect enum Node: Hashable, Sendable {
    /// `TRUE` or `FALSE`.
    case boolean(Bool)
    /// A number.
    case number(Double)
    /// A character literal.
    case string(String)
    /// `DATE('2024-05-01')`: a day, kept as written (`yyyy-mm-dd`).
    case date(String)
    /// `TIMESTAMP('2024-05-01T10:00:00Z')`: an instant.
    case timestamp(Date)
    /// `INTERVAL(start, end)`: each end an instant literal, a property, or ``unbounded``.
    case interval(CQL2Expression, CQL2Expression)
    /// `'..'` as an end of an interval: unbounded on that side.
    case unbounded
    /// A geometry literal (WKT in text, GeoJSON in JSON) or `BBOX(...)`.
    case geometry(CQL2Geometry)
    /// A property of the item, by name.
    case property(String)
    /// `a AND b AND …` (at least two).
    case and([CQL2Expression])
    /// `a OR b OR …` (at least two).
    case or([CQL2Expression])
    /// `NOT a`.
    case not(CQL2Expression)
    /// `a op b` for `=`, `<>`, `<`, `<=`, `>`, `>=`.
    case comparison(ComparisonOperator, CQL2Expression, CQL2Expression)
    /// `a LIKE pattern` (`%` any run, `_` one character, `\` escapes either).
    case like(CQL2Expression, CQL2Expression)
    /// `a BETWEEN low AND high` (both ends included).
    case between(CQL2Expression, CQL2Expression, CQL2Expression)
    /// `a IN (b, c, …)`.
    case `in`(CQL2Expression, [CQL2Expression])
    /// `a IS NULL`.
    case isNull(CQL2Expression)
    /// `CASEI(a)`: `a` compared without regard to case.
    case caseInsensitive(CQL2Expression)
    /// `ACCENTI(a)`: `a` compared without regard to accents.
    case accentInsensitive(CQL2Expression)
    /// `a op b` for `+`, `-`, `*`, `/`, `%`, `div`, `^`.
    case arithmetic(ArithmeticOperator, CQL2Expression, CQL2Expression)
    /// `-a` for an expression that is not a number literal.
    case negation(CQL2Expression)
    /// `S_INTERSECTS(a, b)` and the other spatial functions.
    case spatial(SpatialFunction, CQL2Expression, CQL2Expression)
    /// `T_INTERSECTS(a, b)` and the other temporal functions.
    case temporal(TemporalFunction, CQL2Expression, CQL2Expression)
    /// A call of a function the grammar does not define by name.
    case function(String, [CQL2Expression])
  }

  /// A binary comparison.
  public enum ComparisonOperator: String, Hashable, Sendable, CaseIterable {
    /// `=`
    case equal = "="
    /// `<>`
    case notEqual = "<>"
    /// `<`
    case less = "<"
    /// `<=`
    case lessOrEqual = "<="
    /// `>`
    case greater = ">"
    /// `>=`
    case greaterOrEqual = ">="
  }

  /// An arithmetic operator.
  public enum ArithmeticOperator: String, Hashable, Sendable, CaseIterable {
    /// `+`
    case add = "+"
    /// `-`
    case subtract = "-"
    /// `*`
    case multiply = "*"
    /// `/`: the quotient as a real number.
    case divide = "/"
    /// `%`: the remainder of the division (the sign of the dividend).
    case remainder = "%"
    /// `div`: the quotient rounded toward zero.
    case integerDivide = "div"
    /// `^`: the power.
    case power = "^"
  }

  /// The spatial functions of CQL2 (only `S_INTERSECTS` is in Basic Spatial Functions).
  public enum SpatialFunction: String, Hashable, Sendable, CaseIterable {
    /// `S_INTERSECTS`
    case intersects = "s_intersects"
    /// `S_EQUALS`
    case equals = "s_equals"
    /// `S_DISJOINT`
    case disjoint = "s_disjoint"
    /// `S_TOUCHES`
    case touches = "s_touches"
    /// `S_WITHIN`
    case within = "s_within"
    /// `S_OVERLAPS`
    case overlaps = "s_overlaps"
    /// `S_CROSSES`
    case crosses = "s_crosses"
    /// `S_CONTAINS`
    case contains = "s_contains"
  }

  /// The temporal functions of CQL2, relations of two intervals (an instant is an interval
  /// that starts and ends at once).
  public enum TemporalFunction: String, Hashable, Sendable, CaseIterable {
    /// `T_AFTER`: a starts after b ends.
    case after = "t_after"
    /// `T_BEFORE`: a ends before b starts.
    case before = "t_before"
    /// `T_CONTAINS`: a starts before b starts and ends after b ends.
    case contains = "t_contains"
    /// `T_DISJOINT`: they share no instant.
    case disjoint = "t_disjoint"
    /// `T_DURING`: a starts after b starts and ends before b ends.
    case during = "t_during"
    /// `T_EQUALS`: same start and end.
    case equals = "t_equals"
    /// `T_FINISHEDBY`: a starts before b starts; they end together.
    case finishedBy = "t_finishedby"
    /// `T_FINISHES`: a starts after b starts; they end together.
    case finishes = "t_finishes"
    /// `T_INTERSECTS`: they share an instant.
    case intersects = "t_intersects"
    /// `T_MEETS`: a ends when b starts.
    case meets = "t_meets"
    /// `T_METBY`: a starts when b ends.
    case metBy = "t_metby"
    /// `T_OVERLAPPEDBY`: b starts before a, a starts before b ends, b ends before a ends.
    case overlappedBy = "t_overlappedby"
    /// `T_OVERLAPS`: a starts before b, b starts before a ends, a ends before b ends.
    case overlaps = "t_overlaps"
    /// `T_STARTEDBY`: they start together; a ends after b ends.
    case startedBy = "t_startedby"
    /// `T_STARTS`: they start together; a ends before b ends.
    case starts = "t_starts"
  }
}

/// Where a node starts: a character of CQL2 Text (counted from 1, in Unicode scalars), or a
/// member of CQL2 JSON (a path such as `$.args[1]`).
public enum CQL2Location: Hashable, Sendable, CustomStringConvertible {
  /// The character at this position (from 1) of a CQL2 Text filter.
  case character(Int)
  /// The member at this path of a CQL2 JSON filter.
  case path(String)

  /// `character 12` or `$.args[1]`.
  public var description: String {
    switch self {
    case .character(let position): "character \(position)"
    case .path(let path): path
    }
  }
}

/// A geometry literal of a filter, in the coordinates of the filter's CRS (longitude and
/// latitude for CRS84), as GeoJSON and WKT define them.
public indirect enum CQL2Geometry: Hashable, Sendable {
  /// A position.
  case point(CQL2Position)
  /// Positions.
  case multiPoint([CQL2Position])
  /// A line through the positions in order.
  case lineString([CQL2Position])
  /// Lines.
  case multiLineString([[CQL2Position]])
  /// An outer ring and its holes, each closed (the last position equals the first).
  case polygon([[CQL2Position]])
  /// Polygons.
  case multiPolygon([[[CQL2Position]]])
  /// Geometries.
  case collection([CQL2Geometry])
  /// `BBOX(west, south, east, north)` (a west greater than the east crosses the antimeridian).
  case box(west: Double, south: Double, east: Double, north: Double)
}

/// A position of a geometry: x and y (longitude and latitude in CRS84); a third number, if
/// given, is dropped.
public struct CQL2Position: Hashable, Sendable {
  /// The first coordinate (the longitude in CRS84).
  public var x: Double
  /// The second coordinate (the latitude in CRS84).
  public var y: Double

  /// Creates a position.
  public init(x: Double, y: Double) {
    self.x = x
    self.y = y
  }
}

/// Why a filter was refused: where, and what is wrong there (as swift-nio's errors, a struct
/// with a message; a service answers it as 400).
public struct CQL2Error: Error, Hashable, Sendable, CustomStringConvertible {
  /// Where the fault is.
  public var location: CQL2Location
  /// What is wrong, as a sentence.
  public var reason: String

  /// Creates an error.
  public init(_ reason: String, at location: CQL2Location) {
    self.reason = reason
    self.location = location
  }

  /// `At character 12: expected ')'.`
  public var description: String {
    switch location {
    case .character: "At \(location): \(reason)"
    case .path(let path): "At \(path): \(reason)"
    }
  }
}
