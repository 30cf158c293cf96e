import Foundation
import Persistence

// SwiftData's SampleTrips models as its source declares them, with `import Persistence` in
// place of `import SwiftData`: the classes are not final, the trip names both inverses,
// the bucket-list item and the stay say `var trip: Trip?` with no `@Relationship`.

/// The models, in a namespace of their own (README's examples declare a `Trip` too).
enum SampleTrips {
  @Model class Trip {
    #Index<Trip>([\.name], [\.startDate], [\.endDate], [\.name, \.startDate, \.endDate])
    #Unique<Trip>([\.name, \.startDate, \.endDate])

    @Attribute(.preserveValueOnDeletion)
    var name: String
    var destination: String

    @Attribute(.preserveValueOnDeletion)
    var startDate: Date

    @Attribute(.preserveValueOnDeletion)
    var endDate: Date

    @Relationship(deleteRule: .cascade, inverse: \BucketListItem.trip)
    var bucketList: [BucketListItem] = [BucketListItem]()

    @Relationship(deleteRule: .cascade, inverse: \LivingAccommodation.trip)
    var livingAccommodation: LivingAccommodation?

    @Transient var isSelected = false

    init(name: String, destination: String, startDate: Date, endDate: Date) {
      self.name = name
      self.destination = destination
      self.startDate = startDate
      self.endDate = endDate
    }
  }

  @Model class BucketListItem {
    var title: String
    var details: String
    var hasReservation: Bool
    var isInPlan: Bool
    var trip: Trip?

    init(title: String, details: String, hasReservation: Bool, isInPlan: Bool) {
      self.title = title
      self.details = details
      self.hasReservation = hasReservation
      self.isInPlan = isInPlan
    }
  }

  @Model class LivingAccommodation {
    var address: String
    var placeName: String
    var trip: Trip?

    init(address: String, placeName: String) {
      self.address = address
      self.placeName = placeName
    }
  }
}

/// Runs SampleTrips' calls on a container of its models at `url`: inserts, the search
/// predicate, sections by destination, the `#Unique` upsert and a cascade delete. Each answer
/// is computed here from what was inserted; `check` runs and reports each.
@MainActor func checkSampleTrips(
  _ url: URL, _ check: (String, () throws -> Bool) -> Void
) throws {
  typealias Trip = SampleTrips.Trip
  typealias BucketListItem = SampleTrips.BucketListItem
  typealias LivingAccommodation = SampleTrips.LivingAccommodation
  let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
  let day = Date(timeIntervalSinceReferenceDate: 800_000_000)
  let week = day.addingTimeInterval(7 * 86_400)
  check("SampleTrips: insert trips with a bucket list and a stay set from either side") {
    let context = ModelContext(container)
    let paris = Trip(name: "Spring", destination: "Paris", startDate: day, endDate: week)
    let tokyo = Trip(name: "Autumn", destination: "Tokyo", startDate: week, endDate: week)
    context.insert(paris)
    context.insert(tokyo)
    let louvre = BucketListItem(title: "Louvre", details: "", hasReservation: true, isInPlan: true)
    louvre.trip = paris
    tokyo.bucketList = [
      BucketListItem(title: "Louvre replica", details: "", hasReservation: false, isInPlan: false)
    ]
    let hotel = LivingAccommodation(address: "1 Rue", placeName: "Hôtel")
    paris.livingAccommodation = hotel
    try context.save()
    return paris.bucketList.map(\.title) == ["Louvre"] && hotel.trip === paris
  }
  check("SampleTrips: the search predicate, item.title.contains(text) && item.trip?.name == name") {
    let text = "Louvre"
    let name = "Spring"
    let found = try ModelContext(container).fetch(
      FetchDescriptor<BucketListItem>(
        predicate: #Predicate { item in item.title.contains(text) && item.trip?.name == name }))
    return found.map(\.title) == ["Louvre"]
  }
  check("SampleTrips: a trip's modelContext and persistentModelID, its items' too") {
    let context = ModelContext(container)
    let autumn = try context.fetch(
      FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Autumn" }))
    guard let trip = autumn.first else { return false }
    let id = trip.persistentModelID
    let fresh = Trip(name: "New", destination: "Oslo", startDate: day, endDate: week)
    return trip.modelContext === context && !id.isTemporary
      && context.registeredModel(for: id) as Trip? === trip
      && trip.bucketList.map { $0.modelContext === context } == [true]
      && fresh.modelContext == nil && fresh.persistentModelID.isTemporary
  }
  check("SampleTrips: sections by destination; relationships read back") {
    let context = ModelContext(container)
    let sections = try context.fetch(
      FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.destination)]),
      sectionBy: \Trip.destination)
    let trips = sections.flatMap(\.elements)
    return sections.map(\.id) == ["Paris", "Tokyo"]
      && trips.map { $0.livingAccommodation?.placeName } == ["Hôtel", nil]
      && trips.map { $0.bucketList.map(\.title) } == [["Louvre"], ["Louvre replica"]]
      && trips.allSatisfy { trip in trip.bucketList.allSatisfy { $0.trip === trip } }
  }
  check("SampleTrips: #Unique over name and dates updates the stored trip") {
    let context = ModelContext(container)
    context.insert(Trip(name: "Spring", destination: "Lyon", startDate: day, endDate: week))
    try context.save()
    let trips = try ModelContext(container).fetch(
      FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
    return trips.map(\.destination) == ["Tokyo", "Lyon"]
  }
  check("SampleTrips: deleting a trip deletes its bucket list and stay") {
    let context = ModelContext(container)
    let spring = try context.fetch(
      FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Spring" }))
    guard let trip = spring.first else { return false }
    context.delete(trip)
    try context.save()
    let reader = ModelContext(container)
    return try reader.fetch(FetchDescriptor<BucketListItem>()).map(\.title) == ["Louvre replica"]
      && reader.fetchCount(FetchDescriptor<LivingAccommodation>()) == 0
  }
  check(
    "SampleTrips: history as the 2024 and 2025 talks read it (a token predicate, newest first, typed changes, tombstones)"
  ) {
    let context = ModelContext(container)
    let all = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
    guard all.count >= 2 else { return false }
    let token = all[all.count - 2].token
    var historyDescriptor = HistoryDescriptor<DefaultHistoryTransaction>()
    historyDescriptor.predicate = #Predicate { transaction in transaction.token > token }
    let after = try context.fetchHistory(historyDescriptor)
    var latest = HistoryDescriptor<DefaultHistoryTransaction>(
      sortBy: [SortDescriptor(\.token, order: .reverse)])
    latest.fetchLimit = 1
    let newest = try context.fetchHistory(latest)
    var insertedTrips = 0
    var updatedDestinations = 0
    var deletedNames: [String] = []
    for transaction in all {
      for change in transaction.changes {
        switch change {
        case .insert(_ as DefaultHistoryInsert<Trip>):
          insertedTrips += 1
        case .update(let historyUpdate as DefaultHistoryUpdate<Trip>):
          for attribute in historyUpdate.updatedAttributes where attribute == \Trip.destination {
            updatedDestinations += 1
          }
        case .delete(let historyDelete as DefaultHistoryDelete<Trip>):
          if let tripName = historyDelete.tombstone[\.name] as? String {
            deletedNames.append(tripName)
          }
        default:
          break
        }
      }
    }
    return after.map(\.token) == [all[all.count - 1].token] && newest == [all[all.count - 1]]
      && insertedTrips >= 2 && updatedDestinations == 1 && deletedNames == ["Spring"]
  }
}
