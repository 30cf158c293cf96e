/// The value types the store keeps natively, by the names declarations spell them: the one list
/// that `@Model` (which tells a native attribute from a model or another type by its type's
/// name, having no types to look at) and the store (which checks that each has its
/// `PersistableValue` conformance) both read. Keeping them apart let the macro's list drift:
/// `var n: Int64?` was taken for a to-one and lost its model's generated row loader.
package enum NativeTypes {
  /// Each type's name, without its module.
  package static let names: [String] = [
    "String", "Int", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "Double",
    "Float", "Bool", "Date", "UUID", "Data", "URL",
  ]

  /// The modules a name may be qualified by: `Swift.Int`, `Foundation.URL`.
  static let modules = ["Swift.", "Foundation."]

  private static let set = Set(names)

  /// Number types that are `Codable` but not kept, by name: why, and the type to declare
  /// instead. A property of one would otherwise be kept as JSON, which predicates and sorts
  /// cannot read.
  static let refused: [String: (why: String, instead: String)] = [
    "UInt64": (
      "A UInt64 has no INTEGER column that keeps its order (half its values are above Int64.max), so predicates and sorts would answer wrongly",
      "Int64"
    ),
    "UInt": (
      "A UInt has no INTEGER column that keeps its order (half its values are above Int64.max), so predicates and sorts would answer wrongly",
      "Int"
    ),
    "Decimal": (
      "A Decimal has no exact column that also sorts (a REAL would round it)",
      "an Int of minor units"
    ),
  ]

  /// Why the type `spelling` names is refused as an attribute, bare or qualified by its
  /// module, and what to declare instead; nil for any other. O(1).
  package static func refusal(of spelling: some StringProtocol) -> (why: String, instead: String)? {
    refused[String(unqualified(spelling))]
  }

  /// `spelling` without its module.
  static func unqualified(_ spelling: some StringProtocol) -> Substring {
    let name = Substring(spelling)
    for module in modules where name.hasPrefix(module) {
      return name.dropFirst(module.count)
    }
    return name
  }

  /// Whether `spelling` names a native type, bare or qualified by its module. O(1).
  package static func contains(_ spelling: some StringProtocol) -> Bool {
    set.contains(String(unqualified(spelling)))
  }
}
