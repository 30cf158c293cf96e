import Synchronization

/// What the predicate translator needs to know of a type that only the runtime can tell it:
/// whether a node of a predicate's tree can become SQL, whether a constant is an optional and
/// whether it has a column form. Each is a dynamic cast to an existential (`as? any P`), which
/// costs a conformance lookup of about 2,000 instructions every time; a translation makes
/// several per node, and a predicate is translated on every fetch, count and page.
///
/// The answers are looked up once per type and kept for the life of the process: a type's
/// conformances never change while it runs. The table holds one entry per type ever
/// translated, which is bounded by the program's predicate and constant types, not by the
/// number of predicates. Cost: a lock and a hash of the type's address per question; a value of
/// the type is then read through its conformance as that very type (`unchecked`: the caller
/// passes it as the type it asked about), with no cast.
enum TypeConformances {
  /// What is known of one type.
  struct Facts: Sendable {
    /// The type as a predicate node that translates itself, if it is one.
    var node: (any SQLTranslatable.Type)?
    /// The type as an `Optional`, if it is one.
    var optional: (any OptionalValue.Type)?
    /// The type as a value with a column form, if it is one.
    var persistable: (any PersistableValue.Type)?

    /// The type as a `RawRepresentable` whose raw value has a column form (an enum
    /// attribute's), if it is one.
    var rawRepresentable: (any (RawRepresentable & SendableMetatype).Type)?

    /// The column form of `value`, a value of this very type, as the attribute would store
    /// it: `NULL` for `nil`, the raw value's for a `RawRepresentable` (an optional of one
    /// unwrapped first), nil when the type has no column form. The one rule for the
    /// translator's constants and the shape walk's leaves; no box and no dynamic cast for a
    /// ``PersistableValue``.
    func sqlValue<Value>(unchecked value: Value) -> SQLValue? {
      if let optional, optional.isNone(unchecked: value) { return .null }
      if let persistable { return persistable.sqlValue(unchecked: value) }
      if let rawRepresentable { return rawRepresentable.rawSQLValue(unchecked: value) }
      if let optional { return optional.wrappedSQLValue(unchecked: value) }
      return nil
    }
  }

  private static let table = Mutex<[ObjectIdentifier: Facts]>([:])

  /// What is known of `type`: O(1) after the first question about it.
  static func facts(for type: any Any.Type) -> Facts {
    let key = ObjectIdentifier(type)
    if let known = table.withLock({ $0[key] }) { return known }
    let found = Facts(
      node: type as? any SQLTranslatable.Type,
      optional: type as? any OptionalValue.Type,
      persistable: type as? any PersistableValue.Type,
      rawRepresentable: type as? any (RawRepresentable & SendableMetatype).Type)
    table.withLock { $0[key] = found }
    return found
  }
}

extension SQLTranslatable {
  /// Translates `node`, a value of this very type in an `Any` (see ``TypeConformances``).
  static func translate(
    opening node: Any, _ translator: inout PredicateTranslator
  ) throws -> TranslatedExpression {
    try (node as! Self).translate(&translator)
  }
}

extension SQLTranslatable {
  /// Walks `node`, a value of this very type (`Node == Self`, which the caller checked by
  /// looking up `Node`'s facts), for its shape: no existential box and no dynamic cast.
  static func shape<Node>(unchecked node: Node, _ walker: inout PredicateShapeWalker) {
    assert(Node.self == Self.self)
    withUnsafePointer(to: node) { pointer in
      UnsafeRawPointer(pointer).assumingMemoryBound(to: Self.self).pointee.shape(&walker)
    }
  }
}

extension OptionalValue {
  /// Whether `value`, a value of this very type (`Value == Self`, which the caller checked by
  /// looking up `Value`'s facts), is `nil`: no box and no dynamic cast.
  static func isNone<Value>(unchecked value: Value) -> Bool {
    assert(Value.self == Self.self)
    return withUnsafePointer(to: value) { pointer in
      UnsafeRawPointer(pointer).assumingMemoryBound(to: Self.self).pointee.isNone
    }
  }
}

extension PersistableValue {
  /// The column form of `value`, a value of this very type (`Value == Self`, which the caller
  /// checked by looking up `Value`'s facts): no box and no dynamic cast.
  static func sqlValue<Value>(unchecked value: Value) -> SQLValue {
    assert(Value.self == Self.self)
    return withUnsafePointer(to: value) { pointer in
      UnsafeRawPointer(pointer).assumingMemoryBound(to: Self.self).pointee.sqlValue
    }
  }
}

extension RawRepresentable {
  /// The column form of `value`, a value of this very type (as for ``PersistableValue``'s):
  /// its raw value's, nil when the raw value has none.
  static func rawSQLValue<Value>(unchecked value: Value) -> SQLValue? {
    assert(Value.self == Self.self)
    let raw = withUnsafePointer(to: value) { pointer in
      UnsafeRawPointer(pointer).assumingMemoryBound(to: Self.self).pointee.rawValue
    }
    return TypeConformances.facts(for: RawValue.self).sqlValue(unchecked: raw)
  }
}

extension Optional {
  /// The column form of `value`, a non-nil value of this very type whose wrapped type is not a
  /// ``PersistableValue`` (an optional enum): the wrapped value's.
  static func wrappedSQLValue<Value>(unchecked value: Value) -> SQLValue? {
    assert(Value.self == Self.self)
    let wrapped = withUnsafePointer(to: value) { pointer in
      UnsafeRawPointer(pointer).assumingMemoryBound(to: Self.self).pointee
    }
    guard let wrapped else { return .null }
    return TypeConformances.facts(for: Wrapped.self).sqlValue(unchecked: wrapped)
  }
}
