import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// `@Model`: a class becomes a `PersistentModel` whose stored variables are its
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
/// Cost of the expansion: O(members) for the member and extension roles; the member-attribute
/// role, which the compiler calls once per member, checks the whole class each time (so that a
/// refused class gets no attributes, whose errors would hide the reason), O(members²) a class.
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
    let superclass = Self.superclass(of: declaration, conformingTo: protocols)
    if superclass != nil {
      guard Self.subclassProblems(model, attribute: node).isEmpty else { return [] }
    }
    return ModelEmitter(model, superclass: superclass).members
  }

  /// The superclass of a subclass of a model: the first type of the inheritance clause, when
  /// the class already conforms to `PersistentModel` (the compiler leaves it out of
  /// `protocols`, the conformances still to add) and that type is not a protocol a model
  /// names. Nil for a root model.
  static func superclass(
    of declaration: some DeclGroupSyntax, conformingTo protocols: [TypeSyntax]
  ) -> TypeSyntax? {
    guard
      !protocols.contains(where: {
        ["PersistentModel", "PersistenceCore.PersistentModel"].contains($0.trimmedDescription)
      }),
      let first = declaration.inheritanceClause?.inheritedTypes.first?.type
    else { return nil }
    let known: Set = [
      "PersistentModel", "Identifiable", "Hashable", "Equatable", "Codable", "Sendable",
      "Observable", "LinksOnFirstUse", "AnyObject", "CustomStringConvertible",
    ]
    let name = first.trimmedDescription.split(separator: ".").last.map(String.init) ?? ""
    return known.contains(name) ? nil : first.trimmed
  }

  /// What a subclass of a model may not declare yet, as errors.
  static func subclassProblems(_ model: ModelDeclaration, attribute: AttributeSyntax)
    -> [Diagnostic]
  {
    var problems: [Diagnostic] = []
    if case .argumentList(let arguments) = attribute.arguments,
      let table = arguments.first(where: { $0.label?.text == "table" })
    {
      problems.append(
        Diagnostic(
          node: table,
          message: ModelDiagnostic.error(
            .table,
            "A subclass of a model is kept in its root model's table: leave out table:")))
    }
    return problems
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
    guard let model = ModelDeclaration(declaration, attribute: node, diagnostics: &diagnostics)
    else {
      for diagnostic in diagnostics { context.diagnose(diagnostic) }
      return []
    }
    if Self.superclass(of: declaration, conformingTo: protocols) != nil {
      for problem in Self.subclassProblems(model, attribute: node) { context.diagnose(problem) }
    }
    guard !protocols.isEmpty else { return [] }
    let inherited = InheritedTypeListSyntax(
      protocols.enumerated().map { index, type in
        InheritedTypeSyntax(
          type: type.trimmed,
          trailingComma: index < protocols.count - 1 ? .commaToken(trailingTrivia: .space) : nil)
      })
    return [
      ExtensionDeclSyntax(
        extendedType: type.trimmed,
        inheritanceClause: InheritanceClauseSyntax(inheritedTypes: inherited),
        memberBlock: MemberBlockSyntax(members: []))
    ]
  }
}
