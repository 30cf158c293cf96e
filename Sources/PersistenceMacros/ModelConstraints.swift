import SwiftDiagnostics
import SwiftSyntax

extension ModelDeclaration {
  /// The options `#Index<T>([\.a], [\.b, \.c])` and `#Unique<T>([\.a])` give each property
  /// (by name), as written in a schema: each constraint as an option of its first property,
  /// with the further columns. Reports what cannot be one into `diagnostics` and clears
  /// `valid`. O(members + constraints).
  static func constraints(
    of type: ClassDeclSyntax, properties: [StoredProperty], diagnostics: inout [Diagnostic],
    valid: inout Bool
  ) -> [String: [ExprSyntax]] {
    // `#Index<T>([\.a], [\.b, \.c])` and `#Unique<T>([\.a])`, as options of their first property.
    var constraints: [String: [ExprSyntax]] = [:]
    // `#Index` lists by their first property: the further columns.
    var indexes: [String: [[String]]] = [:]
    // Where each list was written, by its first property: the notes of an error about two.
    var indexLists: [String: [ExprSyntax]] = [:]
    var uniqueLists: [String: ExprSyntax] = [:]
    let columns = Dictionary(
      properties.filter { !$0.isTransient && $0.relationshipAttribute == nil }.map {
        ($0.name, $0.column)
      },
      uniquingKeysWith: { first, _ in first })
    for member in type.memberBlock.members {
      guard let expansion = member.decl.as(MacroExpansionDeclSyntax.self) else { continue }
      let macro = expansion.macroName.text
      guard macro == "Index" || macro == "Unique" else { continue }
      for argument in expansion.arguments {
        guard let array = Self.keyPathList(argument.expression, in: macro),
          !array.elements.isEmpty
        else {
          diagnostics.append(
            Diagnostic(
              node: argument.expression,
              message: ModelDiagnostic.error(
                .constraintList,
                "#\(macro) takes lists of key paths written out, as [\\.name, \\.date]")))
          valid = false
          continue
        }
        var names: [String] = []
        for element in array.elements {
          guard let keyPath = element.expression.as(KeyPathExprSyntax.self),
            keyPath.components.count == 1,
            let component = keyPath.components.first?.component.as(
              KeyPathPropertyComponentSyntax.self),
            columns[component.declName.baseName.text] != nil
          else {
            diagnostics.append(
              Diagnostic(
                node: element.expression,
                message: ModelDiagnostic.error(
                  .constraintKeyPath,
                  "#\(macro) names persisted properties of this class, one step each (\\.name): \(element.expression.trimmedDescription) is not one"
                )))
            valid = false
            continue
          }
          names.append(component.declName.baseName.text)
        }
        guard let first = names.first, names.count == array.elements.count else { continue }
        let rest = names.dropFirst().map { columns[$0] ?? $0 }
        if macro == "Unique" {
          let property = properties.first { $0.name == first }
          let attributeUnique =
            property?.options.contains { $0.optionName == "unique" } ?? false
          if attributeUnique
            || constraints[first, default: []].contains(where: { $0.optionName == "unique" })
          {
            // The other constraint: the property's @Attribute(.unique), or an earlier list.
            let other: Syntax? =
              attributeUnique
              ? property?.attribute.map(Syntax.init) : uniqueLists[first].map(Syntax.init)
            diagnostics.append(
              Diagnostic(
                node: argument.expression,
                message: ModelDiagnostic.error(
                  .uniqueTwice,
                  "'\(first)' begins two unique constraints: begin each with another property (a value unique alone is unique with others too)"
                ),
                notes: other.map {
                  [
                    Note(
                      node: $0,
                      message: ModelNote(message: "the other unique constraint on '\(first)'"))
                  ]
                } ?? []))
            valid = false
            continue
          }
          uniqueLists[first] = argument.expression
          constraints[first, default: []].append(option("unique", with: rest))
        } else {
          indexes[first, default: []].append(rest)
          indexLists[first, default: []].append(argument.expression)
        }
      }
    }
    // A property beginning several indexes keeps the longest: an index on (a, b, c) answers
    // what one on (a) or (a, b) would (SampleTrips indexes [\.name] and [\.name, \.startDate,
    // \.endDate]). Two that are not one the other's start cannot be one option.
    for (first, lists) in indexes.sorted(by: { $0.key < $1.key }) {
      let longest = lists.max { $0.count < $1.count } ?? []
      guard lists.allSatisfy({ Array(longest.prefix($0.count)) == $0 }) else {
        diagnostics.append(
          Diagnostic(
            node: Syntax(type.name),
            message: ModelDiagnostic.error(
              .indexTwice,
              "'\(first)' begins two #Index lists that differ after it: begin one with another property"
            ),
            notes: indexLists[first, default: []].map {
              Note(
                node: Syntax($0),
                message: ModelNote(message: "an #Index list that begins with '\(first)'"))
            }))
        valid = false
        continue
      }
      constraints[first, default: []].append(option("indexed", with: longest))
    }
    return constraints
  }
}

/// `.name`, or `.name(with: "b", "c")` when the constraint has further columns.
extension ModelDeclaration {
  /// The list of key paths a constraint's argument writes: `[\.a, \.b]`, or for `#Index`
  /// SwiftData's `.binary([\.a])` and `.rtree([\.a, \.b])` (however the type is spelled
  /// before the dot); nil for anything else.
  static func keyPathList(_ expression: ExprSyntax, in macro: String) -> ArrayExprSyntax? {
    if let array = expression.as(ArrayExprSyntax.self) { return array }
    guard macro == "Index", let call = expression.as(FunctionCallExprSyntax.self),
      let member = call.calledExpression.as(MemberAccessExprSyntax.self),
      ["binary", "rtree"].contains(member.declName.baseName.text), call.arguments.count == 1,
      call.arguments.first?.label == nil, call.trailingClosure == nil
    else { return nil }
    return call.arguments.first?.expression.as(ArrayExprSyntax.self)
  }
}

private func option(_ name: String, with columns: [String]) -> ExprSyntax {
  guard !columns.isEmpty else { return ExprSyntax(MemberAccessExprSyntax(name: .identifier(name))) }
  return Build.implicitCall(
    name,
    columns.enumerated().map { index, column in
      Build.argument(index == 0 ? "with" : nil, Build.literal(column))
    })
}
