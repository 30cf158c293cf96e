import SwiftSyntax

extension AttributeSyntax {
  /// The attribute's name without its module: `Attribute` for `@Attribute`,
  /// `@PersistenceCore.Attribute` and `@Persistence.Attribute` alike, as the compiler resolves
  /// them to one macro.
  var baseName: String {
    if let member = attributeName.as(MemberTypeSyntax.self) { return member.name.text }
    if let identifier = attributeName.as(IdentifierTypeSyntax.self) { return identifier.name.text }
    return attributeName.trimmedDescription
  }
}
