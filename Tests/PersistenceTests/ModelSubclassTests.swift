import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

/// The models of the 2025 talk's hierarchy, without relationships: a root and two levels of
/// subclasses, each with attributes of its own.
@Model class Journey {
  var name: String
  var destination: String
  var days = 1

  init(name: String, destination: String, days: Int = 1) {
    self.name = name
    self.destination = destination
    self.days = days
  }
}

@Model class PersonalJourney: Journey {
  enum Reason: String, CaseIterable, Codable, Sendable { case family, reunion, wellness, unknown }
  var reason: Reason = Reason.unknown

  init(name: String, destination: String, reason: Reason) {
    self.reason = reason
    super.init(name: name, destination: destination)
  }
}

@Model class BusinessJourney: Journey {
  var perdiem: Double = 0.0
  @Attribute(.unique) var code: String = ""

  init(name: String, destination: String, perdiem: Double, code: String) {
    self.perdiem = perdiem
    self.code = code
    super.init(name: name, destination: destination)
  }
}

@Model class ExecutiveJourney: BusinessJourney {
  var lounge = false

  init(name: String, destination: String, code: String) {
    lounge = true
    super.init(name: name, destination: destination, perdiem: 500, code: code)
  }
}

/// A root model with a to-many and a one-to-one, as SampleTrips' `Trip` declares them, and a
/// subclass that inherits both.
@Model class Voyage {
  var name: String
  @Relationship(deleteRule: .cascade, inverse: \Port.voyage) var ports: [Port] = []
  @Relationship(deleteRule: .cascade, inverse: \Berth.voyage) var berth: Berth?

  init(name: String) { self.name = name }
}

@Model class Cruise: Voyage {
  var ship = ""

  init(name: String, ship: String) {
    self.ship = ship
    super.init(name: name)
  }
}

/// A subclass with a relationship of its own: a to-many whose inverse, on the crew member, is a
/// to-one the macro finds at run time.
@Model class Expedition: Cruise {
  @Relationship(deleteRule: .cascade, inverse: \CrewMember.expedition) var crew: [CrewMember] = []
}

@Model final class CrewMember {
  var name: String
  var expedition: Expedition?
  init(name: String) { self.name = name }
}

/// A subclass as the 2025 talk's `BusinessTrip`: no initializer of its own, made with its
/// superclass's.
@Model class Tender: Voyage {
  var seats = 12
}

@Model final class Port {
  var title: String
  var voyage: Voyage?
  init(title: String) { self.title = title }
}

@Model final class Berth {
  var cabin: String
  var voyage: Voyage?
  init(cabin: String) { self.cabin = cabin }
}

/// A store's first version, with trips alone, and its second, which adds a subclass.
enum SubclassSchemaV1: VersionedSchema {
  static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
  static var models: [any PersistentModel.Type] { [Outing.self] }

  @Model class Outing {
    var name: String
    init(name: String) { self.name = name }
  }
}

enum SubclassSchemaV2: VersionedSchema {
  static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
  static var models: [any PersistentModel.Type] { [Outing.self, PaidOuting.self] }

  @Model class Outing {
    var name: String
    init(name: String) { self.name = name }
  }

  @Model class PaidOuting: Outing {
    var price: Double = 0
  }
}

enum SubclassMigrationPlan: SchemaMigrationPlan {
  static var schemas: [any VersionedSchema.Type] { [SubclassSchemaV1.self, SubclassSchemaV2.self] }
  static var stages: [MigrationStage] {
    [.lightweight(fromVersion: SubclassSchemaV1.self, toVersion: SubclassSchemaV2.self)]
  }
}

@Suite("Model subclasses: one table, each row as its own class")
struct ModelSubclassTests {
  func container(_ engine: TestEngine) throws -> ModelContainer {
    try engineContainer(
      engine, Journey.self, PersonalJourney.self, BusinessJourney.self, ExecutiveJourney.self)
  }

  /// Four journeys, one of each class, saved.
  func fill(_ container: ModelContainer) throws {
    let context = ModelContext(container)
    context.insert(Journey(name: "Plain", destination: "Oslo", days: 2))
    context.insert(PersonalJourney(name: "Family", destination: "Lyon", reason: .family))
    context.insert(BusinessJourney(name: "Fair", destination: "Köln", perdiem: 120, code: "F1"))
    // Inserted as the root's static type: kept as its own class all the same.
    let executive: Journey = ExecutiveJourney(name: "Board", destination: "Zürich", code: "B1")
    context.insert(executive)
    try context.save()
  }

