import Foundation
import Synchronization

extension PredicateExpressions {
  /// A function of one value that SQL cannot run (a case fold, a pattern match of a query
  /// language, a geometric test): the query is narrowed in SQL and finished in Swift.
  ///
  /// A predicate using it translates to SQL that keeps every row the rest of the predicate
  /// does not rule out, and `Predicate.evaluate` decides each of those rows (as for a Swift-only
  /// function on an engine that cannot call Swift: ``StoreFunctions``); the limit and offset
  /// then apply in Swift. Where the argument does not depend on the row, the call is folded in
  /// Swift and bound as a value. Cost of a query using it: O(rows the rest of the predicate
  /// keeps) models read and evaluated; combine it with indexable conditions (a range of an
  /// indexed attribute) to keep that set small.
  public struct SwiftFunction<Argument: PredicateExpression, Output>: PredicateExpression,
    Sendable
  where Argument: Sendable {
    /// A name for the function (in descriptions of the predicate).
    public let name: String
    /// The argument.
    public let argument: Argument
    /// The function.
    public let function: @Sendable (Argument.Output) throws -> Output
    /// The function as a store can call it from SQL, when its argument and result have a
    /// column form.
    let handle: SwiftFunctionHandle?

    /// Creates a call of `function`, named `name`, on `argument`.
    public init(
      _ name: String, _ argument: Argument,
      _ function: @escaping @Sendable (Argument.Output) throws -> Output
    ) {
      self.name = name
      self.argument = argument
      self.function = function
      handle = SwiftFunctionHandle.make([Argument.Output.self, Output.self]) { values in
        // SAFETY: the value is made from Argument.Output's column form.
        try function(values[0] as! Argument.Output)
      }
    }

    /// Evaluates the argument, then the function.
    public func evaluate(_ bindings: PredicateBindings) throws -> Output {
      try function(try argument.evaluate(bindings))
    }
  }

  /// A function of two values that SQL cannot run: as ``SwiftFunction``, with two arguments.
  public struct SwiftFunction2<First: PredicateExpression, Second: PredicateExpression, Output>:
    PredicateExpression, Sendable
  where First: Sendable, Second: Sendable {
    /// A name for the function (in descriptions of the predicate).
    public let name: String
    /// The first argument.
    public let first: First
    /// The second argument.
    public let second: Second
    /// The function.
    public let function: @Sendable (First.Output, Second.Output) throws -> Output
    /// The function as a store can call it from SQL, when its arguments and result have a
    /// column form.
    let handle: SwiftFunctionHandle?

    /// Creates a call of `function`, named `name`, on `first` and `second`.
    public init(
      _ name: String, _ first: First, _ second: Second,
      _ function: @escaping @Sendable (First.Output, Second.Output) throws -> Output
    ) {
      self.name = name
      self.first = first
      self.second = second
      self.function = function
      handle = SwiftFunctionHandle.make([First.Output.self, Second.Output.self, Output.self]) {
        values in
        // SAFETY: each value is made from its argument type's column form.
        try function(values[0] as! First.Output, values[1] as! Second.Output)
      }
    }

    /// Evaluates the arguments in order, then the function.
    public func evaluate(_ bindings: PredicateBindings) throws -> Output {
      try function(try first.evaluate(bindings), try second.evaluate(bindings))
    }
  }
}

/// A function cannot be encoded: a predicate holding one is not `Codable` in fact, though
/// `StandardPredicateExpression` requires the conformance.
private func refuseCoding(_ name: String) -> EncodingError {
  EncodingError.invalidValue(
    name,
    EncodingError.Context(
      codingPath: [],
      debugDescription: "The Swift function '\(name)' of a predicate cannot be encoded."))
}

extension PredicateExpressions.SwiftFunction: Codable {
  /// Throws: a function cannot be encoded.
  public func encode(to encoder: any Encoder) throws { throw refuseCoding(name) }

  /// Throws: a function cannot be decoded.
  public init(from decoder: any Decoder) throws {
    throw DecodingError.dataCorrupted(
      DecodingError.Context(
        codingPath: decoder.codingPath, debugDescription: "A Swift function cannot be decoded."))
  }
}

extension PredicateExpressions.SwiftFunction2: Codable {
  /// Throws: a function cannot be encoded.
  public func encode(to encoder: any Encoder) throws { throw refuseCoding(name) }

  /// Throws: a function cannot be decoded.
  public init(from decoder: any Decoder) throws {
    throw DecodingError.dataCorrupted(
      DecodingError.Context(
        codingPath: decoder.codingPath, debugDescription: "A Swift function cannot be decoded."))
  }
}

extension PredicateExpressions.SwiftFunction: StandardPredicateExpression
where Argument: StandardPredicateExpression {}

extension PredicateExpressions.SwiftFunction2: StandardPredicateExpression
where First: StandardPredicateExpression, Second: StandardPredicateExpression {}

extension PredicateExpressions.SwiftFunction: SQLTranslatable {
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let argument = try translator.translate(self.argument)
    if argument.isConstant { return try translator.fold(self) }
    return try translator.call(handle, [argument], isCondition: Output.self == Bool.self)
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    // The handle is in no template (another predicate has another); whether there is one is
    // decided by the node's type, as a shape plan is.
    if SwiftFunctionHandle.canCall(Argument.Output.self, Output.self) {
      walker.fail()
    } else {
      walker.markCallsSwift()
    }
  }
}

