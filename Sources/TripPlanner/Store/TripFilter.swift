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

/// Compiles a CQL2 tree to predicate expressions on one trip variable.
private struct TripFilterCompiler {
  typealias Expression<Output> = any StandardPredicateExpression<Output>
  let variable: PredicateExpressions.Variable<Trip>
  /// The conditions that the optional properties read so far are given, one list per
  /// ``condition(_:)`` being compiled.
  let guards = Guards()

  final class Guards {
    var frames: [[Expression<Bool>]] = []
  }

  /// What a node of the filter is, with its type.
  enum Value {
    case bool(Expression<Bool>)
    case string(Expression<String>)
    case number(Expression<Double>)
    case instant(Expression<Date>)
    case uuid(Expression<UUID>)
    /// An interval: each end an instant, or nil when unbounded.
    case interval(Expression<Date>?, Expression<Date>?)
    case geometry(CQL2Geometry)
    /// The trip's point.
    case position

    var typeName: String {
      switch self {
      case .bool: "a Boolean"
      case .string: "a character string"
      case .number: "a number"
      case .instant: "an instant"
      case .uuid: "an identifier"
      case .interval: "an interval"
      case .geometry, .position: "a geometry"
      }
    }
  }

  func fail(_ reason: String, _ node: CQL2Expression) -> CQL2Error {
    CQL2Error(reason, at: node.location)
  }

  /// The filter as a condition.
  func condition(_ node: CQL2Expression) throws -> Expression<Bool> {
    // The optional properties this condition reads, each of which must be given for it to
    // hold: `x != nil && …`, whose `&&` Swift stops at before reading `x!`.
    guards.frames.append([])
    let compiled: Value
    do {
      compiled = try value(node)
    } catch {
      guards.frames.removeLast()
      throw error
    }
    let given = guards.frames.removeLast()
    guard case .bool(let condition) = compiled else {
      throw fail("This is \(compiled.typeName), not a condition.", node)
    }
    return given.isEmpty ? condition : and(balanced(given, and), condition)
  }

  // MARK: Nodes

  func value(_ node: CQL2Expression) throws -> Value {
    switch node.node {
    case .boolean(let bool): return .bool(PredicateExpressions.Value(bool))
    case .number(let number): return .number(PredicateExpressions.Value(number))
    case .string(let text): return .string(PredicateExpressions.Value(text))
    case .date(let day):
      guard let date = CQL2Instant.day(day) else { throw fail("'\(day)' is not a date.", node) }
      return .instant(PredicateExpressions.Value(date))
    case .timestamp(let date): return .instant(PredicateExpressions.Value(date))
    case .unbounded:
      throw fail("'..' stands only for an end of an interval.", node)
    case .interval(let start, let end):
      return .interval(try intervalEnd(start), try intervalEnd(end))
    case .geometry(let geometry): return .geometry(geometry)
    case .property(let name): return try property(name, node)
    case .and(let terms):
      return .bool(balanced(try terms.map(condition), and))
    case .or(let terms):
      return .bool(balanced(try terms.map(condition), or))
    case .not(let inner): return .bool(not(try condition(inner)))
    case .comparison(let op, let left, let right):
      return .bool(try compare(op, left, right, at: node))
    case .between(let subject, let low, let high):
      return .bool(
        and(
          try compare(.greaterOrEqual, subject, low, at: node),
          try compare(.lessOrEqual, subject, high, at: node)))
    case .in(let subject, let items):
      if let list = try literalList(subject, items) { return .bool(list) }
      return .bool(balanced(try items.map { try compare(.equal, subject, $0, at: node) }, or))
    case .isNull(let subject):
      if case .property(let name) = subject.node, let property = FilterProperty.byName[name],
        property.isOptional
      {
        return .bool(isNone(property))
      }
      _ = try value(subject)
      return .bool(PredicateExpressions.Value(false))
    case .like(let subject, let pattern):
      guard case .string(let text) = try value(subject) else {
        throw fail("LIKE applies to a character string.", subject)
      }
      guard case .string(let patternText) = try value(pattern) else {
        throw fail("A LIKE pattern is a character string.", pattern)
      }
      return .bool(call2("like", text, patternText) { CQL2LikePattern($1).matches($0) })
    case .caseInsensitive, .accentInsensitive:
      // A chain of them (ACCENTI(CASEI(x))) is one function: one call a row.
      var folds: [Fold] = []
      var inner = node
      while true {
        if case .caseInsensitive(let next) = inner.node {
          folds.append(.caseInsensitive)
          inner = next
        } else if case .accentInsensitive(let next) = inner.node {
          folds.append(.accentInsensitive)
          inner = next
        } else {
          break
        }
      }
      guard case .string(let text) = try value(inner) else {
        throw fail("CASEI and ACCENTI apply to a character string.", inner)
      }
      let applied = Array(folds.reversed())
      return .string(
        call(applied.map(\.rawValue).joined(separator: "+"), text) { text in
          applied.reduce(text) { $1.apply($0) }
        })
    case .arithmetic(let op, let left, let right):
      guard case .number(let l) = try value(left) else {
        throw fail("Arithmetic applies to numbers; this is \(try value(left).typeName).", left)
      }
      guard case .number(let r) = try value(right) else {
        throw fail("Arithmetic applies to numbers; this is \(try value(right).typeName).", right)
      }
      return .number(arithmetic(op, l, r))
    case .negation(let inner):
      guard case .number(let number) = try value(inner) else {
        throw fail("Only a number can be negated.", inner)
      }
      return .number(negate(number))
    case .spatial(let function, let a, let b):
      guard function == .intersects else {
        throw fail(
          "\(function.rawValue.uppercased()) is not supported: this server implements S_INTERSECTS (Basic Spatial Functions, with every geometry type).",
          node)
      }
      return .bool(try intersects(a, b, at: node))
    case .temporal(let function, let a, let b):
      return .bool(try temporal(function, a, b))
    case .function(let name, _):
      throw fail(
        "The function '\(name)' is not defined here; the functions are CASEI, ACCENTI, S_INTERSECTS and the T_ functions.",
        node)
    }
  }

