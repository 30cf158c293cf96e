import Foundation
import Persistence

/// A part of a trip's plan: a model of its own that belongs to one trip, like a bucket-list
/// item or the trip's stay.
///
/// A sync feed's lines, applying a feed, and the checks a feed passes before it is applied go
/// over ``Trip/planParts`` and reach each part through this protocol, so a new part is its
/// model, this conformance, and a case of ``FeedChange/Subject`` (mapped in one place,
/// `FeedChange.Subject.part`).
public protocol TripPlanPart: FieldRules {
  /// The part's name in a feed line: its values' member, and with `Id` its id's
  /// (`bucketListItem`, `bucketListItemId`).
  static var memberName: String { get }
  /// What a person calls one, in messages: "bucket-list item", "stay".
  static var noun: String { get }
  /// Its id, as a stored key path (what a query, a tombstone or ``FieldValues`` is read by:
  /// in generic code `\Part.id` and `values.id` name the protocol's requirement, which no
  /// field is).
  static var idPath: KeyPath<Self, UUID> & Sendable { get }
  /// Its link to its trip, as a stored key path (what a prefetch or a tombstone is read by;
  /// `\Part.trip` in generic code names the protocol's requirement, not the stored property).
  static var tripPath: KeyPath<Self, Trip?> & Sendable { get }
  /// Whether a trip has at most one (a stay) rather than a list (bucket-list items).
  static var isOnePerTrip: Bool { get }

  /// The id: one row for its whole life.
  var id: UUID { get }
  /// The trip it belongs to.
  var trip: Trip? { get set }

  /// `trip`'s parts of this kind (loaded: prefetch ``planPath`` first).
  static func parts(of trip: Trip) -> [Self]
  /// The trip's relationship to its parts of this kind, to prefetch.
  static var planPath: PartialKeyPath<Trip> & Sendable { get }
  /// Makes `parts` the trip's parts of this kind (those it had and `parts` does not list are
  /// the caller's to delete).
  static func setParts(_ parts: [Self], of trip: Trip)
  /// A plan's parts of this kind, as a trip file gives them (an item's `position` its place
  /// in the list).
  static func values(in plan: TripPlan) -> [FieldValues<Self>]
  /// Gives the part to `trip`: appended to its list, or as its one (the one it had is the
  /// caller's to delete first).
  func attach(to trip: Trip)
  /// A feed change's subject for a part's change.
  static func subject(id: UUID, _ values: FieldValues<Self>?, tripID: UUID?) -> FeedChange.Subject
  /// The parts whose id is in `ids`.
  static func predicate(idIn ids: [UUID]) -> Predicate<Self>
}

extension TripPlanPart {
  /// The name of the part's entity in the schema (and in history).
  static var entityName: String { schema.name }
}

extension Trip {
  /// The parts of a trip's plan, in the order a feed carries them.
  public static let planParts: [any TripPlanPart.Type] = [
    BucketListItem.self, LivingAccommodation.self,
  ]

  /// The plan part whose entity is named `entityName`; nil for a trip and for other models.
  /// One hash lookup (a feed asks once per change).
  static func planPart(entityName: String) -> (any TripPlanPart.Type)? {
    planPartsByEntity[entityName]
  }

  private static let planPartsByEntity = Dictionary(
    uniqueKeysWithValues: planParts.map { ($0.entityName, $0) })
}

extension BucketListItem: TripPlanPart {
  public static var memberName: String { "bucketListItem" }
  public static var noun: String { "bucket-list item" }
  public static var idPath: KeyPath<BucketListItem, UUID> & Sendable { \BucketListItem.id }
  public static var tripPath: KeyPath<BucketListItem, Trip?> & Sendable { \BucketListItem.trip }
  public static var isOnePerTrip: Bool { false }
  public static var planPath: PartialKeyPath<Trip> & Sendable { \Trip.bucketList }
  public static func parts(of trip: Trip) -> [BucketListItem] { trip.bucketList }
  public func attach(to trip: Trip) { self.trip = trip }
  public static func setParts(_ parts: [BucketListItem], of trip: Trip) { trip.bucketList = parts }
  public static func values(in plan: TripPlan) -> [FieldValues<BucketListItem>] {
    plan.bucketList.enumerated().map { position, values in
      var values = values
      values.position = position
      return values
    }
  }
  public static func subject(id: UUID, _ values: FieldValues<BucketListItem>?, tripID: UUID?)
    -> FeedChange.Subject
  { .bucketListItem(id: id, values, tripID: tripID) }
  public static func predicate(idIn ids: [UUID]) -> Predicate<BucketListItem> {
    #Predicate { ids.contains($0.id) }
  }
}

