import SwiftSyntax
import SwiftSyntaxBuilder

/// The members `@Model` writes for a checked declaration, built as syntax (``Build``): each
/// name an identifier token, each key path, call and list a node, each comment that names
/// something trivia. The fixed parts are Swift source in which only nodes are interpolated.
///
/// Cost: O(properties + constraints) nodes.
struct ModelEmitter {
  let model: ModelDeclaration
  /// The properties stored in columns of the model's table.
  let persisted: [StoredProperty]
  let relationships: [StoredProperty]
  /// Whether the model is loaded and bound by the code written here (a row loader and a
  /// binder), not through its declarations.
  ///
  /// Not for a non-optional `.codable` value, decoded with its row, which a row loader cannot
  /// do (it keeps faults); nor for a to-one's key, a column no loader reads; nor for
  /// `var x: X?` of a type the macro cannot see (`_OptionalProperty`), a to-one or an
  /// attribute as the compiler finds.
  let loadsByRow: Bool
  /// The superclass, when the class is a subclass of a model (it inherits `PersistentModel`):
  /// the first type of its inheritance clause.
  let superclass: TypeSyntax?

  init(_ model: ModelDeclaration, superclass: TypeSyntax? = nil) {
    self.model = model
    self.superclass = superclass
    persisted = model.properties.filter { !$0.isTransient && $0.relationship == nil }
    relationships = model.properties.filter { $0.relationship != nil }
    loadsByRow =
      !persisted.contains {
        if case .codable = $0.storage { return true }
        return false
      } && relationships.allSatisfy(\.isLinkedOnFirstUse)
      && !persisted.contains(where: { $0.isUndeclaredOptional || $0.isUndeclaredArray })
      && superclass == nil
  }

  var typeName: TokenSyntax { .identifier(model.name) }

  /// The model's access modifier (`public` for an `open` class), then `extra`.
  func modifiers(_ extra: Keyword...) -> DeclModifierListSyntax {
    DeclModifierListSyntax(
      ([model.access].compactMap { $0 } + extra).map {
        DeclModifierSyntax(name: .keyword($0, trailingTrivia: .space))
      })
  }

  /// `private` for a final class; else the class's access and `private(set)`, as the accessors
  /// of its subclasses read it.
  var linkOriginModifiers: DeclModifierListSyntax {
    guard !model.isFinal else {
      return [DeclModifierSyntax(name: .keyword(.private, trailingTrivia: .space))]
    }
    return modifiers()
      + [
        DeclModifierSyntax(
          name: .keyword(.private), detail: DeclModifierDetailSyntax(detail: .identifier("set")),
          trailingTrivia: .space)
      ]
  }

  /// Every member, in the order the expansion shows them.
  var members: [DeclSyntax] {
    if superclass != nil { return subclassMembers }
    var members: [DeclSyntax] = [
      """
      /// Tells observers of this model's properties (a registrar made on first use).
      private let _$observationRegistrar = PersistenceCore.ModelObservationRegistrar()
      """,
      schema,
      """
      /// The context and row this model is in, set by the store through `linkOriginSlot`
      /// (written by `@Model`). Set for each row loaded and read for each link made:
      /// unchecked for exclusivity, as no access overlaps another (a check costs about 100
      /// instructions an access). Read by the accessors of subclasses.
      @exclusivity(unchecked) \(linkOriginModifiers)var _$linkOrigin = PersistenceCore.LinkOrigin()
      """,
      """
      /// The context and row this model is in: where its relationships load from, its
      /// `modelContext` and its `persistentModelID` (written by `@Model`).
      \(modifiers())var linkOrigin: PersistenceCore.LinkOrigin { _$linkOrigin }
      """,
      """
      /// The accessors load what a fetch with `propertiesToFetch` left (written by `@Model`).
      \(modifiers(.static))var loadsPropertiesOnFirstUse: Bool { true }
      """,
      """
      /// How the store sets `linkOrigin`; only it can use this (written by `@Model`).
      \(modifiers(.static))let linkOriginSlot = PersistenceCore.LinkOriginSlot { model, body in
        body(&unsafeDowncast(model, to: \(typeName).self)._$linkOrigin)
      }
      """,
    ]
    if loadsByRow { members.append(rowLoader) }
    members += [emptyInitializer, makeForLoading]
    if !model.isFinal {
      members += [
        inheritedDeclarations,
        """
        /// None: a root model's schema is ``schema`` (written by `@Model`; each subclass
        /// overrides it).
        \(modifiers(.class))var _$subclassSchema: Any? { nil }
        """,
      ]
    }
    if !model.declaresID {
      members.append(
        """
        /// The model's identity, what `Identifiable` asks for: the instance itself, as models
        /// compare by identity (a context holds one per row). Declare `id` to give another
        /// (written by `@Model`).
        \(modifiers())var id: ObjectIdentifier { ObjectIdentifier(self) }
        """)
    }
    if !model.declaresEmptyInitializer {
      let modifiers = model.isFinal ? modifiers(.convenience) : modifiers(.required, .convenience)
      members.append(
        """
        /// A model with each property's initial value, or its type's empty value: what a column
        /// added to an existing table is filled with (written by `@Model`).
        \(modifiers)init() {
          self.init(_$persistenceEmpty: ())
        }
        """)
    }
    return members
  }

