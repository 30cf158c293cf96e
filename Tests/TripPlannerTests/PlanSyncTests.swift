import Foundation
import Persistence
import TestSupport
import Testing

@testable import TripPlanner

@Suite("Sync carries a trip's plan, on every engine")
struct PlanSyncTests {
  @Test(
    "every plan part names its stored id (a field's values are read by it), a member name of its own, and is found by its entity's name"
  )
  func planPartsDeclareWhatFeedsRead() {
    func check<Part: TripPlanPart>(_: Part.Type) {
      let model = Part()
      // A key path of the protocol's requirement would read nil here: no field is declared by it.
      #expect(FieldValues(model)[dynamicMember: Part.idPath] == model.id, "\(Part.self)")
      #expect(model[keyPath: Part.tripPath] == nil, "\(Part.self)")
      #expect(Trip.planPart(entityName: Part.entityName) == Part.self, "\(Part.self)")
      let values = FieldValues(model)
      let subject = Part.subject(id: model.id, values, tripID: nil)
      #expect(subject.part?.id == model.id && subject.part?.noun == Part.noun, "\(Part.self)")
    }
    for part in Trip.planParts { check(part) }
    #expect(Set(Trip.planParts.map { $0.memberName }).count == Trip.planParts.count)
    #expect(Set(SyncFeed.subjectMembers.map(\.id)).count == Trip.planParts.count + 1)
  }

  typealias Engine = TripPlanTests.Engine

  /// Two stores of `engine` and a way to push changes between them as `trips sync` does:
  /// edits by `cli`, applied changes by `sync`, left out of the feed back.
  final class Pair {
    let urls: [URL]
    var after: [DefaultHistoryToken?] = [nil, nil]

    init(_ engine: Engine) throws {
      urls = [
        try TripPlanTests.storeURL(engine, "plansync-a"),
        try TripPlanTests.storeURL(engine, "plansync-b"),
      ]
    }

    /// A store of side `side` writing as `author`.
    func store(_ side: Int, author: String = "cli") throws -> TripStore {
      try TripStore(url: urls[side], author: author)
    }

    /// Pushes side `from`'s changes since its last push to the other side.
    @discardableResult
    func push(from side: Int) throws -> SyncResult {
      let feed = try store(side, author: "sync").changeFeed(
        after: after[side], excludingAuthor: "sync")
      after[side] = feed.resumeToken
      return try store(1 - side, author: "sync").apply(feed)
    }

    /// Side `side`'s trips with their plans, as an export writes them.
    func state(_ side: Int) throws -> [TripRecord] {
      try store(side).exportRecords(plans: true).sorted { $0.id!.uuidString < $1.id!.uuidString }
    }
  }

  /// Lets the clock move past the millisecond the last change was made in.
  static func tick() { Thread.sleep(forTimeInterval: 0.005) }

  @Test(
    "bucket lists and stays travel with their trips: inserts, edits, moves, removals, a stay changed and cleared, and the trip's delete with its plan; nothing echoes back",
    arguments: Engine.allCases)
  func plansTravel(engine: Engine) throws {
    let pair = try Pair(engine)
    let a = try pair.store(0)
    let trip = try a.add(TripPlanTests.kyoto)
    let text = trip.id.uuidString
    let first = try a.addBucketListItem(itemValues(title: "Fushimi Inari"), toTrip: text)
    try a.addBucketListItem(
      itemValues(title: "Kaiseki dinner", details: "Gion", hasReservation: true),
      toTrip: text)
    try a.setStay(
      stayValues(
        name: "Ryokan", address: "Nanzenji", latitude: 35.01, longitude: 135.79,
        placeIdentifier: "geonames:1857910"), forTrip: text)
    #expect(try pair.push(from: 0).applied == 4)
    #expect(try pair.state(1) == pair.state(0))
    #expect(try pair.state(1).first?.plan?.bucketList.count == 2)
    // Nothing comes back: B's changes are all by the sync.
    #expect(try pair.push(from: 1) == SyncResult())

    try a.addBucketListItem(itemValues(title: "Philosopher's Path"), toTrip: text, at: 0)
    try a.moveBucketListItem(first.id, to: 2)
    try a.updateBucketListItem(first.id) { $0.isInPlan = true }
    try a.setStay(
      stayValues(name: "Hotel", latitude: 35.0, longitude: 135.76), forTrip: text)
    try pair.push(from: 0)
    #expect(try pair.state(1) == pair.state(0))
    #expect(
      try pair.state(1).first?.plan?.bucketList.map(\.title) == [
        "Philosopher's Path", "Kaiseki dinner", "Fushimi Inari",
      ])

