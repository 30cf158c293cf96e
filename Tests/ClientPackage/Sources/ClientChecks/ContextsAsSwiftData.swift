import Foundation
import Persistence

// SwiftData's contexts as its users write them, with `import Persistence` in place of
// `import SwiftData`: the container's main context, a bucket list item inserted as it is
// appended, a model's hasChanges, the context's insertedModelsArray, and didSave.

/// The identifiers a `didSave` notification carried, collected on the saving thread.
private final class SavedIdentifiers: @unchecked Sendable {
  private let lock = NSLock()
  private var identifiers: [PersistentIdentifier] = []

  func add(_ more: [PersistentIdentifier]) { lock.withLock { identifiers += more } }
  var all: [PersistentIdentifier] { lock.withLock { identifiers } }
}

/// A model written with SwiftData's option spellings: Spotlight, CloudKit encryption and a hash
/// modifier (without effect here), and an ephemeral property (not stored).
@Model final class Sketch {
  @Attribute(.spotlight, .allowsCloudEncryption, hashModifier: "v2") var title: String
  @Attribute(.ephemeral) var isEditing = false
  init(title: String) { self.title = title }
}

/// Runs the checks on a container of SampleTrips' trips at `url`.
@MainActor func checkContextsAsSwiftData(
  _ url: URL, _ check: (String, () throws -> Bool) -> Void
) throws {
  typealias Trip = SampleTrips.Trip
  typealias BucketListItem = SampleTrips.BucketListItem
  // Every class the trips' table may hold (on PostgreSQL it holds the 2025 talk's subclasses).
  let container = try ModelContainer(
    for: Trip.self, SampleTrips.PersonalTrip.self, SampleTrips.BusinessTrip.self,
    configurations: ModelConfiguration(url: url))
  check(
    "SwiftData's contexts: mainContext, an item inserted as it is appended, hasChanges, insertedModelsArray, didSave"
  ) {
    let context = container.mainContext
    let day = Date(timeIntervalSinceReferenceDate: 820_000_000)
    let trip = Trip(
      name: "Snow festival trip", destination: "Sapporo", startDate: day,
      endDate: day.addingTimeInterval(86_400))
    context.insert(trip)
    let item = BucketListItem(
      title: "Ice sculptures", details: "", hasReservation: false, isInPlan: true)
    trip.bucketList.append(item)
    guard item.modelContext === context, trip.hasChanges, item.hasChanges,
      context.insertedModelsArray.count == 2
    else { return false }
    let saved = SavedIdentifiers()
    let observer = NotificationCenter.default.addObserver(
      forName: ModelContext.didSave, object: context, queue: nil
    ) { notification in
      let key = ModelContext.NotificationKey.insertedIdentifiers.rawValue
      saved.add(notification.userInfo?[key] as? [PersistentIdentifier] ?? [])
    }
    defer { NotificationCenter.default.removeObserver(observer) }
    try context.save()
    return !trip.hasChanges && context.insertedModelsArray.isEmpty
      && Set(saved.all) == [trip.persistentModelID, item.persistentModelID]
  }
  check(
    "SwiftData's option spellings: .spotlight, .allowsCloudEncryption, hashModifier:, .ephemeral"
  ) {
    let sketches = try ModelContainer(
      for: Sketch.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(sketches)
    let sketch = Sketch(title: "Route")
    sketch.isEditing = true
    context.insert(sketch)
    try context.save()
    let reader = ModelContext(sketches)
    let read = try reader.fetch(
      FetchDescriptor<Sketch>(predicate: #Predicate { $0.title == "Route" }))
    return read.map(\.isEditing) == [false]
  }
}
