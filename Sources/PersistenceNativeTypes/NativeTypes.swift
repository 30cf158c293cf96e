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

  /// Whether `spelling` names a native type, bare or qualified by its module. O(1).
  package static func contains(_ spelling: some StringProtocol) -> Bool {
    var name = Substring(spelling)
    for module in modules where name.hasPrefix(module) {
      name = name.dropFirst(module.count)
      break
    }
    return set.contains(String(name))
  }
}
