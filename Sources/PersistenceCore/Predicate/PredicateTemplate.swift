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

/// The walk of one predicate expression type, learned on its first walk: each node's type
/// and its ``SQLTranslatable`` conformance, and each leaf's type and how its value becomes a
/// parameter, in the order of the walk. Which nodes and leaves a walk meets, and in which
/// order, is fixed by the expression's type (a node's ``SQLTranslatable/shape(_:)`` visits its
/// children unconditionally), so a later walk of the type follows the plan: a comparison of
/// type addresses per node, no conformance lookup and no `Any` box per leaf.
///
/// One plan per expression type the program walks, kept for the life of the process (as
/// ``TypeConformances``' answers): bounded by the program's `#Predicate` closures.
final class ShapePlan: Sendable {
  /// A node of the walk.
  struct Node: Sendable {
    let type: ObjectIdentifier
    let translatable: any SQLTranslatable.Type
  }

  /// A leaf of the walk: its value's type, and what that type is.
  struct Leaf: Sendable {
    let type: ObjectIdentifier
    let facts: TypeConformances.Facts
  }

  let nodes: [Node]
  let leaves: [Leaf]
  /// How many key paths, operators and variables a walk records (its shape's parts).
  let partCount: Int
  /// Whether a walk of this type always fails (a node without a conformance, or one that
  /// calls ``PredicateShapeWalker/fail()``, which its type decides): it is then not walked.
  let fails: Bool
  /// Whether the type has a node Swift must evaluate (``PredicateExpressions/SwiftFunction``):
  /// every query of it is finished in Swift, on every engine.
  let callsSwift: Bool
  /// The template last found or kept for a shape of this type: most code builds one shape
  /// per expression type, so a lookup is then an equality test rather than a hash.
  private let recent = Mutex<(shape: PredicateShape, template: PredicateTemplate)?>(nil)

  private static let table = Mutex<[ObjectIdentifier: ShapePlan]>([:])

  init(nodes: [Node], leaves: [Leaf], partCount: Int, fails: Bool, callsSwift: Bool) {
    self.callsSwift = callsSwift
    self.nodes = nodes
    self.leaves = leaves
    self.partCount = partCount
    self.fails = fails
  }

  /// The template kept for `shape`, a shape of this type: the recent one when it is
  /// `shape`'s, else ``PredicateTemplate/cached(for:)``'s (which becomes the recent one).
  func template(for shape: PredicateShape) -> PredicateTemplate? {
    if let recent = recent.withLock({ $0 }), recent.shape == shape { return recent.template }
    guard let found = PredicateTemplate.cached(for: shape) else { return nil }
    recent.withLock { $0 = (shape, found) }
    return found
  }

  /// Keeps `template` for `shape`, a shape of this type (``PredicateTemplate/keep(_:for:)``),
  /// as the recent one too.
  func keep(_ template: PredicateTemplate, for shape: PredicateShape) {
    PredicateTemplate.keep(template, for: shape)
    recent.withLock { $0 = (shape, template) }
  }

  /// The plan learned for the expression type `type`, if any: a lock and a hash.
  static func plan(for type: ObjectIdentifier) -> ShapePlan? {
    table.withLock { $0[type] }
  }

  /// Keeps `plan` for the expression type `type`.
  static func keep(_ plan: ShapePlan, for type: ObjectIdentifier) {
    table.withLock { $0[type] = plan }
  }
}