    try a.removeBucketListItem(first.id)
    try a.clearStay(ofTrip: text)
    try pair.push(from: 0)
    #expect(try pair.state(1) == pair.state(0))
    #expect(try pair.state(1).first?.plan?.livingAccommodation == nil)

    _ = try a.delete([trip.id])
    try pair.push(from: 0)
    #expect(try TripPlanTests.counts(pair.store(1)) == [0, 0, 0])
    #expect(try pair.push(from: 1) == SyncResult())
  }

  @Test(
    "conflicts row by row: the same item changed on both sides keeps the later change on both; different items of one trip both stay; a stay set on both sides keeps the later one",
    arguments: Engine.allCases)
  func conflicts(engine: Engine) throws {
    let pair = try Pair(engine)
    let a = try pair.store(0)
    let trip = try a.add(TripPlanTests.kyoto)
    let text = trip.id.uuidString
    let shared = try a.addBucketListItem(itemValues(title: "Tea ceremony"), toTrip: text)
    try pair.push(from: 0)
    let b = try pair.store(1)

    Self.tick()
    try a.updateBucketListItem(shared.id) { $0.details = "from A, earlier" }
    try a.addBucketListItem(itemValues(title: "Only on A"), toTrip: text)
    try a.setStay(
      stayValues(name: "A's ryokan", latitude: 35, longitude: 135.7), forTrip: text)
    Self.tick()
    try b.updateBucketListItem(shared.id) { $0.details = "from B, later" }
    try b.addBucketListItem(itemValues(title: "Only on B"), toTrip: text)
    try b.setStay(
      stayValues(name: "B's hotel", latitude: 35.1, longitude: 135.8),
      forTrip: text)

    try pair.push(from: 0)
    try pair.push(from: 1)
    let one = try pair.state(0)
    let two = try pair.state(1)
    #expect(one == two, "\(one) \(two)")
    let plan = try #require(one.first?.plan)
    #expect(plan.bucketList.first { $0.id == shared.id }?.details == "from B, later")
    #expect(Set(plan.bucketList.map(\.title)) == ["Tea ceremony", "Only on A", "Only on B"])
    #expect(plan.livingAccommodation?.name == "B's hotel")
    #expect(try TripPlanTests.counts(pair.store(0)) == [1, 3, 1])
  }

  @Test(
    "a plan row made before a later change of its new trip follows the trip in the feed, in its transaction, so an empty store and every batch of a server push take it",
    arguments: Engine.allCases)
  func tripsBeforeTheirPlans(engine: Engine) throws {
    let pair = try Pair(engine)
    let a = try pair.store(0)
    let trip = try a.add(TripPlanTests.kyoto)
    try a.addBucketListItem(itemValues(title: "Early"), toTrip: trip.id.uuidString)
    try a.update(trip.id) { $0.name = "Renamed later" }
    let feed = try a.changeFeed(after: nil)
    #expect(
      feed.changes.map(\.row.model) == [Trip.self, BucketListItem.self].map(ObjectIdentifier.init))
    #expect(feed.changes[0].token == feed.changes[1].token)
    #expect(feed.changes[1].time < feed.changes[0].time)
    // Cut one change a body: the trip's transaction goes whole, so no batch splits them.
    let batches = ServerSync.batches(of: feed, after: nil, maximumBytes: 1)
    #expect(batches.count == 2 && batches[0].resume == nil)
    #expect(try pair.store(1, author: "sync").apply(feed).applied == 2)
    #expect(try pair.state(1) == pair.state(0))
  }

  @Test(
    "a feed whose item or stay belongs to a trip in neither the store nor the feed is refused whole, naming both; a change to the plan of a trip deleted here is skipped",
    arguments: Engine.allCases)
  func danglingPlans(engine: Engine) throws {
    let pair = try Pair(engine)
    let a = try pair.store(0)
    let kept = try a.add(TripPlanTests.kyoto)
    var other = TripPlanTests.kyoto
    other.name = "Elsewhere"
    let gone = try a.add(other)
    try pair.push(from: 0)
    // A's own trip, never sent: its item's change alone points nowhere on B.
    var unsent = TripPlanTests.kyoto
    unsent.name = "Unsent"
    let hidden = try pair.store(0, author: "sync").add(unsent)
    let item = try a.addBucketListItem(
      itemValues(title: "Orphan"), toTrip: hidden.id.uuidString)
    try a.addBucketListItem(itemValues(title: "Fine"), toTrip: kept.id.uuidString)
    let feed = try a.changeFeed(after: pair.after[0], excludingAuthor: "sync")
    let b = try pair.store(1, author: "sync")
    let error = #expect(throws: TripPlannerError.self) { try b.apply(feed) }
    #expect(error?.code == .invalidInput)
    #expect(error?.message.contains(item.id.lowercasedString) == true)
    #expect(error?.message.contains(hidden.id.lowercasedString) == true)
    #expect(try TripPlanTests.counts(b) == [2, 0, 0])

    // B deletes a trip; A's later item for it is skipped there, and the delete reaches A.
    try pair.store(1).delete([gone.id])
    let late = try a.addBucketListItem(
      itemValues(title: "Too late"), toTrip: gone.id.uuidString)
    let lateFeed = SyncFeed(
      changes: try a.changeFeed(after: pair.after[0], excludingAuthor: "sync").changes.filter {
        $0.row.id == late.id
      }, resumeToken: feed.resumeToken)
    #expect(try b.apply(lateFeed) == SyncResult(applied: 0, skipped: 1))
    try pair.push(from: 1)
    #expect(try TripPlanTests.counts(pair.store(0)).prefix(1) == [2])
  }

  @Test(
    "a feed that gives an item or a stay of one trip to another is refused whole, naming the row and both trips",
    arguments: Engine.allCases)
  func rowsStayInTheirTrip(engine: Engine) throws {
    let pair = try Pair(engine)
    let a = try pair.store(0)
    let owner = try a.add(TripPlanTests.kyoto)
    var other = TripPlanTests.kyoto
    other.name = "Elsewhere"
    let taker = try a.add(other)
    let item = try a.addBucketListItem(
      itemValues(title: "Gion"), toTrip: owner.id.uuidString)
    let stay = try a.setStay(
      stayValues(name: "Ryokan", latitude: 35, longitude: 135.7),
      forTrip: owner.id.uuidString)
    try pair.push(from: 0)
    let b = try pair.store(1, author: "sync")
    Self.tick()
    try a.updateBucketListItem(item.id) { $0.title = "Gion at night" }
    try a.setStay(
      stayValues(name: "Ryokan Yachiyo", latitude: 35, longitude: 135.7),
      forTrip: owner.id.uuidString)
    let feed = try a.changeFeed(after: pair.after[0], excludingAuthor: "sync")
    for row in [item.id, stay.id] {
      var moved = feed
      moved.changes = moved.changes.map { change in
        var change = change
        switch change.subject {
        case .bucketListItem(let id, let record, _) where id == row:
          change.subject = .bucketListItem(id: id, record, tripID: taker.id)
        case .livingAccommodation(let id, let record, _) where id == row:
          change.subject = .livingAccommodation(id: id, record, tripID: taker.id)
        default: break
        }
        return change
      }
      let error = #expect(throws: TripPlannerError.self) { try b.apply(moved) }
      #expect(error?.code == .invalidInput)
      for id in [row, owner.id, taker.id] {
        #expect(error?.message.contains(id.lowercasedString) == true)
      }
    }
    #expect(
      try pair.state(1)
        == pair.state(0).map { record in
          var record = record  // B has not taken A's retitle nor its new stay name
          if record.id == owner.id {
            record.plan?.bucketList[0].title = "Gion"
            record.plan?.livingAccommodation?.name = "Ryokan"
          }
          return record
        })
    // The feed as A wrote it applies.
    #expect(try b.apply(feed).applied == 2)
    #expect(try pair.state(1) == pair.state(0))
  }

  @Test(
    "a trip deleted on one side and changed later on the other comes back on both with the plan rows changed after the delete (the stay, older than the delete, stays deleted on both), each row at the time of its own last change",
    arguments: Engine.allCases)
  func tripTakenBackWithItsPlan(engine: Engine) throws {
    let pair = try Pair(engine)
    let a = try pair.store(0)
    let trip = try a.add(TripPlanTests.kyoto)
    let item = try a.addBucketListItem(
      itemValues(title: "Moss garden"), toTrip: trip.id.uuidString)
    try a.setStay(
      stayValues(name: "Machiya", latitude: 35, longitude: 135.7),
      forTrip: trip.id.uuidString)
    try pair.push(from: 0)
    Self.tick()
    _ = try pair.store(1).delete([trip.id])
    Self.tick()
    try a.updateBucketListItem(item.id) { $0.details = "Book ahead" }
    // B has deleted the trip: the item's change is skipped there.
    #expect(try pair.push(from: 0) == SyncResult(applied: 0, skipped: 1))
    Self.tick()
    try a.update(trip.id) { $0.name = "Kyoto again" }
    let feed = try a.changeFeed(after: pair.after[0], excludingAuthor: "sync")
    #expect(
      feed.changes.map(\.row.model)
        == [Trip.self, BucketListItem.self, LivingAccommodation.self].map(ObjectIdentifier.init))
    #expect(try pair.push(from: 0) == SyncResult(applied: 2, skipped: 1))
    try pair.push(from: 1)
    let one = try pair.state(0)
    #expect(one == (try pair.state(1)))
    #expect(one.first?.name == "Kyoto again")
    #expect(one.first?.plan?.bucketList.map(\.details) == ["Book ahead"])
    #expect(one.first?.plan?.livingAccommodation == nil)
    // Each carried row is recorded at its own time, not the trip's.
    func itemTime(_ store: TripStore) throws -> Int64? {
      let local = try store.context.fetch(FetchDescriptor<BucketListItem>()).first
      return try local.flatMap { store.context.persistentIdentifier(for: $0) }
        .flatMap { try store.context.lastChangeDate(for: $0) }
        .map(FeedChange.milliseconds)
    }
    #expect(try itemTime(pair.store(1)) == itemTime(a))
    #expect(try itemTime(pair.store(1)) != FeedChange.milliseconds(feed.changes[0].time))
  }

  @Test("a feed's plan lines with bad members are errors naming the line, nothing applied")
  func badPlanLines() throws {
    let store = "0d6b8c1e-5a0e-4b8e-9a63-6f4a2f1d3c21"
    let trip = "71c27976-fe83-4757-aab5-31f72532f909"
    let item = "8b0a8f57-3f7c-4d0e-9f3b-2f1b8c7d6e5a"
    let head = #"{"token":"\#(store):1","time":"2027-01-01T00:00:00.000Z","#
    let lines: [(String, String)] = [
      (
        #""kind":"insert","tripId":"\#(trip)","bucketListItemId":"\#(item)","bucketListItem":{"id":"\#(item)","title":"x","position":-1}}"#,
        "bucketListItem: position -1 is negative; positions start at 0"
      ),
      (
        #""kind":"insert","tripId":null,"bucketListItemId":"\#(item)","bucketListItem":{"id":"\#(item)","title":"x"}}"#,
        "a change needs tripId"
      ),
      (
        #""kind":"delete","tripId":null,"bucketListItemId":"\#(item)","bucketListItem":{"id":"\#(item)","title":"x"}}"#,
        "a delete carries no values: bucketListItem must be null"
      ),
      (
        #""kind":"update","tripId":"\#(trip)","bucketListItemId":"\#(trip)","bucketListItem":{"id":"\#(item)","title":"x"}}"#,
        "the bucket-list item's id does not match bucketListItemId"
      ),
      (
        #""kind":"update","tripId":"\#(trip)","livingAccommodationId":"not-a-uuid","livingAccommodation":null}"#,
        "livingAccommodationId 'not-a-uuid' is not a UUID"
      ),
      (
        #""kind":"insert","tripId":"\#(trip)","livingAccommodationId":"\#(item)","livingAccommodation":{"id":"\#(item)","name":"x","latitude":"north","longitude":1,"rooms":2}}"#,
        "livingAccommodation: unknown member 'rooms'"
      ),
      (
        #""kind":"update","tripId":"\#(trip)","bucketListItemId":"\#(item)","bucketListItem":{"id":"\#(item)","title":"x"},"livingAccommodationId":"\#(item)","livingAccommodation":null}"#,
        "a change is about one row: this one names both a bucket-list item and a stay"
      ),
      (
        #""kind":"delete","tripId":"\#(trip)","trip":null,"foo":1}"#,
        "unknown member 'foo' in a change"
      ),
      (
        #""kind":"delete","tripId":"\#(trip)","bucketListItemId":"\#(item)","bucketListItem":null,"trip":null}"#,
        "trip does not belong in a change of a bucket-list item"
      ),
      (
        #""kind":"insert","tripId":"\#(trip)","bucketListItemId":"\#(item)","bucketListItem":{"id":"\#(item)","title":"a","title":"b\n"}}"#,
        "not a JSON object: the member 'title' appears twice in one object at bucketListItem"
      ),
    ]
    // The header's members, each named with what is wrong with it.
    let headers: [(String, String)] = [
      (
        #"{"token":"\#(store):1","time":"2027-02-30T00:00:00.000Z","kind":"delete","tripId":"\#(trip)","trip":null}"#,
        "time '2027-02-30T00:00:00.000Z' is not a date and time that exists (ISO 8601, in UTC or with an offset)"
      ),
      (
        #"{"token":"\#(store):999999999999999999999","time":"2027-01-01T00:00:00Z","kind":"delete","tripId":"\#(trip)","trip":null}"#,
        "token '\(store):999999999999999999999' is not a history token: a store's UUID, a colon and a number from 0 to 9223372036854775807"
      ),
      (
        #"{"time":"2027-01-01T00:00:00Z","kind":"delete","tripId":"\#(trip)","trip":null}"#,
        #"a change needs token (such as "STORE-UUID:42")"#
      ),
      (
        #"{"token":"\#(store):1","time":"2027-01-01T00:00:00Z","kind":"upsert","tripId":"\#(trip)","trip":null}"#,
        "kind 'upsert' is not insert, update or delete"
      ),
    ]
    for (line, reason) in headers {
      let feed = Data((line + "\n" + #"{"resumeToken":"\#(store):1"}"#).utf8)
      let error = #expect(throws: TripPlannerError.self) { try SyncFeed.parse(feed, file: "feed") }
      #expect(error?.problems.map(\.reason) == [reason], "\(String(describing: error))")
    }
    for (body, reason) in lines {
      let feed = Data((head + body + "\n" + #"{"resumeToken":"\#(store):1"}"#).utf8)
      let error = #expect(throws: TripPlannerError.self) { try SyncFeed.parse(feed, file: "feed") }
      #expect(error?.problems.first?.line == 1, "\(body)")
      #expect(
        error?.problems.map(\.reason).contains(reason) == true, "\(String(describing: error))")
    }
    // A valid item line reads back as the line it was written from.
    let valid = FeedChange(
      token: DefaultHistoryToken(storeIdentifier: UUID(uuidString: store)!, value: 1),
      author: "cli",
      time: Date(timeIntervalSince1970: 1_800_000_000), kind: .insert,
      subject: .bucketListItem(
        id: UUID(uuidString: item)!,
        itemValues(
          id: UUID(uuidString: item)!, title: "Tea \u{1F375}", details: "3 pm",
          hasReservation: true, position: 4), tripID: UUID(uuidString: trip)!))
    let text = SyncFeed(changes: [valid], resumeToken: valid.token).jsonLines
    let read = try SyncFeed.parse(Data(text.utf8), file: "feed")
    #expect(read.changes == [valid])
    // A byte that is not UTF-8 in a title makes its line bad (never read as U+FFFD), whether
    // lines end with LF or CRLF.
    var bytes = Array(text.utf8)
    let tea = bytes.firstRange(of: Array("Tea".utf8))!
    bytes[tea.lowerBound + 1] = 0xFF
    for lineEnd in ["\n", "\r\n"] {
      let feed = Data(bytes.split(separator: 10).map { $0 + Array(lineEnd.utf8) }.joined())
      let error = #expect(throws: TripPlannerError.self) { try SyncFeed.parse(feed, file: "feed") }
      #expect(error?.problems.map(\.line) == [1], "\(String(describing: error))")
      #expect(
        error?.problems.first?.reason.contains("not valid UTF-8") == true,
        "\(String(describing: error))")
    }
  }
}
