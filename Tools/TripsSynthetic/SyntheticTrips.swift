import Foundation
import TripPlanner

/// A deterministic generator of synthetic trips from GeoNames cities (SplitMix64): the same
/// seed gives the same trips on every machine.
public struct SyntheticTrips {
  /// A city from `Data/cities.csv`.
  public struct City: Sendable {
    /// The GeoNames id.
    public var id: Int
    /// The name.
    public var name: String
    /// Degrees north.
    public var latitude: Double
    /// Degrees east.
    public var longitude: Double
  }

  /// Reads `Data/cities.csv` (`geonameid,name,country,latitude,longitude,population`).
  public static func cities(_ data: Data) throws -> [City] {
    try CSVReader.records(data).dropFirst().compactMap { row in
      guard row.fields.count == 6, let id = Int(row.fields[0]),
        let latitude = Double(row.fields[3]), let longitude = Double(row.fields[4])
      else { return nil }
      return City(id: id, name: row.fields[1], latitude: latitude, longitude: longitude)
    }
  }

  /// Starts the sequence for `seed`.
  public init(seed: UInt64) { state = seed }

  var state: UInt64

  /// The next 64 random bits.
  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A number in 0..<bound.
  public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

  static let templates = [
    "%@ weekend", "Spring in %@", "Conference, %@", "Food tour: %@", "\"Slow travel\" in %@",
    "Hiking near %@", "Family visit to %@", "%@, again", "Winter lights of %@",
  ]

  /// The trip number `index`: a random city, start day in 2027–2030, up to 20 days long.
  public mutating func record(_ index: Int, cities: [City]) -> TripRecord {
    let city = cities[below(cities.count)]
    let start = Date(timeIntervalSince1970: 1_798_761_600 + Double(below(1460)) * 86400)
    let end = start.addingTimeInterval(Double(below(21)) * 86400)
    let name = Self.templates[below(Self.templates.count)].replacingOccurrences(
      of: "%@", with: city.name)
    let id = uuid()
    return TripRecord(
      id: id, name: name, destination: city.name, startDate: start, endDate: end,
      latitude: city.latitude, longitude: city.longitude,
      placeIdentifier: index % 10 == 9 ? nil : "geonames:\(city.id)")
  }

  static let activities = [
    "Walk the old town of %@", "Morning market in %@", "Dinner at a family restaurant",
    "Day trip out of %@", "Cooking class", "Sunrise viewpoint", "Guided walking tour",
    "Botanical garden", "City museum", "Concert or show",
  ]

  /// A generated plan for `trip` (labelled as generated, not real places): `items`
  /// bucket-list items from activity templates, in order, and with `stay` a made-up lodging
  /// within about 3 km of the destination. Ids are random from the same sequence, so the same
  /// seed gives the same plans.
  public mutating func plan(for trip: TripRecord, items: Int, stay: Bool) -> TripPlan {
    var plan = TripPlan()
    for position in 0..<items {
      let template = Self.activities[below(Self.activities.count)]
      var item = FieldValues<BucketListItem>()
      item.id = uuid()
      item.title = template.replacingOccurrences(of: "%@", with: trip.destination)
      item.details = below(3) == 0 ? "Book ahead" : ""
      item.hasReservation = below(4) == 0
      item.isInPlan = below(2) == 0
      item.position = position
      plan.bucketList.append(item)
    }
    if stay {
      let latitude = max(-90, min(90, trip.latitude + (Double(below(601)) - 300) / 10_000))
      var longitude = trip.longitude + (Double(below(601)) - 300) / 10_000
      if longitude >= 180 { longitude -= 360 }
      if longitude < -180 { longitude += 360 }
      var values = FieldValues<LivingAccommodation>()
      values.id = uuid()
      values.name = "Guesthouse \(trip.destination)"
      values.latitude = latitude
      values.longitude = longitude
      plan.livingAccommodation = values
    }
    return plan
  }

  /// A version-4 UUID from the sequence.
  mutating func uuid() -> UUID {
    var bytes = (next(), next())
    return withUnsafeBytes(of: &bytes) { raw -> UUID in
      var uuid = UUID().uuid
      withUnsafeMutableBytes(of: &uuid) {
        $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[0..<16]))
      }
      uuid.6 = (uuid.6 & 0x0F) | 0x40
      uuid.8 = (uuid.8 & 0x3F) | 0x80
      return UUID(uuid: uuid)
    }
  }
}
