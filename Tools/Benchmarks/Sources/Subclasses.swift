import Foundation
import Persistence

// The `subclasses` phase: a fetch of a root model whose table holds subclasses, beside the same
// fetch of a table that holds none.

/// A trip as a root model that is not final, so that it can have subclasses.
@Model class BenchJourney {
  var name: String
  var destination: String
  var startDate: Date
  var endDate: Date
  var latitude: Double
  var longitude: Double

  init(
    name: String, destination: String, startDate: Date, endDate: Date, latitude: Double,
    longitude: Double
  ) {
    self.name = name
    self.destination = destination
    self.startDate = startDate
    self.endDate = endDate
    self.latitude = latitude
    self.longitude = longitude
  }
}

/// A subclass with one attribute of its own, as the 2025 talk's `BusinessTrip`.
@Model class BenchBusinessJourney: BenchJourney {
  var perdiem: Double = 0
}

/// The journey `index` of a deterministic set (every field depends on the index only).
func benchJourney(_ index: Int, business: Bool) -> BenchJourney {
  let start = Date(timeIntervalSinceReferenceDate: 700_000_000 + Double(index % 5_000) * 86_400)
  let name = "journey \(index)"
  let destination = "city \(index % 997)"
  let end = start.addingTimeInterval(Double(1 + index % 14) * 86_400)
  let latitude = Double(index % 180) - 89.5
  let longitude = Double(index % 360) - 179.5
  guard business else {
    return BenchJourney(
      name: name, destination: destination, startDate: start, endDate: end,
      latitude: latitude, longitude: longitude)
  }
  let journey = BenchBusinessJourney(
    name: name, destination: destination, startDate: start, endDate: end, latitude: latitude,
    longitude: longitude)
  journey.perdiem = Double(index % 300)
  return journey
}

/// A fetch of every journey, sorted by start date, from three stores of the same `--size`
/// journeys, each against the first in the same run: a table of the root model alone (no
/// subclass listed: today's layout); the same table holding a subclass's column and
/// `"_entity"` (the subclass listed, none of its rows); and a tenth of the rows of the
/// subclass. Checksums of the names and start dates must agree.
@MainActor func subclassesPhase() throws {
  let count = options.size
  func store(_ name: String, subclassed: Bool, businessEvery: Int?) throws -> ModelContainer {
    let url = storeURL(name)
    removeStore(url)
    let types: [any PersistentModel.Type] =
      subclassed ? [BenchJourney.self, BenchBusinessJourney.self] : [BenchJourney.self]
    let container = try ModelContainer(for: types, configuration: ModelConfiguration(url: url))
    let context = ModelContext(container)
    for index in 0..<count {
      let business = businessEvery.map { index % $0 == 0 } ?? false
      context.insert(benchJourney(index, business: business))
      if index % 10_000 == 9_999 {
        try context.save()
        context.reset()
      }
    }
    try context.save()
    return container
  }
  let plain = try store("journeys.sqlite", subclassed: false, businessEvery: nil)
  let listed = try store("journeys-listed.sqlite", subclassed: true, businessEvery: nil)
  let mixed = try store("journeys-mixed.sqlite", subclassed: true, businessEvery: 10)
  func fetchAll(_ container: ModelContainer) -> (sum: Int, business: Int) {
    do {
      let journeys = try ModelContext(container).fetch(
        FetchDescriptor<BenchJourney>(sortBy: [SortDescriptor(\.startDate)]))
      var sum = 0
      var business = 0
      for journey in journeys {
        sum = sum &+ journey.name.utf8.count &+ Int(journey.startDate.timeIntervalSince1970)
        if journey is BenchBusinessJourney { business += 1 }
      }
      return (sum, business)
    } catch {
      fatalError("fetch of journeys failed: \(error)")
    }
  }
  var plainResult = (sum: 0, business: 0)
  var result = (sum: 0, business: 0)
  try compare(
    "root fetch: subclass listed/none", n: count,
    ours: { result = fetchAll(listed) }, base: { plainResult = fetchAll(plain) })
  check(result.sum == plainResult.sum && result.business == 0, "listed subclass checksums")
  try compare(
    "root fetch: 10% subclass/none", n: count,
    ours: { result = fetchAll(mixed) }, base: { plainResult = fetchAll(plain) })
  check(
    result.sum == plainResult.sum && result.business == (count + 9) / 10,
    "subclass rows checksums \(result) vs \(plainResult)")
  try compare(
    "subclass fetch (10%)/root, none", n: (count + 9) / 10,
    ours: {
      do {
        let business = try ModelContext(mixed).fetch(
          FetchDescriptor<BenchBusinessJourney>(sortBy: [SortDescriptor(\.startDate)]))
        check(business.count == (count + 9) / 10, "subclass fetch count \(business.count)")
      } catch {
        fatalError("fetch of business journeys failed: \(error)")
      }
    }, base: { plainResult = fetchAll(plain) })
}
