import PersistenceNativeTypes
import SwiftDiagnostics
import SwiftSyntax

/// The class `@Model` is attached to, checked: a non-generic class whose persisted
/// properties are each a `var` of its own declaration. Nil, with the errors in `diagnostics`,
/// when it is not.
struct ModelDeclaration {
  let name: String
  /// The table: `@Model(table:)`'s, else the class's name.
  let table: String
  /// The access modifier the generated schema and `init()` take (`open` gives `public`), or
  /// none.
  let access: Keyword?
  let properties: [StoredProperty]
  let declaresEmptyInitializer: Bool
  /// Whether the class declares a designated initializer (one not marked `convenience`): a
  /// subclass that declares none inherits its superclass's.
  let declaresDesignatedInitializer: Bool
  /// Whether the class is final; one that is not makes `init()` required and
  /// `makeForLoading()` return `Self`.
  let isFinal: Bool
  /// Whether the class declares `id` (which then makes it `Identifiable`).
  let declaresID: Bool
  /// The options `#Index` and `#Unique` give each property (by name), as written in a schema.
  let constraints: [String: [ExprSyntax]]

  init?(
    _ declaration: some DeclGroupSyntax, attribute: AttributeSyntax,
    diagnostics: inout [Diagnostic]
  ) {
    guard let type = declaration.as(ClassDeclSyntax.self) else {
      diagnostics.append(
        Diagnostic(
          node: attribute,
          message: ModelDiagnostic.error(
            .notAClass,
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
            .generic, "@Model does not apply to a generic class: a table stores one type")))
      valid = false
    }
    var properties: [StoredProperty] = []
    // A class named with backticks (`` `Trip` ``) has the table `Trip`.
    var table = type.name.identifier?.name ?? type.name.trimmedDescription
    if case .argumentList(let arguments) = attribute.arguments,
      let argument = arguments.first(where: { $0.label?.text == "table" })
    {
      if let value = argument.expression.as(StringLiteralExprSyntax.self)?
        .representedLiteralValue,
        // The store's rule for a table's name, checked here rather than when a container opens.
        let first = value.unicodeScalars.first, first != "_",
        !("0"..."9").contains(first),
        value.unicodeScalars.allSatisfy({
          ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
            || $0 == "_"
        })
      {
        table = value
      } else {
        diagnostics.append(
          Diagnostic(
            node: argument.expression,
            message: ModelDiagnostic.error(
              .table,
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
              .lazy,
              "A @Model class does not persist a lazy property: make it a stored 'var', a computed property, or mark it @Transient"
            ),
            fixIt: ModelFixIts.markTransient(variable)))
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
              .severalBindings,
              "Declare each property of a @Model class on its own (one name per 'var')")))
        valid = false
        continue
      }
      if !property.isVariable && !property.isTransient {
        diagnostics.append(
          Diagnostic(
            node: variable.bindingSpecifier,
            message: ModelDiagnostic.error(
              .constant,
              "A @Model class persists its variables: declare '\(property.name)' with 'var', or mark it @Transient"
            ),
            fixIt: ModelFixIts.declareVariable(variable)))
        valid = false
        continue
      }
      if property.hasObservers && !property.isTransient {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              .observers,
              "A persisted property cannot have willSet or didSet: '\(property.name)' is observed through Observation (withObservationTracking)"
            )))
        valid = false
        continue
      }
      if property.name.hasPrefix("`")
        || ["schema", "linkOrigin", "linkOriginSlot", "loadsPropertiesOnFirstUse"].contains(
          property.name)
      {
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              .reservedName,
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
              .underscore,
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
              .transientWithoutValue,
              "A @Transient (or .ephemeral) property needs an initial value: the store makes models from rows without calling your initializers"
            ),
            fixIts: ModelFixIts.addInitialValue(variable, type: property.type).map { [$0] } ?? []))
        valid = false
        continue
      }
      if !property.isTransient && property.type == nil && property.initializer == nil {
        valid = false
        continue  // Swift itself says a stored property needs a type.
      }
      if property.relationshipAttribute != nil {
        if let problem = property.relationshipProblem {
          let fixIt: FixIt? =
            switch problem.id {
            case .optionalToMany:
              ModelFixIts.rebind(
                variable, type: property.wrappedType, value: "[]",
                message: "Make it an array, empty")
            case .toManyStart: ModelFixIts.rebind(variable, value: "[]", message: "Start it empty")
            case .toOneStart:
              ModelFixIts.rebind(variable, value: nil, message: "Leave out the initial value")
            default: nil
            }
          diagnostics.append(
            Diagnostic(
              node: property.relationshipAttribute.map(Syntax.init) ?? Syntax(variable),
              message: ModelDiagnostic.error(problem.id, problem.message),
              fixIts: fixIt.map { [$0] } ?? []))
          valid = false
          continue
        }
      } else if !property.isTransient && !property.isCodable,
        let problem = NativeTypes.refusal(
          of: (property.wrappedType ?? property.type)?.trimmedDescription ?? "")
      {
        // `Codable`, so the compiler would keep it as JSON, opaque to predicates and sorts
        // (`InferredAttributes`): refused here, saying why and what to write instead.
        diagnostics.append(
          Diagnostic(
            node: variable,
            message: ModelDiagnostic.error(
              .unorderedNumber,
              "\(problem.why): declare '\(property.name)' \(problem.instead), or mark it @Attribute(.codable) to keep it as JSON, opaque to predicates and sorts"
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
            .notRequired,
            "The store makes models of '\(type.name.text)' with init(), which a class that is not final must mark required"
          ),
          fixIt: ModelFixIts.markRequired(initializer)))
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
              .defaultedInitializer,
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
              .originalName,
              "originalName: names the column '\(property.name)' is stored in: give it as one string literal, not empty and without interpolation"
            )))
        valid = false
      }
      if property.isCodable && property.type == nil {
        diagnostics.append(
          Diagnostic(
            node: node,
            message: ModelDiagnostic.error(
              .codableType,
              "A .codable property needs its type written out: '\(property.name)' has none")))
        valid = false
      } else if case .codable = property.storage, property.initializer == nil {
        diagnostics.append(
          Diagnostic(
            node: node,
            message: ModelDiagnostic.error(
              .codableValue,
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
              .urlValue,
              "A URL has no empty value for the model the store makes before loading a row: give '\(property.name)' an initial value, or declare it URL?"
            )))
        valid = false
      }
    }
    let constraints = Self.constraints(
      of: type, properties: properties, diagnostics: &diagnostics, valid: &valid)
    guard valid else { return nil }
    self.constraints = constraints
    self.table = table
    self.declaresEmptyInitializer = declaresEmptyInitializer
    declaresDesignatedInitializer = type.memberBlock.members.contains { member in
      guard let initializer = member.decl.as(InitializerDeclSyntax.self) else { return false }
      return !initializer.modifiers.contains { $0.name.tokenKind == .keyword(.convenience) }
    }
    self.isFinal = isFinal
    name = type.name.trimmedDescription
    access =
      type.modifiers.lazy.compactMap { modifier -> Keyword? in
        switch modifier.name.tokenKind {
        case .keyword(.public), .keyword(.open): .public
        case .keyword(.package): .package
        default: nil
        }
      }.first
    self.properties = properties
  }
}
