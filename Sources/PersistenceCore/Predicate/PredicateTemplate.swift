import Foundation
import Synchronization

/// What makes two predicates translate to the same SQL text: the expression's type (every
/// node type, with the model), and what the type does not hold: the key paths (by object:
/// a key path literal is one object for the life of the process), the operators of
/// comparisons and arithmetic, and which variable each variable node names. The captured
/// values (`PredicateExpressions.Value` leaves) are not part of it: they are the parameters.
struct PredicateShape: Hashable, Sendable {
  let expression: ObjectIdentifier
  let narrowing: Bool
  /// The key paths' addresses, operators and variables, in the order of the walk (which of
  /// the three each position holds is fixed by the expression's type).
  let parts: [Int]
}

/// Collects a predicate's ``PredicateShape`` and its leaves' values in one walk of its tree,
/// in the order the translator meets them (each node's ``SQLTranslatable/shape(_:)``).
///
/// Cost: O(size of the predicate): a lookup of each node's type (``TypeConformances``) and an
/// append per key path, operator, variable and leaf.
struct PredicateShapeWalker {
  /// The values of the `PredicateExpressions.Value` leaves, in order.
  private(set) var leaves: [Any] = []
  /// The key path objects, in order (kept by a ``PredicateTemplate``), when collected.
  private(set) var keyPaths: [AnyKeyPath] = []
  private let collectsKeyPaths: Bool
  private var parts: [Int] = []
  /// The predicate's own variable (numbered 0), and the variables its closures bind
  /// (numbered from 1 in the order the walk first meets them): no array for the common case
  /// of none.
  private let ownVariable: PredicateExpressions.VariableID
  private var boundVariables: [PredicateExpressions.VariableID] = []
  /// Whether a node cannot be part of a shape (an unsupported node, or one whose SQL depends
  /// on its values anyway): the predicate is then translated every time.
  private var failed = false

  /// A walker for a predicate whose own variable is `variable`; it collects the key path
  /// objects only when asked to (to keep a template: once per shape).
  init(variable: PredicateExpressions.VariableID, collectingKeyPaths: Bool = false) {
    ownVariable = variable
    collectsKeyPaths = collectingKeyPaths
  }

  /// The shape of `expression`, or nil when it has none (see ``fail()``).
  ///
  /// `expression` is the predicate's `any StandardPredicateExpression<Bool>`, opened here, so
  /// that `Expression` is the tree's concrete type.
  mutating func shape<Expression: PredicateExpression>(
    of expression: Expression, narrowing: Bool
  ) -> PredicateShape? {
    visit(expression)
    guard !failed else { return nil }
    return PredicateShape(
      expression: ObjectIdentifier(Expression.self), narrowing: narrowing,
      parts: parts)
  }

  /// Walks a child node (generic, so that no node is boxed in an `Any` and opened again).
  mutating func visit<Node>(_ node: Node) {
    guard !failed else { return }
    guard let translatable = TypeConformances.facts(for: Node.self).node else {
      failed = true
      return
    }
    translatable.shape(unchecked: node, &self)
  }

  /// A leaf's value: a parameter of the shape.
  mutating func leaf(_ value: Any) {
    leaves.append(value)
  }

  /// A key path of the shape.
  mutating func keyPath(_ keyPath: AnyKeyPath) {
    if collectsKeyPaths { keyPaths.append(keyPath) }
    parts.append(Int(bitPattern: ObjectIdentifier(keyPath)))
  }

  /// An operator or other choice of a node that its type does not fix.
  mutating func part(_ value: Int) {
    parts.append(value)
  }

  /// A variable, named or bound: recorded as the order in which the walk first met it (the
  /// identifiers themselves differ between two predicates built by the same code).
  mutating func variable(_ key: PredicateExpressions.VariableID) {
    if key == ownVariable {
      parts.append(0)
    } else if let index = boundVariables.firstIndex(of: key) {
      parts.append(index + 1)
    } else {
      boundVariables.append(key)
      parts.append(boundVariables.count)
    }
  }

  /// Marks the predicate as one that is translated every time.
  mutating func fail() {
    failed = true
  }
}

