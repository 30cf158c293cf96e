import Foundation

/// Which history to fetch: after a token, by authors, for some model types.
public struct HistoryDescriptor: Sendable {
  /// Only transactions after this token; nil for all that are kept.
  public var token: HistoryToken?
  /// Only transactions by these authors; nil for any author.
  public var authors: Set<String>?
  /// Leave out transactions by these authors (for example changes a sync applied, so that they
  /// are not sent back where they came from).
  public var excludedAuthors: Set<String> = []
  /// Only changes to these entities (table names); nil for all. Transactions left with no
  /// change are left out.
  public var entityNames: Set<String>?
  /// At most this many transactions.
  public var fetchLimit: Int?

  /// Creates a descriptor.
  public init(
    after token: HistoryToken? = nil, authors: Set<String>? = nil,
    modelTypes: [any PersistentModel.Type]? = nil, fetchLimit: Int? = nil
  ) {
    self.token = token
    self.authors = authors
    self.entityNames = modelTypes.map { Set($0.map { $0.entityName }) }
    self.fetchLimit = fetchLimit
  }
}

extension PersistentModel {
  /// The table name from the schema.
  static var entityName: String { schema.name }
}

/// One save, as history keeps it.
public struct HistoryTransaction: Sendable, Identifiable {
  /// The transaction's token; fetch after it to see only later transactions.
  public var token: HistoryToken
  /// The author of the context that saved.
  public var author: String?
  /// When the save committed.
  public var timestamp: Date
  /// What the save changed.
  public var changes: [HistoryChange]
  /// The token.
  public var id: HistoryToken { token }
}

/// One row inserted, updated or deleted by a save.
public struct HistoryChange: Sendable {
  /// The kind of change.
  public enum Kind: String, Sendable, Codable {
    /// The row was inserted.
    case insert
    /// Attributes of the row changed.
    case update
    /// The row was deleted.
    case delete
  }
  /// The kind of change.
  public var kind: Kind
  /// The row.
  public var changedIdentifier: PersistentIdentifier
  /// For updates, the names of the changed attributes (history keeps names, not values).
  public var updatedAttributes: Set<String>
  /// For deletes, the `.preserveValueOnDeletion` values the row had.
  public var tombstone: HistoryTombstone?

  /// Whether the attribute at `keyPath` was among the updated ones.
  public func updated<Model: PersistentModel>(_ keyPath: PartialKeyPath<Model>) -> Bool {
    guard let attribute = Model.modelSchema.attribute(for: keyPath) else { return false }
    return updatedAttributes.contains(attribute.name)
  }
}

/// The values a deleted row kept for its `.preserveValueOnDeletion` attributes and, for a
/// model that preserves any, the keys of its to-ones that store one (``key(of:)``): which
/// parent a deleted child belonged to.
public struct HistoryTombstone: Sendable {
  /// Stored values by column name.
  public var values: [String: SQLValue]

  /// The preserved value of the attribute at `keyPath`, or nil when it was not preserved.
  public subscript<Model: PersistentModel, Value: PersistableValue>(
    keyPath: KeyPath<Model, Value>
  ) -> Value? {
    guard let attribute = Model.modelSchema.attribute(for: keyPath),
      let stored = values[attribute.name]
    else { return nil }
    return try? Value(sqlValue: stored)
  }

  /// The preserved value of the enum attribute at `keyPath` (kept as its raw value), or nil
  /// when it was not preserved or names no case.
  public subscript<Model: PersistentModel, Value: RawRepresentable>(
    keyPath: KeyPath<Model, Value>
  ) -> Value? where Value.RawValue: PersistableValue {
    guard let attribute = Model.modelSchema.attribute(for: keyPath),
      let stored = values[attribute.name], let raw = try? Value.RawValue(sqlValue: stored)
    else { return nil }
    return Value(rawValue: raw)
  }

  /// The primary key of the row that the deleted row's to-one at `keyPath` pointed to, as
  /// ``PersistentIdentifier/primaryKey`` of the related model's rows; nil when it pointed to
  /// none, or when the tombstone did not keep it (a model whose attributes are none of them
  /// `.preserveValueOnDeletion`, or a to-one whose inverse side stores the key).
  public func key<Model: PersistentModel, Target: PersistentModel>(
    of keyPath: KeyPath<Model, Target?>
  ) -> Int64? {
    guard let relationship = Model.modelSchema.relationship(for: keyPath), relationship.storesKey,
      case .integer(let key)? = values[relationship.name]
    else { return nil }
    return key
  }
}