  @Test(
    "a fetch of the root makes each row as its own class with its own values; a fetch of a subclass reads its rows and its subclasses' only",
    arguments: TestEngine.allCases)
  func fetchesByClass(engine: TestEngine) throws {
    let container = try container(engine)
    try fill(container)
    let context = ModelContext(container)
    let all = try context.fetch(FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.name)]))
    #expect(all.map(\.name) == ["Board", "Fair", "Family", "Plain"])
    #expect(
      all.map { "\(type(of: $0))" } == [
        "ExecutiveJourney", "BusinessJourney", "PersonalJourney", "Journey",
      ])
    let board = try #require(all[0] as? ExecutiveJourney)
    #expect(board.lounge && board.perdiem == 500 && board.code == "B1")
    #expect(board.destination == "Zürich")
    #expect((all[2] as? PersonalJourney)?.reason == .family)
    #expect(all[3].days == 2)

    let business = try context.fetch(
      FetchDescriptor<BusinessJourney>(sortBy: [SortDescriptor(\.perdiem)]))
    #expect(business.map(\.name) == ["Fair", "Board"])
    // One instance per row, whichever fetch met it first.
    #expect(business[1] === board)
    #expect(try context.fetchCount(FetchDescriptor<BusinessJourney>()) == 2)
    #expect(try context.fetchCount(FetchDescriptor<ExecutiveJourney>()) == 1)
    #expect(try context.fetchCount(FetchDescriptor<PersonalJourney>()) == 1)
    #expect(try context.fetchCount(FetchDescriptor<Journey>()) == 4)

    // A predicate on an inherited attribute and on the subclass's own.
    let rich = try context.fetch(
      FetchDescriptor<BusinessJourney>(predicate: #Predicate { $0.perdiem > 200 }))
    #expect(rich.map(\.name) == ["Board"])
    let inLyon = try context.fetch(
      FetchDescriptor<PersonalJourney>(predicate: #Predicate { $0.destination == "Lyon" }))
    #expect(inLyon.map(\.name) == ["Family"])
    let nowhere = try context.fetch(
      FetchDescriptor<PersonalJourney>(predicate: #Predicate { $0.destination == "Oslo" }))
    #expect(nowhere.isEmpty)

    // A fresh context meeting a row first through its subclass's fetch.
    let other = ModelContext(container)
    let executives = try other.fetch(FetchDescriptor<ExecutiveJourney>())
    #expect(executives.map(\.code) == ["B1"])
    let roots = try other.fetch(FetchDescriptor<Journey>())
    #expect(roots.contains { $0 === executives[0] })
    // By identifier, as the root or as the subclass; a row of another class is no subclass.
    let id = board.persistentModelID
    #expect(try other.model(for: id, as: Journey.self) is ExecutiveJourney)
    let plainID = all[3].persistentModelID
    #expect(try ModelContext(container).model(for: plainID, as: BusinessJourney.self) == nil)
  }

  @Test(
    "updates and deletes of subclass models, through either class, are saved; history and observers see them",
    arguments: TestEngine.allCases)
  func updatesAndDeletes(engine: TestEngine) throws {
    let container = try container(engine)
    try fill(container)
    let context = ModelContext(container)
    let fair = try #require(
      context.fetch(FetchDescriptor<Journey>(predicate: #Predicate { $0.name == "Fair" })).first
        as? BusinessJourney)
    fair.perdiem = 150
    fair.days = 3
    try context.save()
    let check = ModelContext(container)
    let reread = try #require(
      check.fetch(FetchDescriptor<BusinessJourney>()).first { $0.name == "Fair" })
    #expect(reread.perdiem == 150 && reread.days == 3)

    context.delete(fair)
    try context.save()
    let after = ModelContext(container)
    #expect(try after.fetchCount(FetchDescriptor<BusinessJourney>()) == 1)
    #expect(
      try after.fetch(FetchDescriptor<Journey>()).map(\.name).sorted() == [
        "Board", "Family", "Plain",
      ])
    // The unique code of a stored executive journey: a business journey does not update a
    // row of another class (a subclass's); refused, nothing written.
    after.insert(BusinessJourney(name: "Again", destination: "Bern", perdiem: 1, code: "B1"))
    let refused = try #require(throws: PersistenceError.self) { try after.save() }
    #expect(refused.code == .uniqueConstraint)
    let stored = try ModelContext(container).fetch(FetchDescriptor<BusinessJourney>())
    #expect(stored.map(\.name) == ["Board"] && stored.first is ExecutiveJourney)
  }

  @Test(
    "is and as? in a predicate, as the 2025 talk writes them, run in SQL: a type test, a subclass's own attribute, one inside a to-many's rows of another fetch",
    arguments: TestEngine.allCases)
  func typeTestsInPredicates(engine: TestEngine) throws {
    let container = try container(engine)
    try fill(container)
    let context = ModelContext(container)
    func names(_ predicate: Predicate<Journey>) throws -> [String] {
      try context.fetch(FetchDescriptor(predicate: predicate, sortBy: [SortDescriptor(\.name)]))
        .map(\.name)
    }
    #expect(try names(#Predicate { $0 is BusinessJourney }) == ["Board", "Fair"])
    #expect(try names(#Predicate { $0 is ExecutiveJourney }) == ["Board"])
    #expect(try names(#Predicate { !($0 is BusinessJourney) }) == ["Family", "Plain"])
    let family = PersonalJourney.Reason.family
    #expect(
      try names(
        #Predicate { journey in
          if let personal = journey as? PersonalJourney {
            return personal.reason == family
          } else {
            return false
          }
        }) == ["Family"])
    // An inherited attribute read through the cast; a subclass's own, compared.
    #expect(
      try names(#Predicate { ($0 as? BusinessJourney)?.perdiem ?? 0 > 200 }) == ["Board"])
    #expect(
      try names(#Predicate { ($0 as? BusinessJourney)?.destination == "Köln" }) == ["Fair"])
    #expect(
      try context.fetchCount(
        FetchDescriptor(predicate: #Predicate<Journey> { $0 is PersonalJourney })) == 1)
    // Of a subclass's fetch: a further subclass.
    #expect(
      try context.fetch(
        FetchDescriptor<BusinessJourney>(predicate: #Predicate { $0 is ExecutiveJourney })
      ).map(\.name) == ["Board"])
    // The translation: a test of the row's own column, no Swift evaluation.
    let sql = try #require(
      try FetchDescriptor<Journey>(predicate: #Predicate { $0 is BusinessJourney })
        .whereClause(schema: Journey.modelSchema, narrowing: true))
    #expect(!sql.isNarrowed)
    #expect(sql.sql.contains("\"_entity\""))
    // A test of a type that is no model is refused, saying why.
    let refused = try #require(throws: PersistenceError.self) {
      try context.fetch(
        FetchDescriptor<Journey>(predicate: #Predicate { $0 is any CustomDebugStringConvertible }))
    }
    #expect(refused.code == .unsupportedPredicate)
    #expect(refused.message.contains("not a model"))
  }

  @Test(
    "observers: of the root, each row as its own class; of a subclass, its rows only, told of a change made through the root",
    arguments: TestEngine.allCases)
  func observers(engine: TestEngine) throws {
    let container = try container(engine)
    try fill(container)
    let context = ModelContext(container)
    let all = try ResultsObserver(
      FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.name)]), modelContext: context)
    let business = try ResultsObserver(
      FetchDescriptor<BusinessJourney>(sortBy: [SortDescriptor(\.name)]), modelContext: context)
    #expect(
      all.results.map { "\(type(of: $0))" } == [
        "ExecutiveJourney", "BusinessJourney", "PersonalJourney", "Journey",
      ])
    #expect(business.results.map(\.name) == ["Board", "Fair"])

    let other = ModelContext(container)
    other.insert(ExecutiveJourney(name: "Audit", destination: "Basel", code: "A1"))
    other.insert(Journey(name: "Walk", destination: "Bern"))
    try other.delete(model: Journey.self, where: #Predicate { $0.name == "Fair" })
    try other.save()
    all.waitForPendingUpdates()
    business.waitForPendingUpdates()
    #expect(all.results.map(\.name) == ["Audit", "Board", "Family", "Plain", "Walk"])
    #expect(all.results.first is ExecutiveJourney)
    #expect(business.results.map(\.name) == ["Audit", "Board"])
    #expect(business.results.allSatisfy { $0 is ExecutiveJourney })
  }

  @Test(
    "a subclass inherits its root's relationships: read, predicated, the inverse its own instance, cascades from it",
    arguments: TestEngine.allCases)
  func inheritedRelationships(engine: TestEngine) throws {
    // Listing the subclass alone finds its root and the models its relationships reach.
    let container = try engineContainer(engine, Cruise.self, Tender.self)
    let context = ModelContext(container)
    let tender = Tender(name: "Shuttle")
    context.insert(tender)
    tender.ports = [Port(title: "Pier")]
    let cruise = Cruise(name: "Fjords", ship: "Nordlys")
    context.insert(cruise)
    cruise.ports = [Port(title: "Bergen"), Port(title: "Ålesund")]
    cruise.berth = Berth(cabin: "A12")
    let plain = Voyage(name: "Ferry")
    context.insert(plain)
    plain.ports = [Port(title: "Kiel")]
    try context.save()

    let reader = ModelContext(container)
    let voyages = try reader.fetch(FetchDescriptor<Voyage>(sortBy: [SortDescriptor(\.name)]))
    #expect(voyages.map(\.name) == ["Ferry", "Fjords", "Shuttle"])
    #expect((voyages[2] as? Tender)?.seats == 12)
    #expect(voyages[2].ports.map(\.title) == ["Pier"])
    let read = try #require(voyages[1] as? Cruise)
    #expect(read.ship == "Nordlys")
    #expect(Set(read.ports.map(\.title)) == ["Bergen", "Ålesund"])
    #expect(read.berth?.cabin == "A12")
    #expect(read.ports.allSatisfy { $0.voyage === read })
    // From the other side: the to-one holds the subclass's instance, the same one.
    let ports = try reader.fetch(
      FetchDescriptor<Port>(
        predicate: #Predicate { $0.title != "Pier" }, sortBy: [SortDescriptor(\.title)]))
    #expect(ports.map { $0.voyage?.name } == ["Fjords", "Ferry", "Fjords"])
    let bergen = try #require(ports.first { $0.title == "Bergen" })
    #expect(bergen.voyage === read)
    #expect(!(ports.first { $0.title == "Kiel" }?.voyage is Cruise))
    // A predicate through an inherited relationship, on the subclass's fetch and the root's.
    let withBergen = try reader.fetch(
      FetchDescriptor<Cruise>(predicate: #Predicate { $0.ports.contains { $0.title == "Bergen" } }))
    #expect(withBergen.map(\.name) == ["Fjords"])
    let inCabin = try reader.fetch(
      FetchDescriptor<Voyage>(predicate: #Predicate { $0.berth?.cabin == "A12" }))
    #expect(inCabin.map(\.name) == ["Fjords"])
    let portsOfCruises = try reader.fetch(
      FetchDescriptor<Port>(predicate: #Predicate { $0.voyage?.name == "Fjords" }))
    #expect(portsOfCruises.count == 2)

    // A port moved from the plain voyage to the cruise; then the cruise deleted: its ports
    // and berth go with it, the plain voyage stays.
    let writer = ModelContext(container)
    let kiel = try #require(
      writer.fetch(FetchDescriptor<Port>(predicate: #Predicate { $0.title == "Kiel" })).first)
    let fjords = try #require(writer.fetch(FetchDescriptor<Cruise>()).first)
    kiel.voyage = fjords
    try writer.save()
    let recount = ModelContext(container)
    #expect(try recount.fetch(FetchDescriptor<Cruise>()).first?.ports.count == 3)
    writer.delete(fjords)
    try writer.save()
    let after = ModelContext(container)
    #expect(
      try after.fetch(FetchDescriptor<Voyage>(sortBy: [SortDescriptor(\.name)])).map(\.name) == [
        "Ferry", "Shuttle",
      ])
    #expect(try after.fetchCount(FetchDescriptor<Port>()) == 1)
    #expect(try after.fetchCount(FetchDescriptor<Berth>()) == 0)
  }

  @Test(
    "a subclass's own relationships, beside its inherited ones: kept in the root's table, read, predicated, cascaded",
    arguments: TestEngine.allCases)
  func ownRelationships(engine: TestEngine) throws {
    let container = try engineContainer(engine, Expedition.self)
    let context = ModelContext(container)
    let expedition = Expedition(name: "Svalbard", ship: "Polar")
    context.insert(expedition)
    expedition.crew = [CrewMember(name: "Ada"), CrewMember(name: "Bo")]
    expedition.ports = [Port(title: "Longyearbyen")]
    context.insert(Voyage(name: "Ferry"))
    try context.save()
    let reader = ModelContext(container)
    let voyages = try reader.fetch(FetchDescriptor<Voyage>(sortBy: [SortDescriptor(\.name)]))
    let read = try #require(voyages.last as? Expedition)
    #expect(Set(read.crew.map(\.name)) == ["Ada", "Bo"])
    #expect(read.ports.map(\.title) == ["Longyearbyen"])
    let ada = try #require(
      reader.fetch(FetchDescriptor<CrewMember>(predicate: #Predicate { $0.name == "Ada" })).first)
    #expect(ada.expedition === read)
    #expect(
      try reader.fetch(
        FetchDescriptor<Expedition>(predicate: #Predicate { $0.crew.contains { $0.name == "Bo" } })
      ).map(\.name) == ["Svalbard"])
    #expect(
      try reader.fetch(
        FetchDescriptor<CrewMember>(predicate: #Predicate { $0.expedition?.ship == "Polar" })
      ).count == 2)
    reader.delete(read)
    try reader.save()
    let after = ModelContext(container)
    #expect(try after.fetchCount(FetchDescriptor<CrewMember>()) == 0)
    #expect(try after.fetchCount(FetchDescriptor<Port>()) == 0)
    #expect(try after.fetch(FetchDescriptor<Voyage>()).map(\.name) == ["Ferry"])
  }

  @Test(
    "a versioned schema that adds a subclass: a lightweight stage keeps the stored rows as the root"
  )
  func migrationAddsSubclass() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("outings.store")
    do {
      let container = try ModelContainer(
        for: SubclassSchemaV1.Outing.self, configurations: ModelConfiguration(url: url))
      let context = ModelContext(container)
      context.insert(SubclassSchemaV1.Outing(name: "old"))
      try context.save()
    }
    let container = try ModelContainer(
      for: Schema(versionedSchema: SubclassSchemaV2.self),
      migrationPlan: SubclassMigrationPlan.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(container)
    let paid = SubclassSchemaV2.PaidOuting(name: "new")
    paid.price = 12
    context.insert(paid)
    try context.save()
    let all = try ModelContext(container).fetch(
      FetchDescriptor<SubclassSchemaV2.Outing>(sortBy: [SortDescriptor(\.name)]))
    #expect(all.map { "\(type(of: $0)):\($0.name)" } == ["PaidOuting:new", "Outing:old"])
  }

  @Test(
    "Schema's entities: a subclass named as its class, with its superentity and the root's subentities"
  )
  func schemaEntities() throws {
    let schema = Schema([
      Journey.self, PersonalJourney.self, BusinessJourney.self, ExecutiveJourney.self,
    ])
    let entities = schema.entitiesByName
    #expect(
      Set(entities.keys) == ["Journey", "PersonalJourney", "BusinessJourney", "ExecutiveJourney"])
    #expect(entities["Journey"]?.superentity == nil)
    #expect(entities["ExecutiveJourney"]?.superentityName == "BusinessJourney")
    #expect(entities["BusinessJourney"]?.superentity?.name == "Journey")
    #expect(
      Set(entities["Journey"]?.subentities.map(\.name) ?? []) == [
        "PersonalJourney", "BusinessJourney",
      ])
    #expect(entities["BusinessJourney"]?.subentities.map(\.name) == ["ExecutiveJourney"])
    #expect(entities["PersonalJourney"]?.attributesByName["reason"] != nil)
    #expect(schema.entityNames == ["Journey"])
  }

  @Test("the table holds one row per model, its class in _entity, and reopens as it was")
  func layoutAndReopen() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("journeys.store")
    do {
      let container = try ModelContainer(
        for: Journey.self, PersonalJourney.self, BusinessJourney.self, ExecutiveJourney.self,
        configurations: ModelConfiguration(url: url))
      try fill(container)
    }
    // Listing the root and one leaf finds the superclasses between them.
    let container = try ModelContainer(
      for: Journey.self, PersonalJourney.self, ExecutiveJourney.self,
      configurations: ModelConfiguration(url: url))
    #expect(container.entityNames == ["Journey"])
    let context = ModelContext(container)
    let all = try context.fetch(FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.name)]))
    #expect(
      all.map { "\(type(of: $0))" } == [
        "ExecutiveJourney", "BusinessJourney", "PersonalJourney", "Journey",
      ])
  }

  @Test("a container without the subclasses refuses a table that holds them, naming its columns")
  func rootAloneRefusesSubclassRows() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("journeys.store")
    do {
      try fill(
        try ModelContainer(
          for: Journey.self, PersonalJourney.self, BusinessJourney.self, ExecutiveJourney.self,
          configurations: ModelConfiguration(url: url)))
    }
    let error = try #require(throws: PersistenceError.self) {
      try ModelContainer(for: Journey.self, configurations: ModelConfiguration(url: url))
    }
    #expect(error.code == .newerStore)
    #expect(error.message.contains("_entity"))
  }

  @Test("a subclass not in the container is refused by the save, nothing written")
  func unlistedSubclassIsRefused() throws {
    let container = try ModelContainer(
      for: Journey.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    context.insert(Journey(name: "Plain", destination: "Oslo"))
    context.insert(PersonalJourney(name: "Family", destination: "Lyon", reason: .family))
    let error = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(error.code == .unknownModel)
    #expect(error.message.contains("PersonalJourney"))
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<Journey>()) == 0)
  }
}
