import Foundation

#if !canImport(Darwin)
  extension PredicateExpressions {
    /// `text.localizedStandardContains(other)` in a `#Predicate`: case- and
    /// diacritic-insensitive, locale-aware containment, as Foundation defines it.
    ///
    /// Foundation on Apple platforms provides this node; Foundation on Linux does not, so this
    /// library does, under the same name, and translates it to SQL that calls the same Swift
    /// function (so SQL and `Predicate.evaluate` agree by construction).
    public struct StringLocalizedStandardContains<
      Root: PredicateExpression, Other: PredicateExpression
    >:
      PredicateExpression, Sendable
    where Root.Output: StringProtocol, Other.Output: StringProtocol, Root: Sendable, Other: Sendable
    {
      /// A Boolean.
      public typealias Output = Bool
      /// The text searched.
      public let root: Root
      /// The text searched for.
      public let other: Other

      /// Creates the expression.
      public init(root: Root, other: Other) {
        self.root = root
        self.other = other
      }

      /// Evaluates `root.localizedStandardContains(other)`.
      public func evaluate(_ bindings: PredicateBindings) throws -> Bool {
        try root.evaluate(bindings).localizedStandardContains(try other.evaluate(bindings))
      }
    }

    /// Builds ``StringLocalizedStandardContains``; called by the `#Predicate` macro.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static func build_localizedStandardContains<Root, Other>(
      _ root: Root, _ other: Other
    ) -> StringLocalizedStandardContains<Root, Other> {
      StringLocalizedStandardContains(root: root, other: other)
    }
  }

  extension PredicateExpressions.StringLocalizedStandardContains: Codable
  where Root: Codable, Other: Codable {
    /// Encodes the two operands in order.
    public func encode(to encoder: any Encoder) throws {
      var container = encoder.unkeyedContainer()
      try container.encode(root)
      try container.encode(other)
    }

    /// Decodes the two operands in order.
    public init(from decoder: any Decoder) throws {
      var container = try decoder.unkeyedContainer()
      root = try container.decode(Root.self)
      other = try container.decode(Other.self)
    }
  }

  extension PredicateExpressions.StringLocalizedStandardContains: StandardPredicateExpression
  where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}

  extension PredicateExpressions.StringLocalizedStandardContains: SQLTranslatable {
    func translate(_ translator: inout PredicateTranslator) throws -> TranslatedExpression {
      let call = try translator.binaryOperation(self, root, other) { l, r in
        SQLFragment(
          "(\(StoreFunctions.localizedStandardContains)(\(l.sql), \(r.sql)) = 1)",
          l.bindings + r.bindings, isCondition: true, canBeNull: l.canBeNull || r.canBeNull)
      }
      guard case .sql(let fragment) = call else { return call }
      return .sql(translator.swiftFunction(fragment))
    }

    func shape(_ walker: inout PredicateShapeWalker) {
      walker.visit(root)
      walker.visit(other)
    }
  }
#endif
