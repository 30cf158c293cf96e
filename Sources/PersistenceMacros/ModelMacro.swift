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
          "    .toMany(\(head), link: \\._$link_\(property.name), existing: \\._\(property.name)\(inverse)\(rule)\(order))"
      }
      if property.isLinkedOnFirstUse {
        // The side of a one-to-one that names its inverse (an inverse that is a to-many picks
        // an overload that is refused, saying to name it on the to-many).
        return
          "    .toOne(\(head), link: \\._$link_\(property.name), existing: \\._\(property.name)\(inverse)\(rule))"
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
      /// The context and row this model is in, set by the store through `linkOriginSlot`
      /// (written by `@Model`). Private, set for each row loaded and read for each link made:
      /// unchecked for exclusivity, as no access overlaps another (a check costs about 100
      /// instructions an access).
      @exclusivity(unchecked) private var _$linkOrigin = PersistenceCore.LinkOrigin()
      """)
    members.append(
      """
      /// The context and row this model is in: where its relationships load from, its
      /// `modelContext` and its `persistentModelID` (written by `@Model`).
      \(raw: access)var linkOrigin: PersistenceCore.LinkOrigin { _$linkOrigin }
      """)
    members.append(
      """
      /// How the store sets `linkOrigin`; only it can use this (written by `@Model`).
      \(raw: access)static let linkOriginSlot = PersistenceCore.LinkOriginSlot { model, body in
        body(&unsafeDowncast(model, to: \(raw: name).self)._$linkOrigin)
      }
      """)
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
    guard ModelDeclaration(declaration, attribute: node, diagnostics: &diagnostics) != nil else {
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