extension LivingAccommodation: TripPlanPart {
  public static var memberName: String { "livingAccommodation" }
  public static var noun: String { "stay" }
  public static var idPath: KeyPath<LivingAccommodation, UUID> & Sendable {
    \LivingAccommodation.id
  }
  public static var tripPath: KeyPath<LivingAccommodation, Trip?> & Sendable {
    \LivingAccommodation.trip
  }
  public static var isOnePerTrip: Bool { true }
  public static var planPath: PartialKeyPath<Trip> & Sendable { \Trip.livingAccommodation }
  public static func parts(of trip: Trip) -> [LivingAccommodation] {
    trip.livingAccommodation.map { [$0] } ?? []
  }
  public func attach(to trip: Trip) { trip.livingAccommodation = self }
  public static func setParts(_ parts: [LivingAccommodation], of trip: Trip) {
    trip.livingAccommodation = parts.first
  }
  public static func values(in plan: TripPlan) -> [FieldValues<LivingAccommodation>] {
    plan.livingAccommodation.map { [$0] } ?? []
  }
  public static func subject(
    id: UUID, _ values: FieldValues<LivingAccommodation>?, tripID: UUID?
  ) -> FeedChange.Subject { .livingAccommodation(id: id, values, tripID: tripID) }
  public static func predicate(idIn ids: [UUID]) -> Predicate<LivingAccommodation> {
    #Predicate { ids.contains($0.id) }
  }
}

/// A plan part's change, in the part's own types: what ``FeedChange/Subject`` holds for
/// each part, for code written once over every part.
struct PartChange<Part: TripPlanPart> {
  var id: UUID
  var values: FieldValues<Part>?
  var tripID: UUID?

  var subject: FeedChange.Subject { Part.subject(id: id, values, tripID: tripID) }
}

/// ``PartChange`` of some part: what a generic function opens.
protocol AnyPartChange {
  associatedtype Part: TripPlanPart
  var change: PartChange<Part> { get }
  /// The part's id.
  var id: UUID { get }
  /// Its trip's id (nil for a delete).
  var tripID: UUID? { get }
}

extension PartChange: AnyPartChange {
  var change: PartChange<Part> { self }
}

extension AnyPartChange {
  /// What a person calls the part: ``TripPlanPart/noun``.
  var noun: String { Part.noun }
}

// The one place that maps a part's case of `FeedChange.Subject`: its change in the part's own
// types (`part`), and what a feed reads of every change without them (no box, no generics:
// a feed reads these once or more per change).
extension FeedChange.Subject {
  /// The changed row's id.
  var rowID: UUID {
    switch self {
    case .trip(let id, _), .bucketListItem(let id, _, _), .livingAccommodation(let id, _, _): id
    }
  }

  /// The plan part's model; nil for a trip.
  var partType: (any TripPlanPart.Type)? {
    switch self {
    case .trip: nil
    case .bucketListItem: BucketListItem.self
    case .livingAccommodation: LivingAccommodation.self
    }
  }

  /// The trip a part's insert or update gives; nil for a part's delete and for a trip.
  var partTripID: UUID? {
    switch self {
    case .trip: nil
    case .bucketListItem(_, _, let tripID), .livingAccommodation(_, _, let tripID): tripID
    }
  }

  /// The plan part a change is about, in its own types; nil for a trip.
  var part: (any AnyPartChange)? {
    switch self {
    case .trip: nil
    case .bucketListItem(let id, let values, let tripID):
      PartChange(id: id, values: values, tripID: tripID)
    case .livingAccommodation(let id, let values, let tripID):
      PartChange(id: id, values: values, tripID: tripID)
    }
  }
}
