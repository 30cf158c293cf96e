import SwiftDiagnostics
import SwiftSyntax

/// The fix-its of the persistence macros' errors, each built as syntax: a modifier or an
/// attribute added where Swift puts them, a binding's type or initial value replaced, the
/// declaration's own trivia (its comments, its indentation, the space after it) kept.
enum ModelFixIts {
  /// `@Transient` put first among the declaration's attributes (for a `lazy` property).
  static func markTransient(_ variable: VariableDeclSyntax) -> FixIt {
    let attribute = AttributeSyntax(
      atSign: .atSignToken(), attributeName: IdentifierTypeSyntax(name: .identifier("Transient")),
      trailingTrivia: .space)
    var changed = variable.with(\.leadingTrivia, [])
    changed.attributes = AttributeListSyntax([.attribute(attribute)] + Array(variable.attributes))
    changed.leadingTrivia = variable.leadingTrivia
    return FixIt(
      message: ModelFixIt(message: "Mark it @Transient"),
      changes: [.replace(oldNode: Syntax(variable), newNode: Syntax(changed))])
  }

  /// `required` added after the initializer's modifiers.
  static func markRequired(_ initializer: InitializerDeclSyntax) -> FixIt {
    let required = DeclModifierSyntax(name: .keyword(.required, trailingTrivia: .space))
    var changed = initializer.with(\.leadingTrivia, [])
    changed.modifiers = DeclModifierListSyntax(Array(initializer.modifiers) + [required])
    changed.leadingTrivia = initializer.leadingTrivia
    return FixIt(
      message: ModelFixIt(message: "Mark it required"),
      changes: [.replace(oldNode: Syntax(initializer), newNode: Syntax(changed))])
  }

  /// `let` replaced by `var`.
  static func declareVariable(_ variable: VariableDeclSyntax) -> FixIt {
    let specifier = variable.bindingSpecifier
    return FixIt(
      message: ModelFixIt(message: "Declare it with 'var'"),
      changes: [
        .replace(
          oldNode: Syntax(specifier),
          newNode: Syntax(
            specifier.with(\.tokenKind, .keyword(.var))))
      ])
  }

  /// The property's one binding with `type` as its type (its own when nil) and `value` as its
  /// initial value (none when nil): `var rooms: [Room] = []`.
  static func rebind(
    _ variable: VariableDeclSyntax, type: TypeSyntax? = nil, value: ExprSyntax?, message: String
  ) -> FixIt? {
    guard let binding = variable.bindings.first, variable.bindings.count == 1 else { return nil }
    var changed = binding.with(\.trailingTrivia, [])
    if let type = type ?? binding.typeAnnotation?.type {
      changed.typeAnnotation = TypeAnnotationSyntax(
        colon: .colonToken(trailingTrivia: .space), type: type.trimmed)
    }
    changed.initializer = value.map {
      InitializerClauseSyntax(
        equal: .equalToken(leadingTrivia: .space, trailingTrivia: .space), value: $0.trimmed)
    }
    changed.trailingTrivia = binding.trailingTrivia
    return FixIt(
      message: ModelFixIt(message: message),
      changes: [.replace(oldNode: Syntax(binding), newNode: Syntax(changed))])
  }

  /// An initial value for a property that needs one: `nil` for an optional, else a
  /// placeholder to fill in.
  static func addInitialValue(_ variable: VariableDeclSyntax, type: TypeSyntax?) -> FixIt? {
    let isOptional =
      type?.is(OptionalTypeSyntax.self) == true
      || type?.is(ImplicitlyUnwrappedOptionalTypeSyntax.self) == true
    let value: ExprSyntax =
      isOptional
      ? ExprSyntax(NilLiteralExprSyntax())
      : ExprSyntax(EditorPlaceholderExprSyntax(placeholder: .identifier("<#initial value#>")))
    return rebind(
      variable, value: value, message: isOptional ? "Start it as nil" : "Give it an initial value")
  }
}