  func intervalEnd(_ node: CQL2Expression) throws -> Expression<Date>? {
    if case .unbounded = node.node { return nil }
    guard case .instant(let instant) = try value(node) else {
      throw fail("An end of an interval is an instant, '..', or a date property.", node)
    }
    return instant
  }

  func property(_ name: String, _ node: CQL2Expression) throws -> Value {
    if name == "geometry" { return .position }
    guard let property = FilterProperty.byName[name] else {
      throw fail(
        "Unknown property '\(name)'; the trips' queryables are \(TripFilter.queryables.map(\.name).joined(separator: ", ")).",
        node)
    }
    // Each cast holds: `FilterProperty.fields` chose the kind by the field's type.
    if property.isOptional {
      switch property.kind {
      case .string: return .string(readGiven(property, String.self))
      case .number: return .number(readGiven(property, Double.self))
      case .instant: return .instant(readGiven(property, Date.self))
      case .uuid: return .uuid(readGiven(property, UUID.self))
      case .bool: return .bool(readGiven(property, Bool.self))
      }
    }
    switch property.kind {
    case .string: return .string(read(property, String.self))
    case .number: return .number(read(property, Double.self))
    case .instant: return .instant(read(property, Date.self))
    case .uuid: return .uuid(read(property, UUID.self))
    case .bool: return .bool(read(property, Bool.self))
    }
  }

  /// The predicate expression reading the optional `property` (of type `Output?`) of the trip
  /// where it is given: `x!`, with `x != nil` for the condition that reads it
  /// (``condition(_:)``).
  private func readGiven<Output: Equatable & Codable & Sendable>(
    _ property: FilterProperty, _: Output.Type
  ) -> Expression<Output> {
    let path = optionalPath(property, Output.self)
    guards.frames[guards.frames.count - 1].append(
      PredicateExpressions.NotEqual(lhs: path, rhs: PredicateExpressions.Value<Output?>(nil)))
    return PredicateExpressions.ForcedUnwrap(path)
  }

