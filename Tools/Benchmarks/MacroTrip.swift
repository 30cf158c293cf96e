import Foundation
import Persistence
import TripPlanner

/// Trip's attributes and a bucket list declared as a SwiftData user declares them, with
/// `@Model`: what the macro generates, measured beside `Trip`'s hand-written loader, binder,
/// registrar and links and beside C (the `macro` phase).
@Model final class MacroTrip {
  #Unique<MacroTrip>([\.id])
  #Index<MacroTrip>([\.startDate], [\.destination])
  var id: UUID
  var name: String
  var destination: String
  var startDate: Date
  var endDate: Date
  var latitude: Double
  var longitude: Double
  @Attribute(.codable, .sharesEqualValues) var placeIdentifier: PlaceIdentifier?
  /// As Trip's bucket list: a to-many whose link is made on first use, so that each fetched
  /// trip keeps a `LinkOrigin`, as each `Trip` does.
  @Relationship(deleteRule: .cascade, inverse: \MacroBucketItem.trip)
  var bucketList: [MacroBucketItem] = []

  init(_ record: TripRecord) {
    id = record.id ?? UUID()
    name = record.name
    destination = record.destination
    startDate = record.startDate
    endDate = record.endDate
    latitude = record.latitude
    longitude = record.longitude
    placeIdentifier = record.placeIdentifier.flatMap(PlaceIdentifier.init(rawValue:))
  }
}

/// A bucket-list item of a `MacroTrip`.
@Model final class MacroBucketItem {
  var title = ""
  var position = 0
  @Relationship var trip: MacroTrip?
}

/// The checksum of `checksum(_:)` for trips, over `@Model` trips.
func checksum(_ trips: some Sequence<MacroTrip>) -> UInt64 {
  var sum: UInt64 = 0
  for (index, trip) in trips.enumerated() {
    var hash: UInt64 = 1_469_598_103_934_665_603
    withUnsafeBytes(of: trip.id.uuid) { bytes in
      for byte in bytes { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
    }
    sum = sum &+ hash &* UInt64(index + 1)
  }
  return sum
}
