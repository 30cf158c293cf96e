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
    let keyPath = Build.keyPath(property.identifier)
    switch property.relationship {
    case .toOne where property.isLinkedOnFirstUse:
      // The side of a one-to-one that names its inverse: its link made on first use.
      return [
        "get { \(property.link).value(of: self) }",
        "set { \(property.link).set(newValue, of: self) }",
      ]
    case .toOne:
      // The side that stores the key: an eager link, its key loaded with the row.
      return [
        "get { \(property.backing).value(of: self) }",
        "set { \(property.backing).set(newValue, of: self) }",
      ]
    case .toMany:
      // Its link made on first use (`LinksOnFirstUse`). It starts empty (`= []`, which the
      // model's check requires): a non-empty value set before the model's other stored
      // properties could not be kept (its inverse needs the model whole), so it traps, saying so.
      return [
        """
        @storageRestrictions(accesses: \(property.backing))
        init(initialValue) {
          PersistenceCore._ArrayProperty.checkStartsEmpty(initialValue, \(literal: property.name))
        }
        """,
        "get { \(property.link).value(of: self) }",
        "set { \(property.link).set(newValue, of: self) }",
      ]
    case nil: break
    }
    // What a fetch with `propertiesToFetch` left is loaded on the first read or write of it.
    let load: ExprSyntax = """
      if _$linkOrigin.hasPropertiesToLoad {
        PersistenceCore.LinkOrigin.loadProperties(of: self, \(keyPath))
      }
      """
    if property.isUndeclaredArray, let type = property.type {
      // A to-many or an attribute, as the compiler finds `X` to be (`_ArrayProperty`).
      return [
        """
        @storageRestrictions(initializes: \(property.backing))
        init(initialValue) {
          \(property.backing) = PersistenceCore._ArrayProperty.storage(\(type).self, initialValue)
        }
        """,
        """
        get {
          \(load)
          return PersistenceCore._ArrayProperty.get(self, \(Build.keyPath(property.backing)), \(keyPath), _$observationRegistrar)
        }
        """,
        """
        set {
          \(load)
          PersistenceCore._ArrayProperty.set(
            self, \(Build.keyPath(property.backing)), newValue, \(keyPath), _$observationRegistrar)
        }
        """,
      ]
    }
    if property.isUndeclaredOptional {
      // A to-one or an attribute, as the compiler finds `X` to be (`_OptionalProperty`).
      return [
        """
        get {
          \(load)
          return PersistenceCore._OptionalProperty.get(self, \(property.backing), \(keyPath), _$observationRegistrar)
        }
        """,
        """
        set {
          \(load)
          PersistenceCore._OptionalProperty.set(
            self, \(Build.keyPath(property.backing)), newValue, \(keyPath), _$observationRegistrar)
        }
        """,
      ]
    }
    if case .fault = property.storage {
      // An optional `.codable` value behind a fault: rows load its bytes, decoded on first read.
      return [
        """
        @storageRestrictions(initializes: \(property.backing))
        init(initialValue) {
          \(property.backing) = PersistenceCore.CodableFault(initialValue)
        }
        """,
        """
        get {
          \(load)
          _$observationRegistrar.access(self, keyPath: \(keyPath))
          return \(property.backing).value
        }
        """,
        """
        set {
          \(load)
          guard _$observationRegistrar.shouldNotify(\(property.backing).value, newValue) else {
            \(property.backing).value = newValue
            return
          }
          _$observationRegistrar.withMutation(of: self, keyPath: \(keyPath)) {
            \(property.backing).value = newValue
          }
        }
        """,
      ]
    }
    return [
      """
      @storageRestrictions(initializes: \(property.backing))
      init(initialValue) {
        \(property.backing) = initialValue
      }
      """,
      """
      get {
        \(load)
        _$observationRegistrar.access(self, keyPath: \(keyPath))
        return \(property.backing)
      }
      """,
      """
      set {
        \(load)
        guard _$observationRegistrar.shouldNotify(\(property.backing), newValue) else {
          \(property.backing) = newValue
          return
        }
        _$observationRegistrar.withMutation(of: self, keyPath: \(keyPath)) {
          \(property.backing) = newValue
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
    let backing = property.backing
    switch property.relationship {
    case .toOne(let target) where property.isLinkedOnFirstUse:
      let link: TypeSyntax = "PersistenceCore.ToOne<\(target)>"
      return [
        "@exclusivity(unchecked) private var \(backing): \(link)? = nil",
        firstUseLink(of: property, link),
      ]
    case .toOne(let target):
      return ["private let \(backing) = PersistenceCore.ToOne<\(target)>()"]
    case .toMany(let target):
      let link: TypeSyntax = "PersistenceCore.ToMany<\(target)>"
      return [
        "@exclusivity(unchecked) private var \(backing): \(link)? = nil",
        firstUseLink(of: property, link),
      ]
    case nil: break
    }
    if property.isUndeclaredArray, let type = property.type, let initial = property.initializer {
      return [
        "private var \(backing) = PersistenceCore._ArrayProperty.storage(\(type).self, \(initial))"
      ]
    }
    if property.isUndeclaredOptional, let wrapped = property.wrappedType {
      return ["private var \(backing) = PersistenceCore._OptionalProperty.storage(\(wrapped).self)"]
    }
    if case .fault(let wrapped) = property.storage {
      let type: TypeSyntax = "PersistenceCore.CodableFault<\(wrapped)>"
      guard let initial = property.initializer else { return ["private var \(backing): \(type)"] }
      return ["private var \(backing): \(type) = PersistenceCore.CodableFault(\(initial))"]
    }
    // The backing storage has the property's type and initial value, as declared.
    let binding = PatternBindingSyntax(
      pattern: IdentifierPatternSyntax(identifier: backing),
      typeAnnotation: property.type.map { TypeAnnotationSyntax(type: $0) },
      initializer: property.initializer.map { InitializerClauseSyntax(value: $0) })
    var peers: [DeclSyntax] = ["private var \(binding)"]
    if case .native = property.storage {
      // A type the store does not keep is an error here, at the property, saying what to do
      // (`_persistableAttribute`'s unavailable overload), besides the schema's at the class.
      let check: DeclSyntax = """
        private func \(TokenSyntax.identifier("_$check_" + property.name))() { PersistenceCore._persistableAttribute(\(backing)) }
        """
      peers.append(
        Build.documented(
          check,
          [
            "Checks at compile time that the store keeps `\(property.name)`'s type (written by `@Model`)."
          ]))
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

/// The link of a relationship made on first use, `_$link_name` (a `link` of PersistenceCore).
private func firstUseLink(of property: StoredProperty, _ link: TypeSyntax) -> DeclSyntax {
  Build.documented(
    """
    private var \(property.link): \(link) {
      link(&\(property.backing))
    }
    """,
    ["The link of `\(property.name)`, made on first use (written by `@Model`)."])
}