  /// The members of a subclass of a model: its own registrar, schema (over the superclass's
  /// declarations, ``inheritedDeclarations``), empty initializer and `makeForLoading()`; the
  /// rest it inherits.
  var subclassMembers: [DeclSyntax] {
    let schemaName = subclassSchemaName
    // The superclass's declarations over this class, its own attributes, then its own
    // relationships, declared over this class as a root's are.
    let ownEntries = persisted.map { attribute($0) } + relationships.map(relationship)
    let own = ArrayExprSyntax(
      elements: ArrayElementListSyntax(
        ownEntries.enumerated().map { index, entry in
          ArrayElementSyntax(
            leadingTrivia: .newline, expression: entry,
            trailingComma: index < ownEntries.count - 1 ? .commaToken() : nil)
        }),
      rightSquare: .rightSquareToken(leadingTrivia: ownEntries.isEmpty ? [] : .newline))
    let declarations: ExprSyntax =
      "\(superclass!).\(Self.declarationsName(of: superclass!))(\(typeName).self) + \(own)"
    var schema: ExprSyntax =
      "PersistenceCore.ModelSchema<\(typeName)>(subclassOf: \(superclass!).self, entity: \(Build.literal(model.name)), \(declarations))"
    if let described = describedList { schema = "\(schema)\n.described(\(described))" }
    // A subclass that declares no designated initializer, each of whose properties has an
    // initial value, inherits its superclass's initializers (the one the store makes models
    // with too): declaring one here would take them away from its users.
    let inheritsInitializers =
      !model.declaresDesignatedInitializer
      && persisted.allSatisfy {
        $0.initializer != nil || $0.wrappedType != nil || $0.isUndeclaredOptional
      }
    var members: [DeclSyntax] = [
      """
      /// Tells observers of this model's properties (a registrar made on first use).
      private let _$observationRegistrar = PersistenceCore.ModelObservationRegistrar()
      """,
      Build.documented(
        "\(modifiers(.static))let \(schemaName) = \(schema)",
        [
          "The schema of the subclass \(model.name): its superclass's attributes, then its own, in the table of its root model (written by `@Model`)."
        ]),
      """
      /// The subclass's schema (written by `@Model`).
      \(modifiers(.override, .class))var _$subclassSchema: Any? { \(schemaName) }
      """,
      makeForLoading,
      inheritedDeclarations,
    ]
    if !inheritsInitializers { members.insert(emptyInitializer, at: 3) }
    if !model.declaresEmptyInitializer && !inheritsInitializers {
      members.append(
        """
        /// A model with each property's initial value, or its type's empty value (written by
        /// `@Model`).
        \(modifiers(.required, .convenience))init() {
          self.init(_$persistenceEmpty: ())
        }
        """)
    }
    return members
  }

  /// The name of a subclass's schema (`_$schema_BusinessTrip`).
  var subclassSchemaName: TokenSyntax { .identifier("_$schema_" + model.name) }

  /// The name of the class's declarations over a subclass (``inheritedDeclarations``).
  var declarationsName: TokenSyntax { .identifier("_$declarations_" + model.name) }

  /// The name of `type`'s declarations over a subclass: by its own name, without the module
  /// or types it is declared in (`SampleTrips.Trip` has `_$declarations_Trip`).
  static func declarationsName(of type: TypeSyntax) -> TokenSyntax {
    let name =
      type.as(MemberTypeSyntax.self)?.name.text ?? type.as(IdentifierTypeSyntax.self)?.name.text
      ?? type.trimmedDescription
    return .identifier("_$declarations_" + name)
  }