  /// `x == nil` for the optional `property`: `IS NULL`.
  private func isNone(_ property: FilterProperty) -> Expression<Bool> {
    switch property.kind {
    case .string: isNone(property, String.self)
    case .number: isNone(property, Double.self)
    case .instant: isNone(property, Date.self)
    case .uuid: isNone(property, UUID.self)
    case .bool: isNone(property, Bool.self)
    }
  }

  private func isNone<Output: Equatable & Codable & Sendable>(
    _ property: FilterProperty, _: Output.Type
  )
    -> Expression<Bool>
  {
    PredicateExpressions.Equal(
      lhs: optionalPath(property, Output.self), rhs: PredicateExpressions.Value<Output?>(nil))
  }

  private func optionalPath<Output>(_ property: FilterProperty, _: Output.Type)
    -> PredicateExpressions.KeyPath<PredicateExpressions.Variable<Trip>, Output?>
  {
    // As in `read(_:_:)`.
    let keyPath = unsafeBitCast(
      property.keyPath as! KeyPath<Trip, Output?>, to: (KeyPath<Trip, Output?> & Sendable).self)
    return PredicateExpressions.KeyPath(root: variable, keyPath: keyPath)
  }

  /// The predicate expression reading `property` (of type `Output`) of the trip.
  private func read<Output>(_ property: FilterProperty, _: Output.Type) -> Expression<Output> {
    // A key path is an immutable value, and `Sendable` a marker protocol with no
    // representation: the field's key path (a literal `@Model` wrote) is shared as it is.
    let keyPath = unsafeBitCast(
      property.keyPath as! KeyPath<Trip, Output>, to: (KeyPath<Trip, Output> & Sendable).self)
    return PredicateExpressions.KeyPath(root: variable, keyPath: keyPath)
  }

  // MARK: Comparisons

  func compare(
    _ op: CQL2Expression.ComparisonOperator, _ left: CQL2Expression, _ right: CQL2Expression,
    at node: CQL2Expression
  ) throws -> Expression<Bool> {
    let l = try value(left)
    let r = try value(right)
    switch (l, r) {
    case (.string(let a), .string(let b)): return comparison(op, a, b)
    case (.number(let a), .number(let b)): return comparison(op, a, b)
    case (.instant(let a), .instant(let b)): return comparison(op, a, b)
    case (.bool(let a), .bool(let b)):
      guard op == .equal || op == .notEqual else {
        throw fail("Booleans compare with = and <> only.", node)
      }
      return op == .equal ? equal(a, b) : not(equal(a, b))
    case (.uuid(let a), .string), (.string, .uuid(let a)):
      guard op == .equal || op == .notEqual else {
        throw fail("An id compares with =, <> and IN only.", node)
      }
      let literal = if case .string = l { left } else { right }
      guard case .string(let text) = literal.node else {
        throw fail("An id compares with a character literal.", literal)
      }
      // A text that is no UUID is no trip's id: equal to none.
      guard let id = UUID(uuidString: text) else {
        return PredicateExpressions.Value(op == .notEqual)
      }
      let test = equal(a, PredicateExpressions.Value(id) as Expression<UUID>)
      return op == .equal ? test : not(test)
    default:
      throw fail("Cannot compare \(l.typeName) with \(r.typeName).", node)
    }
  }

  func comparison<T: Comparable & Codable & Sendable>(
    _ op: CQL2Expression.ComparisonOperator, _ a: Expression<T>, _ b: Expression<T>
  ) -> Expression<Bool> {
    func open<L: StandardPredicateExpression<T>, R: StandardPredicateExpression<T>>(
      _ l: L, _ r: R
    ) -> Expression<Bool> {
      switch op {
      case .equal: PredicateExpressions.Equal(lhs: l, rhs: r)
      case .notEqual: PredicateExpressions.NotEqual(lhs: l, rhs: r)
      case .less: PredicateExpressions.Comparison(lhs: l, rhs: r, op: .lessThan)
      case .lessOrEqual: PredicateExpressions.Comparison(lhs: l, rhs: r, op: .lessThanOrEqual)
      case .greater: PredicateExpressions.Comparison(lhs: l, rhs: r, op: .greaterThan)
      case .greaterOrEqual:
        PredicateExpressions.Comparison(lhs: l, rhs: r, op: .greaterThanOrEqual)
      }
    }
    return open(a, b)
  }

