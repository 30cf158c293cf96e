import CQL2
import Foundation
import Geo
import Persistence

/// A CQL2 filter over trips (OGC API – Features Part 3), compiled to a `Predicate<Trip>` that
/// the persistence layer translates to SQL like every other predicate: the one
/// predicate-to-SQL path, on both engines.
///
/// The trips' queryables are ``queryables``: `id`, `name`, `destination`, `startDate`,
/// `endDate`, `latitude`, `longitude` and `geometry` (the trip's point). What each part of
/// CQL2 becomes:
///
/// - comparisons, `BETWEEN`, `IN`, `AND`, `OR`, `NOT`, `+ - *`, temporal functions and
///   `S_INTERSECTS` with a point or a `BBOX`: SQL (indexed ranges where the attribute is
///   indexed; a `BBOX` whose west is greater than its east crosses the antimeridian, as the
///   service's `bbox` parameter);
/// - `LIKE`, `CASEI`, `ACCENTI`, `/ % div ^`, and `S_INTERSECTS` with a line or a polygon:
///   Swift (`PredicateExpressions.SwiftFunction` (PersistenceCore)), on the rows the rest of the filter keeps
///   in SQL (for a geometry, the rows inside its envelope, from the index on longitude).
///
/// A trip's dates are the instants at 00:00 UTC of its days; a `DATE` is the same instant of
/// its day, and a trip's interval for the temporal functions is `INTERVAL(startDate,
/// endDate)`. An optional field is a queryable too: `IS NULL` is true where it is none, and a
/// comparison, `LIKE` or `IN` that reads it is false there (and `NOT` of it true), in SQL and in
/// Swift alike; `IS NULL` is false for every other queryable.
/// `CASEI` case-folds (Unicode's full default case folding: `ß` and `SS`, `ς` and `Σ` match),
/// `ACCENTI` removes diacritics; `LIKE`
/// matches `%` with any run of characters and `_` with one character, `\` escaping either.
///
/// Cost: O(size of the filter) to parse and compile; the query as its parts say above.
public struct TripFilter: Hashable, Sendable, CustomStringConvertible {
  /// The filter as parsed.
  public let expression: CQL2Expression
  /// The filter as a predicate on trips.
  public let predicate: Predicate<Trip>

  /// Compiles `expression`, or throws `CQL2Error` naming the node at fault (an unknown
  /// property, operands of different types, a function this filter does not define).
  public init(_ expression: CQL2Expression) throws {
    try Budget.check(expression)
    self.expression = expression
    let probe = try TripFilterCompiler(variable: PredicateExpressions.Variable<Trip>())
      .condition(expression)
    func make<Condition: StandardPredicateExpression<Bool>>(_ probe: Condition) -> Predicate<Trip> {
      Predicate<Trip> { trip in
        // The same filter compiles to the same type for any variable: the probe above has
        // thrown any error already, so this cast and compilation cannot fail. (If they did,
        // the probe names another variable, and translating or evaluating fails loudly.)
        ((try? TripFilterCompiler(variable: trip).condition(expression)) as? Condition) ?? probe
      }
    }
    predicate = make(probe)
  }

  /// Parses and compiles a CQL2 Text filter.
  public init(text: String) throws {
    try self.init(CQL2Expression(text: text))
  }

  /// Parses and compiles a CQL2 JSON filter.
  public init(json: Data) throws {
    try self.init(CQL2Expression(json: json))
  }

  /// Equal when the parsed filters are.
  public static func == (lhs: TripFilter, rhs: TripFilter) -> Bool {
    lhs.expression == rhs.expression
  }

  /// Hashes the parsed filter.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(expression)
  }

  /// The filter's tree, for logs.
  public var description: String { "\(expression)" }

  /// A property a filter can name.
  public struct Queryable: Sendable, Hashable {
    /// Its name in a filter.
    public let name: String
    /// Its JSON Schema type (`string`, `number`) or, for the geometry, its GeoJSON type.
    public let type: String
    /// Its JSON Schema format (`uuid`, `date`), if any.
    public let format: String?
    /// What it is.
    public let title: String
  }

  /// The queryables of trips: ``Trip``'s fields a filter can compare, in declaration order,
  /// then `geometry` (its position). Written once over `Trip.schema.fields`, as the filter's
  /// properties are: a field added to ``Trip`` is a queryable with no other change.
  public static let queryables: [Queryable] =
    FilterProperty.fields.map(\.queryable)
    + [Queryable(name: "geometry", type: "Point", format: nil, title: "The trip's position.")]
}