extension PredicateExpressions.SwiftFunction2: SQLTranslatable {
  func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
    let first = try translator.translate(self.first)
    let second = try translator.translate(self.second)
    if first.isConstant && second.isConstant { return try translator.fold(self) }
    return try translator.call(handle, [first, second], isCondition: Output.self == Bool.self)
  }

  func shape(_ walker: inout PredicateShapeWalker) {
    if SwiftFunctionHandle.canCall(First.Output.self, Second.Output.self, Output.self) {
      walker.fail()
    } else {
      walker.markCallsSwift()
    }
  }
}

extension PredicateTranslator {
  /// A call of a Swift function in SQL (`swift_call(handle, arguments…)`, see
  /// ``StoreFunctions/call``) on an engine that runs Swift's functions, or an unknown that
  /// Swift decides (no handle: a value without a column form; or an engine that cannot).
  mutating func call(
    _ handle: SwiftFunctionHandle?, _ arguments: [TranslatedExpression], isCondition: Bool
  ) throws -> TranslatedExpression {
    guard let handle, !narrows else { return evaluatedInSwift(isCondition: isCondition) }
    if arguments.contains(where: \.isUnknown) { return .sql(.unknown(isCondition: isCondition)) }
    reusable = false
    var bindings = FragmentBindings(.integer(handle.id), leaf: -1)
    var sql = StoreFunctions.call + "(?"
    for argument in arguments {
      let operand = try self.operand(argument)
      sql += ", " + operand.sql
      bindings += operand.bindings
    }
    sql += ")"
    if isCondition {
      return .sql(SQLFragment("(" + sql + " = 1)", bindings, isCondition: true, canBeNull: true))
    }
    return .sql(SQLFragment(sql, bindings, canBeNull: true))
  }

  /// An unknown for a call Swift must decide: the condition is narrowed on every engine, and
  /// no template is kept (the function is not part of the predicate's shape).
  mutating func evaluatedInSwift(isCondition: Bool) -> TranslatedExpression {
    narrowed = true
    reusable = false
    return .sql(.unknown(isCondition: isCondition))
  }
}

/// A Swift function of a predicate registered for SQL to call by number, for as long as a
/// predicate holding it lives (``StoreFunctions/call``): made when the node is, when its
/// arguments and result have a column form (``PersistableValue``), and unregistered when the
/// last copy of the node goes.
final class SwiftFunctionHandle: Sendable {
  let id: Int64

  private static let registry = Mutex<(next: Int64, bodies: [Int64: Body])>((1, [:]))
  typealias Body = @Sendable ([SQLValue]) throws -> SQLValue

  private init(_ body: @escaping Body) {
    id = Self.registry.withLock { registry in
      let id = registry.next
      registry.next += 1
      registry.bodies[id] = body
      return id
    }
  }

  deinit {
    let id = self.id
    _ = Self.registry.withLock { $0.bodies.removeValue(forKey: id) }
  }

  /// Whether a function of these types can be called from SQL.
  static func canCall(_ types: any Any.Type...) -> Bool {
    types.allSatisfy { $0 is any PersistableValue.Type }
  }

  /// A handle for a function of arguments of `types` (the last of `types` is its result's),
  /// or nil when one of them has no column form.
  static func make(
    _ all: [any Any.Type], _ function: @escaping @Sendable ([Any]) throws -> Any
  ) -> SwiftFunctionHandle? {
    let columns = all.compactMap { $0 as? any PersistableValue.Type }
    guard columns.count == all.count, !columns.isEmpty else { return nil }
    let inputs = Array(columns.dropLast())
    return SwiftFunctionHandle { values in
      guard values.count == inputs.count else {
        throw PersistenceError(
          code: .invalidValue,
          message:
            "A Swift function of a predicate takes \(inputs.count) values, not \(values.count).")
      }
      var arguments: [Any] = []
      arguments.reserveCapacity(values.count)
      for (type, value) in zip(inputs, values) {
        do {
          arguments.append(try type.init(sqlValue: value))
        } catch  where value == .null {
          // SQL's unknown (a NULL column, or a NaN an inner call gave, which SQLite stores
          // as NULL) given where the function takes no optional: unknown, as SQL's own
          // functions answer NULL for NULL; the row then does not match, never an error.
          return .null
        }
      }
      let result = try function(arguments)
      guard let column = result as? any PersistableValue else {
        throw PersistenceError(
          code: .invalidValue, message: "A Swift function of a predicate gave \(type(of: result)).")
      }
      return column.sqlValue
    }
  }

  /// Calls the function registered as `id`.
  static func call(_ id: Int64, _ arguments: [SQLValue]) throws -> SQLValue {
    guard let body = registry.withLock({ $0.bodies[id] }) else {
      throw PersistenceError(
        code: .invalidValue, message: "No Swift function of a predicate is registered as \(id).")
    }
    return try body(arguments)
  }
}

extension StoreFunctions {
  /// `swift_call(handle, value…)`: the Swift function of a predicate registered as `handle`
  /// (`PredicateExpressions.SwiftFunction`, `PredicateExpressions.SwiftFunction2`) on the
  /// values, its result in its column form. An engine that runs Swift's functions registers it
  /// and answers with ``callSwiftFunction(_:_:)``.
  public static let call = "swift_call"

  /// Calls the Swift function of a predicate registered as `handle` on `arguments` (in the
  /// column forms of its argument types): what `swift_call` answers. Throws when none is
  /// registered as `handle` or a value is not of the function's type.
  public static func callSwiftFunction(_ handle: Int64, _ arguments: [SQLValue]) throws
    -> SQLValue
  {
    try SwiftFunctionHandle.call(handle, arguments)
  }
}