  func equal<T: Equatable & Codable & Sendable>(_ a: Expression<T>, _ b: Expression<T>)
    -> Expression<Bool>
  {
    func open<L: StandardPredicateExpression<T>, R: StandardPredicateExpression<T>>(
      _ l: L, _ r: R
    ) -> Expression<Bool> { PredicateExpressions.Equal(lhs: l, rhs: r) }
    return open(a, b)
  }

  func and(_ a: Expression<Bool>, _ b: Expression<Bool>) -> Expression<Bool> {
    func open<L: StandardPredicateExpression<Bool>, R: StandardPredicateExpression<Bool>>(
      _ l: L, _ r: R
    ) -> Expression<Bool> { PredicateExpressions.Conjunction(lhs: l, rhs: r) }
    return open(a, b)
  }

  func or(_ a: Expression<Bool>, _ b: Expression<Bool>) -> Expression<Bool> {
    func open<L: StandardPredicateExpression<Bool>, R: StandardPredicateExpression<Bool>>(
      _ l: L, _ r: R
    ) -> Expression<Bool> { PredicateExpressions.Disjunction(lhs: l, rhs: r) }
    return open(a, b)
  }

  /// `terms` joined by `join` as a balanced tree: a chain of n terms is ⌈log₂ n⌉ levels deep
  /// in the predicate, its SQL and its evaluation, never n (the depth of every recursion over
  /// the tree stays small whatever the length a client sends). Terms keep their order.
  func balanced(
    _ terms: [Expression<Bool>], _ join: (Expression<Bool>, Expression<Bool>) -> Expression<Bool>
  ) -> Expression<Bool> {
    func half(_ part: ArraySlice<Expression<Bool>>) -> Expression<Bool> {
      guard part.count > 1 else { return part[part.startIndex] }
      let middle = part.startIndex + part.count / 2
      return join(half(part[..<middle]), half(part[middle...]))
    }
    return half(terms[...])
  }

  /// `subject IN (…)` as one membership test (SQL `IN (?, ?, …)`, one parameter an item) when
  /// the subject is a property or value of a kind a list can hold and every item is a literal
  /// of that kind; nil otherwise (the items are then compared one by one, each checked).
  func literalList(_ subject: CQL2Expression, _ items: [CQL2Expression]) throws
    -> Expression<Bool>?
  {
    func contains<T: Equatable & Codable & Sendable>(_ values: [T], _ element: Expression<T>)
      -> Expression<Bool>
    {
      func open<E: StandardPredicateExpression<T>>(_ e: E) -> Expression<Bool> {
        PredicateExpressions.SequenceContains(
          sequence: PredicateExpressions.Value(values), element: e)
      }
      return open(element)
    }
    switch try value(subject) {
    case .number(let element):
      let numbers = items.compactMap { item -> Double? in
        if case .number(let number) = item.node { number } else { nil }
      }
      return numbers.count == items.count ? contains(numbers, element) : nil
    case .string(let element):
      let texts = items.compactMap { item -> String? in
        if case .string(let text) = item.node { text } else { nil }
      }
      return texts.count == items.count ? contains(texts, element) : nil
    case .instant(let element):
      let instants = items.compactMap { item -> Date? in
        switch item.node {
        case .timestamp(let date): date
        case .date(let day): CQL2Instant.day(day)
        default: nil
        }
      }
      return instants.count == items.count ? contains(instants, element) : nil
    case .uuid(let element):
      var ids: [UUID] = []
      for item in items {
        guard case .string(let text) = item.node else { return nil }
        // A text that is no UUID is no trip's id: it matches none.
        if let id = UUID(uuidString: text) { ids.append(id) }
      }
      return ids.isEmpty ? PredicateExpressions.Value(false) : contains(ids, element)
    default:
      return nil
    }
  }

  func not(_ a: Expression<Bool>) -> Expression<Bool> {
    func open<E: StandardPredicateExpression<Bool>>(_ e: E) -> Expression<Bool> {
      PredicateExpressions.Negation(e)
    }
    return open(a)
  }

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
