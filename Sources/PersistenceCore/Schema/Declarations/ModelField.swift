/// One persisted attribute of a model as formats and tools see its declaration: the
/// property's name (the key JSON, CSV, a service and a command line use for it), its column,
/// its value's type, whether it may be nil, and the summary of its documentation comment.
///
/// `@Model` writes them (``ModelSchema/fields``), so that a format written once over a model's
/// fields learns of a field added to the declaration without being told:
///
/// ```swift
/// for field in Trip.schema.fields {
///   print(field.name, field.valueType, field.isOptional, field.documentation)
/// }
/// // id UUID false The trip's identity, unique in a store …
/// // startDate Date false When it starts.
/// ```
///
/// A schema declared by hand names each field as its column, with no documentation, unless it
/// says otherwise with ``ModelSchema/described(_:)``.
public struct ModelField<Model: PersistentModel>: Sendable {
  /// The property's name.
  public let name: String
  /// The column it is stored in (the name, or its `originalName`).
  public let column: String
  /// The value's type, optional unwrapped: `String` for `String?`; for a `.codable`
  /// attribute, the encoded type.
  public let valueType: Any.Type
  /// Whether the property may be nil.
  public let isOptional: Bool
  /// Whether the value is stored opaquely (`.codable`): predicates and sorts cannot use it.
  public let isCodable: Bool
  /// Whether no two models may have the same value (`.unique`, alone).
  public let isUnique: Bool
  /// The first paragraph of the property's documentation comment, its lines joined by
  /// spaces; empty when it has none.
  public let documentation: String
  /// The property: a key path is an immutable value, shared between threads as it is (what
  /// `ModelContext.enumerateValues` reads takes these).
  public let keyPath: PartialKeyPath<Model> & Sendable

  /// The field of `attribute`; nil for an entry whose key path does not start at the model
  /// (a to-one's key column, which is not a field).
  init?(_ attribute: ModelAttribute<Model>, name: String?, documentation: String?) {
    guard let keyPath = attribute.keyPath as? PartialKeyPath<Model> else { return nil }
    // `Sendable` is a marker: the same reference, its immutability stated.
    self.keyPath = unsafeBitCast(keyPath, to: (PartialKeyPath<Model> & Sendable).self)
    self.name = name ?? attribute.name
    column = attribute.name
    valueType = unwrappedType(attribute.valueType)
    isOptional = attribute.isOptional
    isCodable = attribute.isCodable
    isUnique = attribute.options.contains(.unique)
    self.documentation = documentation ?? ""
  }

  /// The field's value in `model`, as `Any` (an optional as it is: `nil` or the value).
  /// O(1), a key-path read.
  public func value(of model: Model) -> Any { model[keyPath: keyPath] }
}

/// `Optional<Wrapped>`, seen through its wrapped type.
private protocol OptionalType { static var wrappedType: Any.Type { get } }
extension Optional: OptionalType {
  static var wrappedType: Any.Type { Wrapped.self }
}

/// `type`, or its wrapped type when it is an optional.
private func unwrappedType(_ type: Any.Type) -> Any.Type {
  (type as? any OptionalType.Type)?.wrappedType ?? type
}
