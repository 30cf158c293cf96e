/// One row inserted, updated or deleted by a save: SwiftData's `HistoryChange`.
///
/// Each case carries the change typed by its model, so that a change of one model is matched
/// by casting:
///
/// ```swift
/// for change in transaction.changes {
///   switch change {
///   case .insert(let inserted as DefaultHistoryInsert<Trip>): …
///   case .update(let updated as DefaultHistoryUpdate<Trip>): … updated.updatedAttributes …
///   case .delete(let deleted as DefaultHistoryDelete<Trip>): … deleted.tombstone[\.name] …
///   default: break
///   }
/// }
/// ```
///
/// Beside SwiftData's members, ``kind``, ``updatedAttributeNames`` and ``tombstone(as:)`` read
/// a change without a cast to its model.
public enum HistoryChange: Sendable {
  /// A row was inserted.
  case insert(any HistoryInsert)
  /// Attributes of a row changed.
  case update(any HistoryUpdate)
  /// A row was deleted.
  case delete(any HistoryDelete)

  /// The kind of a change.
  public enum Kind: String, Sendable, Codable {
    /// The row was inserted.
    case insert
    /// Attributes of the row changed.
    case update
    /// The row was deleted.
    case delete
  }

  /// The kind of change.
  public var kind: Kind {
    switch self {
    case .insert: .insert
    case .update: .update
    case .delete: .delete
    }
  }

  /// The row that changed.
  public var changedPersistentIdentifier: PersistentIdentifier {
    switch self {
    case .insert(let change): change.changedPersistentIdentifier
    case .update(let change): change.changedPersistentIdentifier
    case .delete(let change): change.changedPersistentIdentifier
    }
  }

  /// For an update, the stored names (columns) of the attributes and to-ones it changed; empty
  /// for an insert or a delete. History keeps names, not values.
  public var updatedAttributeNames: Set<String> { record?.attributeNames ?? [] }

  /// Whether this is an update of a `Model` (or of a subclass of it) that changed the
  /// attribute or to-one at `keyPath`.
  public func updated<Model: PersistentModel>(_ keyPath: PartialKeyPath<Model>) -> Bool {
    guard let record, record.isOf(Model.self),
      let name = Model.modelSchema.storedName(of: keyPath)
    else { return false }
    return record.attributeNames.contains(name)
  }

  /// For a delete of a `Model` row (or of a subclass of it), what it preserved
  /// (``HistoryTombstone``); nil for another kind of change or a row of another model.
  public func tombstone<Model: PersistentModel>(as _: Model.Type) -> HistoryTombstone<Model>? {
    guard let record, record.kind == .delete, record.isOf(Model.self) else { return nil }
    return HistoryTombstone(values: record.preserved)
  }

  /// What history recorded of the change.
  var record: HistoryChangeRecord? {
    switch self {
    case .insert(let change): (change as? any RecordedHistoryChange)?.record
    case .update(let change): (change as? any RecordedHistoryChange)?.record
    case .delete(let change): (change as? any RecordedHistoryChange)?.record
    }
  }

  /// The change `record` describes, typed by `Model`.
  static func make<Model: PersistentModel>(_: Model.Type, _ record: HistoryChangeRecord)
    -> HistoryChange
  {
    switch record.kind {
    case .insert: .insert(DefaultHistoryInsert<Model>(record: record))
    case .update: .update(DefaultHistoryUpdate<Model>(record: record))
    case .delete: .delete(DefaultHistoryDelete<Model>(record: record))
    }
  }
}

/// What history recorded of one change, whatever its model.
struct HistoryChangeRecord: Sendable {
  /// The kind of change.
  var kind: HistoryChange.Kind
  /// The row.
  var identifier: PersistentIdentifier
  /// The change's position in the store's history of changes.
  var changeIdentifier: Int64
  /// The token value of its transaction.
  var transactionIdentifier: Int64
  /// For an update, the stored names of what changed.
  var attributeNames: Set<String>
  /// For a delete, the preserved values by stored name.
  var preserved: [String: SQLValue]
  /// For a row of a model subclass, its path in `"_entity"` (``ModelInheritance``); nil for a
  /// root model's row.
  var subentity: String?

  /// Whether the row is one of `Model`'s: of its table, and of its class or a subclass of it.
  func isOf<Model: PersistentModel>(_: Model.Type) -> Bool {
    guard identifier.entityName == Model.entityName else { return false }
    guard let path = Model.modelSchema.inheritance?.path else { return true }
    return (subentity ?? "").hasPrefix(path)
  }
}

/// A change made from a ``HistoryChangeRecord``.
protocol RecordedHistoryChange: Sendable {
  var record: HistoryChangeRecord { get }
}

/// An inserted row, as SwiftData's `HistoryInsert`.
public protocol HistoryInsert<Model>: Sendable {
  /// The model of the row.
  associatedtype Model: PersistentModel
  /// The type that identifies a change.
  associatedtype ChangeIdentifier: Comparable, Hashable, Sendable
  /// The type that identifies a transaction.
  associatedtype TransactionIdentifier: Comparable, Hashable, Sendable
  /// The row.
  var changedPersistentIdentifier: PersistentIdentifier { get }
  /// The change's identity in its store.
  var changeIdentifier: ChangeIdentifier { get }
  /// The identity of the change's transaction.
  var transactionIdentifier: TransactionIdentifier { get }
}

