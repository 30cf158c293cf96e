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

  /// An input's object of `Model`'s fields (a request body's properties) but those named in
  /// `leaving`, then the members in `adding`: as ``object(_:leaving:adding:nullable:)``
  /// describes them, with what an input must keep, so that a client generator or a fuzzer
  /// makes bodies the service takes. `required`: the members ``FieldValues`` reads as missing
  /// when left out (a field that is neither the identity, optional, nor of a type that fills
  /// itself in, such as a date), the fields that must not be blank
  /// (``FieldRules/nonBlankFields``), and `requiring`; no other member
  /// (`additionalProperties: false`); each text field at most ``FieldRules/maximumLength(of:)``
  /// long, without control characters, and with something but white space when it must not be
  /// blank; then the model's own (``FieldRules/schemaMembers(of:)``).
  public static func input<Model: FieldRules>(
    _: Model.Type, leaving: Set<String> = [], adding: [(String, JSONValue)] = [],
    requiring: [String] = [], nullable: Bool = false
  ) -> JSONValue {
    let nonBlank = Set(
      Model.nonBlankFields.compactMap { keyPath in
        Model.schema.fields.first { $0.keyPath == keyPath }?.name
      })
    var required: [String] = []
    let fields = Model.schema.fields.filter { !leaving.contains($0.name) }
    let properties: [(String, JSONValue)] = fields.compactMap { field in
      guard let type = formatType(of: field), case .object(var members)? = property(field) else {
        return nil
      }
      if nonBlank.contains(field.name)
        || (!field.isIdentity && !field.isOptional && type.valueWhenAbsent == nil)
      {
        required.append(field.name)
      }
      if type.isText {
        members.append(("maxLength", .number(Double(Model.maximumLength(of: field.name)))))
        members.append(
          ("pattern", .string(nonBlank.contains(field.name) ? notBlankText : plainText)))
      }
      members += Model.schemaMembers(of: field.name)
      return (field.name, .object(members))
    }
    var members: [(String, JSONValue)] = [
      ("type", .string("object")),
      ("required", .array((required + requiring).map(JSONValue.string))),
      ("properties", .object(properties + adding)),
      ("additionalProperties", .bool(false)),
    ]
    if nullable { members.append(("nullable", .bool(true))) }
    return .object(members)
  }

  /// Text without control characters (C0, DEL, C1), as an ECMA-262 pattern.
  static let plainText = #"^[^\u0000-\u001F\u007F-\u009F]*$"#
  /// ``plainText`` with something but white space.
  static let notBlankText =
    #"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"#
}
