import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore

// Many-to-many at its edges: rules that must still apply when the other side changed in the
// same save, cascades meeting new links, subclasses on either side, upserts, change tracking
// after a save, and history without noise.

/// Locks that cannot be deleted while a key opens them (deny); keys own the links.
@Model final class MeLock {
  var name: String
  @Relationship(deleteRule: .deny) var keys: [MeKey] = []
  init(name: String) { self.name = name }
}

@Model final class MeKey {
  var name: String
  @Relationship(inverse: \MeLock.keys) var locks: [MeLock] = []
  init(name: String) { self.name = name }
}

/// Folders whose delete takes their files (cascade); files own the links.
@Model final class MeFolder {
  var name: String
  @Relationship(deleteRule: .cascade) var files: [MeFile] = []
  init(name: String) { self.name = name }
}

@Model final class MeFile {
  var name: String
  @Relationship(inverse: \MeFolder.files) var folders: [MeFolder] = []
  init(name: String) { self.name = name }
}

/// Items of a table that holds a subclass, in bins (cascade) and on shelves (nullify); the
/// subclass has a many-to-many of its own, denied while linked.
@Model class MeItem {
  var label: String
  var bins: [MeBin] = []
  var shelves: [MeShelf] = []
  init(label: String) { self.label = label }
}

@Model class MeHeavy: MeItem {
  var weight = 0
  @Relationship(deleteRule: .deny, inverse: \MeTag.heavies) var tags: [MeTag] = []
}

@Model final class MeBin {
  var name: String
  @Relationship(deleteRule: .cascade, inverse: \MeItem.bins) var items: [MeItem] = []
  init(name: String) { self.name = name }
}

@Model final class MeShelf {
  var name: String
  @Relationship(inverse: \MeItem.shelves) var items: [MeItem] = []
  init(name: String) { self.name = name }
}

@Model final class MeTag {
  var label: String
  var heavies: [MeHeavy] = []
  init(label: String) { self.label = label }
}

/// Two subclasses of one table, each declaring a many-to-many named `toys`.
@Model class MePet {
  var name: String
  init(name: String) { self.name = name }
}

@Model class MeDog: MePet {
  @Relationship(inverse: \MeToy.dogs) var toys: [MeToy] = []
}

@Model class MeCat: MePet {
  @Relationship(inverse: \MeToy.cats) var toys: [MeToy] = []
}

@Model final class MeToy {
  var name: String
  var dogs: [MeDog] = []
  var cats: [MeCat] = []
  init(name: String) { self.name = name }
}

/// Members unique by name (upserts), owning their links to clubs.
@Model final class MeMember {
  @Attribute(.unique) var name: String
  @Relationship(inverse: \MeClub.members) var clubs: [MeClub] = []
  init(name: String) { self.name = name }
}

@Model final class MeClub {
  var name: String
  var members: [MeMember] = []
  init(name: String) { self.name = name }
}

/// Two pairs whose join tables would have one name, `_MeClashC_d_e`: of `MeClashC`'s `d_e`,
/// and of `MeClashC_d`'s `e` (each side names its inverse, so owns the table).
@Model final class MeClashC {
  var name = ""
  // The name the clash needs.
  // swift-format-ignore: AlwaysUseLowerCamelCase
  @Relationship(inverse: \MeClashE.cs) var d_e: [MeClashE] = []
  init() {}
}

@Model final class MeClashE {
  var name = ""
  var cs: [MeClashC] = []
  init() {}
}

@Model final class MeClashC_d {
  var name = ""
  @Relationship(inverse: \MeClashF.ds) var e: [MeClashF] = []
  init() {}
}

@Model final class MeClashF {
  var name = ""
  var ds: [MeClashC_d] = []
  init() {}
}

@Suite("Many-to-many at its edges")
struct ManyToManyEdgeTests {
  func first<M: PersistentModel>(_ context: ModelContext, _ predicate: Predicate<M>? = nil) throws
    -> M
  {
    try #require(try context.fetch(FetchDescriptor<M>(predicate: predicate)).first)
  }

