import Foundation
import Observation
import Persistence
import TripsBaseline

// The relationships phase: owners with five items each (a to-many ordered by position,
// cascade) and a stay (a one-to-one, cascade), against the C baseline running the same SQL
// (Tools/CBaseline/baseline_relations.c) on the same store.

@Observable final class BenchOwner: PersistentModel {
  var name = ""
  let itemsLink = ToMany<BenchItem>()
  var items: [BenchItem] {
    get { itemsLink.value(of: self) }
    set { itemsLink.set(newValue, of: self) }
  }
  let stayLink = ToOne<BenchStay>()
  var stay: BenchStay? {
    get { stayLink.value(of: self) }
    set { stayLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<BenchOwner>(
    "owners",
    .attribute(\.name, "name", .unique, storage: \._name),
    .toMany(
      \.items, "items", link: \.itemsLink, inverse: \.owner, deleteRule: .cascade,
      orderBy: \.position),
    .toOne(
      \.stay, "stay", link: \.stayLink, inverse: \.owner, deleteRule: .cascade, storesKey: false))
}

@Observable final class BenchItem: PersistentModel {
  var title = ""
  var position = 0
  let ownerLink = ToOne<BenchOwner>()
  var owner: BenchOwner? {
    get { ownerLink.value(of: self) }
    set { ownerLink.set(newValue, of: self) }
  }
  init() {}
  init(title: String, position: Int) {
    self.title = title
    self.position = position
  }
  static let schema = ModelSchema<BenchItem>(
    "items",
    .attribute(\.title, "title", storage: \._title),
    .attribute(\.position, "position", storage: \._position),
    .toOne(\.owner, "owner", link: \.ownerLink, inverse: \.items))
}

@Observable final class BenchStay: PersistentModel {
  var city = ""
  let ownerLink = ToOne<BenchOwner>()
  var owner: BenchOwner? {
    get { ownerLink.value(of: self) }
    set { ownerLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<BenchStay>(
    "stays",
    .attribute(\.city, "city", storage: \._city),
    .toOne(\.owner, "owner", link: \.ownerLink, inverse: \.stay))
}

/// Groups and members, a many-to-many as SwiftData's users declare it: the members' side names
/// the inverse (so the join table is `_m2m_members_groups`), the groups' side is a plain array.
@Model(table: "m2m_groups") final class BenchGroup {
  var name: String
  var members: [BenchMember] = []
  init(name: String) { self.name = name }
}

@Model(table: "m2m_members") final class BenchMember {
  var name: String
  var weight: Int
  @Relationship(inverse: \BenchGroup.members) var groups: [BenchGroup] = []
  init(name: String, weight: Int) {
    self.name = name
    self.weight = weight
  }
}

/// The checksum `tb_m2m_fetch` computes, over groups in key order, each one's members in key
/// order.
func manyToManyChecksum(_ groups: [BenchGroup]) -> UInt64 {
  var sum: UInt64 = 0
  for (ordinal, group) in groups.enumerated() {
    let members = group.members
    for (index, member) in members.enumerated() {
      sum &+= UInt64(member.weight) &* UInt64(index + 1)
    }
    sum &+= UInt64(ordinal + 1) &* UInt64(members.count)
  }
  return sum
}

/// The many-to-many part of the relationships phase: `groups` groups, each linked to five of
/// `groups / 2` members (so each member is in about ten groups), fetched with the members
/// prefetched, beside the C baseline running the same three queries (`tb_m2m_fetch`).
@MainActor func manyToManyPrefetch(groups: Int) throws {
  let url = storeURL("many-to-many.sqlite")
  removeStore(url)
  let container = try ModelContainer(
    for: [BenchGroup.self, BenchMember.self], configuration: ModelConfiguration(url: url))
  do {
    let context = ModelContext(container)
    let pool = max(groups / 2, 5)
    var members: [BenchMember] = []
    for index in 0..<pool {
      let member = BenchMember(name: "member \(index)", weight: (index * 7) % 101)
      context.insert(member)
      members.append(member)
    }
    try context.save()
    for index in 0..<groups {
      let group = BenchGroup(name: "group \(index)")
      context.insert(group)
      group.members = (0..<5).map { members[(index * 3 + $0 * 17) % pool] }
      if index % 10_000 == 9_999 { try context.save() }
    }
    try context.save()
  }
  let db = tb_open(url.path, Int32(ModelConfiguration(url: url).cacheSizeKiB))
  defer { tb_close(db) }
  var ours: UInt64 = 0
  var base: UInt64 = 0
  try compare(
    "many-to-many fetch, members prefetched", n: groups,
    ours: {
      let context = ModelContext(container)
      var descriptor = FetchDescriptor<BenchGroup>()
      descriptor.relationshipKeyPathsForPrefetching = [\.members]
      ours = manyToManyChecksum(try context.fetch(descriptor))
    },
    base: { check(tb_m2m_fetch(db, &base) == 0, "C many-to-many fetch failed") })
  check(ours == base, "many-to-many checksums \(ours) vs \(base)")
}

/// An owner with `count` items and a stay, not saved.
func benchOwner(_ name: String, items count: Int, seed: Int) -> BenchOwner {
  let owner = BenchOwner()
  owner.name = name
  owner.items = (0..<count).map {
    BenchItem(title: "item \($0)", position: ($0 * 3 + seed) % count)
  }
  let stay = BenchStay()
  stay.city = "city \(seed % 97)"
  owner.stay = stay
  return owner
}

/// The checksum `tb_rel_fetch` computes, over owners in key order.
func relationshipChecksum(_ owners: [BenchOwner], stays: Bool) -> UInt64 {
  var sum: UInt64 = 0
  for (ordinal, owner) in owners.enumerated() {
    let items = owner.items
    sum &+= UInt64(ordinal + 1) &* UInt64(items.count)
    for (index, item) in items.enumerated() { sum &+= UInt64(item.position) &* UInt64(index + 1) }
    if stays, owner.stay != nil { sum &+= 7 }
  }
  return sum
}

@MainActor func relationshipsPhase() throws {
  let parents = options.size
  let url = storeURL("relationships.sqlite")
  removeStore(url)
  let types: [any PersistentModel.Type] = [BenchOwner.self, BenchItem.self, BenchStay.self]
  let container = try ModelContainer(for: types, configuration: ModelConfiguration(url: url))
  do {
    let context = ModelContext(container)
    for index in 0..<parents {
      context.insert(benchOwner("owner \(index)", items: 5, seed: index))
      if index % 10_000 == 9_999 {
        try context.save()
        context.reset()
      }
    }
    try context.save()
  }
  let db = tb_open(url.path, Int32(ModelConfiguration(url: url).cacheSizeKiB))
  defer { tb_close(db) }

  var ours: UInt64 = 0
  var base: UInt64 = 0
  try compare(
    "fetch with both relationships prefetched", n: parents,
    ours: {
      let context = ModelContext(container)
      var descriptor = FetchDescriptor<BenchOwner>()
      descriptor.relationshipKeyPathsForPrefetching = [\.items, \.stay]
      ours = relationshipChecksum(try context.fetch(descriptor), stays: true)
    },
    base: { check(tb_rel_fetch(db, 1, &base) == 0, "C relationship fetch failed") })
  check(ours == base, "prefetched checksums \(ours) vs \(base)")

  try compare(
    "the same without prefetch, each to-many read (N+1)", n: parents,
    ours: {
      let context = ModelContext(container)
      ours = relationshipChecksum(try context.fetch(FetchDescriptor<BenchOwner>()), stays: false)
    },
    base: { check(tb_rel_fetch(db, 0, &base) == 0, "C relationship fetch failed") })
  check(ours == base, "N+1 checksums \(ours) vs \(base)")

  try manyToManyPrefetch(groups: parents)

  let names = (0..<100).map { "owner \($0 * max(parents / 100, 1))" }
  try compare(
    "predicate through a to-one (owner?.name ==) x100", n: parents * 5,
    ours: {
      let context = ModelContext(container)
      ours = 0
      for name in names {
        for item in try context.fetch(
          FetchDescriptor<BenchItem>(predicate: #Predicate { $0.owner?.name == name }))
        {
          ours &+= UInt64(item.position + 1)
        }
      }
    },
    base: {
      base = 0
      for name in names { check(tb_rel_items_of_owner_named(db, name, &base) >= 0, "C join") }
    })
  check(ours == base, "predicate checksums \(ours) vs \(base)")

  // A cascade: a new owner with 1,000 items and a stay for each side, each round (not timed),
  // then its delete and save.
  var oursTimes: [Double] = []
  var baseTimes: [Double] = []
  for round in 0..<options.rounds {
    let setup = ModelContext(container)
    setup.insert(benchOwner("big ours \(round)", items: 1000, seed: round))
    setup.insert(benchOwner("big base \(round)", items: 1000, seed: round))
    try setup.save()
    let context = ModelContext(container)
    let oursName = "big ours \(round)"
    let baseName = "big base \(round)"
    let mine = try context.fetch(
      FetchDescriptor<BenchOwner>(predicate: #Predicate { $0.name == oursName }))
    let theirs = try context.fetchIdentifiers(
      FetchDescriptor<BenchOwner>(predicate: #Predicate { $0.name == baseName }))
    guard let owner = mine.first, let key = theirs.first?.primaryKey else {
      check(false, "cascade setup")
      return
    }
    try inTurn(
      round: round,
      {
        oursTimes.append(
          try time {
            context.delete(owner)
            try context.save()
          })
      },
      { baseTimes.append(time { check(tb_rel_cascade(db, key, "bench") == 0, "C cascade") }) })
  }
  let left = ModelContext(container)
  check(
    try left.fetchCount(FetchDescriptor<BenchItem>()) == parents * 5,
    "the cascades left other items or kept theirs")
  report(
    Phase(
      phase: "cascade delete of a parent with 1,000", n: 1001, seconds: median(oursTimes),
      baselineSeconds: median(baseTimes), note: "1,000 items and a stay, each in history"))
}
