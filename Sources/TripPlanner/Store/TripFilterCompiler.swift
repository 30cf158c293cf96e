import CQL2
import Foundation
import Geo
import Persistence

/// Compiles a CQL2 tree to predicate expressions on one trip variable.
struct TripFilterCompiler {
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

}
