import Foundation
import Persistence

/// JSON Schema (in OpenAPI 3.0's dialect) of a model's fields as the trip formats write them,
/// written once over `ModelField`: each field's type and format from its value's type, its
/// description from its documentation comment, `nullable` when it is optional. A field added
/// to ``Trip``, ``LivingAccommodation`` or ``BucketListItem`` is described with no other
/// change. Cost: O(fields), made once per document.
public enum FieldSchema {
  /// The schema of a value of `type` as JSON features and files write it; nil for a type the
  /// formats do not write (a test checks that every field of the domain's models has one).
  public static func value(of type: Any.Type) -> [(String, JSONValue)]? {
    (type as? any FormatValue.Type)?.schemaMembers
  }

  /// `field`'s schema: its value's, `nullable` when it is optional, its documentation as
  /// `description`; nil when the formats do not write its type.
  public static func property<Model>(_ field: ModelField<Model>) -> JSONValue? {
    guard var members = value(of: field.valueType) else { return nil }
    if field.isOptional { members.append(("nullable", .bool(true))) }
    if !field.documentation.isEmpty {
      members.append(("description", .string(field.documentation)))
    }
    return .object(members)
  }

  /// An object of `fields` (each by its property name, in declaration order) but those named
  /// in `leaving`, then the members in `adding`; `nullable` as asked. No member is required:
  /// a response may select its properties (`properties=`).
  public static func object<Model>(
    _ fields: [ModelField<Model>], leaving: Set<String> = [],
    adding: [(String, JSONValue)] = [], nullable: Bool = false
  ) -> JSONValue {
    let properties = fields.filter { !leaving.contains($0.name) }.compactMap { field in
      property(field).map { (field.name, $0) }
    }
    var members: [(String, JSONValue)] = [
      ("type", .string("object")), ("properties", .object(properties + adding)),
    ]
    if nullable { members.append(("nullable", .bool(true))) }
    return .object(members)
  }
}
