import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// `@Model`: a final class becomes a `PersistentModel` whose stored variables are its
/// attributes, as SwiftData's macro makes them.
///
/// It writes what a hand-written model says (see `ModelSchema`): the schema, a table named as
/// the class with a column per persisted property named as the property; a row loader that
/// makes a model from a row through its backing storage (no key-path call, no observation) and
/// a binder that binds it the same way; `init()`, which the store uses for the values of a
/// column added to an existing table (each property's initial value, else the type's empty
/// value), unless the class declares one; an observation registrar made when a property is
/// first read or changed through its accessors. Each persisted property gets
/// `@_PersistedProperty`, which turns it into accessors over backing storage `_name`.
///
/// Cost of the expansion: O(members).
public struct ModelMacro {}

extension ModelMacro: MemberMacro {
  public static func expansion(
    of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax,
    conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
  ) throws -> [DeclSyntax] {
    // The extension role reports what is refused: the compiler expands it for every
    // declaration, where it expands this role only when a member is looked up.
    var diagnostics: [Diagnostic] = []
    guard let model = ModelDeclaration(declaration, attribute: node, diagnostics: &diagnostics)
    else { return [] }
    let name = model.name
    let access = model.access
    let persisted = model.properties.filter { !$0.isTransient }
    var members: [DeclSyntax] = []
    members.append(
      """
      /// Tells observers of this model's properties (a registrar made on first use).
      private let _$observationRegistrar = PersistenceCore.ModelObservationRegistrar()
      """)
    let attributes = persisted.map { property in
      "    .attribute(\\.\(property.name), \(literal(property.name)), storage: \\._\(property.name))"
    }
    let loads = persisted.map { "    self._\($0.name) = try row.next(\\.\($0.name))" }
    let binds = persisted.map { "    try row.bind(\\.\($0.name), model._\($0.name))" }
    members.append(
      """
      /// The table \(raw: literal(name)), a column per persisted property (written by `@Model`).
      \(raw: access)static let schema = PersistenceCore.ModelSchema<\(raw: name)>(
        \(raw: literal(name))\(raw: attributes.isEmpty ? "" : ",\n" + attributes.joined(separator: ",\n"))
      )
      .loading { row in try \(raw: name)(_$persistenceLoading: &row) }
      .saving { \(raw: binds.isEmpty ? "_, _ in" : "model, row in")
      \(raw: binds.joined(separator: "\n"))
      }
      """)
    members.append(
      """
      /// A model made from a row, through the backing storage (written by `@Model`).
      private init(_$persistenceLoading row: inout PersistenceCore.ModelRow<\(raw: name)>) throws {
      \(raw: loads.joined(separator: "\n"))
      }
      """)
    if !model.declaresEmptyInitializer {
      let defaults = persisted.filter { $0.initializer == nil }.map { property in
        "  self._\(property.name) = PersistenceCore.ModelDefaults.value()"
      }
      members.append(
        """
        /// A model with each property's initial value, or its type's empty value: what a column
        /// added to an existing table is filled with (written by `@Model`).
        \(raw: access)init() {
        \(raw: defaults.joined(separator: "\n"))
        }
        """)
    }
    return members
  }
}

extension ModelMacro: MemberAttributeMacro {
  public static func expansion(
    of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
    providingAttributesFor member: some DeclSyntaxProtocol, in context: some MacroExpansionContext
  ) throws -> [AttributeSyntax] {
    // A declaration the member role refuses gets nothing: its errors are the only ones shown.
    var diagnostics: [Diagnostic] = []
    guard ModelDeclaration(declaration, attribute: node, diagnostics: &diagnostics) != nil,
      let variable = member.as(VariableDeclSyntax.self),
      let property = StoredProperty(variable), !property.isTransient
    else { return [] }
    return ["@_PersistedProperty"]
  }
}

extension ModelMacro: ExtensionMacro {
  public static func expansion(
    of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
    providingExtensionsOf type: some TypeSyntaxProtocol, conformingTo protocols: [TypeSyntax],
    in context: some MacroExpansionContext
  ) throws -> [ExtensionDeclSyntax] {
    var diagnostics: [Diagnostic] = []
    guard ModelDeclaration(declaration, attribute: node, diagnostics: &diagnostics) != nil else {
      for diagnostic in diagnostics { context.diagnose(diagnostic) }
      return []
    }
    guard !protocols.isEmpty else { return [] }
    return [
      try ExtensionDeclSyntax(
        "extension \(type.trimmed): \(raw: protocols.map(\.trimmedDescription).joined(separator: ", ")) {}"
      )
    ]
  }
}

/// A Swift string literal of `text` (names are identifiers: no escaping needed).
func literal(_ text: String) -> String { "\"\(text)\"" }

/// The class `@Model` is attached to, checked: a final, non-generic class whose persisted
/// properties are each a `var` of its own declaration. Nil, with the errors in `diagnostics`,
/// when it is not.
struct ModelDeclaration {
  let name: String
  /// The access modifier (with a trailing space) the generated schema and `init()` take.
  let access: String
  let properties: [StoredProperty]
  let declaresEmptyInitializer: Bool

