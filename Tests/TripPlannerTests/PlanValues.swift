import Foundation
import TripPlanner

/// A stay's values as a test spells them: a new stay's, with these set.
func stayValues(
  id: UUID? = nil, name: String, address: String = "", latitude: Double, longitude: Double,
  placeIdentifier: String? = nil
) -> FieldValues<LivingAccommodation> {
  var values = FieldValues<LivingAccommodation>()
  values.id = id
  values.name = name
  values.address = address
  values.latitude = latitude
  values.longitude = longitude
  values.placeIdentifier = .some(placeIdentifier.flatMap(PlaceIdentifier.init(rawValue:)))
  return values
}

/// A bucket-list item's values as a test spells them: a new item's, with these set.
func itemValues(
  id: UUID? = nil, title: String, details: String = "", hasReservation: Bool = false,
  isInPlan: Bool = false, position: Int = 0
) -> FieldValues<BucketListItem> {
  var values = FieldValues<BucketListItem>()
  values.id = id
  values.title = title
  values.details = details
  values.hasReservation = hasReservation
  values.isInPlan = isInPlan
  values.position = position
  return values
}
