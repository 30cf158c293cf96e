import Foundation
import Persistence

/// Something to do on a trip: SampleTrips' bucket-list item. It belongs to one trip, in that
/// trip's ``Trip/bucketList`` at its ``position``, and is deleted with it.
///
/// Its values travel as ``FieldValues``. Validation (``FieldValues/validate()``) runs on every
/// save, as a trip's does: a title that is not blank, every text field free of control
/// characters, the title at most ``TripRecord/maximumTextLength`` Unicode scalars long and the
/// details at most ``maximumDetailsLength``, a position that is not negative, and a trip.
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

  /// Checks the item's rules (see the type's docs).
  public func validateForSave() throws {
    try FieldValues(self).validate()
    // The link, not the trip: a stored row's key needs no query, nor a context.
    guard _trip.hasTarget else {
      throw TripPlannerError(
        code: .invalidTrip,
        message: "bucket-list item \(id.lowercasedString) belongs to no trip; add it to a trip",
        field: "trip")
    }
  }
}

extension BucketListItem: FieldRules {
  /// The longest the details may be, in Unicode scalars.
  public static let maximumDetailsLength = 2048

  /// A title that is not blank.
  public static var nonBlankFields: [PartialKeyPath<BucketListItem> & Sendable] {
    [\BucketListItem.title]
  }

  /// A position of 0 or more.
  public static func schemaMembers(of name: String) -> [(String, JSONValue)] {
    name == "position" ? [("minimum", .number(0))] : []
  }

  /// A position that is not negative.
  public static func violations(of values: FieldValues<BucketListItem>) -> [(
    field: String, reason: String
  )] {
    var found: [(String, String)] = []
    if let position = values.position, position < 0 {
      found.append(("position", "position \(position) is negative; positions start at 0"))
    }
    return found
  }

  /// ``maximumDetailsLength`` for the details; the other text fields, a trip's.
  public static func maximumLength(of name: String) -> Int {
    name == "details" ? maximumDetailsLength : TripRecord.maximumTextLength
  }
}
