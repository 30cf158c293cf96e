import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// `@ModelActor`: an actor gets a model container, an executor holding a context of its own,
/// and `init(modelContainer:)`, and conforms to `ModelActor`, as SwiftData's macro makes it.
/// The members take the actor's access level (a `public` actor's initializer is public).
///
/// Cost of the expansion: O(1) (the actor's modifiers are read, its members are not).
public struct ModelActorMacro {}

extension ModelActorMacro: MemberMacro {
  public static func expansion(
    of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax,
    conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
  ) throws -> [DeclSyntax] {
    guard declaration.is(ActorDeclSyntax.self) else { return [] }
    let access =
      declaration.modifiers.first {
        ["public", "package", "open"].contains($0.name.text)
      }.map { "\($0.name.text == "open" ? "public" : $0.name.text) " } ?? ""
    return [
      "\(raw: access)nonisolated let modelExecutor: any PersistenceCore.ModelExecutor",
      "\(raw: access)nonisolated let modelContainer: PersistenceCore.ModelContainer",
      """
      \(raw: access)init(modelContainer: PersistenceCore.ModelContainer) {
        let modelContext = PersistenceCore.ModelContext(modelContainer)
        self.modelExecutor = PersistenceCore.DefaultSerialModelExecutor(modelContext: modelContext)
        self.modelContainer = modelContainer
      }
      """,
    ]
  }
}

extension ModelActorMacro: ExtensionMacro {
  public static func expansion(
    of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
    providingExtensionsOf type: some TypeSyntaxProtocol, conformingTo protocols: [TypeSyntax],
    in context: some MacroExpansionContext
  ) throws -> [ExtensionDeclSyntax] {
    guard declaration.is(ActorDeclSyntax.self) else {
      context.diagnose(
        Diagnostic(
          node: node,
          message: ModelDiagnostic.error(
            .notAnActor,
            "@ModelActor applies to an actor: declare 'actor', whose code then runs on the context's executor"
          )))
      return []
    }
    guard !protocols.isEmpty else { return [] }
    return [
      ExtensionDeclSyntax(
        extendedType: type.trimmed,
        inheritanceClause: InheritanceClauseSyntax(
          inheritedTypes: [InheritedTypeSyntax(type: TypeSyntax("PersistenceCore.ModelActor"))]),
        memberBlock: MemberBlockSyntax(members: []))
    ]
  }
}
