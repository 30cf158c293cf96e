import Foundation
import Persistence

/// Something to do on a trip: SampleTrips' bucket-list item. It belongs to one trip, in that
/// trip's ``Trip/bucketList`` at its ``position``, and is deleted with it.
///
/// Validation (``BucketListItemRecord/validate()``) runs on every save, as a trip's does: a
/// title that is not blank, a title and details free of control characters, the title at most
/// ``TripRecord/maximumTextLength`` Unicode scalars long and the details at most
/// ``BucketListItemRecord/maximumDetailsLength``, a position that is not negative, and a trip.
@Model(table: "bucket_list_items")
public final class BucketListItem {
  /// The item's identity, unique in a store (files and sync name items by it).
  @Attribute(.unique, .preserveValueOnDeletion) public var id: UUID
  /// What to do.
  public var title: String
  /// More about it; may be empty.
  public var details: String
  /// Whether it needs a reservation.
  @Attribute(originalName: "has_reservation") public var hasReservation: Bool
  /// Whether it is in the plan (SampleTrips' "in plan").
  @Attribute(originalName: "is_in_plan") public var isInPlan: Bool
  /// Where it is in its trip's bucket list: the list is ordered by it, ties by ``id`` (so
  /// that stores that synced the same items list them alike).
  public var position: Int

  /// The trip it belongs to (its key is stored in the column `trip`); nil only for an item not
  /// yet given one (which cannot be saved).
  @Relationship public var trip: Trip?

  /// An empty item with a new random id.
  public init() {
    id = UUID()
    title = ""
    details = ""
    hasReservation = false
    isInPlan = false
    position = 0
  }

  /// Creates an item from a record (a new random id when the record has none), in no trip.
  public convenience init(_ record: BucketListItemRecord) {
    self.init()
    apply(record)
  }

  /// Copies every field of `record` except an absent id.
  public func apply(_ record: BucketListItemRecord) {
    if let id = record.id { self.id = id }
    title = record.title
    details = record.details
    hasReservation = record.hasReservation
    isInPlan = record.isInPlan
    position = record.position
  }

  /// The item's values as a record.
  public var record: BucketListItemRecord {
    BucketListItemRecord(
      id: id, title: title, details: details, hasReservation: hasReservation,
      isInPlan: isInPlan, position: position)
  }

  /// Checks the item's rules (see the type's docs).
  public func validateForSave() throws {
    try record.validate()
    // The link, not the trip: a stored row's key needs no query, nor a context.
    guard _trip.hasTarget else {
      throw TripPlannerError(
        code: .invalidTrip,
        message: "bucket-list item \(id.lowercasedString) belongs to no trip; add it to a trip",
        field: "trip")
    }
  }
}

/// A bucket-list item's values, without identity in a store: what files and requests carry.
public struct BucketListItemRecord: Hashable, Sendable, Codable {
  /// The id, or nil to make a new one.
  public var id: UUID?
  /// What to do.
  public var title: String
  /// More about it.
  public var details: String
  /// Whether it needs a reservation.
  public var hasReservation: Bool
  /// Whether it is in the plan.
  public var isInPlan: Bool
  /// Its place in the trip's list.
  public var position: Int

  /// Creates a record.
  public init(
    id: UUID? = nil, title: String, details: String = "", hasReservation: Bool = false,
    isInPlan: Bool = false, position: Int = 0
  ) {
    self.id = id
    self.title = title
    self.details = details
    self.hasReservation = hasReservation
    self.isInPlan = isInPlan
    self.position = position
  }

  /// The longest the details may be, in Unicode scalars.
  public static let maximumDetailsLength = 2048

  /// Every rule the record breaks, as (field, reason); empty when valid.
  public var violations: [(field: String, reason: String)] {
    var found: [(String, String)] = []
    if TripRecord.isBlank(title) { found.append(("title", "title must not be empty")) }
    found += TripRecord.textViolations(title, field: "title", label: "title")
    found += TripRecord.textViolations(
      details, field: "details", label: "details", maximum: Self.maximumDetailsLength)
    if position < 0 {
      found.append(("position", "position \(position) is negative; positions start at 0"))
    }
    return found
  }

  /// Throws ``TripPlannerError/Code/invalidTrip`` naming the first field at fault.
  public func validate() throws { try TripRecord.throwIfAny(violations) }
}

extension BucketListItemRecord: ModelValue {
  /// An item's record read straight from its row by a value fetch
  /// (`ModelContext.fetch(_:as:)`): no ``BucketListItem`` is made; which trip it belongs to
  /// is not read.
  public init(row: inout ModelRow<BucketListItem>) throws {
    try self.init(
      id: row.next(\.id), title: row.next(\.title), details: row.next(\.details),
      hasReservation: row.next(\.hasReservation), isInPlan: row.next(\.isInPlan),
      position: row.next(\.position))
  }
}