  /// Each change of the transactions after `token`: "kind Type [attributes]", sorted.
  func changes(_ container: ModelContainer, after token: DefaultHistoryToken) throws -> [String] {
    try ModelContext(container).fetchHistory(HistoryDescriptor(after: token)).flatMap(\.changes)
      .map { change in
        switch change {
        case .insert(let inserted): "insert \(type(of: inserted))"
        case .update(let updated):
          "update \(type(of: updated)) \(change.updatedAttributeNames.sorted())"
        case .delete(let deleted): "delete \(type(of: deleted))"
        }
      }.sorted()
  }

  @Test(
    "deny and cascade apply when the other side's array changed in the same save",
    arguments: TestEngine.allCases)
  func rulesAfterOtherSideChanged(engine: TestEngine) throws {
    let container = try engineContainer(
      engine, MeLock.self, MeKey.self, MeFolder.self, MeFile.self)
    let setup = ModelContext(container)
    let l1 = MeLock(name: "L1")
    setup.insert(l1)
    setup.insert(MeLock(name: "L2"))
    l1.keys = [MeKey(name: "K")]
    let d1 = MeFolder(name: "D1")
    setup.insert(d1)
    setup.insert(MeFolder(name: "D2"))
    d1.files = [MeFile(name: "F")]
    try setup.save()

    let context = ModelContext(container)
    let key: MeKey = try first(context)
    key.locks.append(try first(context, #Predicate<MeLock> { $0.name == "L2" }))
    context.delete(try first(context, #Predicate<MeLock> { $0.name == "L1" }))
    #expect(throws: PersistenceError.self) { try context.save() }
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MeLock>()) == 2)

    let other = ModelContext(container)
    let file: MeFile = try first(other)
    file.folders.append(try first(other, #Predicate<MeFolder> { $0.name == "D2" }))
    other.delete(try first(other, #Predicate<MeFolder> { $0.name == "D1" }))
    try other.save()
    // The cascade took the file, and with it the link the save was to make.
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MeFile>()) == 0)
    let reader = ModelContext(container)
    #expect(try first(reader, #Predicate<MeFolder> { $0.name == "D2" }).files.isEmpty)
  }

  @Test(
    "a model a cascade deletes, linked elsewhere in the same save, is deleted and not linked",
    arguments: TestEngine.allCases)
  func cascadeMeetsNewLink(engine: TestEngine) throws {
    let container = try engineContainer(engine, MmAlbum.self, MmPhoto.self)
    let setup = ModelContext(container)
    let a = MmAlbum(title: "A")
    setup.insert(a)
    setup.insert(MmAlbum(title: "B"))
    a.photos = [MmPhoto(caption: "P")]
    try setup.save()

    let context = ModelContext(container)
    let albumA: MmAlbum = try first(context, #Predicate { $0.title == "A" })
    let albumB: MmAlbum = try first(context, #Predicate { $0.title == "B" })
    albumB.photos.append(try #require(albumA.photos.first))
    context.delete(albumA)
    try context.save()
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MmPhoto>()) == 0)
    #expect(albumB.photos.isEmpty)
    #expect(!context.hasChanges)
  }

  @Test(
    "rows of a subclass reached through a many-to-many unloaded are deleted, unlinked and denied as their class",
    arguments: TestEngine.allCases)
  func subclassRows(engine: TestEngine) throws {
    let container = try engineContainer(
      engine, MeItem.self, MeHeavy.self, MeBin.self, MeShelf.self, MeTag.self)
    let setup = ModelContext(container)
    let bin1 = MeBin(name: "bin1")
    let bin3 = MeBin(name: "bin3")
    let shelf = MeShelf(name: "shelf")
    let tag = MeTag(label: "t")
    [bin1, bin3].forEach(setup.insert)
    setup.insert(shelf)
    setup.insert(tag)
    bin1.items = [MeHeavy(label: "h1")]
    shelf.items = [MeHeavy(label: "h2")]
    let h3 = MeHeavy(label: "h3")
    bin3.items = [h3]
    h3.tags = [tag]
    try setup.save()

    var token = try ModelContext(container).currentHistoryToken()
    let cascade = ModelContext(container)
    cascade.delete(try first(cascade, #Predicate<MeBin> { $0.name == "bin1" }))
    try cascade.save()
    #expect(try changes(container, after: token).contains("delete DefaultHistoryDelete<MeHeavy>"))

    token = try ModelContext(container).currentHistoryToken()
    let unlink = ModelContext(container)
    unlink.delete(try first(unlink) as MeShelf)
    try unlink.save()
    #expect(
      try changes(container, after: token).contains(
        "update DefaultHistoryUpdate<MeHeavy> [\"shelves\"]"))

    let denied = ModelContext(container)
    denied.delete(try first(denied, #Predicate<MeBin> { $0.name == "bin3" }))
    #expect(throws: PersistenceError.self) { try denied.save() }
    #expect(try ModelContext(container).fetchCount(FetchDescriptor<MeHeavy>()) == 2)
  }

  @Test(
    "two subclasses of one table declaring a many-to-many of one name keep separate links",
    arguments: TestEngine.allCases)
  func subclassesSameName(engine: TestEngine) throws {
    let container = try engineContainer(engine, MePet.self, MeDog.self, MeCat.self, MeToy.self)
    let context = ModelContext(container)
    let ball = MeToy(name: "ball")
    context.insert(ball)
    let rex = MeDog(name: "Rex")
    rex.toys = [ball]
    context.insert(MeCat(name: "Tom"))
    try context.save()
    let reader = ModelContext(container)
    let read: MeToy = try first(reader)
    #expect(read.dogs.map(\.name) == ["Rex"])
    #expect(read.cats.isEmpty)
    #expect(
      try reader.fetchCount(FetchDescriptor<MeToy>(predicate: #Predicate { $0.cats.isEmpty })) == 1)
  }

  @Test(
    "a link made through a model an upsert merged is saved", arguments: TestEngine.allCases)
  func upsertMerged(engine: TestEngine) throws {
    let container = try engineContainer(engine, MeMember.self, MeClub.self)
    let setup = ModelContext(container)
    let chess = MeClub(name: "Chess")
    setup.insert(chess)
    setup.insert(MeClub(name: "Go"))
    let ana = MeMember(name: "Ana")
    setup.insert(ana)
    ana.clubs = [chess]
    try setup.save()

    let context = ModelContext(container)
    let fetched: MeMember = try first(context)
    #expect(fetched.clubs.map(\.name) == ["Chess"])
    context.insert(MeMember(name: "Ana"))
    try context.save()
    fetched.clubs.append(try first(context, #Predicate<MeClub> { $0.name == "Go" }))
    #expect(context.hasChanges)
    try context.save()
    let reader = ModelContext(container)
    let stored: MeMember = try first(reader)
    #expect(stored.clubs.map(\.name).sorted() == ["Chess", "Go"])
  }

  @Test(
    "after a save neither side has changes; new rows' links are recorded by their inserts only",
    arguments: TestEngine.allCases)
  func changeTrackingAndHistory(engine: TestEngine) throws {
    let container = try engineContainer(engine, MmTrip.self, MmTraveler.self)
    let token = try ModelContext(container).currentHistoryToken()
    let context = ModelContext(container)
    let kyoto = MmTrip(name: "Kyoto")
    context.insert(kyoto)
    let ana = MmTraveler(name: "Ana")
    kyoto.travelers = [ana, MmTraveler(name: "Ben")]
    #expect(kyoto.hasChanges && ana.hasChanges)
    try context.save()
    #expect(!context.hasChanges && !kyoto.hasChanges && !ana.hasChanges)
    #expect(
      try changes(container, after: token)
        == [
          "insert DefaultHistoryInsert<MmTrip>", "insert DefaultHistoryInsert<MmTraveler>",
          "insert DefaultHistoryInsert<MmTraveler>",
        ].sorted())

    let other = ModelContext(container)
    let trip: MmTrip = try first(other)
    let traveler: MmTraveler = try first(other, #Predicate { $0.name == "Ana" })
    traveler.trips = []
    #expect(trip.hasChanges && traveler.hasChanges && other.hasChanges)
    try other.save()
    #expect(!trip.hasChanges && !traveler.hasChanges && !other.hasChanges)
    #expect(trip.travelers.map(\.name) == ["Ben"])
  }

  @Test(
    "two pairs whose join tables would have one name are refused when the container opens"
  )
  func joinTableNameClashes() throws {
    let shared = #expect(throws: PersistenceError.self) {
      _ = try engineContainer(.sqlite, MeClashC.self, MeClashE.self, MeClashC_d.self, MeClashF.self)
    }
    #expect(shared?.code == .invalidValue)
    #expect(shared?.message.contains("one join table, '_MeClashC_d_e'") == true)
  }
}