/// Collects a predicate's ``PredicateShape`` and its leaves' parameter values in one walk of
/// its tree, in the order the translator meets them (each node's
/// ``SQLTranslatable/shape(_:)``).
///
/// Cost: O(size of the predicate). The first walk of an expression type looks up each node's
/// and leaf's type (``TypeConformances``) and keeps what it found as the type's
/// ``ShapePlan``; every later walk of the type makes one lookup (the plan), then a comparison
/// of type addresses per node, an append per key path, operator and variable, and a
/// conversion per leaf through its type's conformance, with no dynamic cast.
struct PredicateShapeWalker {
  /// The parameter values of the `PredicateExpressions.Value` leaves, in order; a leaf whose
  /// type has no column form holds `NULL` here and clears ``leavesConvertible``.
  private(set) var leaves: [SQLValue] = []
  /// Whether every leaf's value had a column form: otherwise no template can bind them, and
  /// the predicate is translated (which reports the value it cannot bind, if it binds it).
  private(set) var leavesConvertible = true
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
  /// The plan this walk follows, until a node or leaf differs from it (which a type-decided
  /// walk never does; the walk then looks the rest up).
  private var plan: ShapePlan?
  /// The plan of the walked expression's type, found or learned (nil after a deviation).
  private(set) var typePlan: ShapePlan?
  private var nodePosition = 0
  private var leafPosition = 0
  /// What this walk met, when it learns its expression type's plan.
  private var learning: (nodes: [ShapePlan.Node], leaves: [ShapePlan.Leaf])?

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
    let type = ObjectIdentifier(Expression.self)
    if let known = ShapePlan.plan(for: type) {
      if known.fails {
        callsSwift = known.callsSwift
        return nil
      }
      plan = known
      parts.reserveCapacity(known.partCount)
      leaves.reserveCapacity(known.leaves.count)
    } else {
      learning = ([], [])
    }
    visit(expression)
    if let learned = learning {
      let made = ShapePlan(
        nodes: learned.nodes, leaves: learned.leaves, partCount: parts.count, fails: failed,
        callsSwift: callsSwift)
      ShapePlan.keep(made, for: type)
      plan = made
    }
    guard !failed else { return nil }
    typePlan = plan
    return PredicateShape(expression: type, narrowing: narrowing, parts: parts)
  }

  /// Walks a child node (generic, so that no node is boxed in an `Any` and opened again).
  mutating func visit<Node>(_ node: Node) {
    guard !failed else { return }
    let type = ObjectIdentifier(Node.self)
    let translatable: any SQLTranslatable.Type
    if let plan, nodePosition < plan.nodes.count, plan.nodes[nodePosition].type == type {
      translatable = plan.nodes[nodePosition].translatable
    } else {
      plan = nil
      guard let found = TypeConformances.facts(for: Node.self).node else {
        failed = true
        return
      }
      translatable = found
      learning?.nodes.append(ShapePlan.Node(type: type, translatable: found))
    }
    nodePosition += 1
    translatable.shape(unchecked: node, &self)
  }

  /// A leaf's value: a parameter of the shape, converted as the attribute would store it
  /// (``TypeConformances/Facts/sqlValue(unchecked:)``, as the translator converts constants).
  mutating func leaf<Value>(_ value: Value) {
    let type = ObjectIdentifier(Value.self)
    let facts: TypeConformances.Facts
    if let plan, leafPosition < plan.leaves.count, plan.leaves[leafPosition].type == type {
      facts = plan.leaves[leafPosition].facts
    } else {
      plan = nil
      facts = TypeConformances.facts(for: Value.self)
      learning?.leaves.append(ShapePlan.Leaf(type: type, facts: facts))
    }
    leafPosition += 1
    if let converted = facts.sqlValue(unchecked: value) {
      leaves.append(converted)
    } else {
      leavesConvertible = false
      leaves.append(.null)
    }
  }

  /// A key path of the shape: its address, and the object itself only when collected.
  mutating func keyPath(_ address: ObjectIdentifier, object: @autoclosure () -> AnyKeyPath) {
    if collectsKeyPaths { keyPaths.append(object()) }
    parts.append(Int(bitPattern: address))
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

  /// Whether the walk met a node Swift must evaluate (see ``markCallsSwift()``).
  private(set) var callsSwift = false

  /// Marks the predicate as one with a node Swift must evaluate: translated every time, and
  /// finished in Swift on every engine.
  mutating func markCallsSwift() {
    callsSwift = true
    failed = true
  }

  /// The template kept for `shape`, the shape this walk returned.
  func template(for shape: PredicateShape) -> PredicateTemplate? {
    typePlan?.template(for: shape) ?? PredicateTemplate.cached(for: shape)
  }

  /// Keeps `template` for `shape`, the shape this walk returned.
  func keep(_ template: PredicateTemplate, for shape: PredicateShape) {
    if let typePlan {
      typePlan.keep(template, for: shape)
    } else {
      PredicateTemplate.keep(template, for: shape)
    }
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

  /// The parameters' values for a predicate of this shape whose leaves hold `leafValues`
  /// (a ``PredicateShapeWalker``'s), in the order of the condition's `?`s; nil when a
  /// parameter is `NULL` where it was not (or the reverse): that predicate must be
  /// translated. O(parameters).
  func values(leaves leafValues: [SQLValue]) -> [SQLValue]? {
    var bound = values
    for (leaf, isNull) in boundLeaves {
      let value = leafValues[Int(leaf)]
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
  func fragment(leaves leafValues: [SQLValue]) -> SQLFragment? {
    guard let bound = values(leaves: leafValues) else { return nil }
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
