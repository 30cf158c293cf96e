import PersistenceNativeTypes
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
    let name = model.name
    let access = model.access
    let persisted = model.properties.filter { !$0.isTransient && $0.relationship == nil }
    let relationships = model.properties.filter { $0.relationship != nil }
    let onFirstUse = relationships.filter(\.isLinkedOnFirstUse)
    // `var x: X?` of a type the macro cannot see, named by no `#Unique` or `#Index`: a to-one or
    // an attribute, as the compiler finds (`_OptionalProperty`); a to-one's key is a column no
    // row loader reads, so such a model loads through its declarations.
    let undeclared = persisted.filter(\.isUndeclaredOptional)
    // A non-optional `.codable` value is decoded with its row, which a row loader cannot do
    // (it keeps faults), and a to-one's key is a column no loader reads: such a model is
    // loaded and bound through its declarations.
    let fast =
      !persisted.contains {
        if case .codable = $0.storage { return true }
        return false
      } && onFirstUse.count == relationships.count && undeclared.isEmpty
    var members: [DeclSyntax] = []
    members.append(
      """
      /// Tells observers of this model's properties (a registrar made on first use).
      private let _$observationRegistrar = PersistenceCore.ModelObservationRegistrar()
      """)
    let attributes = persisted.map { property -> String in
      let constraints = model.constraints[property.name, default: []]
      // `#Index` over several columns covers an `@Attribute(.indexed)` of its first.
      let own = property.options.filter {
        $0 != ".indexed" || !constraints.contains { $0.hasPrefix(".indexed") }
      }
      let options = (own + constraints).map { ", " + $0 }.joined()
      let head = "\\.\(property.name), \(literal(property.column))\(options)"
      if property.isUndeclaredOptional {
        return "    ._optional(\(head), storage: \\._\(property.name))"
      }
      switch property.storage {
      case .native: return "    .attribute(\(head), storage: \\._\(property.name))"
      case .fault: return "    .codable(\(head), fault: \\._\(property.name))"
      case .codable: return "    .codable(\(head), storage: \\._\(property.name))"
      }
    }
    let links = relationships.map { property -> String in
      let rule = property.deleteRule.map { ", deleteRule: \($0)" } ?? ""
      let inverse = property.inverse.map { ", inverse: \($0)" } ?? ""
      let order =
        property.orderBy.isEmpty ? "" : ", orderBy: " + property.orderBy.joined(separator: ", ")
      let head = "\\.\(property.name), \(literal(property.name))"
      if case .toMany = property.relationship {
        return
          "    .toMany(\(head), link: \\._\(property.name)Link, existing: \\._\(property.name)\(inverse)\(rule)\(order))"
      }
      if property.isLinkedOnFirstUse {
        // The side of a one-to-one that names its inverse (an inverse that is a to-many picks
        // an overload that is refused, saying to name it on the to-many).
        return
          "    .toOne(\(head), link: \\._\(property.name)Link, existing: \\._\(property.name)\(inverse)\(rule))"
      }
      // The side that stores the key; its rule is .nullify (the relationship's check refuses
      // any other).
      return "    .toOne(\(head), link: \\._\(property.name))"
    }
    let declarations = attributes + links
    let loads = persisted.map { property -> String in
      if case .fault = property.storage {
        return "    self._\(property.name) = try row.fault(\\.\(property.name))"
      }
      return "    self._\(property.name) = try row.next(\\.\(property.name))"
    }
    let binds = persisted.map { property -> String in
      if case .fault = property.storage {
        return "    try row.bind(\\.\(property.name), fault: model._\(property.name))"
      }
      return "    try row.bind(\\.\(property.name), model._\(property.name))"
    }
    let rowCode =
      fast
      ? """

      .loading { row in try \(name)(_$persistenceLoading: &row) }
      .saving { \(binds.isEmpty ? "_, _ in" : "model, row in")
      \(binds.joined(separator: "\n"))
      }
      """ : ""
    // Each persisted property's name and documentation, for `ModelSchema.fields`.
    let described = persisted.map { property -> String in
      let documentation = StringLiteralExprSyntax(content: property.documentation)
      return "    (\(literal(property.column)), \(literal(property.name)), \(documentation))"
    }
    let describedCode =
      described.isEmpty ? "" : "\n.described([\n" + described.joined(separator: ",\n") + "\n])"
    members.append(
      """
      /// The table \(raw: literal(model.table)), a column per persisted property (written by `@Model`).
      \(raw: access)static let schema = PersistenceCore.ModelSchema<\(raw: name)>(
        \(raw: literal(model.table))\(raw: declarations.isEmpty ? "" : ",\n" + declarations.joined(separator: ",\n"))
      )\(raw: rowCode)\(raw: describedCode)
      """)
    // Every model has its origin: what `modelContext` and `persistentModelID` read.
    members.append(
      """
      /// The context and row this model is in, set by the store: where its relationships
      /// load from, its `modelContext` and its `persistentModelID` (written by `@Model`).
      @exclusivity(unchecked) \(raw: access)var linkOrigin = PersistenceCore.LinkOrigin()
      """)
    for property in onFirstUse {
      let linkType: String
      switch property.relationship {
      case .toMany(let target): linkType = "ToMany<\(target)>"
      case .toOne(let target): linkType = "ToOne<\(target)>"
      case nil: continue
      }
      members.append(
        """
        /// The link of `\(raw: property.name)`, made on first use (written by `@Model`).
        private var _\(raw: property.name)Link: PersistenceCore.\(raw: linkType) {
          link(&_\(raw: property.name))
        }
        """)
    }
    if fast {
      members.append(
        """
        /// A model made from a row, through the backing storage (written by `@Model`).
        private init(_$persistenceLoading row: inout PersistenceCore.ModelRow<\(raw: name)>) throws {
        \(raw: loads.joined(separator: "\n"))
        }
        """)
    }
    // An undeclared optional's storage has its initial value (`_OptionalProperty.storage`).
    let defaults = persisted.filter { $0.initializer == nil && !$0.isUndeclaredOptional }.map {
      property in
      if case .fault = property.storage {
        return "  self._\(property.name) = PersistenceCore.CodableFault()"
      }
      return "  self._\(property.name) = PersistenceCore.ModelDefaults.value()"
    }
    members.append(
      """
      /// A model with each property's initial value, or its type's empty value, made without
      /// running your initializers (written by `@Model`).
      private init(_$persistenceEmpty: Void) {
      \(raw: defaults.joined(separator: "\n"))
      }
      """)
    members.append(
      """
      /// What the store makes a model with before it sets a row's values: your initializers
      /// are not run for a fetched model (written by `@Model`).
      \(raw: access)static func makeForLoading() -> \(raw: model.isFinal ? name : "Self") {
        \(raw: model.isFinal ? "" : "modelAsSelf(")\(raw: name)(_$persistenceEmpty: ())\(raw: model.isFinal ? "" : ")")
      }
      """)
    if !model.declaresID {
      members.append(
        """
        /// The model's identity, what `Identifiable` asks for: the instance itself, as models
        /// compare by identity (a context holds one per row). Declare `id` to give another
        /// (written by `@Model`).
        \(raw: access)var id: ObjectIdentifier { ObjectIdentifier(self) }
        """)
    }
    if !model.declaresEmptyInitializer {
      members.append(
        """
        /// A model with each property's initial value, or its type's empty value: what a column
        /// added to an existing table is filled with (written by `@Model`).
        \(raw: access)\(raw: model.isFinal ? "" : "required ")convenience init() {
          self.init(_$persistenceEmpty: ())
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
    guard let model = ModelDeclaration(declaration, attribute: node, diagnostics: &diagnostics)
    else {
      for diagnostic in diagnostics { context.diagnose(diagnostic) }
      return []
    }
    let wanted = protocols
    guard !wanted.isEmpty else { return [] }
    return [
      try ExtensionDeclSyntax(
        "extension \(type.trimmed): \(raw: wanted.map(\.trimmedDescription).joined(separator: ", ")) {}"
      )
    ]
  }
}

/// A Swift string literal of `text` (names are identifiers: no escaping needed).
func literal(_ text: String) -> String { "\"\(text)\"" }

/// The class `@Model` is attached to, checked: a non-generic class whose persisted
/// properties are each a `var` of its own declaration. Nil, with the errors in `diagnostics`,
/// when it is not.
struct ModelDeclaration {
  let name: String
  /// The table: `@Model(table:)`'s, else the class's name.
  let table: String
  /// The access modifier (with a trailing space) the generated schema and `init()` take.
  let access: String
  let properties: [StoredProperty]
  let declaresEmptyInitializer: Bool
  /// Whether the class is final; one that is not makes `init()` required and
  /// `makeForLoading()` return `Self`.
  let isFinal: Bool
  /// Whether the class declares `id` (which then makes it `Identifiable`).
  let declaresID: Bool
  /// The options `#Index` and `#Unique` give each property (by name), as written in a schema.
  let constraints: [String: [String]]

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
    let isFinal = modifiers.contains(.keyword(.final))
    if let generics = type.genericParameterClause {
      diagnostics.append(
        Diagnostic(
          node: generics,
          message: ModelDiagnostic.error(
            "generic", "@Model does not apply to a generic class: a table stores one type")))
      valid = false
    }
    var properties: [StoredProperty] = []
    // The links `@Model` writes are named after the relationships made on first use
    // (`roomsLink`).
    let linkedNames = Set(
      type.memberBlock.members.compactMap {
        $0.decl.as(VariableDeclSyntax.self).flatMap(StoredProperty.init)
      }.filter(\.isLinkedOnFirstUse).map(\.name))
    var table = type.name.trimmedDescription
    if case .argumentList(let arguments) = attribute.arguments,
      let argument = arguments.first(where: { $0.label?.text == "table" })
    {
      if let literal = argument.expression.as(StringLiteralExprSyntax.self),
        literal.segments.count == 1, case .stringSegment(let segment) = literal.segments.first,
        // The store's rule for a table's name, checked here rather than when a container opens.
        let first = segment.content.text.unicodeScalars.first, first != "_",
        !("0"..."9").contains(first),
        segment.content.text.unicodeScalars.allSatisfy({
          ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
            || $0 == "_"
        })
      {
        table = segment.content.text
      } else {
        diagnostics.append(
          Diagnostic(
            node: argument.expression,
            message: ModelDiagnostic.error(
              "table",
              "table: names the model's table: give it as one string literal of letters, digits and underscores, not starting with '_' or a digit"
            )))
        valid = false
      }
    }
    for member in type.memberBlock.members {
      // A lazy variable would be neither stored nor refused: SwiftData refuses it too.
      if let variable = member.decl.as(VariableDeclSyntax.self),
        variable.modifiers.contains(where: { $0.name.tokenKind == .keyword(.lazy) }),
        !variable.modifiers.contains(where: { $0.name.tokenKind == .keyword(.static) }),
        !variable.attributes.contains(where: {
          if case .attribute(let attribute) = $0 {
            return attribute.baseName == "Transient"
          }
          return false
        })
      {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              "lazy",
              "A @Model class does not persist a lazy property: make it a stored 'var', a computed property, or mark it @Transient"
            )))
        valid = false
        continue
      }
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
      if property.name.hasPrefix("`") || ["schema", "linkOrigin"].contains(property.name)
        || (property.name.hasSuffix("Link")
          && linkedNames.contains(String(property.name.dropLast(4))))
      {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              "reservedName",
              property.name.hasPrefix("`")
                ? "A persisted property's name is its column's and a name in the code @Model writes: rename \(property.name), which needs backticks"
                : "'\(property.name)' is a member @Model writes for the class: rename the property"
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
      if property.relationshipAttribute != nil {
        if let problem = property.relationshipProblem {
          diagnostics.append(
            Diagnostic(
              node: property.relationshipAttribute.map(Syntax.init) ?? Syntax(variable),
              message: ModelDiagnostic.error(problem.id, problem.message)))
          valid = false
          continue
        }
      } else if !property.isTransient && !property.isCodable
        && property.type?.is(ArrayTypeSyntax.self) == true
      {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              "array",
              "An array is stored as a relationship (@Relationship) or as JSON (@Attribute(.codable)): '\(property.name)' is neither"
            )))
        valid = false
        continue
      }
      properties.append(property)
    }
    declaresID = type.memberBlock.members.contains { member in
      guard let variable = member.decl.as(VariableDeclSyntax.self),
        !variable.modifiers.contains(where: {
          $0.name.tokenKind == .keyword(.static) || $0.name.tokenKind == .keyword(.class)
        })
      else { return false }
      return variable.bindings.contains {
        $0.pattern.as(IdentifierPatternSyntax.self)?.identifier.text == "id"
      }
    }
    let declaresEmptyInitializer = type.memberBlock.members.contains { member in
      guard let initializer = member.decl.as(InitializerDeclSyntax.self) else { return false }
      return initializer.signature.parameterClause.parameters.isEmpty
        && initializer.optionalMark == nil
    }
    // A class that is not final makes `init()` required, as the protocol's requirement.
    for member in type.memberBlock.members where !isFinal {
      guard let initializer = member.decl.as(InitializerDeclSyntax.self),
        initializer.signature.parameterClause.parameters.isEmpty,
        initializer.optionalMark == nil,
        !initializer.modifiers.contains(where: { $0.name.tokenKind == .keyword(.required) })
      else { continue }
      diagnostics.append(
        Diagnostic(
          node: initializer.initKeyword,
          message: ModelDiagnostic.error(
            "notRequired",
            "The store makes models of '\(type.name.text)' with init(), which a class that is not final must mark required"
          ),
          fixIt: FixIt(
            message: ModelFixIt(message: "Mark it required"),
            changes: [
              .replace(
                oldNode: Syntax(initializer.initKeyword),
                newNode: Syntax(
                  TokenSyntax(
                    .identifier("required init"),
                    leadingTrivia: initializer.initKeyword.leadingTrivia,
                    trailingTrivia: initializer.initKeyword.trailingTrivia, presence: .present)))
            ])))
      valid = false
    }
    // An initializer every parameter of which has a default could be called as `init()`,
    // which the store needs and `@Model` writes: `X()` would call that one, not yours.
    for member in type.memberBlock.members {
      guard let initializer = member.decl.as(InitializerDeclSyntax.self) else { continue }
      let parameters = initializer.signature.parameterClause.parameters
      if !parameters.isEmpty && parameters.allSatisfy({ $0.defaultValue != nil })
        && !declaresEmptyInitializer
      {
        diagnostics.append(
          Diagnostic(
            node: initializer.initKeyword,
            message: ModelDiagnostic.error(
              "defaultedInitializer",
              "This initializer can be called with no arguments, as the init() that @Model writes for the store: '\(type.name.text)()' would call that one. Declare init() yourself, or give a parameter no default"
            )))
        valid = false
      }
    }
    for property in properties where !property.isTransient {
      let node = property.attribute.map(Syntax.init) ?? Syntax(property.declaration)
      if let bad = property.badOriginalName {
        diagnostics.append(
          Diagnostic(
            node: bad,
            message: ModelDiagnostic.error(
              "originalName",
              "originalName: names the column '\(property.name)' is stored in: give it as one string literal"
            )))
        valid = false
      }
      if property.isCodable && property.type == nil {
        diagnostics.append(
          Diagnostic(
            node: node,
            message: ModelDiagnostic.error(
              "codableType",
              "A .codable property needs its type written out: '\(property.name)' has none")))
        valid = false
      } else if case .codable = property.storage, property.initializer == nil {
        diagnostics.append(
          Diagnostic(
            node: node,
            message: ModelDiagnostic.error(
              "codableValue",
              "A .codable property that is not optional needs an initial value: '\(property.name)' has none for the model the store makes before loading a row, or for a column added to an existing table"
            )))
        valid = false
      }
      // A URL has no empty value (`URL(string: "")` is nil) for the model made before a row
      // is loaded: it would trap when the container opens.
      if property.relationship == nil, property.initializer == nil,
        ["URL", "Foundation.URL"].contains(property.type?.trimmedDescription ?? "")
      {
        diagnostics.append(
          Diagnostic(
            node: node,
            message: ModelDiagnostic.error(
              "urlValue",
              "A URL has no empty value for the model the store makes before loading a row: give '\(property.name)' an initial value, or declare it URL?"
            )))
        valid = false
      }
    }
    // `#Index<T>([\.a], [\.b, \.c])` and `#Unique<T>([\.a])`, as options of their first property.
    var constraints: [String: [String]] = [:]
    // `#Index` lists by their first property: the further columns, as literals.
    var indexes: [String: [[String]]] = [:]
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
        guard let array = argument.expression.as(ArrayExprSyntax.self), !array.elements.isEmpty
        else {
          diagnostics.append(
            Diagnostic(
              node: argument.expression,
              message: ModelDiagnostic.error(
                "constraintList",
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
                  "constraintKeyPath",
                  "#\(macro) names persisted properties of this class, one step each (\\.name): \(element.expression.trimmedDescription) is not one"
                )))
            valid = false
            continue
          }
          names.append(component.declName.baseName.text)
        }
        guard let first = names.first, names.count == array.elements.count else { continue }
        let rest = names.dropFirst().map { literal(columns[$0] ?? $0) }
        if macro == "Unique" {
          let attributeUnique =
            properties.first { $0.name == first }?.options.contains {
              $0 == ".unique" || $0.hasPrefix(".unique(") || $0.hasSuffix("AttributeOption.unique")
            } ?? false
          if attributeUnique
            || constraints[first, default: []].contains(where: { $0.hasPrefix(".unique") })
          {
            diagnostics.append(
              Diagnostic(
                node: argument.expression,
                message: ModelDiagnostic.error(
                  "uniqueTwice",
                  "'\(first)' begins two unique constraints: begin each with another property (a value unique alone is unique with others too)"
                )))
            valid = false
            continue
          }
          constraints[first, default: []].append(
            rest.isEmpty ? ".unique" : ".unique(with: \(rest.joined(separator: ", ")))")
        } else {
          indexes[first, default: []].append(rest)
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
              "indexTwice",
              "'\(first)' begins two #Index lists that differ after it: begin one with another property"
            )))
        valid = false
        continue
      }
      constraints[first, default: []].append(
        longest.isEmpty ? ".indexed" : ".indexed(with: \(longest.joined(separator: ", ")))")
    }
    guard valid else { return nil }
    self.constraints = constraints
    self.table = table
    self.declaresEmptyInitializer = declaresEmptyInitializer
    self.isFinal = isFinal
    name = type.name.trimmedDescription
    let accessKeywords: [Keyword] = [.public, .open, .package]
    access =
      type.modifiers.first { modifier in
        accessKeywords.contains { modifier.name.tokenKind == .keyword($0) }
      }.map { $0.name.tokenKind == .keyword(.open) ? "public " : $0.name.text + " " } ?? ""
    self.properties = properties
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
  /// Its declaration, where errors about it are shown.
  let declaration: VariableDeclSyntax
  /// Its `@Relationship`, if it has one.
  let relationshipAttribute: AttributeSyntax?
  /// `@Relationship`'s `inverse:` and `deleteRule:` arguments, as written.
  let inverse: ExprSyntax?
  let deleteRule: ExprSyntax?
  /// `@Relationship`'s `orderBy:` key paths, as written.
  let orderBy: [String]

  /// Whether the relationship's link is made on first use (``LinksOnFirstUse``): a to-many, or
  /// a to-one that names its inverse (the side of a one-to-one that does not store the key).
  var isLinkedOnFirstUse: Bool {
    switch relationship {
    case .toMany: true
    case .toOne: inverse != nil
    case nil: false
    }
  }

  /// What a `@Relationship` property is: a to-one (`T?`) or a to-many (`[T]`) of `T`.
  enum RelationshipKind {
    case toOne(TypeSyntax)
    case toMany(TypeSyntax)
  }

  /// Why `@Relationship` cannot apply to this property as declared, as (id, message); nil when
  /// it can.
  var relationshipProblem: (id: String, message: String)? {
    if isTransient || !isVariable {
      return (
        "relationshipStored", "A relationship is a stored 'var' of the model: '\(name)' is not one"
      )
    }
    if attribute != nil {
      return (
        "relationshipAttribute",
        "@Attribute does not apply to a relationship: '\(name)' is stored as its related rows' keys"
      )
    }
    if let wrapped = wrappedType, wrapped.is(ArrayTypeSyntax.self) {
      return (
        "optionalToMany",
        "A to-many relationship is an array, not an optional one: declare '\(name)' as \(wrapped.trimmedDescription) = []"
      )
    }
    guard let kind = relationship else {
      return (
        "relationshipType",
        "A relationship is an optional model (Hotel?) or an array of models ([Room]): '\(name)' is neither"
      )
    }
    switch kind {
    case .toMany:
      // `= []`, or `= [Room]()` as SampleTrips writes it.
      let empty =
        initializer?.as(ArrayExprSyntax.self)?.elements.isEmpty
        ?? initializer.map { value in
          guard let call = value.as(FunctionCallExprSyntax.self), call.arguments.isEmpty,
            call.trailingClosure == nil
          else { return false }
          return call.calledExpression.is(ArrayExprSyntax.self)
        } ?? false
      if !empty {
        return (
          "toManyStart",
          "A to-many relationship starts empty: declare '\(name)' with '= []', and set it once the model's stored properties are"
        )
      }
    case .toOne:
      if inverse == nil, let rule = deleteRule, !rule.trimmedDescription.hasSuffix(".nullify") {
        return (
          "toOneRule",
          "A to-one that names no inverse stores the key and keeps the rule .nullify (deleting a row never deletes what it points to): declare 'deleteRule:' on the other side, with 'inverse:'"
        )
      }
      if !orderBy.isEmpty {
        return ("toOneOrder", "orderBy: orders a to-many: '\(name)' is a to-one")
      }
      if initializer != nil {
        return (
          "toOneStart",
          "A to-one relationship starts as nil: leave out the initial value of '\(name)', and set it once the model's stored properties are"
        )
      }
    }
    return nil
  }

  /// The relationship's kind, from its type; nil for a property that is not one, or whose
  /// type is neither `T?` nor `[T]`.
  var relationship: RelationshipKind? {
    guard relationshipAttribute != nil, let type else { return nil }
    if let array = type.as(ArrayTypeSyntax.self) { return .toMany(array.element.trimmed) }
    if let wrapped = wrappedType { return .toOne(wrapped) }
    return nil
  }
  /// Its `@Attribute`, if it has one.
  let attribute: AttributeSyntax?
  /// The options of its `@Attribute` other than `.codable`, as written (`.unique`).
  let options: [String]
  /// Whether its `@Attribute` says `.codable`: stored as JSON.
  let isCodable: Bool
  /// The column its `@Attribute(originalName:)` names, else nil (the property's name).
  let originalName: String?
  /// The `originalName:` argument, when it is not one plain string literal.
  let badOriginalName: ExprSyntax?

  /// The column: `originalName`, else the property's name.
  var column: String { originalName ?? name }

  /// Whether it is `var x: X?` with nothing saying what `X` is: no `@Relationship`, no
  /// `@Attribute`, and `X` not a type the store keeps natively by name. `X` may be a model
  /// (SwiftData's side of a relationship whose inverse the other side names) or a
  /// `PersistableValue` of one's own; the code `@Model` writes leaves the choice to the
  /// compiler (`_OptionalProperty`). A `#Unique` or `#Index` naming it makes it an attribute
  /// (`ModelDeclaration` checks that; this property does not know the class's constraints).
  var isUndeclaredOptional: Bool {
    guard !isTransient, relationshipAttribute == nil, attribute == nil,
      initializer == nil || initializer?.trimmedDescription == "nil",
      let wrapped = wrappedType?.trimmedDescription
    else { return false }
    return !NativeTypes.contains(wrapped) && !wrapped.hasPrefix("[") && !wrapped.hasPrefix("(")
  }

  /// The wrapped type of an optional type annotation (`T?`, `Optional<T>`), else nil.
  var wrappedType: TypeSyntax? {
    guard let type else { return nil }
    if let optional = type.as(OptionalTypeSyntax.self) { return optional.wrappedType.trimmed }
    if let named = type.as(IdentifierTypeSyntax.self), named.name.text == "Optional",
      let argument = named.genericArgumentClause?.arguments.first
    {
      return TypeSyntax(stringLiteral: argument.argument.trimmedDescription)
    }
    return nil
  }

  /// How the store keeps it: natively, as JSON behind a fault (an optional `.codable`: decoded
  /// on first read), or as JSON decoded with the row (a non-optional `.codable`).
  enum Storage {
    case native
    case fault(TypeSyntax)
    case codable
  }

  var storage: Storage {
    guard isCodable else { return .native }
    if let wrapped = wrappedType { return .fault(wrapped) }
    return .codable
  }

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
    declaration = variable
    hasObservers = binding.accessorBlock != nil
    name = pattern.identifier.trimmedDescription
    // Our own members (the registrar) are not properties of the model.
    if name.hasPrefix("_$") { return nil }
    type = binding.typeAnnotation?.type.trimmed
    initializer = binding.initializer?.value.trimmed
    isTransient = variable.attributes.contains { element in
      guard case .attribute(let attribute) = element else { return false }
      return attribute.baseName == "Transient"
    }
    isVariable = variable.bindingSpecifier.tokenKind == .keyword(.var)
    let attribute = variable.attributes.lazy.compactMap { element -> AttributeSyntax? in
      guard case .attribute(let attribute) = element,
        attribute.baseName == "Attribute"
      else { return nil }
      return attribute
    }.first
    self.attribute = attribute
    let relationshipAttribute = variable.attributes.lazy.compactMap {
      element -> AttributeSyntax? in
      guard case .attribute(let attribute) = element,
        attribute.baseName == "Relationship"
      else { return nil }
      return attribute
    }.first
    self.relationshipAttribute = relationshipAttribute
    var inverse: ExprSyntax?
    var deleteRule: ExprSyntax?
    var orderBy: [String] = []
    if case .argumentList(let arguments) = relationshipAttribute?.arguments {
      // A variadic's further values have no label: they belong to the label before them.
      var label = ""
      for argument in arguments {
        if let text = argument.label?.text { label = text }
        if label == "inverse" { inverse = argument.expression.trimmed }
        if label == "deleteRule" { deleteRule = argument.expression.trimmed }
        if label == "orderBy" { orderBy.append(argument.expression.trimmedDescription) }
      }
    }
    self.inverse = inverse
    self.deleteRule = deleteRule
    self.orderBy = orderBy
    var options: [String] = []
    var isCodable = false
    var originalName: String?
    var badOriginalName: ExprSyntax?
    if case .argumentList(let arguments) = attribute?.arguments {
      for argument in arguments {
        if argument.label?.text == "originalName" {
          if let literal = argument.expression.as(StringLiteralExprSyntax.self),
            literal.segments.count == 1,
            case .stringSegment(let segment) = literal.segments.first
          {
            originalName = segment.content.text
          } else {
            badOriginalName = argument.expression
          }
          continue
        }
        let option = argument.expression.trimmedDescription
        if option == ".codable" || option.hasSuffix("AttributeOption.codable") {
          isCodable = true
        } else {
          options.append(option)
        }
      }
    }
    self.options = options
    self.isCodable = isCodable
    self.originalName = originalName
    self.badOriginalName = badOriginalName
  }
}
