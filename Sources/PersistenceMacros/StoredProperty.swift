import PersistenceNativeTypes
import SwiftDiagnostics
import SwiftSyntax

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
  let orderBy: [ExprSyntax]
  /// `@Relationship`'s `minimumModelCount:` and `maximumModelCount:`, as written.
  let minimumModelCount: ExprSyntax?
  let maximumModelCount: ExprSyntax?
  /// `@Relationship`'s `originalName:`, as written (a to-many has no column it could name).
  let relationshipOriginalName: ExprSyntax?

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
  var relationshipProblem: (id: ModelError, message: String)? {
    if isTransient || !isVariable {
      return (
        .relationshipStored, "A relationship is a stored 'var' of the model: '\(name)' is not one"
      )
    }
    if attribute != nil {
      return (
        .relationshipAttribute,
        "@Attribute does not apply to a relationship: '\(name)' is stored as its related rows' keys"
      )
    }
    if let wrapped = wrappedType, wrapped.is(ArrayTypeSyntax.self) {
      return (
        .optionalToMany,
        "A to-many relationship is an array, not an optional one: declare '\(name)' as \(wrapped.trimmedDescription) = []"
      )
    }
    guard let kind = relationship else {
      return (
        .relationshipType,
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
          .toManyStart,
          "A to-many relationship starts empty: declare '\(name)' with '= []', and set it once the model's stored properties are"
        )
      }
    case .toOne:
      if inverse == nil, let rule = deleteRule, rule.optionName != "nullify" {
        return (
          .toOneRule,
          "A to-one that names no inverse stores the key and keeps the rule .nullify (deleting a row never deletes what it points to): declare 'deleteRule:' on the other side, with 'inverse:'"
        )
      }
      if !orderBy.isEmpty {
        return (.toOneOrder, "orderBy: orders a to-many: '\(name)' is a to-one")
      }
      if relationshipOriginalName != nil {
        return (
          .relationshipOriginalName,
          "originalName: would name the key column of the to-one '\(name)', which is named as the property here: leave it out (on a to-many, which has no column, it is accepted)"
        )
      }
      if initializer != nil {
        return (
          .toOneStart,
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
  let options: [ExprSyntax]
  /// Whether its `@Attribute` says `.codable` (however its type is spelled): stored as JSON.
  let isCodable: Bool
  /// The column its `@Attribute(originalName:)` names, else nil (the property's name).
  let originalName: String?
  /// The `originalName:` argument, when it is not one plain string literal.
  let badOriginalName: ExprSyntax?

  /// The column: `originalName`, else the property's name.
  var column: String { originalName ?? name }

  /// The property's name, as the code `@Model` writes uses it.
  var identifier: TokenSyntax { .identifier(name) }
  /// Its backing storage, `_name`, which the store reads and writes without observation.
  var backing: TokenSyntax { .identifier("_" + name) }
  /// A relationship's link made on first use, `_$link_name`.
  var link: TokenSyntax { .identifier("_$link_" + name) }

  /// Whether it is `var x: X?` with nothing saying what `X` is: no `@Relationship`, no
  /// `@Attribute`, and `X` not a type the store keeps natively by name. `X` may be a model
  /// (SwiftData's side of a relationship whose inverse the other side names) or a
  /// `PersistableValue` of one's own; the code `@Model` writes leaves the choice to the
  /// compiler (`_OptionalProperty`). A `#Unique` or `#Index` naming it makes it an attribute
  /// (`ModelDeclaration` checks that; this property does not know the class's constraints).
  var isUndeclaredOptional: Bool {
    guard !isTransient, relationshipAttribute == nil, attribute == nil,
      initializer == nil || initializer?.is(NilLiteralExprSyntax.self) == true,
      let wrapped = wrappedType,
      !wrapped.is(ArrayTypeSyntax.self), !wrapped.is(DictionaryTypeSyntax.self),
      !wrapped.is(TupleTypeSyntax.self)
    else { return false }
    return !NativeTypes.contains(wrapped.trimmedDescription)
  }

  /// Whether it is `var x: [X] = …` with nothing saying what `X` is: no `@Relationship`, no
  /// `@Attribute`, and `X` not a type the store keeps natively by name. `X` may be a model
  /// (SwiftData infers a to-many: the side of a relationship whose inverse the other side
  /// names) or a `Codable` type kept as JSON; the code `@Model` writes leaves the choice to the
  /// compiler (`_ArrayProperty`). An array without an initial value stays an attribute.
  var isUndeclaredArray: Bool {
    guard !isTransient, isVariable, relationshipAttribute == nil, attribute == nil,
      initializer != nil, let element = arrayElementType,
      !element.is(ArrayTypeSyntax.self), !element.is(DictionaryTypeSyntax.self),
      !element.is(OptionalTypeSyntax.self), !element.is(TupleTypeSyntax.self)
    else { return false }
    return !NativeTypes.contains(element.trimmedDescription)
  }

  /// The element type of an array type annotation (`[T]`, `Array<T>`), else nil.
  var arrayElementType: TypeSyntax? {
    guard let type else { return nil }
    if let array = type.as(ArrayTypeSyntax.self) { return array.element.trimmed }
    if let named = type.as(IdentifierTypeSyntax.self), named.name.text == "Array",
      let argument = named.genericArgumentClause?.arguments.first
    {
      return TypeSyntax(stringLiteral: argument.argument.trimmedDescription)
    }
    return nil
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
    // `@Attribute(.ephemeral)` is SwiftData's tracked but unsaved property: here, as
    // `@Transient`, a property the store neither saves nor loads.
    isTransient = variable.attributes.contains { element in
      guard case .attribute(let attribute) = element else { return false }
      if attribute.baseName == "Transient" { return true }
      guard attribute.baseName == "Attribute",
        case .argumentList(let arguments) = attribute.arguments
      else { return false }
      return arguments.contains { $0.label == nil && $0.expression.optionName == "ephemeral" }
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
    var orderBy: [ExprSyntax] = []
    var minimumModelCount: ExprSyntax?
    var maximumModelCount: ExprSyntax?
    var relationshipOriginalName: ExprSyntax?
    if case .argumentList(let arguments) = relationshipAttribute?.arguments {
      // A variadic's further values have no label: they belong to the label before them.
      var label = ""
      for argument in arguments {
        if let text = argument.label?.text { label = text }
        if label == "inverse" { inverse = argument.expression.trimmed }
        if label == "deleteRule" { deleteRule = argument.expression.trimmed }
        if label == "orderBy" { orderBy.append(argument.expression.trimmed) }
        if label == "minimumModelCount" { minimumModelCount = argument.expression.trimmed }
        if label == "maximumModelCount" { maximumModelCount = argument.expression.trimmed }
        if label == "originalName" { relationshipOriginalName = argument.expression.trimmed }
      }
    }
    self.minimumModelCount = minimumModelCount
    self.maximumModelCount = maximumModelCount
    self.relationshipOriginalName = relationshipOriginalName
    self.inverse = inverse
    self.deleteRule = deleteRule
    self.orderBy = orderBy
    var options: [ExprSyntax] = []
    var isCodable = false
    var originalName: String?
    var badOriginalName: ExprSyntax?
    if case .argumentList(let arguments) = attribute?.arguments {
      for argument in arguments {
        if argument.label?.text == "originalName" {
          // The literal's value, its escapes read (`"a\"b"` names the column `a"b`).
          if let value = argument.expression.as(StringLiteralExprSyntax.self)?
            .representedLiteralValue, !value.isEmpty
          {
            originalName = value
          } else {
            badOriginalName = argument.expression
          }
          continue
        }
        // SwiftData's schema hash, Spotlight and CloudKit options mean nothing to this store;
        // external storage is not built yet (the value stays in its row).
        if argument.label?.text == "hashModifier" { continue }
        if ["spotlight", "allowsCloudEncryption", "externalStorage"].contains(
          argument.expression.optionName)
        {
          continue
        }
        if argument.expression.optionName == "codable" {
          isCodable = true
        } else {
          options.append(argument.expression.trimmed)
        }
      }
    }
    self.options = options
    self.isCodable = isCodable
    self.originalName = originalName
    self.badOriginalName = badOriginalName
  }
}