/// An updated row, as SwiftData's `HistoryUpdate`.
public protocol HistoryUpdate<Model>: Sendable {
  /// The model of the row.
  associatedtype Model: PersistentModel
  /// The type that identifies a change.
  associatedtype ChangeIdentifier: Comparable, Hashable, Sendable
  /// The type that identifies a transaction.
  associatedtype TransactionIdentifier: Comparable, Hashable, Sendable
  /// The row.
  var changedPersistentIdentifier: PersistentIdentifier { get }
  /// The change's identity in its store.
  var changeIdentifier: ChangeIdentifier { get }
  /// The identity of the change's transaction.
  var transactionIdentifier: TransactionIdentifier { get }
  /// The attributes and to-ones the update changed.
  var updatedAttributes: [any PartialKeyPath<Model> & Sendable] { get }
}

/// A deleted row, as SwiftData's `HistoryDelete`.
public protocol HistoryDelete<Model>: Sendable {
  /// The model of the row.
  associatedtype Model: PersistentModel
  /// The type that identifies a change.
  associatedtype ChangeIdentifier: Comparable, Hashable, Sendable
  /// The type that identifies a transaction.
  associatedtype TransactionIdentifier: Comparable, Hashable, Sendable
  /// The row.
  var changedPersistentIdentifier: PersistentIdentifier { get }
  /// The change's identity in its store.
  var changeIdentifier: ChangeIdentifier { get }
  /// The identity of the change's transaction.
  var transactionIdentifier: TransactionIdentifier { get }
  /// What the deleted row preserved.
  var tombstone: HistoryTombstone<Model> { get }
}

/// An inserted row of `Model`: SwiftData's `DefaultHistoryInsert`.
public struct DefaultHistoryInsert<Model: PersistentModel>: HistoryInsert, RecordedHistoryChange {
  let record: HistoryChangeRecord
  /// The row.
  public var changedPersistentIdentifier: PersistentIdentifier { record.identifier }
  /// The change's position in the store's history of changes.
  public var changeIdentifier: Int64 { record.changeIdentifier }
  /// The position of the change's transaction (its token's value).
  public var transactionIdentifier: Int64 { record.transactionIdentifier }
}

/// An updated row of `Model`: SwiftData's `DefaultHistoryUpdate`.
public struct DefaultHistoryUpdate<Model: PersistentModel>: HistoryUpdate, RecordedHistoryChange {
  let record: HistoryChangeRecord
  /// The row.
  public var changedPersistentIdentifier: PersistentIdentifier { record.identifier }
  /// The change's position in the store's history of changes.
  public var changeIdentifier: Int64 { record.changeIdentifier }
  /// The position of the change's transaction (its token's value).
  public var transactionIdentifier: Int64 { record.transactionIdentifier }
  /// The key paths of the attributes and to-ones the update changed, in declaration order.
  /// History keeps names, not values. O(declared properties).
  public var updatedAttributes: [any PartialKeyPath<Model> & Sendable] {
    let names = record.attributeNames
    return Model.modelSchema.storedKeyPaths.compactMap { name, keyPath in
      names.contains(name) ? keyPath : nil
    }
  }
}

/// A deleted row of `Model`: SwiftData's `DefaultHistoryDelete`.
public struct DefaultHistoryDelete<Model: PersistentModel>: HistoryDelete, RecordedHistoryChange {
  let record: HistoryChangeRecord
  /// The row.
  public var changedPersistentIdentifier: PersistentIdentifier { record.identifier }
  /// The change's position in the store's history of changes.
  public var changeIdentifier: Int64 { record.changeIdentifier }
  /// The position of the change's transaction (its token's value).
  public var transactionIdentifier: Int64 { record.transactionIdentifier }
  /// What the row preserved: its `.preserveValueOnDeletion` attributes and, for a model that
  /// preserves any, the keys of its to-ones that store one.
  public var tombstone: HistoryTombstone<Model> { HistoryTombstone(values: record.preserved) }
}

extension ModelSchema {
  /// Each attribute's and stored relationship's stored name and key path, in declaration
  /// order.
  var storedKeyPaths: [(String, any PartialKeyPath<Model> & Sendable)] {
    attributes.compactMap { attribute in
      sendableKeyPath(attribute.keyPath, of: Model.self).map { (attribute.name, $0) }
    }
      + relationships.compactMap { relationship in
        sendableKeyPath(relationship.keyPath, of: Model.self).map { (relationship.name, $0) }
      }
  }

  /// The stored name of the attribute or relationship at `keyPath`, if it is one.
  func storedName(of keyPath: AnyKeyPath) -> String? {
    attribute(for: keyPath)?.name ?? relationship(for: keyPath)?.name
  }
}