  init?(
    _ declaration: some DeclGroupSyntax, attribute: AttributeSyntax,
    diagnostics: inout [Diagnostic]
  ) {
    guard let type = declaration.as(ClassDeclSyntax.self) else {
      diagnostics.append(
        Diagnostic(
          node: attribute,
          message: ModelDiagnostic.error(
            "notAClass",
            "@Model applies to a class: a model has an identity its context tracks, and a struct or an enum has none"
          )
        ))
      return nil
    }
    var valid = true
    let modifiers = type.modifiers.map(\.name.tokenKind)
    if !modifiers.contains(.keyword(.final)) {
      diagnostics.append(
        Diagnostic(
          node: type.classKeyword,
          message: ModelDiagnostic.error(
            "notFinal", "@Model needs a final class: the store makes its models by their type"),
          fixIt: FixIt(
            message: ModelFixIt(message: "Declare the class final"),
            changes: [
              .replace(
                oldNode: Syntax(type.classKeyword),
                newNode: Syntax(
                  TokenSyntax(
                    .identifier("final class"), leadingTrivia: type.classKeyword.leadingTrivia,
                    trailingTrivia: type.classKeyword.trailingTrivia, presence: .present)))
            ])))
      valid = false
    }
    if let generics = type.genericParameterClause {
      diagnostics.append(
        Diagnostic(
          node: generics,
          message: ModelDiagnostic.error(
            "generic", "@Model does not apply to a generic class: a table stores one type")))
      valid = false
    }
    var properties: [StoredProperty] = []
    for member in type.memberBlock.members {
      guard let variable = member.decl.as(VariableDeclSyntax.self),
        let property = StoredProperty(variable)
      else { continue }
      if variable.bindings.count > 1 {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              "severalBindings",
              "Declare each property of a @Model class on its own (one name per 'var')")))
        valid = false
        continue
      }
      if !property.isVariable && !property.isTransient {
        diagnostics.append(
          Diagnostic(
            node: variable.bindingSpecifier,
            message: ModelDiagnostic.error(
              "constant",
              "A @Model class persists its variables: declare '\(property.name)' with 'var', or mark it @Transient"
            ),
            fixIt: FixIt(
              message: ModelFixIt(message: "Declare it with 'var'"),
              changes: [
                .replace(
                  oldNode: Syntax(variable.bindingSpecifier),
                  newNode: Syntax(
                    TokenSyntax.keyword(
                      .var, leadingTrivia: variable.bindingSpecifier.leadingTrivia,
                      trailingTrivia: variable.bindingSpecifier.trailingTrivia)))
              ])))
        valid = false
        continue
      }
      if property.hasObservers && !property.isTransient {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              "observers",
              "A persisted property cannot have willSet or didSet: '\(property.name)' is observed through Observation (withObservationTracking)"
            )))
        valid = false
        continue
      }
      if property.name.hasPrefix("_") && !property.isTransient {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              "underscore",
              "A persisted property's name is its column's, which cannot start with '_': rename '\(property.name)', or mark it @Transient"
            )))
        valid = false
        continue
      }
      if property.isTransient && property.initializer == nil {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              "transientWithoutValue",
              "A @Transient property needs an initial value: the store makes models from rows without calling your initializers"
            )))
        valid = false
        continue
      }
      if !property.isTransient && property.type == nil && property.initializer == nil {
        valid = false
        continue  // Swift itself says a stored property needs a type.
      }
      properties.append(property)
    }
    guard valid else { return nil }
    name = type.name.trimmedDescription
    let accessKeywords: [Keyword] = [.public, .open, .package]
    access =
      type.modifiers.first { modifier in
        accessKeywords.contains { modifier.name.tokenKind == .keyword($0) }
      }.map { $0.name.tokenKind == .keyword(.open) ? "public " : $0.name.text + " " } ?? ""
    self.properties = properties
    declaresEmptyInitializer = type.memberBlock.members.contains { member in
      guard let initializer = member.decl.as(InitializerDeclSyntax.self) else { return false }
      return initializer.signature.parameterClause.parameters.isEmpty
        && initializer.optionalMark == nil
    }
  }
}

/// An instance property stored in the class, as declared: its name, type, initial value and
/// whether it is marked `@Transient`. Nil for static, computed and observed-only members.
struct StoredProperty {
  let name: String
  let type: TypeSyntax?
  let initializer: ExprSyntax?
  let isTransient: Bool
  let isVariable: Bool
  /// Whether it declares `willSet` or `didSet`.
  let hasObservers: Bool

  init?(_ variable: VariableDeclSyntax) {
    let modifiers = variable.modifiers.map(\.name.tokenKind)
    if modifiers.contains(.keyword(.static)) || modifiers.contains(.keyword(.class))
      || modifiers.contains(.keyword(.lazy))
    {
      return nil
    }
    guard let binding = variable.bindings.first,
      let pattern = binding.pattern.as(IdentifierPatternSyntax.self)
    else { return nil }
    if let accessors = binding.accessorBlock {
      switch accessors.accessors {
      case .getter: return nil
      case .accessors(let list):
        // Only observers (willSet, didSet) keep a property stored.
        let stored = list.allSatisfy {
          $0.accessorSpecifier.tokenKind == .keyword(.willSet)
            || $0.accessorSpecifier.tokenKind == .keyword(.didSet)
        }
        if !stored { return nil }
      @unknown default: return nil
      }
    }
    hasObservers = binding.accessorBlock != nil
    name = pattern.identifier.trimmedDescription
    // Our own members (the registrar) are not properties of the model.
    if name.hasPrefix("_$") { return nil }
    type = binding.typeAnnotation?.type.trimmed
    initializer = binding.initializer?.value.trimmed
    isTransient = variable.attributes.contains { element in
      guard case .attribute(let attribute) = element else { return false }
      return attribute.attributeName.trimmedDescription == "Transient"
    }
    isVariable = variable.bindingSpecifier.tokenKind == .keyword(.var)
  }
}
