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
    return ModelEmitter(model).members
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