/// A field of ``Trip`` a filter can name: its queryable, and how it enters a predicate.
struct FilterProperty: Sendable {
  /// How a field's value is compared.
  enum Kind: Sendable {
    case string, number, instant, uuid, bool
  }
  let queryable: TripFilter.Queryable
  let kind: Kind
  /// Whether the field is optional (its type is then `kind`'s optional).
  let isOptional: Bool
  /// The property (its type is `kind`'s).
  nonisolated(unsafe) let keyPath: PartialKeyPath<Trip>

  /// Every persisted field of ``Trip`` whose value a filter compares (text, a number, an
  /// instant, an identifier, a Boolean, or none of them for an optional one), in declaration
  /// order; a `.codable` one is left out (a filter cannot compare it). Made once from
  /// `Trip.schema.fields`.
  static let fields: [FilterProperty] = Trip.schema.fields.compactMap { field in
    guard !field.isCodable else { return nil }
    let (kind, type, format): (Kind, String, String?)
    switch ObjectIdentifier(field.valueType) {
    case ObjectIdentifier(String.self): (kind, type, format) = (.string, "string", nil)
    case ObjectIdentifier(Double.self): (kind, type, format) = (.number, "number", nil)
    // A trip's dates are days (``TripDates``).
    case ObjectIdentifier(Date.self): (kind, type, format) = (.instant, "string", "date")
    case ObjectIdentifier(UUID.self): (kind, type, format) = (.uuid, "string", "uuid")
    case ObjectIdentifier(Bool.self): (kind, type, format) = (.bool, "boolean", nil)
    default: return nil
    }
    return FilterProperty(
      queryable: TripFilter.Queryable(
        name: field.name, type: type, format: format, title: field.documentation),
      kind: kind, isOptional: field.isOptional, keyPath: field.keyPath)
  }

  /// ``fields`` by name.
  static let byName = Dictionary(fields.map { ($0.queryable.name, $0) }) { first, _ in first }
}

extension TripFilter {
  /// What one filter may ask of the server, checked before any work (``TripFilter/init(_:)``
  /// throws `CQL2Error` naming the limit and where it was passed; the service answers 400).
  ///
  /// Each limit bounds a cost a client would otherwise choose: ``maximumTerms`` the work to
  /// compile and translate a filter, ``maximumDepth`` every recursion over it (and the SQL's
  /// nesting: SQLite refuses a statement nested about 50 levels deep), ``maximumListItems``
  /// the parameters of one `IN`, and ``maximumSwiftClauses`` and ``maximumVertices`` the work
  /// per row of the clauses decided in Swift, the one part of a filter whose cost grows with
  /// the rows it is decided on (a request's deadline bounds that product). A chain of `AND` or
  /// `OR` counts ⌈log₂ n⌉ levels of depth (it is compiled as a balanced tree), and an `IN` of
  /// literals one level (it is one SQL `IN`).
  public enum Budget {
    /// The most nodes (properties, literals, operators, functions, list items) in a filter.
    public static let maximumTerms = 2_000
    /// The most items of one `IN` list.
    public static let maximumListItems = 1_000
    /// The deepest a filter's tree may be, counted as it is compiled.
    public static let maximumDepth = 30
    /// The most clauses decided in Swift on each row: `LIKE`, `CASEI`, `ACCENTI`, `/`, `%`,
    /// `div`, `^`, and `S_INTERSECTS` with a line or a polygon.
    public static let maximumSwiftClauses = 8
    /// The most positions of the lines and polygons decided in Swift, all together.
    public static let maximumVertices = 1_000
    /// The most characters of one `LIKE` pattern (matching costs up to its length times the
    /// text's, on every row).
    public static let maximumPatternCharacters = 256