  /// `static func _$declarations_Name<S: Name>(_: S.Type) -> [ModelAttribute<S>]`: the class's
  /// attributes and relationships (its superclass's first, for a subclass) declared over `S`,
  /// what a subclass's schema starts with.
  var inheritedDeclarations: DeclSyntax {
    let root: TypeSyntax = "S"
    // A relationship is the class's own, read through the subclass's key path.
    let entries =
      persisted.map { attribute($0, root: root) }
      + relationships.map { property -> ExprSyntax in
        let arguments = [
          Build.argument(Build.keyPath(property.identifier, root: root)),
          Build.argument(Build.literal(property.name)),
          Build.argument(
            "from",
            superclass == nil
              ? "\(typeName).schema" as ExprSyntax : "\(typeName).\(subclassSchemaName)"),
        ]
        return Build.implicitCall("inherited", arguments)
      }
    let own = ArrayExprSyntax(
      elements: ArrayElementListSyntax(
        entries.enumerated().map { index, entry in
          ArrayElementSyntax(
            leadingTrivia: .newline, expression: entry,
            trailingComma: index < entries.count - 1 ? .commaToken() : nil)
        }),
      rightSquare: .rightSquareToken(leadingTrivia: entries.isEmpty ? [] : .newline))
    let body: ExprSyntax =
      if let superclass {
        "\(superclass).\(Self.declarationsName(of: superclass))(S.self) + \(own)"
      } else {
        "\(own)"
      }
    return """
      /// The attributes and relationships of \(raw: model.name), over a subclass `S`
      /// (written by `@Model`).
      \(modifiers(.static))func \(declarationsName)<S: \(typeName)>(_: S.Type) -> [PersistenceCore.ModelAttribute<S>] {
        \(body)
      }
      """
  }

  /// Each persisted property's column, name and documentation, for `ModelSchema.fields`; nil
  /// when there is none.
  var describedList: ArrayExprSyntax? {
    let described = persisted.map { property -> ExprSyntax in
      let members = [property.column, property.name, property.documentation].map {
        Build.argument(Build.literal($0))
      }
      return ExprSyntax(TupleExprSyntax(elements: Build.arguments(members)))
    }
    guard !described.isEmpty else { return nil }
    return ArrayExprSyntax(
      elements: ArrayElementListSyntax(
        described.enumerated().map { index, element in
          ArrayElementSyntax(
            leadingTrivia: .newline, expression: element,
            trailingComma: index < described.count - 1 ? .commaToken() : nil)
        }),
      rightSquare: .rightSquareToken(leadingTrivia: .newline))
  }

  /// `static let schema`: the table, a declaration per persisted property and relationship,
  /// the row loader and binder when the model has them, and each field's documentation.
  var schema: DeclSyntax {
    let entries =
      [Build.argument(Build.literal(model.table))]
      + (persisted.map { attribute($0) } + relationships.map(relationship)).map {
        Build.argument($0)
      }
    var schema: ExprSyntax =
      "PersistenceCore.ModelSchema<\(typeName)>(\(Build.arguments(entries, onLines: true))\n)"
    if loadsByRow {
      let binds = persisted.map { property -> ExprSyntax in
        if case .fault = property.storage {
          return
            "try row.bind(\(Build.keyPath(property.identifier)), fault: model.\(property.backing))"
        }
        return "try row.bind(\(Build.keyPath(property.identifier)), model.\(property.backing))"
      }
      schema = "\(schema)\n.loading { row in try \(typeName)(_$persistenceLoading: &row) }"
      schema =
        binds.isEmpty
        ? "\(schema)\n.saving { _, _ in }"
        : "\(schema)\n.saving { model, row in\(Build.statements(binds))\n}"
    }
    // Each persisted property's column, name and documentation, for `ModelSchema.fields`.
    if let list = describedList { schema = "\(schema)\n.described(\(list))" }
    return Build.documented(
      "\(modifiers(.static))let schema = \(schema)",
      ["The table \"\(model.table)\", a column per persisted property (written by `@Model`)."])
  }

  /// A persisted property's declaration in the schema: `.attribute(\.name, "name", options…,
  /// storage: \._name)`, `.codable(…)` for JSON, `._optional(…)` for an undeclared optional.
  func attribute(_ property: StoredProperty, root: TypeSyntax? = nil) -> ExprSyntax {
    let constraints = model.constraints[property.name, default: []]
    // `#Index` over several columns covers an `@Attribute(.indexed)` of its first.
    let own = property.options.filter {
      $0.optionName != "indexed" || !constraints.contains { $0.optionName == "indexed" }
    }
    let head =
      [
        Build.argument(Build.keyPath(property.identifier, root: root)),
        Build.argument(Build.literal(property.column)),
      ]
      + (own + constraints).map { Build.argument($0) }
    let backing = Build.keyPath(property.backing, root: root)
    if property.isUndeclaredOptional {
      return Build.implicitCall("_optional", head + [Build.argument("storage", backing)])
    }
    if property.isUndeclaredArray {
      return Build.implicitCall("_array", head + [Build.argument("storage", backing)])
    }
    return switch property.storage {
    case .native: Build.implicitCall("attribute", head + [Build.argument("storage", backing)])
    case .fault: Build.implicitCall("codable", head + [Build.argument("fault", backing)])
    case .codable: Build.implicitCall("codable", head + [Build.argument("storage", backing)])
    }
  }

