import SwiftSyntax
import SwiftSyntaxMacros

/// `@_PersistedProperty`, which `@Model` puts on each persisted property: the property becomes
/// accessors over backing storage `_name` (declared beside it, with the property's type and
/// initial value): an `init` accessor, so that the class's own initializers assign it as a
/// stored property; a getter that records the read for observers; a setter that tells them of
/// a change (not of an equal value assigned, as `@Observable`'s).
/// The store reads and writes `_name` itself, without observation.
public struct PersistedPropertyMacro {}

extension PersistedPropertyMacro: AccessorMacro {
  public static func expansion(
    of node: AttributeSyntax, providingAccessorsOf declaration: some DeclSyntaxProtocol,
    in context: some MacroExpansionContext
  ) throws -> [AccessorDeclSyntax] {
    guard let variable = declaration.as(VariableDeclSyntax.self),
      let property = StoredProperty(variable)
    else { return [] }
    let name = property.name
    switch property.relationship {
    case .toOne where property.isLinkedOnFirstUse:
      // The side of a one-to-one that names its inverse: its link made on first use.
      return [
        "get { _$link_\(raw: name).value(of: self) }",
        "set { _$link_\(raw: name).set(newValue, of: self) }",
      ]
    case .toOne:
      // The side that stores the key: an eager link, its key loaded with the row.
      return [
        "get { _\(raw: name).value(of: self) }",
        "set { _\(raw: name).set(newValue, of: self) }",
      ]
    case .toMany:
      // Its link made on first use (`LinksOnFirstUse`). It starts empty (`= []`, which the
      // model's check requires): the initial value is not kept.
      return [
        """
        @storageRestrictions(accesses: _\(raw: name))
        init(initialValue) {
        }
        """,
        "get { _$link_\(raw: name).value(of: self) }",
        "set { _$link_\(raw: name).set(newValue, of: self) }",
      ]
    case nil: break
    }
    if property.isUndeclaredOptional {
      // A to-one or an attribute, as the compiler finds `X` to be (`_OptionalProperty`).
      return [
        """
        get {
          PersistenceCore._OptionalProperty.get(self, _\(raw: name), \\.\(raw: name), _$observationRegistrar)
        }
        """,
        """
        set {
          PersistenceCore._OptionalProperty.set(
            self, \\._\(raw: name), newValue, \\.\(raw: name), _$observationRegistrar)
        }
        """,
      ]
    }
    if case .fault = property.storage {
      // An optional `.codable` value behind a fault: rows load its bytes, decoded on first read.
      return [
        """
        @storageRestrictions(initializes: _\(raw: name))
        init(initialValue) {
          _\(raw: name) = PersistenceCore.CodableFault(initialValue)
        }
        """,
        """
        get {
          _$observationRegistrar.access(self, keyPath: \\.\(raw: name))
          return _\(raw: name).value
        }
        """,
        """
        set {
          guard _$observationRegistrar.shouldNotify(_\(raw: name).value, newValue) else {
            _\(raw: name).value = newValue
            return
          }
          _$observationRegistrar.withMutation(of: self, keyPath: \\.\(raw: name)) {
            _\(raw: name).value = newValue
          }
        }
        """,
      ]
    }
    return [
      """
      @storageRestrictions(initializes: _\(raw: name))
      init(initialValue) {
        _\(raw: name) = initialValue
      }
      """,
      """
      get {
        _$observationRegistrar.access(self, keyPath: \\.\(raw: name))
        return _\(raw: name)
      }
      """,
      """
      set {
        guard _$observationRegistrar.shouldNotify(_\(raw: name), newValue) else {
          _\(raw: name) = newValue
          return
        }
        _$observationRegistrar.withMutation(of: self, keyPath: \\.\(raw: name)) {
          _\(raw: name) = newValue
        }
      }
      """,
    ]
  }
}

extension PersistedPropertyMacro: PeerMacro {
  public static func expansion(
    of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
    in context: some MacroExpansionContext
  ) throws -> [DeclSyntax] {
    guard let variable = declaration.as(VariableDeclSyntax.self),
      let property = StoredProperty(variable)
    else { return [] }
    switch property.relationship {
    case .toOne(let target) where property.isLinkedOnFirstUse:
      return [
        "@exclusivity(unchecked) private var _\(raw: property.name): PersistenceCore.ToOne<\(target)>? = nil",
        link(property.name, "ToOne<\(target)>"),
      ]
    case .toOne(let target):
      return ["private let _\(raw: property.name) = PersistenceCore.ToOne<\(target)>()"]
    case .toMany(let target):
      return [
        "@exclusivity(unchecked) private var _\(raw: property.name): PersistenceCore.ToMany<\(target)>? = nil",
        link(property.name, "ToMany<\(target)>"),
      ]
    case nil: break
    }
    if property.isUndeclaredOptional, let wrapped = property.wrappedType {
      return [
        "private var _\(raw: property.name) = PersistenceCore._OptionalProperty.storage(\(wrapped).self)"
      ]
    }
    if case .fault(let wrapped) = property.storage {
      let initial = property.initializer.map { " = PersistenceCore.CodableFault(\($0))" } ?? ""
      return [
        "private var _\(raw: property.name): PersistenceCore.CodableFault<\(wrapped)>\(raw: initial)"
      ]
    }
    let type = property.type.map { ": \($0)" } ?? ""
    let initial = property.initializer.map { " = \($0)" } ?? ""
    var peers: [DeclSyntax] = ["private var _\(raw: property.name)\(raw: type)\(raw: initial)"]
    if case .native = property.storage {
      // A type the store does not keep is an error here, at the property, saying what to do
      // (`_persistableAttribute`'s unavailable overload), besides the schema's at the class.
      peers.append(
        """
        /// Checks at compile time that the store keeps `\(raw: property.name)`'s type (written by `@Model`).
        private func _$check_\(raw: property.name)() { PersistenceCore._persistableAttribute(_\(raw: property.name)) }
        """)
    }
    return peers
  }
}

/// `@Transient`, `@Attribute` and `@Relationship`: marks that `@Model` reads from the
/// properties they are on; they expand to nothing themselves.
public struct MarkerMacro: PeerMacro {
  public static func expansion(
    of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
    in context: some MacroExpansionContext
  ) throws -> [DeclSyntax] {
    []
  }
}

/// `#Unique` and `#Index`: declarations `@Model` reads from the class's body; they expand to
/// nothing themselves.
public struct SchemaDeclarationMacro: DeclarationMacro {
  public static func expansion(
    of node: some FreestandingMacroExpansionSyntax, in context: some MacroExpansionContext
  ) throws -> [DeclSyntax] {
    []
  }
}

/// The link of the relationship `name` (a `linkType` of PersistenceCore), made on first use.
private func link(_ name: String, _ linkType: String) -> DeclSyntax {
  """
  /// The link of `\(raw: name)`, made on first use (written by `@Model`).
  private var _$link_\(raw: name): PersistenceCore.\(raw: linkType) {
    link(&_\(raw: name))
  }
  """
}