    /// Throws when `expression` passes a limit. Cost: O(nodes), no recursion.
    static func check(_ expression: CQL2Expression) throws {
      var terms = 0
      var swiftClauses = 0
      var vertices = 0
      var pending: [(node: CQL2Expression, depth: Int)] = [(expression, 1)]
      // A function of literals alone (`CASEI('Paris')`) is decided once, not row by row.
      func isLiteral(_ node: CQL2Expression) -> Bool {
        switch node.node {
        case .string, .number, .boolean, .date, .timestamp: true
        case .caseInsensitive(let inner), .accentInsensitive(let inner): isLiteral(inner)
        default: false
        }
      }
      func log2(_ count: Int) -> Int {
        var levels = 0
        while (1 << levels) < count { levels += 1 }
        return max(1, levels)
      }
      while let (node, depth) = pending.popLast() {
        terms += 1
        guard terms <= maximumTerms else {
          throw CQL2Error(
            "The filter has more than \(maximumTerms) terms (properties, literals, operators and list items); make it shorter.",
            at: node.location)
        }
        guard depth <= maximumDepth else {
          throw CQL2Error(
            "The filter is more than \(maximumDepth) levels deep (operators, functions and negations within one another); make it flatter.",
            at: node.location)
        }
        var children: [CQL2Expression] = []
        var levels = 1
        switch node.node {
        case .boolean, .number, .string, .date, .timestamp, .unbounded, .property: break
        case .geometry(let geometry):
          var stack = [geometry]
          while let next = stack.popLast() {
            switch next {
            case .point, .box: terms += 1
            case .multiPoint(let points): terms += points.count
            case .lineString(let line): vertices += line.count
            case .multiLineString(let lines): vertices += lines.reduce(0) { $0 + $1.count }
            case .polygon(let rings): vertices += rings.reduce(0) { $0 + $1.count }
            case .multiPolygon(let polygons):
              vertices += polygons.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } }
            case .collection(let members): stack += members
            }
          }
          guard vertices <= maximumVertices else {
            throw CQL2Error(
              "The filter's lines and polygons have more than \(maximumVertices) positions in all; simplify them.",
              at: node.location)
          }
        case .interval(let a, let b): children = [a, b]
        case .and(let terms), .or(let terms):
          children = terms
          levels = log2(terms.count)
        case .not(let inner), .isNull(let inner), .negation(let inner): children = [inner]
        case .comparison(_, let a, let b): children = [a, b]
        case .like(let a, let b):
          children = [a, b]
          if !isLiteral(a) || !isLiteral(b) { swiftClauses += 1 }
          var literal = b
          while case .caseInsensitive(let inner) = literal.node { literal = inner }
          while case .accentInsensitive(let inner) = literal.node { literal = inner }
          if case .string(let pattern) = literal.node, pattern.count > maximumPatternCharacters {
            throw CQL2Error(
              "The LIKE pattern has \(pattern.count) characters; at most \(maximumPatternCharacters) are allowed.",
              at: b.location)
          }
        case .between(let a, let b, let c):
          children = [a, b, c]
          levels = 2
        case .in(let subject, let items):
          guard items.count <= maximumListItems else {
            throw CQL2Error(
              "The IN list has \(items.count) items; at most \(maximumListItems) are allowed.",
              at: node.location)
          }
          children = [subject] + items
          levels = 1 + (items.count > 1 ? log2(items.count) : 0)
        case .caseInsensitive(let inner), .accentInsensitive(let inner):
          children = [inner]
          if !isLiteral(inner) { swiftClauses += 1 }
        case .arithmetic(let op, let a, let b):
          children = [a, b]
          if ![.add, .subtract, .multiply].contains(op), !isLiteral(a) || !isLiteral(b) {
            swiftClauses += 1
          }
        case .spatial(_, let a, let b):
          children = [a, b]
          levels = 2
          let decidedInSwift = [a, b].contains { operand in
            switch operand.node {
            case .geometry(.lineString), .geometry(.multiLineString), .geometry(.polygon),
              .geometry(.multiPolygon), .geometry(.collection):
              true
            default: false
            }
          }
          if decidedInSwift { swiftClauses += 1 }
        case .temporal(_, let a, let b):
          children = [a, b]
          levels = 2
        case .function(_, let arguments): children = arguments
        }
        guard swiftClauses <= maximumSwiftClauses else {
          throw CQL2Error(
            "The filter has more than \(maximumSwiftClauses) functions decided row by row (each LIKE, each CASEI or ACCENTI of a property, each /, %, div or ^, each line or polygon counts one); use fewer.",
            at: node.location)
        }
        for child in children.reversed() { pending.append((child, depth + levels)) }
      }
    }
  }
}

/// `CASEI` and `ACCENTI`.
enum Fold: String, Sendable {
  case caseInsensitive = "casei"
  case accentInsensitive = "accenti"

  /// `text` case-folded (Unicode's full default case folding) or without its diacritics. ASCII text
  /// takes a fast path with the same answer (no Foundation call).
  func apply(_ text: String) -> String {
    let ascii = text.utf8.allSatisfy { $0 < 0x80 }
    switch self {
    case .caseInsensitive:
      // Unicode's full case folding (ß and SS, ς and σ, ﬁ and FI alike), not lower-casing.
      guard ascii else { return text.folding(options: .caseInsensitive, locale: nil) }
      guard text.utf8.contains(where: { (0x41...0x5A).contains($0) }) else { return text }
      return String(
        decoding: text.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    case .accentInsensitive:
      return ascii ? text : text.folding(options: .diacriticInsensitive, locale: nil)
    }
  }
}
