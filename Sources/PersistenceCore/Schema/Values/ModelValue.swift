/// A `Sendable` value a fetch fills from a model's row without making the model: no identity
/// map, no registrar, no snapshot; each string and byte buffer made once, from the row.
///
/// Declare it beside the model, reading the model's attributes in the schema's order as the
/// model's own ``ModelSchema/loading(_:)`` does, native ones with `ModelRow.next(_:)`,
/// `.codable` ones decoded with `ModelRow.decoded(_:)`, and those the
/// value does not hold passed over with ``ModelRow/skip(_:)``:
///
/// ```swift
/// struct TripSummary: ModelValue {
///   var id: UUID
///   var name: String
///   var place: PlaceIdentifier?
///
///   init(row: inout ModelRow<Trip>) throws {
///     id = try row.next(\.id)
///     name = try row.next(\.name)
///     try row.skip(\.destination)
///     // …every attribute, in order…
///     place = try row.decoded(\.placeIdentifier)
///   }
/// }
///
/// let summaries = try context.fetch(FetchDescriptor<Trip>(), as: TripSummary.self)
/// ```
///
/// The first fetch of a value type in a container checks its initializer against the schema
/// (an attribute read out of order, of another type, twice or not at all is an error naming it,
/// thrown by that fetch; a later fetch does not check again). Relationships are not read: a
/// value holds what the model's own row stores.
///
/// Values are what the store holds: a context's unsaved changes are not in them (with
/// ``ModelContext/autosaveEnabled`` they are saved first, as for any fetch).
public protocol ModelValue<Model>: Sendable {
  /// The model whose rows fill the value.
  associatedtype Model: PersistentModel
  /// Fills the value from `row`, reading each of the model's attributes once, in the
  /// schema's order.
  init(row: inout ModelRow<Model>) throws
}
