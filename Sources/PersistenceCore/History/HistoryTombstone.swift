import Foundation

/// What a deleted row of `Model` preserved: SwiftData's `HistoryTombstone`.
///
/// A tombstone holds the row's `.preserveValueOnDeletion` attributes and, for a model that
/// preserves any, the keys of its to-ones that store one (``key(of:)``: which parent a
/// deleted child belonged to).
///
/// ```swift
/// case .delete(let deleted as DefaultHistoryDelete<Trip>):
///   let name = deleted.tombstone[\.name] as? String
/// ```
public struct HistoryTombstone<Model: PersistentModel>: Sequence, Sendable {
  /// Stored values by stored name (column).
  public let values: [String: SQLValue]

  /// A preserved property and its value.
  public typealias Element = (keyPath: any PartialKeyPath<Model> & Sendable, value: any Sendable)

  /// The preserved value of the attribute at `keyPath`, as the attribute's type (a `String`
  /// for a `String` attribute, an enum case for an enum): nil when it was not preserved, was
  /// `nil`, or cannot be read as the attribute's type. For a to-one, ``key(of:)``.
  public subscript(keyPath: PartialKeyPath<Model>) -> (any Sendable)? {
    guard let attribute = Model.modelSchema.attribute(for: keyPath),
      let stored = values[attribute.name]
    else { return nil }
    return Self.value(stored, as: attribute.valueType)
  }

  /// The primary key of the row that the deleted row's to-one at `keyPath` pointed to, as
  /// ``PersistentIdentifier/primaryKey`` of the related model's rows; nil when it pointed to
  /// none, or when the tombstone did not keep it (a model whose attributes are none of them
  /// `.preserveValueOnDeletion`, or a to-one whose inverse side stores the key).
  public func key<Target: PersistentModel>(of keyPath: KeyPath<Model, Target?>) -> Int64? {
    guard let relationship = Model.modelSchema.relationship(for: keyPath), relationship.storesKey,
      case .integer(let key)? = values[relationship.name]
    else { return nil }
    return key
  }

  /// The preserved attributes with a value, in declaration order.
  public func makeIterator() -> IndexingIterator<[Element]> {
    Model.modelSchema.attributes.compactMap { attribute -> Element? in
      guard let stored = values[attribute.name],
        let keyPath = sendableKeyPath(attribute.keyPath, of: Model.self),
        let value = Self.value(stored, as: attribute.valueType)
      else { return nil }
      return (keyPath, value)
    }.makeIterator()
  }

  /// `stored` read as `type`: a stored value type, an enum of raw values, or a `Codable` type
  /// kept as JSON; an optional as its wrapped type. Nil for `NULL` or a value that does not
  /// read as the type.
  static func value(_ stored: SQLValue, as type: Any.Type) -> (any Sendable)? {
    if stored == .null { return nil }
    let type = (type as? any TombstoneOptional.Type)?.tombstoneWrappedType ?? type
    if let native = type as? any PersistableValue.Type {
      return try? native.init(sqlValue: stored)
    }
    if let raw = type as? any (RawRepresentable & Sendable).Type {
      return raw.tombstoneValue(stored)
    }
    if let codable = type as? any (Decodable & Sendable).Type {
      let data: Data
      switch stored {
      case .text(let text): data = Data(text.utf8)
      case .blob(let bytes): data = bytes
      default: return nil
      }
      return try? decodeStoredJSON(codable, from: data)
    }
    return nil
  }
}

/// `Optional<Wrapped>`, seen through its wrapped type.
private protocol TombstoneOptional { static var tombstoneWrappedType: Any.Type { get } }
extension Optional: TombstoneOptional {
  fileprivate static var tombstoneWrappedType: Any.Type { Wrapped.self }
}

extension RawRepresentable where Self: Sendable {
  /// The case whose raw value is stored as `stored`, when the raw value is a stored type.
  fileprivate static func tombstoneValue(_ stored: SQLValue) -> Self? {
    guard let rawType = RawValue.self as? any PersistableValue.Type,
      let raw = (try? rawType.init(sqlValue: stored)) as? RawValue
    else { return nil }
    return Self(rawValue: raw)
  }
}

/// `keyPath` as a key path of `Model`, as SwiftData's history gives them: `& Sendable`. The
/// schema's key paths name stored properties, with no captured values, so they are immutable.
func sendableKeyPath<Model>(_ keyPath: AnyKeyPath, of _: Model.Type)
  -> (any PartialKeyPath<Model> & Sendable)?
{
  guard let partial = keyPath as? PartialKeyPath<Model> else { return nil }
  return unsafeBitCast(partial, to: (any PartialKeyPath<Model> & Sendable).self)
}