  /// A relationship's declaration in the schema: `.toMany(…)`, or `.toOne(…)` with its link
  /// made on first use (the side of a one-to-one that names its inverse) or eager (the side
  /// that stores the key, whose rule is `.nullify`, as the relationship's check requires).
  func relationship(_ property: StoredProperty) -> ExprSyntax {
    let head = [
      Build.argument(Build.keyPath(property.identifier)),
      Build.argument(Build.literal(property.name)),
    ]
    guard property.isLinkedOnFirstUse else {
      return counted(
        Build.implicitCall(
          "toOne", head + [Build.argument("link", Build.keyPath(property.backing))]), property)
    }
    var arguments =
      head + [
        Build.argument("link", Build.keyPath(property.link)),
        Build.argument("existing", Build.keyPath(property.backing)),
      ]
    if let inverse = property.inverse { arguments.append(Build.argument("inverse", inverse)) }
    if let rule = property.deleteRule { arguments.append(Build.argument("deleteRule", rule)) }
    // `orderBy:` is variadic: its further key paths have no label.
    for (index, order) in property.orderBy.enumerated() {
      arguments.append(Build.argument(index == 0 ? "orderBy" : nil, order))
    }
    // An inverse that is a to-many picks an overload that is refused, saying to name it on the
    // to-many.
    let call: ExprSyntax
    if case .toMany = property.relationship {
      call = Build.implicitCall("toMany", arguments)
    } else {
      call = Build.implicitCall("toOne", arguments)
    }
    return counted(call, property)
  }

  /// `declaration`, with SwiftData's `minimumModelCount:` and `maximumModelCount:` when the
  /// property's `@Relationship` gives either.
  func counted(_ declaration: ExprSyntax, _ property: StoredProperty) -> ExprSyntax {
    guard property.minimumModelCount != nil || property.maximumModelCount != nil else {
      return declaration
    }
    let minimum = property.minimumModelCount ?? "nil"
    let maximum = property.maximumModelCount ?? "nil"
    return "\(declaration).modelCount(minimum: \(minimum), maximum: \(maximum))"
  }

  /// `init(_$persistenceLoading:)`: a model made from a row through its backing storage (no
  /// key-path call, no observation).
  var rowLoader: DeclSyntax {
    let loads = persisted.map { property -> ExprSyntax in
      let keyPath = Build.keyPath(property.identifier)
      if case .fault = property.storage {
        return "self.\(property.backing) = try row.fault(\(keyPath))"
      }
      return "self.\(property.backing) = try row.next(\(keyPath))"
    }
    return """
      /// A model made from a row, through the backing storage (written by `@Model`).
      private init(_$persistenceLoading row: inout PersistenceCore.ModelRow<\(typeName)>) throws {\(Build.statements(loads))
      }
      """
  }

  /// `init(_$persistenceEmpty:)`: each property's initial value, else its type's empty value.
  /// An undeclared optional's storage has its initial value (`_OptionalProperty.storage`).
  var emptyInitializer: DeclSyntax {
    let defaults = persisted.filter { $0.initializer == nil && !$0.isUndeclaredOptional }.map {
      property -> ExprSyntax in
      if case .fault = property.storage {
        return "self.\(property.backing) = PersistenceCore.CodableFault()"
      }
      return "self.\(property.backing) = PersistenceCore.ModelDefaults.value()"
    }
    // A class that is not final shares it with its subclasses, which call it.
    let modifiers =
      superclass != nil
      ? modifiers(.override)
      : model.isFinal
        ? DeclModifierListSyntax([
          DeclModifierSyntax(name: .keyword(.private, trailingTrivia: .space))
        ]) : modifiers()
    let statements =
      superclass == nil ? defaults : defaults + ["super.init(_$persistenceEmpty: ())"]
    return """
      /// A model with each property's initial value, or its type's empty value, made without
      /// running your initializers (written by `@Model`).
      \(modifiers)init(_$persistenceEmpty: Void) {\(Build.statements(statements))
      }
      """
  }

  /// `makeForLoading()`: what the store makes a model with before it sets a row's values; a
  /// class that is not final returns `Self`, as the protocol asks.
  var makeForLoading: DeclSyntax {
    let made: ExprSyntax = "\(typeName)(_$persistenceEmpty: ())"
    let type: TypeSyntax = model.isFinal ? TypeSyntax(IdentifierTypeSyntax(name: typeName)) : "Self"
    let body: ExprSyntax = model.isFinal ? made : "modelAsSelf(\(made))"
    let modifiers =
      superclass != nil
      ? modifiers(.override, model.isFinal ? .static : .class)
      : model.isFinal ? modifiers(.static) : modifiers(.class)
    return """
      /// What the store makes a model with before it sets a row's values: your initializers
      /// are not run for a fetched model (written by `@Model`).
      \(modifiers)func makeForLoading() -> \(type) {
        \(body)
      }
      """
  }
}
