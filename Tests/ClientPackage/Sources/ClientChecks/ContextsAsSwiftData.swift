import Foundation
import Persistence

// SwiftData's contexts as its users write them, with `import Persistence` in place of
// `import SwiftData`: the container's main context, a bucket list item inserted as it is
// appended, a model's hasChanges, the context's insertedModelsArray, didSave, an upsert onto a
// fetched trip, and an importer written with @ModelActor.

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
  #Index<Sketch>(.binary([\.title]))
  @Attribute(.spotlight, .allowsCloudEncryption, hashModifier: "v2") var title: String
  @Attribute(.ephemeral) var isEditing = false
  @Attribute(.externalStorage) var preview: Data? = nil
  init(title: String) { self.title = title }
}

/// A many-to-many, as SwiftData's users declare one: the inverse named on one side, the other a
/// plain array of models.
@Model final class Jaunt {
  var title: String
  var voyagers: [Wayfarer] = []
  init(title: String) { self.title = title }
}

@Model final class Wayfarer {
  var name: String
  @Relationship(inverse: \Jaunt.voyagers) var excursions: [Jaunt] = []
  init(name: String) { self.name = name }
}

/// A tree, as SwiftData's users declare one: a folder's parent and its subfolders, at most
/// three a folder.
@Model final class Folder {
  var name: String
  var parent: Folder?
  @Relationship(deleteRule: .cascade, maximumModelCount: 3, inverse: \Folder.parent)
  var subfolders: [Folder] = []
  init(name: String, parent: Folder? = nil) {
    self.name = name
    self.parent = parent
  }
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
    "SwiftData's upsert onto a trip the context fetched: both references see the row, a later change to the fetched one is saved"
  ) {
    let context = ModelContext(container)
    let day = Date(timeIntervalSinceReferenceDate: 830_000_000)
    context.insert(
      Trip(
        name: "Lantern trip", destination: "Nagasaki", startDate: day,
        endDate: day.addingTimeInterval(86_400)))
    try context.save()
    let fetched = try context.fetch(
      FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Lantern trip" }))
    guard fetched.count == 1 else { return false }
    let again = Trip(
      name: "Lantern trip", destination: "Nagasaki harbour", startDate: day,
      endDate: day.addingTimeInterval(86_400))
    context.insert(again)
    try context.save()
    guard fetched[0].destination == "Nagasaki harbour" else { return false }
    fetched[0].destination = "Dejima"
    try context.save()
    let reader = ModelContext(container)
    let stored = try reader.fetch(
      FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Lantern trip" }))
    return stored.map(\.destination) == ["Dejima"] && again.destination == "Dejima"
  }
  check(
    "A tree of folders: saved deepest first, read level by level, maximumModelCount refuses a fourth subfolder, a cascade deletes a subtree"
  ) {
    let folders = try ModelContainer(
      for: Folder.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(folders)
    let root = Folder(name: "Trips")
    let japan = Folder(name: "Japan", parent: root)
    let kyoto = Folder(name: "Kyoto", parent: japan)
    context.insert(kyoto)
    try context.save()
    let ids = context.changedModelsArray.map(\.persistentModelID)
    guard ids.isEmpty, context.model(for: kyoto.persistentModelID) as? Folder === kyoto else {
      return false
    }
    for name in ["Osaka", "Nara"] { _ = Folder(name: name, parent: japan) }
    try context.save()
    _ = Folder(name: "Kobe", parent: japan)
    do {
      try context.save()
      return false
    } catch let error as PersistenceError where error.code == .invalidValue {
      context.rollback()
    }
    let reader = ModelContext(folders)
    let top = try reader.fetch(FetchDescriptor<Folder>(predicate: #Predicate { $0.parent == nil }))
    guard top.map(\.name) == ["Trips"], top[0].subfolders.first?.subfolders.count == 3 else {
      return false
    }
    reader.delete(top[0].subfolders[0])
    try reader.save()
    return try ModelContext(folders).fetchCount(FetchDescriptor<Folder>()) == 1
  }
  check(
    "SwiftData's option spellings: .spotlight, .allowsCloudEncryption, hashModifier:, .ephemeral, .externalStorage"
  ) {
    let sketches = try ModelContainer(
      for: Sketch.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(sketches)
    let sketch = Sketch(title: "Route")
    sketch.isEditing = true
    sketch.preview = Data(repeating: 1, count: 200_000)
    context.insert(sketch)
    try context.save()
    let reader = ModelContext(sketches)
    let read = try reader.fetch(
      FetchDescriptor<Sketch>(predicate: #Predicate { $0.title == "Route" }))
    return read.map(\.isEditing) == [false] && read.first?.preview?.count == 200_000
  }
  check(
    "SwiftData's many-to-many: links made from both sides, a predicate through them, a delete that takes them"
  ) {
    let trips = try ModelContainer(
      for: Jaunt.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(trips)
    let temples = Jaunt(title: "Temples")
    let market = Jaunt(title: "Market")
    context.insert(temples)
    context.insert(market)
    let ana = Wayfarer(name: "Ana")
    temples.voyagers = [ana, Wayfarer(name: "Ben")]
    ana.excursions.append(market)
    try context.save()
    let reader = ModelContext(trips)
    let withBen = try reader.fetch(
      FetchDescriptor<Jaunt>(
        predicate: #Predicate { $0.voyagers.contains { $0.name == "Ben" } }))
    let readAna = try reader.fetch(
      FetchDescriptor<Wayfarer>(predicate: #Predicate { $0.name == "Ana" }))
    guard withBen.map(\.title) == ["Temples"],
      readAna.first?.excursions.map(\.title).sorted() == ["Market", "Temples"]
    else { return false }
    reader.delete(readAna[0])
    try reader.save()
    let after = ModelContext(trips)
    let left = try after.fetch(FetchDescriptor<Jaunt>(sortBy: [SortDescriptor(\.title)]))
    return left.map { $0.voyagers.map(\.name) } == [[], ["Ben"]]
  }
}

/// An importer as SwiftData's users write one: an actor with a context of its own; trips are
/// made and saved inside, identifiers come out.
@ModelActor actor TripImporter {
  func importTrips(named names: [String], on day: Date) throws -> [PersistentIdentifier] {
    let trips = names.map {
      SampleTrips.Trip(
        name: $0, destination: "Imported", startDate: day, endDate: day.addingTimeInterval(3_600))
    }
    for trip in trips { modelContext.insert(trip) }
    try modelContext.save()
    return trips.map(\.persistentModelID)
  }

  func destination(of id: PersistentIdentifier) -> String? {
    self[id, as: SampleTrips.Trip.self]?.destination
  }
}

/// Runs the `@ModelActor` check on a container of SampleTrips' trips at `url`.
@MainActor func checkModelActor(_ url: URL) async throws -> Bool {
  let container = try ModelContainer(
    for: SampleTrips.Trip.self, SampleTrips.PersonalTrip.self, SampleTrips.BusinessTrip.self,
    configurations: ModelConfiguration(url: url))
  let importer = TripImporter(modelContainer: container)
  let ids = try await importer.importTrips(
    named: ["Imported one", "Imported two"],
    on: Date(timeIntervalSinceReferenceDate: 840_000_000))
  guard ids.count == 2, await importer.destination(of: ids[1]) == "Imported" else { return false }
  let context = ModelContext(container)
  return try context.model(for: ids[0], as: SampleTrips.Trip.self)?.name == "Imported one"
}