/// A translated `WHERE` condition kept for the predicates of one ``PredicateShape``: its SQL,
/// and for each parameter the leaf it binds, so that another predicate of the shape gets its
/// condition by converting its own leaves' values, without translating.
///
/// A translation is kept only when its SQL depends on the captured values through nothing
/// but their parameters (``PredicateTranslator/reusable``): nothing folded in Swift, no branch
/// chosen on a constant, no `IN` list. Whether a leaf's value is `NULL` does change the SQL
/// (`IS NULL`, with no parameter, instead of `= ?`; `IS NOT DISTINCT FROM` instead of `=`): a
/// predicate whose leaves differ from the kept one's in that is translated.
///
/// The table holds at most ``capacity`` shapes, which is far more than the predicate code of a
/// program writes (the shapes come from the `#Predicate` closures in its source, not from
/// values); when it is full it is emptied. Cost of a reuse: a lock and a hash of the shape,
/// and a conversion per parameter.
///
/// A class, so that a query built around a template's condition can be kept by the template's
/// identity (``ModelContext``'s kept counts): immutable once made.
final class PredicateTemplate: Sendable {
  /// The most shapes kept.
  static let capacity = 1024

  /// The condition's SQL, with a `?` per parameter.
  let sql: String
  private let values: [SQLValue]
  private let leaves: [Int32]
  /// Every leaf the translation bound, whether or not its parameter stayed in the SQL, and
  /// whether it was `NULL`.
  private let boundLeaves: [(leaf: Int32, isNull: Bool)]
  private let isCondition: Bool
  private let canBeNull: Bool
  private let isUnknown: Bool
  /// Whether the condition is narrowed (a Swift-only function taken as unknown): the rows it
  /// selects must then be checked in Swift.
  let isNarrowed: Bool
  /// The shape's key paths, kept alive so that no other key path object takes one of their
  /// addresses, which the shape holds, while the template is kept. Immutable objects.
  nonisolated(unsafe) private let keyPaths: [AnyKeyPath]

  private static let table = Mutex<[PredicateShape: PredicateTemplate]>([:])
  private static let reuses = Atomic<Int>(0)

  /// Keeps `fragment`, the translation of a predicate with these key paths, which bound these
  /// leaves.
  init(
    _ fragment: SQLFragment, boundLeaves: [(leaf: Int32, isNull: Bool)], keyPaths: [AnyKeyPath]
  ) {
    sql = fragment.sql
    values = fragment.bindings.values
    leaves = fragment.bindings.leaves
    self.boundLeaves = boundLeaves
    isCondition = fragment.isCondition
    canBeNull = fragment.canBeNull
    isUnknown = fragment.isUnknown
    isNarrowed = fragment.isNarrowed
    self.keyPaths = keyPaths
  }

  /// The template kept for `shape`, if any.
  static func cached(for shape: PredicateShape) -> PredicateTemplate? {
    table.withLock { $0[shape] }
  }

  /// Keeps `template` for `shape`.
  static func keep(_ template: PredicateTemplate, for shape: PredicateShape) {
    table.withLock { table in
      if table.count >= capacity { table.removeAll(keepingCapacity: true) }
      table[shape] = template
    }
  }

  /// How many conditions were made from a template so far (for tests).
  static var reuseCount: Int { reuses.load(ordering: .relaxed) }

  /// The parameters' values for a predicate of this shape whose leaves hold `leafValues`, in
  /// the order of the condition's `?`s; nil when a parameter is `NULL` where it was not (or
  /// the reverse): that predicate must be translated. O(parameters).
  func values(leaves leafValues: [Any]) throws -> [SQLValue]? {
    var bound = values
    for (leaf, isNull) in boundLeaves {
      let value = try PredicateTranslator.sqlValue(of: leafValues[Int(leaf)])
      guard (value == .null) == isNull else { return nil }
      // Its parameters (none when it became `IS NULL`, two when its SQL is repeated).
      for index in leaves.indices where leaves[index] == leaf { bound[index] = value }
    }
    Self.reuses.add(1, ordering: .relaxed)
    return bound
  }

  /// The condition for a predicate of this shape whose leaves hold `leafValues`, or nil when
  /// a parameter is `NULL` where it was not (or the reverse): that predicate must be
  /// translated.
  func fragment(leaves leafValues: [Any]) throws -> SQLFragment? {
    guard let bound = try values(leaves: leafValues) else { return nil }
    return condition(values: bound)
  }

  /// The condition with `bound`, values from ``values(leaves:)``.
  func condition(values bound: [SQLValue]) -> SQLFragment {
    var fragment = SQLFragment(
      sql, FragmentBindings(bound, leaves: leaves), isCondition: isCondition,
      canBeNull: canBeNull)
    fragment.isUnknown = isUnknown
    fragment.isNarrowed = isNarrowed
    return fragment
  }
}
