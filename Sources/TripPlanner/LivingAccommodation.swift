import Foundation
import Persistence

/// Where one stays on a trip: SampleTrips' living accommodation. A trip has at most one
/// (``Trip/livingAccommodation``), deleted with it; its position can be far from the trip's
/// destination coordinates.
///
/// Validation (``LivingAccommodationRecord/validate()``) runs on every save, with a trip's rules
/// and messages: a name that is not blank, a name, an address and a place identifier free of
/// control characters and at most ``TripRecord/maximumTextLength`` Unicode scalars long, a
/// finite latitude in [-90, 90] and longitude in [-180, 180], and a trip.
@Model(table: "living_accommodations")
public final class LivingAccommodation {
  /// The stay's identity, unique in a store.
  @Attribute(.unique, .preserveValueOnDeletion) public var id: UUID
  /// What the place is called.
  public var name: String
  /// Its address; may be empty.
  public var address: String
  /// Degrees north.
  public var latitude: Double
  /// Degrees east.
  public var longitude: Double
  /// The place in an outside gazetteer, stored opaquely (as a trip's: decoded when first read;
  /// reads that must not take undecodable bytes for none resolve it first,
  /// `ModelContext.resolveFaults(_:)`).
  @Attribute(.codable, originalName: "place_id") public var placeIdentifier: PlaceIdentifier?

  /// The trip it is the stay of (its key is stored in the column `trip`, unique: one stay a
  /// trip); nil only for a stay not yet given one (which cannot be saved).
  @Relationship public var trip: Trip?

  /// An empty stay with a new random id.
  public init() {
    id = UUID()
    name = ""
    address = ""
    latitude = 0
    longitude = 0
    placeIdentifier = nil
  }

  /// Creates a stay from a record (a new random id when the record has none), of no trip.
  public convenience init(_ record: LivingAccommodationRecord) {
    self.init()
    apply(record)
  }

  /// Copies every field of `record` except an absent id.
  public func apply(_ record: LivingAccommodationRecord) {
    if let id = record.id { self.id = id }
    name = record.name
    address = record.address
    latitude = record.latitude
    longitude = record.longitude
    placeIdentifier = record.placeIdentifier.flatMap(PlaceIdentifier.init(rawValue:))
  }

  /// The stay's values as a record.
  public var record: LivingAccommodationRecord {
    LivingAccommodationRecord(
      id: id, name: name, address: address, latitude: latitude, longitude: longitude,
      placeIdentifier: placeIdentifier?.rawValue)
  }

  /// Checks the stay's rules (see the type's docs).
  public func validateForSave() throws {
    try record.validate()
    // The link, not the trip: a stored row's key needs no query, nor a context.
    guard _trip.hasTarget else {
      throw TripPlannerError(
        code: .invalidTrip,
        message: "stay \(id.lowercasedString) belongs to no trip; set it as a trip's stay",
        field: "trip")
    }
  }
}

/// A stay's values, without identity in a store: what files and requests carry.
public struct LivingAccommodationRecord: Hashable, Sendable, Codable {
  /// The id, or nil to make a new one.
  public var id: UUID?
  /// What the place is called.
  public var name: String
  /// Its address.
  public var address: String
  /// Degrees north.
  public var latitude: Double
  /// Degrees east.
  public var longitude: Double
  /// The place identifier's raw value.
  public var placeIdentifier: String?

  /// Creates a record.
  public init(
    id: UUID? = nil, name: String, address: String = "", latitude: Double, longitude: Double,
    placeIdentifier: String? = nil
  ) {
    self.id = id
    self.name = name
    self.address = address
    self.latitude = latitude
    self.longitude = longitude
    self.placeIdentifier = placeIdentifier
  }

  /// Every rule the record breaks, as (field, reason); empty when valid.
  public var violations: [(field: String, reason: String)] {
    var found: [(String, String)] = []
    if TripRecord.isBlank(name) { found.append(("name", "name must not be empty")) }
    found += TripRecord.textViolations(name, field: "name", label: "name")
    found += TripRecord.textViolations(address, field: "address", label: "address")
    if let placeIdentifier {
      found += TripRecord.textViolations(
        placeIdentifier, field: "placeIdentifier", label: "place id")
    }
    found += TripRecord.coordinateViolations(latitude: latitude, longitude: longitude)
    return found
  }

  /// Throws ``TripPlannerError/Code/invalidTrip`` naming the first field at fault.
  public func validate() throws { try TripRecord.throwIfAny(violations) }
}
