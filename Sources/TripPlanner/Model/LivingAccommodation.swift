import Foundation
import Geo
import Persistence

/// Where one stays on a trip: SampleTrips' living accommodation. A trip has at most one
/// (``Trip/livingAccommodation``), deleted with it; its position can be far from the trip's
/// destination coordinates.
///
/// Its values travel as ``FieldValues`` (files, requests, sync feeds, the command line), each
/// format written once over its declared fields. Validation (``FieldValues/validate()``) runs
/// on every save, with a trip's rules and messages: a name that is not blank, every text field
/// free of control characters and at most ``TripRecord/maximumTextLength`` Unicode scalars
/// long, a finite latitude in [-90, 90] and longitude in [-180, 180], and a trip.
@Model(table: "living_accommodations")
public final class LivingAccommodation {
  /// The stay's identity, unique in a store.
  @Attribute(.unique, .preserveValueOnDeletion) public var id: UUID
  /// What the place is called.
  public var name: String
  /// Its address; may be empty.
  public var address: String
  /// Degrees north, -90 to 90.
  public var latitude: Double
  /// Degrees east, -180 to 180.
  public var longitude: Double
  /// The place in a gazetteer, such as geonames:1850147.
  ///
  /// Stored opaquely, as a trip's: decoded when first read; reads that must not take
  /// undecodable bytes for none resolve it first (`ModelContext.resolveFaults(_:)`).
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

  /// Checks the stay's rules (see the type's docs).
  public func validateForSave() throws {
    try FieldValues(self).validate()
    // The link, not the trip: a stored row's key needs no query, nor a context.
    guard _trip.hasTarget else {
      throw TripPlannerError(
        code: .invalidTrip,
        message: "stay \(id.lowercasedString) belongs to no trip; set it as a trip's stay",
        field: "trip")
    }
  }
}

extension LivingAccommodation: FieldRules {
  /// A name that is not blank.
  public static var nonBlankFields: [PartialKeyPath<LivingAccommodation> & Sendable] {
    [\LivingAccommodation.name]
  }

  /// A latitude in [-90, 90] and a longitude in [-180, 180].
  public static func schemaMembers(of name: String) -> [(String, JSONValue)] {
    switch name {
    case "latitude": [("minimum", .number(-90)), ("maximum", .number(90))]
    case "longitude": [("minimum", .number(-180)), ("maximum", .number(180))]
    default: []
    }
  }

  /// A finite latitude in [-90, 90] and longitude in [-180, 180].
  public static func violations(of values: FieldValues<LivingAccommodation>) -> [(
    field: String, reason: String
  )] {
    var found: [(String, String)] = []
    if let latitude = values.latitude, let longitude = values.longitude {
      found += TripRecord.coordinateViolations(latitude: latitude, longitude: longitude)
    }
    return found
  }
}

extension FieldValues where Model == LivingAccommodation {
  /// The stay's position; nil when its latitude or longitude is not given.
  public var coordinate: Coordinate? {
    guard let latitude = self.latitude, let longitude = self.longitude else { return nil }
    return Coordinate(latitude: latitude, longitude: longitude)
  }
}
