import Foundation
import Persistence

// The subclasses of SampleTrips' `Trip` that SwiftData's 2025 talk ("Dive into inheritance
// and schema migration") declares, as it writes them, with `import Persistence` in place of
// `import SwiftData`.

extension SampleTrips {
  @available(iOS 26, *)
  @Model class PersonalTrip: Trip {
    enum Reason: String, CaseIterable, Codable {
      case family
      case reunion
      case wellness
      case unknown
    }

    var reason: Reason

    init(name: String, destination: String, startDate: Date, endDate: Date, reason: Reason) {
      self.reason = reason
      super.init(name: name, destination: destination, startDate: startDate, endDate: endDate)
    }
  }

  @available(iOS 26, *)
  @Model class BusinessTrip: Trip {
    var perdiem: Double = 0.0
  }
}

/// Runs the talk's calls on a container of the trips and their subclasses at `url`: trips of
/// each class inserted (a business trip with the initializer it inherits, a bucket list of its
/// own), a fetch of every trip as its own class, the talk's two predicates (`is` and `if let …
/// as?`), a cascade from a subclass, and history typed by the subclass. Each answer is computed here from what was inserted.
@MainActor func checkSampleTripsInheritance(
  _ url: URL, _ check: (String, () throws -> Bool) -> Void
) throws {
  typealias Trip = SampleTrips.Trip
  typealias PersonalTrip = SampleTrips.PersonalTrip
  typealias BusinessTrip = SampleTrips.BusinessTrip
  typealias BucketListItem = SampleTrips.BucketListItem
  let container = try ModelContainer(
    for: Trip.self, PersonalTrip.self, BusinessTrip.self,
    configurations: ModelConfiguration(url: url))
  let day = Date(timeIntervalSinceReferenceDate: 810_000_000)
  let week = day.addingTimeInterval(7 * 86_400)
  let inserted: [(name: String, kind: String)] = [
    ("Grandma's birthday", "PersonalTrip"), ("Sales summit", "BusinessTrip"),
    ("Weekend away", "Trip"),
  ]
  check("SampleTrips 2025: a personal, a business and a plain trip, each fetched as its class") {
    let context = ModelContext(container)
    context.insert(
      PersonalTrip(
        name: inserted[0].name, destination: "Osaka", startDate: day, endDate: week,
        reason: .family))
    let business = BusinessTrip(
      name: inserted[1].name, destination: "Berlin", startDate: day, endDate: week)
    business.perdiem = 180
    context.insert(business)
    business.bucketList = [
      BucketListItem(title: "Keynote", details: "", hasReservation: true, isInPlan: true)
    ]
    context.insert(Trip(name: inserted[2].name, destination: "Nara", startDate: day, endDate: week))
    try context.save()
    // The store may hold other trips (PostgreSQL's holds the other checks' too).
    let names = inserted.map(\.name)
    let all = try ModelContext(container).fetch(
      FetchDescriptor<Trip>(
        predicate: #Predicate { names.contains($0.name) }, sortBy: [SortDescriptor(\.name)]))
    let expected = inserted.sorted { $0.name < $1.name }
    return all.map(\.name) == expected.map(\.name)
      && all.map { "\(type(of: $0))" } == expected.map(\.kind)
  }
  check("SampleTrips 2025: #Predicate { $0 is BusinessTrip }, a business trip's own values") {
    let context = ModelContext(container)
    let trips = try context.fetch(
      FetchDescriptor<Trip>(predicate: #Predicate { $0 is BusinessTrip }))
    guard trips.count == 1, let business = trips.first as? BusinessTrip else { return false }
    return business.name == inserted[1].name && business.perdiem == 180
      && business.bucketList.map(\.title) == ["Keynote"]
  }
  check("SampleTrips 2025: if let personal = trip as? PersonalTrip { personal.reason == family }") {
    let family = PersonalTrip.Reason.family
    let trips = try ModelContext(container).fetch(
      FetchDescriptor<Trip>(
        predicate: #Predicate { trip in
          if let personal = trip as? PersonalTrip {
            return personal.reason == family
          } else {
            return false
          }
        }))
    return trips.map(\.name) == [inserted[0].name]
  }
  check("SampleTrips 2025: deleting a business trip deletes its bucket list") {
    let context = ModelContext(container)
    let trips = try context.fetchCount(FetchDescriptor<Trip>())
    let items = try context.fetchCount(FetchDescriptor<BucketListItem>())
    guard let business = try context.fetch(FetchDescriptor<BusinessTrip>()).first else {
      return false
    }
    context.delete(business)
    try context.save()
    let check = ModelContext(container)
    return try check.fetchCount(FetchDescriptor<BusinessTrip>()) == 0
      && check.fetchCount(FetchDescriptor<BucketListItem>()) == items - 1
      && check.fetchCount(FetchDescriptor<Trip>()) == trips - 1
  }
  check("SampleTrips 2025: history types a business trip's changes as BusinessTrip's") {
    let context = ModelContext(container)
    var latest = HistoryDescriptor<DefaultHistoryTransaction>(
      sortBy: [SortDescriptor(\.token, order: .reverse)])
    latest.fetchLimit = 1
    guard let token = try context.fetchHistory(latest).first?.token else { return false }
    let trip = BusinessTrip(name: "Trade fair", destination: "Milan", startDate: day, endDate: week)
    context.insert(trip)
    try context.save()
    trip.perdiem = 95
    try context.save()
    context.delete(trip)
    try context.save()
    let descriptor = HistoryDescriptor<DefaultHistoryTransaction>(
      predicate: #Predicate { $0.token > token })
    var seen: [String] = []
    for transaction in try context.fetchHistory(descriptor) {
      for change in transaction.changes {
        switch change {
        case .insert(_ as DefaultHistoryInsert<BusinessTrip>):
          seen.append("insert")
        case .update(let updated as DefaultHistoryUpdate<BusinessTrip>):
          if updated.updatedAttributes.contains(where: { $0 == \BusinessTrip.perdiem }) {
            seen.append("perdiem")
          }
        case .delete(let deleted as DefaultHistoryDelete<BusinessTrip>):
          seen.append("delete \(deleted.tombstone[\.name] as? String ?? "?")")
        case .insert(_ as DefaultHistoryInsert<Trip>), .delete(_ as DefaultHistoryDelete<Trip>):
          seen.append("as a trip")
        default:
          break
        }
      }
    }
    return seen == ["insert", "perdiem", "delete Trade fair"]
  }
}
