import SwiftSyntax
import SwiftSyntaxBuilder

/// The pieces the macros build their code from, each a syntax node: names are identifier
/// tokens, text is a string literal node, a list is a syntax collection with its commas, a
/// comment is trivia. Nothing the macros write is text spliced into source.
enum Build {
  /// `\.name`: a key path of one property of the type it is used on.
  static func keyPath(_ name: TokenSyntax, root: TypeSyntax? = nil) -> ExprSyntax {
    let component = KeyPathPropertyComponentSyntax(
      declName: DeclReferenceExprSyntax(baseName: name))
    return ExprSyntax(
      KeyPathExprSyntax(
        root: root,
        components: [
          KeyPathComponentSyntax(period: .periodToken(), component: .property(component))
        ]
      ))
  }

  /// `"text"`, escaped as a Swift string literal needs.
  static func literal(_ text: String) -> ExprSyntax {
    ExprSyntax(StringLiteralExprSyntax(content: text))
  }

  /// One argument of a call without a label.
  static func argument(_ value: some ExprSyntaxProtocol) -> LabeledExprSyntax {
    argument(nil, value)
  }

  /// One argument of a call: `label: value`, or `value` when `label` is nil.
  static func argument(_ label: String?, _ value: some ExprSyntaxProtocol) -> LabeledExprSyntax {
    LabeledExprSyntax(
      label: label.map { .identifier($0) },
      colon: label.map { _ in .colonToken(trailingTrivia: .space) },
      expression: value)
  }

  /// `arguments` as a call's list, each but the last followed by a comma; each on its own line
  /// when `onLines`.
  static func arguments(_ arguments: [LabeledExprSyntax], onLines: Bool = false)
    -> LabeledExprListSyntax
  {
    LabeledExprListSyntax(
      arguments.enumerated().map { index, argument in
        var argument = argument
        if onLines { argument.leadingTrivia = .newline }
        argument.trailingComma =
          index < arguments.count - 1 ? .commaToken(trailingTrivia: onLines ? [] : .space) : nil
        return argument
      })
  }

  /// `.member(arguments)`: an implicit member call, as a schema's declarations and options are
  /// written.
  static func implicitCall(_ member: String, _ arguments: [LabeledExprSyntax]) -> ExprSyntax {
    ExprSyntax(
      FunctionCallExprSyntax(
        calledExpression: MemberAccessExprSyntax(name: .identifier(member)),
        leftParen: .leftParenToken(), arguments: Self.arguments(arguments),
        rightParen: .rightParenToken()))
  }

  /// `statements` as a body's lines.
  static func statements(_ statements: [ExprSyntax]) -> CodeBlockItemListSyntax {
    CodeBlockItemListSyntax(
      statements.map { CodeBlockItemSyntax(leadingTrivia: .newline, item: .expr($0)) })
  }

  /// `declaration` with `lines` as its documentation comment (`///` each), before whatever it
  /// had.
  static func documented(_ declaration: DeclSyntax, _ lines: [String]) -> DeclSyntax {
    let comment = lines.flatMap { line -> [TriviaPiece] in
      [.docLineComment("/// " + line), .newlines(1)]
    }
    return declaration.with(\.leadingTrivia, Trivia(pieces: comment) + declaration.leadingTrivia)
  }
}

extension ExprSyntax {
  /// The name an option is matched by, whatever spells its type: `unique` for `.unique`,
  /// `Schema.Attribute.Option.unique` and `.unique(with: …)` alike, as the compiler resolves
  /// them to one case. Nil for an expression that names no member.
  var optionName: String? {
    if let call = self.as(FunctionCallExprSyntax.self) { return call.calledExpression.optionName }
    if let member = self.as(MemberAccessExprSyntax.self) { return member.declName.baseName.text }
    if let reference = self.as(DeclReferenceExprSyntax.self) { return reference.baseName.text }
    return nil
  }
}
