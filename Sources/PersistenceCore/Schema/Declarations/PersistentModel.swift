import Observation

/// A class whose instances a ``ModelContext`` persists: the macro-free counterpart of
/// SwiftData's `@Model`.
///
/// Declare the model as an `@Observable final class` with an empty initializer and describe its
/// stored attributes once, with key paths:
///
/// ```swift
/// @Observable final class Trip: PersistentModel {
///   var id = UUID()
///   var name = ""
///   var destination = ""
///   var placeIdentifier: PlaceIdentifier? = nil
///
///   static let schema = ModelSchema<Trip>(
///     "trips",
///     .attribute(\.id, "id", .unique, .preserveValueOnDeletion),
///     .attribute(\.name, "name"),
///     .attribute(\.destination, "destination", .indexed),
///     .codable(\.placeIdentifier, "place_id"))
/// }
/// ```
///
/// Rows are decoded by column index straight into these key paths: no `Mirror`, and `Codable`
/// only for `.codable` attributes. The empty initializer supplies the default values used when
/// an attribute is added to an existing store.
///
/// A model that is not `final` (as `@Model class Trip` declares) makes `init()` `required`.
/// A subclass declared with `@Model` (`@Model class BusinessTrip: Trip`) is a model of its own,
/// kept in its root model's table (see ``ModelSchema/init(subclassOf:entity:_:)``); a subclass
/// without `@Model` is not: the store traps when asked to keep one, as it holds the class's
/// attributes only.
public protocol PersistentModel: AnyObject, Observable, SendableMetatype {
  /// The class the schema describes: the model itself (`Self`, inferred from ``schema``). It
  /// is named apart from `Self` so that a non-final class can declare its schema.
  associatedtype SchemaModel: PersistentModel = Self
  /// Creates an instance with default values; rows are loaded into it through the schema.
  init()
  /// The table and attributes of this model.
  static var schema: ModelSchema<SchemaModel> { get }
  /// Checks the model before a save writes it (inserted or changed); throw to refuse the whole
  /// save. The default accepts everything.
  func validateForSave() throws
  /// Makes the instance a fetch then fills from a row, when the schema has no row loader
  /// (``ModelSchema/loading(_:)``, the faster way). The default calls `init()`; implement it
  /// when `init()` does work that loading overwrites anyway, such as generating a `UUID`
  /// (about 5 µs each on Linux: more than loading the rest of the row).
  static func makeForLoading() -> Self
  /// The schema of a subclass declared with `@Model`, a `ModelSchema<Self>` (the protocol's
  /// ``schema`` is its root model's, whose type a subclass cannot change); nil for a root
  /// model. `@Model` writes it as a `class var` that each subclass overrides.
  static var _$subclassSchema: Any? { get }
}

extension PersistentModel {
  /// The schema, as a schema of `Self`: what the store uses. O(1): a comparison of two types
  /// (none once specialized) for a root model; for a subclass declared with `@Model`, its
  /// ``_$subclassSchema`` (a class property call and a cast). Traps for a subclass declared
  /// without `@Model`, whose schema is its model's.
  @inlinable
  static var modelSchema: ModelSchema<Self> {
    if SchemaModel.self == Self.self { return unsafeBitCast(schema, to: ModelSchema<Self>.self) }
    guard let schema = _$subclassSchema as? ModelSchema<Self> else { subclassIsNotAModel() }
    return schema
  }

  /// No subclass schema: a root model's.
  public static var _$subclassSchema: Any? { nil }

  /// `model`, as `Self`: what a class that is not final returns from `makeForLoading()`
  /// (written by `@Model`). O(1). Traps when `Self` is a subclass `@Model` did not declare,
  /// which the store cannot keep.
  public static func modelAsSelf<Made: AnyObject>(_ model: Made) -> Self {
    guard Made.self == Self.self else { subclassIsNotAModel() }
    return unsafeDowncast(model, to: Self.self)
  }

  /// Stops the program: `Self` is a subclass of a model, which the store cannot keep.
  @usableFromInline
  static func subclassIsNotAModel() -> Never {
    fatalError(
      "\(Self.self) is a subclass of the model \(SchemaModel.self) not declared with @Model: mark it @Model to keep it, or keep \(SchemaModel.self) instances"
    )
  }

  /// Calls `init()`.
  public static func makeForLoading() -> Self { Self() }

  /// Accepts the model.
  public func validateForSave() throws {}
}

extension PersistentModel where Self: Hashable {
  /// Whether two models are one: models compare by identity, as SwiftData's do (a context
  /// holds one instance per row). What lets `#Predicate { $0.hotel == nil }` compile.
  public static func == (lhs: Self, rhs: Self) -> Bool { lhs === rhs }

  /// Hashes the model's identity.
  public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
