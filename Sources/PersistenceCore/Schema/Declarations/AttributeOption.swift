import Foundation
import Synchronization

/// An option on a ``ModelAttribute``.
public struct AttributeOption: Hashable, Sendable {
  private let name: String
  /// For ``indexed(with:)``: the further columns of the index, in order.
  let companions: [String]
  /// For ``unique(with:)``: the further columns whose values are unique with this one's.
  let uniqueCompanions: [String]
  private init(_ name: String, companions: [String] = [], uniqueCompanions: [String] = []) {
    self.name = name
    self.companions = companions
    self.uniqueCompanions = uniqueCompanions
  }

  /// At most one row has a given value. Inserting a model whose value exists updates that
  /// row instead (SwiftData's upsert). Implies an index.
  public static let unique = AttributeOption("unique")
  /// At most one row has a given combination of this column's value and those of the columns
  /// named `columns` (SwiftData's `#Unique<Trip>([\.name, \.startDate, \.endDate])`, which
  /// `@Model` writes as `.unique(with: "startDate", "endDate")` on `name`). Inserting a model
  /// whose combination exists updates that row instead (the upsert of ``unique``); a `NULL` in
  /// any of them never matches. Implies a unique index on the columns, in that order.
  public static func unique(with columns: String...) -> AttributeOption {
    AttributeOption("uniqueWith:" + columns.joined(separator: ","), uniqueCompanions: columns)
  }
  /// The column has an index, for fast predicates and sorts on it.
  public static let indexed = AttributeOption("indexed")
  /// The column has an index on it and the columns named `columns` (in that order): a range of
  /// this column filtered, or sorted, by the others is answered from the index alone, without
  /// reading rows (a bounding box: longitude, then latitude, then the columns of the usual
  /// sort). Each further column makes inserts and updates a little dearer.
  public static func indexed(with columns: String...) -> AttributeOption {
    AttributeOption("indexedWith:" + columns.joined(separator: ","), companions: columns)
  }
  /// The value is kept in history (the tombstone) when the model is deleted.
  public static let preserveValueOnDeletion = AttributeOption("preserveValueOnDeletion")
  /// For `.codable` attributes of an immutable type: rows with equal stored bytes may share one
  /// decoded instance (decoded once per fetch), and equal `Hashable` values that only
  /// Foundation's `JSONEncoder` can encode (floating point, dates, super coders) reuse one
  /// encoding; the others are written straight to bytes, which costs less than finding an
  /// equal value. Do not use it for a type whose instances can change.
  public static let sharesEqualValues = AttributeOption("sharesEqualValues")
  /// For `@Attribute` of a `@Model` class: the property is stored as JSON, what `.codable(…)`
  /// declares in a hand-written schema, whose attributes refuse this option.
  public static let codable = AttributeOption("codable")
  /// SwiftData's property that is tracked but not saved: with `@Model`, the property is not
  /// stored, as a `@Transient` one (it keeps its initial value in each model the store makes,
  /// and needs one).
  public static let ephemeral = AttributeOption("ephemeral")
  /// SwiftData's Spotlight indexing. Accepted so that a model compiles unchanged; it has no
  /// effect here (there is no Spotlight on Linux): `@Model` leaves it out of the schema.
  public static let spotlight = AttributeOption("spotlight")
  /// SwiftData's encryption of the value in CloudKit. Accepted so that a model compiles
  /// unchanged; it has no effect here (nothing is synced to CloudKit): `@Model` leaves it out
  /// of the schema.
  public static let allowsCloudEncryption = AttributeOption("allowsCloudEncryption")
  /// SwiftData's storage of a large value beside the store. Accepted so that a model compiles
  /// unchanged; the value is kept in its row here, as any other (`@Model` leaves the option
  /// out of the schema): a fetch that does not need it can leave it out with
  /// `propertiesToFetch`.
  public static let externalStorage = AttributeOption("externalStorage")
}
