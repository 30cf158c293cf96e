import Foundation
import Persistence

/// One change of a trip or of its plan, as a sync feed carries it: when, by whom, what kind,
/// and the row's current values (history keeps only attribute names, as SwiftData's does).
public struct FeedChange: Hashable, Sendable {
  /// The history token of the change's transaction in the source store.
  public var token: HistoryToken
  /// Who made it.
  public var author: String?
  /// When it was committed.
  public var time: Date
  /// Insert, update or delete.
  public var kind: HistoryChange.Kind
  /// What changed, by id, with its values for an insert or an update.
  public var subject: Subject

  /// The row a change is about: a trip, a bucket-list item or a stay.
  public enum Subject: Hashable, Sendable {
    /// A trip: its id, and its values for an insert or an update (nil for a delete).
    case trip(id: UUID, TripRecord?)
    /// A bucket-list item: its id, and for an insert or an update its values and its trip's id
    /// (a delete carries neither: a deleted row's link is not kept in its tombstone).
    case bucketListItem(id: UUID, FieldValues<BucketListItem>?, tripID: UUID?)
    /// A stay: its id, and for an insert or an update its values and its trip's id.
    case livingAccommodation(id: UUID, FieldValues<LivingAccommodation>?, tripID: UUID?)
  }

  /// Creates a change.
  public init(
    token: HistoryToken, author: String?, time: Date, kind: HistoryChange.Kind, subject: Subject
  ) {
    self.token = token
    self.author = author
    self.time = time
    self.kind = kind
    self.subject = subject
  }

  /// Creates a change of a trip.
  public init(
    token: HistoryToken, author: String?, time: Date, kind: HistoryChange.Kind, tripID: UUID,
    trip: TripRecord?
  ) {
    self.init(
      token: token, author: author, time: time, kind: kind, subject: .trip(id: tripID, trip))
  }

  /// The trip the change is about, or the trip of the item or stay it is about (nil for an
  /// item's or a stay's delete).
  public var tripID: UUID? {
    switch subject {
    case .trip(let id, _): id
    case .bucketListItem(_, _, let tripID), .livingAccommodation(_, _, let tripID): tripID
    }
  }

  /// A trip change's values; nil for a delete and for changes of a plan.
  public var trip: TripRecord? {
    if case .trip(_, let record) = subject { return record }
    return nil
  }

  /// The changed row's model and id: a row of a feed is named by both.
  var row: FeedRow {
    switch subject {
    case .trip(let id, _): FeedRow(model: .trip, id: id)
    case .bucketListItem(let id, _, _): FeedRow(model: .bucketListItem, id: id)
    case .livingAccommodation(let id, _, _): FeedRow(model: .livingAccommodation, id: id)
    }
  }

  /// The change's values as a JSON object, for ties between versions (nil for a delete).
  var valuesJSON: String? {
    switch subject {
    case .trip(_, let record): record.map { TripJSON.object($0).rendered() }
    case .bucketListItem(_, let record, _): record.map { TripJSON.object($0).rendered() }
    case .livingAccommodation(_, let record, _): record.map { TripJSON.object($0).rendered() }
    }
  }
}

/// A row a feed names: its model and its id.
struct FeedRow: Hashable {
  enum Model: Hashable { case trip, bucketListItem, livingAccommodation }
  var model: Model
  var id: UUID
}

extension FeedChange {
  /// A time to the millisecond, as feeds carry it and as conflicts compare it (a time read
  /// back from a feed is within a rounding error of a whole millisecond).
  static func milliseconds(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1000).rounded())
  }

  /// The time of `milliseconds` since 1970.
  static func date(milliseconds: Int64) -> Date {
    Date(timeIntervalSince1970: Double(milliseconds) / 1000)
  }

  /// `2027-01-01T10:00:00.123Z`: ISO 8601 to the millisecond, rounded as
  /// ``milliseconds(_:)`` rounds (the same time on every machine and every pass through a feed).
  static func text(of date: Date) -> String {
    let total = milliseconds(date)
    let fraction = ((total % 1000) + 1000) % 1000
    let whole = Date(timeIntervalSince1970: Double((total - fraction) / 1000))
    let digits = String(fraction)
    return String(whole.formatted(.iso8601).dropLast())
      + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
  }
}

/// The changes of a store after a token, and the token to resume from.
///
/// As JSON lines: one object per change, then a last line `{"resumeToken": "<token>"}`. A
/// trip's change is `{"token","author","time","kind","tripId","trip"}` (`trip` as Trip JSON,
/// or `null` for a delete); a bucket-list item's is
/// `{"token","author","time","kind","tripId","bucketListItemId","bucketListItem"}` and a
/// stay's `{"token","author","time","kind","tripId","livingAccommodationId",
/// "livingAccommodation"}`, the values as a trip file's plan writes them (an item with its
/// `position`), `tripId` the trip they belong to, both `null` for a delete.
///
/// A feed names every trip before the plan rows that point to it: a plan row whose trip was
/// inserted or changed later in the same span is carried with its trip's transaction (its own
/// time kept), so that whatever prefix of a feed a store applies, no row points to a trip the
/// store has not been given. A trip's insert or update also carries the trip's plan rows the
/// feed has no change of, as updates at the times of their last changes: a store that deleted
/// the trip, and takes it back because this change is later, gets its plan back with it.
public struct SyncFeed: Sendable {
  /// The changes, oldest first.
  public var changes: [FeedChange]
  /// Export after this token next time.
  public var resumeToken: HistoryToken

  /// Creates a feed.
  public init(changes: [FeedChange], resumeToken: HistoryToken) {
    self.changes = changes
    self.resumeToken = resumeToken
  }

  /// The feed as JSON lines (``TripStore/writeChangeFeed(after:excludingAuthor:batchSize:to:)``
  /// writes the same lines without holding the feed).
  public var jsonLines: String {
    changes.map(Self.line(for:)).joined() + Self.resumeLine(resumeToken)
  }

  /// The feed's last line, with the token to resume from.
  static func resumeLine(_ token: HistoryToken) -> String {
    JSONValue.object([("resumeToken", .string(token.description))]).rendered() + "\n"
  }

  /// One change's JSON line, with its line end.
  static func line(for change: FeedChange) -> String {
    var members: [(String, JSONValue)] = [
      ("token", .string(change.token.description)),
      ("author", change.author.map(JSONValue.string) ?? .null),
      ("time", .string(FeedChange.text(of: change.time))),
      ("kind", .string(change.kind.rawValue)),
      ("tripId", change.tripID.map { .string($0.lowercasedString) } ?? .null),
    ]
    switch change.subject {
    case .trip(_, let record):
      members.append(("trip", record.map(TripJSON.object) ?? .null))
    case .bucketListItem(let id, let record, _):
      members.append(("bucketListItemId", .string(id.lowercasedString)))
      members.append(("bucketListItem", record.map(TripJSON.object) ?? .null))
    case .livingAccommodation(let id, let record, _):
      members.append(("livingAccommodationId", .string(id.lowercasedString)))
      members.append(("livingAccommodation", record.map(TripJSON.object) ?? .null))
    }
    return JSONValue.object(members).rendered() + "\n"
  }

  /// Reads JSON lines; throws ``TripPlannerError/Code/invalidInput`` listing every bad line.
  public static func parse(_ data: Data, file: String) throws -> SyncFeed {
    var problems = ProblemList(file: file)
    var changes: [FeedChange] = []
    var resume: HistoryToken?
    // A line ends at LF or CRLF (`\r\n` is one Character in Swift, so splitting at "\n" alone
    // kept a CRLF feed as one line).
    let lines = String(decoding: data, as: UTF8.self).split(omittingEmptySubsequences: false) {
      $0 == "\n" || $0 == "\r\n"
    }
    for (offset, line) in lines.enumerated() where !line.allSatisfy(\.isWhitespace) {
      let number = offset + 1
      let value: JSONValue
      do {
        value = try JSONValue.parse(Data(line.utf8))
      } catch let error as JSONValue.ParseError {
        problems.add(number, "not a JSON object: \(error)")
        continue
      } catch {
        problems.add(number, "not a JSON object")
        continue
      }
      guard case .object = value else {
        problems.add(number, "not a JSON object")
        continue
      }
      if case .string(let text)? = value["resumeToken"] {
        guard let token = HistoryToken(text) else {
          problems.add(number, "resumeToken '\(text)' is not a history token")
          continue
        }
        resume = token
        continue
      }
      guard let (token, time, kind) = Self.header(of: value, line: number, problems: &problems)
      else { continue }
      var author: String?
      if case .string(let name)? = value["author"] { author = name }
      let before = problems.problems.count
      let subject = Self.subject(of: value, kind: kind, line: number, problems: &problems)
      guard let subject, problems.problems.count == before else { continue }
      changes.append(
        FeedChange(token: token, author: author, time: time, kind: kind, subject: subject))
    }
    if resume == nil && problems.problems.isEmpty {
      problems.add(nil, "the feed has no resumeToken line: it may have been cut short")
    }
    try problems.throwIfAny()
    return SyncFeed(changes: changes, resumeToken: resume!)  // set: checked just above
  }

  /// The members a change line may have: its header, and per subject its id and values.
  static let headerMembers: Set<String> = ["token", "author", "time", "kind"]
  static let subjectMembers: [(id: String, values: String)] = [
    ("bucketListItemId", "bucketListItem"), ("livingAccommodationId", "livingAccommodation"),
    ("tripId", "trip"),
  ]

  /// A change line's token, time and kind, each checked on its own so that a problem names
  /// the member and what is wrong with it; nil (with the problems added) when any is wrong.
  private static func header(of value: JSONValue, line: Int, problems: inout ProblemList)
    -> (HistoryToken, Date, HistoryChange.Kind)?
  {
    let before = problems.problems.count
    func text(_ key: String, _ example: String) -> String? {
      switch value[key] {
      case .string(let text)?: return text
      case nil, .null?: problems.add(line, "a change needs \(key) (such as \(example))")
      default: problems.add(line, "\(key) must be a string (such as \(example))")
      }
      return nil
    }
    let tokenText = text("token", "\"STORE-UUID:42\"")
    let token = tokenText.flatMap(HistoryToken.init)
    if let tokenText, token == nil {
      problems.add(
        line,
        "token '\(tokenText)' is not a history token: a store's UUID, a colon and a number from 0 to \(Int64.max)"
      )
    }
    let timeText = text("time", "\"2027-05-01T09:30:00Z\"")
    let time = timeText.flatMap { TripDates.parse($0) }
    if let timeText, time == nil {
      problems.add(
        line,
        "time '\(timeText)' is not a date and time that exists (ISO 8601, in UTC or with an offset)"
      )
    }
    let kindText = text("kind", "\"update\"")
    let kind = kindText.flatMap(HistoryChange.Kind.init(rawValue:))
    if let kindText, kind == nil {
      problems.add(line, "kind '\(kindText)' is not insert, update or delete")
    }
    // Members the line may not have: unknown ones, and those of another subject than the
    // one its id names (a line is about one row).
    if case .object(let members) = value {
      let subjects = subjectMembers.filter { value[$0.id] != nil || value[$0.values] != nil }
      let planSubjects = subjects.filter { $0.id != "tripId" }
      if planSubjects.count > 1 {
        problems.add(
          line,
          "a change is about one row: this one names both a bucket-list item and a stay")
      } else {
        let subject = planSubjects.first ?? subjectMembers[2]
        var allowed = headerMembers.union([subject.id, subject.values])
        allowed.insert("tripId")
        for (name, _) in members where !allowed.contains(name) {
          let known = subjectMembers.contains { $0.id == name || $0.values == name }
          problems.add(
            line,
            known
              ? "\(name) does not belong in a change of a \(subject.id == "tripId" ? "trip" : subject.values == "bucketListItem" ? "bucket-list item" : "stay")"
              : "unknown member '\(name)' in a change")
        }
      }
    }
    guard let token, let time, let kind, problems.problems.count == before else { return nil }
    return (token, time, kind)
  }

  /// What one change line is about, by which id member it has (`bucketListItemId`,
  /// `livingAccommodationId`, else a trip's `tripId`), with its values for an insert or update.
  private static func subject(
    of value: JSONValue, kind: HistoryChange.Kind, line: Int, problems: inout ProblemList
  ) -> FeedChange.Subject? {
    func id(_ key: String, required: Bool) -> UUID?? {
      switch value[key] {
      case .string(let text)?:
        guard let id = UUID(uuidString: text) else {
          problems.add(line, "\(key) '\(text)' is not a UUID")
          return nil
        }
        return .some(id)
      case nil, .null?:
        if required { problems.add(line, "a change needs \(key)") }
        return required ? nil : .some(nil)
      default:
        problems.add(line, "\(key) must be a string")
        return nil
      }
    }
    let isDelete = kind == .delete
    /// The values member: required for an insert or update, refused on a delete.
    func values(_ key: String, what: String) -> JSONValue? {
      switch value[key] {
      case nil, .null?:
        if !isDelete { problems.add(line, "an \(kind.rawValue) needs the \(what)'s values") }
      case let member?:
        if isDelete { problems.add(line, "a delete carries no values: \(key) must be null") }
        return member
      }
      return nil
    }
    /// A plan row's line: its id member, its trip (required but for a delete), its values
    /// read by `read` (whose id must be the line's) and checked by its model's rules, made
    /// into a subject by `make`.
    func planRow<Model: FieldRules>(
      _ key: String, what: String,
      read: (JSONValue, inout ProblemList) -> FieldValues<Model>?,
      make: (UUID, FieldValues<Model>?, UUID?) -> FeedChange.Subject
    ) -> FeedChange.Subject? {
      guard case .some(let rowID?) = id(key + "Id", required: true),
        case .some(let tripID) = id("tripId", required: !isDelete)
      else { return nil }
      guard let member = values(key, what: what) else {
        return isDelete ? make(rowID, nil, tripID) : nil
      }
      guard let record = read(member, &problems) else { return nil }
      let violations = record.violations
      for violation in violations { problems.add(line, "\(key): \(violation.reason)") }
      guard violations.isEmpty else { return nil }
      guard record.identity == rowID else {
        problems.add(line, "the \(what)'s id does not match \(key)Id")
        return nil
      }
      return make(rowID, record, tripID)
    }
    if value["bucketListItemId"] != nil {
      return planRow(
        "bucketListItem", what: "item",
        read: {
          TripJSON.bucketListItem(from: $0, label: "bucketListItem", line: line, problems: &$1)
        }, make: { .bucketListItem(id: $0, $1, tripID: $2) })
    }
    if value["livingAccommodationId"] != nil {
      return planRow(
        "livingAccommodation", what: "stay",
        read: { TripJSON.stay(from: $0, label: "livingAccommodation", line: line, problems: &$1) },
        make: { .livingAccommodation(id: $0, $1, tripID: $2) })
    }
    guard case .some(let tripID?) = id("tripId", required: true) else { return nil }
    guard let member = values("trip", what: "trip") else {
      return isDelete ? .trip(id: tripID, nil) : nil
    }
    let before = problems.problems.count
    let record = TripJSON.record(from: member, line: line, problems: &problems)
    guard let record, problems.problems.count == before else { return nil }
    guard record.id == tripID else {
      problems.add(line, "the trip's id does not match tripId")
      return nil
    }
    return .trip(id: tripID, record)
  }
}

/// What applying a feed did.
public struct SyncResult: Hashable, Sendable {
  /// Changes applied.
  public var applied = 0
  /// Changes skipped because the local row changed later (the last change wins), because
  /// nothing was left to do, or because they change the plan of a trip deleted here.
  public var skipped = 0
}

extension TripStore {
  /// The model types a sync feed carries: trips and their plans.
  static let syncedModelTypes: [any PersistentModel.Type] = [
    Trip.self, BucketListItem.self, LivingAccommodation.self,
  ]
  /// Their entities' names, in the same order.
  static let syncedEntityNames = [
    Trip.schema.name, BucketListItem.schema.name, LivingAccommodation.schema.name,
  ]

  /// The changes to trips and their plans after `token` (all kept history when nil), leaving
  /// out those by `excludedAuthor`: each row's last change, with the row's current values, at
  /// the time of that change (read afresh, in a context of its own, in one read transaction,
  /// so values and times agree). Earlier changes of a row in the same span are left out: its
  /// current values stand for them, and carrying them under their older times would give a
  /// receiving store the newest values under an old time. A plan row whose trip's change comes
  /// later in the feed moves into that change's transaction, after it, and a trip's change
  /// carries its other plan rows (see ``SyncFeed``).
  ///
  /// Cost: O(changes after `token`) history rows, one read by key per row changed, for each
  /// plan row one more for its trip (none when it is already loaded), and for each trip
  /// inserted or changed two queries for its plan and a history lookup per plan row carried.
  ///
  /// - Throws: ``TripPlannerError`` wrapping `historyTokenExpired` when the store no longer
  ///   keeps the history after `token`: do a full export instead.
  public func changeFeed(after token: HistoryToken?, excludingAuthor excludedAuthor: String? = nil)
    throws -> SyncFeed
  {
    var changes: [FeedChange] = []
    let resume = try forEachFeedChange(after: token, excludingAuthor: excludedAuthor) {
      changes.append($0)
    }
    return SyncFeed(changes: changes, resumeToken: resume)
  }

  /// Checks that a feed after `token` can be made (a token of this store, whose history is
  /// still kept, and not newer than its history), reading nothing else: what a writer asks
  /// before it opens its output, so that a refused token leaves no file. Nothing for nil.
  ///
  /// - Throws: as ``changeFeed(after:excludingAuthor:)`` does for the token.
  public func checkFeedToken(_ token: HistoryToken?) throws {
    guard token != nil else { return }
    var descriptor = HistoryDescriptor(after: token)
    descriptor.fetchLimit = 0
    do {
      _ = try context.fetchHistory(descriptor)
    } catch let error as PersistenceError {
      throw TripPlannerError(code: .store, message: error.message, cause: error)
    }
  }

  /// Writes ``changeFeed(after:excludingAuthor:)`` as JSON lines (``SyncFeed/jsonLines``) to
  /// `sink`, `batchSize` lines at a time, then the resume line, as the changes are read
  /// (``forEachFeedChange(after:excludingAuthor:_:)``): the feed is never held whole. Returns
  /// how many changes it wrote and the token to resume from.
  @discardableResult
  public func writeChangeFeed(
    after token: HistoryToken?, excludingAuthor excludedAuthor: String? = nil,
    batchSize: Int = 1000, to sink: ([UInt8]) throws -> Void
  ) throws -> (count: Int, resumeToken: HistoryToken) {
    var chunk: [UInt8] = []
    var count = 0
    let resume = try forEachFeedChange(after: token, excludingAuthor: excludedAuthor) { change in
      chunk += SyncFeed.line(for: change).utf8
      count += 1
      if count.isMultiple(of: max(1, batchSize)) {
        try sink(chunk)
        chunk.removeAll(keepingCapacity: true)
      }
    }
    chunk += SyncFeed.resumeLine(resume).utf8
    try sink(chunk)
    return (count, resume)
  }

  /// ``changeFeed(after:excludingAuthor:)``'s changes handed to `body` one at a time, in
  /// the feed's order, as they are read; returns the token to resume from. What a writer of a
  /// feed to a file or a socket uses: the feed is never held whole.
  ///
  /// Two reads of the history (`ModelContext.enumerateHistory(_:_:)`) in one snapshot: the
  /// first keeps each changed row's last position (and, for a row deleted, its id's), the
  /// second reads each row at its last change and hands it over. A plan row whose trip's last
  /// change comes later waits for it; a trip's change is followed by those rows, then by the
  /// plan rows it carries.
  ///
  /// Cost: O(changes) history rows read twice; one read by key per row changed, for each plan
  /// row one more for its trip, for each row deleted a lookup of its id, and for each trip
  /// inserted or changed two queries for its plan and a history lookup per plan row carried.
  /// Memory: O(rows changed) positions (a few dozen bytes each), the plan rows waiting for a
  /// later change of their trip, and the models of a thousand rows' reads.
  ///
  /// - Throws: as ``changeFeed(after:excludingAuthor:)``, and what `body` throws.
  @discardableResult
  public func forEachFeedChange(
    after token: HistoryToken?, excludingAuthor excludedAuthor: String? = nil,
    _ body: (FeedChange) throws -> Void
  ) throws -> HistoryToken {
    /// A row: its model's place in `syncedModelTypes` and its primary key (16 bytes, no text).
    struct RowKey: Hashable {
      var entity: Int
      var key: Int64

      init(entity name: String, key: Int64) {
        entity = TripStore.syncedEntityNames.firstIndex(of: name) ?? -1
        self.key = key
      }
    }
    do {
      var descriptor = HistoryDescriptor(after: token, modelTypes: Self.syncedModelTypes)
      if let excludedAuthor { descriptor.excludedAuthors = [excludedAuthor] }
      // A context of its own: the store's long-lived context may hold instances registered by
      // an earlier feed, whose values would be those of that time, not the current ones.
      let context = ModelContext(container)
      return try context.withSnapshot {
        let currentBefore = try context.currentHistoryToken()
        // First pass: each row's last position, whether that change is a delete, and for the
        // ids of rows deleted, the last position a delete of that id has.
        var last: [RowKey: (position: Int, isDelete: Bool)] = [:]
        var deletes: [(row: FeedRow, key: RowKey, position: Int)] = []
        var position = 0
        var read: HistoryToken?
        try context.enumerateHistory(descriptor) { transaction, change in
          let row = RowKey(
            entity: change.changedIdentifier.entityName, key: change.changedIdentifier.primaryKey)
          last[row] = (position, change.kind == .delete)
          if change.kind == .delete, let subject = Self.deletedRow(change) {
            deletes.append((subject, row, position))
          }
          read = transaction.token
          position += 1
        }
        // The last delete of each id that is its row's last change (history can show a change
        // after a delete: a context that still held the row wrote to it).
        var deletedIDs: [FeedRow: Int] = [:]
        for delete in deletes where last[delete.key]?.position == delete.position {
          deletedIDs[delete.row] = delete.position
        }
        deletes = []
        // Second pass: each row at its last change.
        var waiting: [Int: [FeedChange]] = [:]
        var rowsRead = 0
        position = 0
        try context.enumerateHistory(descriptor) { transaction, change in
          defer { position += 1 }
          let row = RowKey(
            entity: change.changedIdentifier.entityName, key: change.changedIdentifier.primaryKey)
          guard last[row]?.position == position else { return }
          rowsRead += 1
          if rowsRead.isMultiple(of: 1000) { context.reset() }
          guard let (subject, tripKey) = try Self.subjectAndTrip(of: change, in: context) else {
            return
          }
          var feedChange = FeedChange(
            token: transaction.token, author: transaction.author,
            time: transaction.timestamp, kind: change.kind, subject: subject)
          if change.kind == .delete {
            // A row deleted, then another with its id made (or deleted) later: the later one's.
            if let later = deletedIDs[feedChange.row], later > position { return }
            if let current = try Self.currentRow(feedChange.row, in: context),
              let later = last[RowKey(entity: current.entityName, key: current.primaryKey)],
              later.position > position
            {
              return
            }
          }
          // A plan row whose trip changes later waits for that change.
          if let tripKey,
            let trip = last[RowKey(entity: Trip.schema.name, key: tripKey)],
            !trip.isDelete, trip.position > position
          {
            waiting[trip.position, default: []].append(feedChange)
            return
          }
          try body(feedChange)
          guard case .trip(let id, _) = subject, change.kind != .delete else { return }
          for var moved in waiting.removeValue(forKey: position) ?? [] {
            moved.token = transaction.token
            try body(moved)
          }
          feedChange.token = transaction.token
          // Rows the feed has a change of, by row or (a row deleted) by id, are not carried.
          let carried = try Self.plan(ofTrip: id, carriedBy: feedChange, in: context) {
            model, feedRow in
            if deletedIDs[feedRow] != nil { return true }
            guard let identifier = context.persistentIdentifier(for: model) else { return false }
            return last[RowKey(entity: identifier.entityName, key: identifier.primaryKey)] != nil
          }
          for change in carried { try body(change) }
        }
        // Rows left waiting for a trip change that was not read (none in one snapshot).
        for key in waiting.keys.sorted() { for change in waiting[key]! { try body(change) } }
        return max(read ?? token ?? currentBefore, currentBefore)
      }
    } catch let error as PersistenceError {
      throw TripPlannerError(code: .store, message: error.message, cause: error)
    }
  }

  /// The row a delete is of, by its tombstone's id; nil when it kept none.
  private static func deletedRow(_ change: HistoryChange) -> FeedRow? {
    switch change.changedIdentifier.entityName {
    case Trip.schema.name: change.tombstone?[\Trip.id].map { FeedRow(model: .trip, id: $0) }
    case BucketListItem.schema.name:
      change.tombstone?[\BucketListItem.id].map { FeedRow(model: .bucketListItem, id: $0) }
    case LivingAccommodation.schema.name:
      change.tombstone?[\LivingAccommodation.id].map {
        FeedRow(model: .livingAccommodation, id: $0)
      }
    default: nil
    }
  }

  /// The row of the store with `row`'s id now, if any. One lookup by the unique id.
  private static func currentRow(_ row: FeedRow, in context: ModelContext) throws
    -> PersistentIdentifier?
  {
    let id = row.id
    switch row.model {
    case .trip:
      return try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id }))
        .first.flatMap { context.persistentIdentifier(for: $0) }
    case .bucketListItem:
      return try context.fetch(
        FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.id == id })
      ).first.flatMap { context.persistentIdentifier(for: $0) }
    case .livingAccommodation:
      return try context.fetch(
        FetchDescriptor<LivingAccommodation>(predicate: #Predicate { $0.id == id })
      ).first.flatMap { context.persistentIdentifier(for: $0) }
    }
  }

  /// What a history change is about, with the row's current values, and the primary key of
  /// the trip a plan row's insert or update belongs to (nil for a trip's change and for a
  /// delete); nil for a row deleted since (outside the history read: the next feed has it) or
  /// of another model.
  private static func subjectAndTrip(of change: HistoryChange, in context: ModelContext) throws
    -> (subject: FeedChange.Subject, tripKey: Int64?)?
  {
    let identifier = change.changedIdentifier
    switch identifier.entityName {
    case Trip.schema.name:
      if change.kind == .delete {
        return change.tombstone?[\Trip.id].map { (.trip(id: $0, nil), nil) }
      }
      // Read as a value: no model is made or kept for a feed's row.
      guard let record = try context.fetch([identifier], as: TripRecord.self).first,
        let id = record.id
      else { return nil }
      return (.trip(id: id, record), nil)
    case BucketListItem.schema.name:
      if change.kind == .delete {
        return change.tombstone?[\BucketListItem.id].map {
          (.bucketListItem(id: $0, nil, tripID: nil), nil)
        }
      }
      // The trip loaded where a failure is thrown (the property would trap).
      guard let item = try context.model(for: identifier, as: BucketListItem.self) else {
        return nil
      }
      try context.prefetch([\.trip], of: [item])
      guard let trip = item.trip else { return nil }
      return (
        .bucketListItem(id: item.id, FieldValues(item), tripID: trip.id),
        context.persistentIdentifier(for: trip)?.primaryKey
      )
    case LivingAccommodation.schema.name:
      if change.kind == .delete {
        return change.tombstone?[\LivingAccommodation.id].map {
          (.livingAccommodation(id: $0, nil, tripID: nil), nil)
        }
      }
      guard let stay = try context.model(for: identifier, as: LivingAccommodation.self) else {
        return nil
      }
      try context.prefetch([\.trip], of: [stay])
      guard let trip = stay.trip else { return nil }
      try context.resolveFaults(CollectionOfOne(stay))
      return (
        .livingAccommodation(id: stay.id, FieldValues(stay), tripID: trip.id),
        context.persistentIdentifier(for: trip)?.primaryKey
      )
    default:
      return nil
    }
  }

  /// The plan rows of trip `id` that `isListed` says the feed has no change of, as updates carried by the
  /// trip's `change` (its token), each at the time of its own last change here (the trip's
  /// change's time when history no longer has it). Cost: a query for the items and one for the
  /// stay, and a history lookup per row carried.
  private static func plan(
    ofTrip id: UUID, carriedBy change: FeedChange, in context: ModelContext,
    isListed: (any PersistentModel, FeedRow) throws -> Bool
  ) throws -> [FeedChange] {
    guard
      let trip = try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id }))
        .first
    else { return [] }
    func carried(_ model: some PersistentModel, _ subject: FeedChange.Subject) throws
      -> FeedChange
    {
      let time = try context.persistentIdentifier(for: model).flatMap {
        try context.lastChangeDate(for: $0)
      }
      return FeedChange(
        token: change.token, author: change.author, time: time ?? change.time, kind: .update,
        subject: subject)
    }
    var rows: [FeedChange] = []
    // Loaded here, where a failure is thrown, not by the properties (which trap).
    try context.prefetch([\.bucketList, \.livingAccommodation], of: [trip])
    for item in trip.bucketList
    where try !isListed(item, FeedRow(model: .bucketListItem, id: item.id)) {
      rows.append(try carried(item, .bucketListItem(id: item.id, FieldValues(item), tripID: id)))
    }
    if let stay = trip.livingAccommodation,
      try !isListed(stay, FeedRow(model: .livingAccommodation, id: stay.id))
    {
      try context.resolveFaults(CollectionOfOne(stay))
      rows.append(
        try carried(stay, .livingAccommodation(id: stay.id, FieldValues(stay), tripID: id)))
    }
    return rows
  }

  /// Applies a feed, idempotently, recording this store's author (so that a feed exported with
  /// `excludingAuthor` does not send the changes back) and the time each change was made at its
  /// source (`ModelContext.historyTimestamp`), so that this store's history, and the feeds it
  /// gives others, say when a change was made, not when it arrived.
  ///
  /// Conflicts: **the last change wins, by the time it was made, deletes included, row by
  /// row** (a trip, a bucket-list item, a stay), on every store: a change is applied when it
  /// was made after the row's last change here (its history's newest time, whoever made it,
  /// local or synced) or, for a row this store no longer has, after its deletion here (the
  /// tombstone's time). Times compare to the millisecond; at the same millisecond a delete
  /// wins, and between two versions of a row the one whose JSON sorts last, so that every store
  /// picks the same. A row this store has no history for accepts the change. Every store that
  /// has seen the same changes holds the same rows, in whatever order the changes came. A
  /// trip's plan rows are rows of their own: an item changed on one side and another item of
  /// the same trip on the other side both stay; the same item changed on both sides keeps the
  /// later change; a trip's own change does not touch its plan. Two rows need more than the
  /// rule: a stay arriving for a trip that has another stay here replaces it when it is the
  /// later of the two (a trip has one stay), and a change to the plan of a trip deleted here is
  /// skipped (the delete took the plan with it). Positions are values like any other: two
  /// stores that reorder one list at once can leave two items at one position, which every
  /// store lists by their ids. Two limits: a change equal to the row here is
  /// skipped and leaves the row's time as it was (two stores that made the same edit
  /// independently); and times are the machines' clocks, so a clock that runs ahead wins
  /// conflicts it should lose.
  ///
  /// All records are validated first, and every plan row's trip must be in this store, deleted
  /// from it, or in the feed before the row: otherwise nothing is written and the error names
  /// the row and its trip. Then each run of changes from one source transaction is applied in
  /// one transaction (the plan rows' deletes first, so that a stay replaced in one transaction
  /// never meets its replacement; plan rows carried with it at times of their own each in a
  /// transaction at that time, so that this store's history has every row's own time), under
  /// the store's write lock (a writer in between, such as a
  /// PATCH on a server, cannot be overwritten by an older change read before it). A feed cut
  /// short by a crash applies again from the start: what it had applied is skipped.
  ///
  /// Cost: O(changes), each one lookup by id and one by history (or tombstone) index; a plan
  /// row's insert or update one more lookup of its trip.
  @discardableResult
  public func apply(_ feed: SyncFeed) throws -> SyncResult {
    var result = SyncResult()
    do {
      try Self.validate(feed)
      try checkTrips(of: feed)
      try checkOwners(of: feed)
      let changes = feed.changes
      var start = 0
      while start < changes.count {
        var end = start + 1
        while end < changes.count, changes[end].token == changes[start].token { end += 1 }
        let run = changes[start..<end]
        let planDeletes = run.filter { $0.kind == .delete && $0.row.model != .trip }
        let rest = run.filter { !($0.kind == .delete && $0.row.model != .trip) }
        let ordered = planDeletes + rest
        // Rows carried with the transaction at times of their own are saved at those times.
        var first = 0
        while first < ordered.count {
          let time = FeedChange.milliseconds(ordered[first].time)
          var last = first + 1
          while last < ordered.count, FeedChange.milliseconds(ordered[last].time) == time {
            last += 1
          }
          try context.performExclusively {
            defer { context.historyTimestamp = nil }
            var inserted: [UUID: Trip] = [:]
            for change in ordered[first..<last] {
              try apply(change, to: &result, inserted: &inserted)
            }
            context.historyTimestamp = FeedChange.date(milliseconds: time)
            try context.save()
          }
          first = last
        }
        start = end
      }
    } catch {
      context.rollback()
      if let error = error as? PersistenceError {
        throw TripPlannerError(code: .store, message: error.message, cause: error)
      }
      throw error
    }
    return result
  }

  /// Throws the rules' violations of every record in `feed`, each naming its row.
  private static func validate(_ feed: SyncFeed) throws {
    for change in feed.changes {
      switch change.subject {
      case .trip(_, let record): try record?.validate()
      case .bucketListItem(let id, let record, _):
        try Self.named("bucket-list item \(id.lowercasedString)") { try record?.validate() }
      case .livingAccommodation(let id, let record, _):
        try Self.named("stay \(id.lowercasedString)") { try record?.validate() }
      }
    }
  }

  /// `body`, its ``TripPlannerError`` message prefixed with `what`.
  private static func named(_ what: String, _ body: () throws -> Void) throws {
    do {
      try body()
    } catch var error as TripPlannerError {
      error.message = "\(what): \(error.message)"
      throw error
    }
  }

  /// Throws, naming the row, when a plan row's insert or update points to a trip that is not
  /// in this store, was never deleted from it, and is not inserted or changed earlier in the
  /// feed: applying it would leave a row pointing nowhere. Cost: a lookup by id (and, for a
  /// trip not here, one of the tombstones) per such row, in one read.
  private func checkTrips(of feed: SyncFeed) throws {
    var given: Set<UUID> = []
    var known: [UUID: Bool] = [:]
    for change in feed.changes where change.kind != .delete {
      if case .trip(let id, _) = change.subject {
        given.insert(id)
        continue
      }
      guard let tripID = change.tripID, !given.contains(tripID) else { continue }
      if known[tripID] == nil {
        known[tripID] =
          try localTrip(tripID) != nil
          || context.lastDeletionDate(of: Trip.self, where: \.id, equals: tripID) != nil
      }
      if known[tripID] == false {
        let what =
          change.row.model == .bucketListItem
          ? "bucket-list item \(change.row.id.lowercasedString)"
          : "stay \(change.row.id.lowercasedString)"
        throw TripPlannerError(
          code: .invalidInput,
          message:
            "\(what) belongs to trip \(tripID.lowercasedString), which is neither in this store nor in the feed before it; nothing was applied"
        )
      }
    }
  }

  /// Throws, naming the row and both trips, when a plan row's insert or update gives a
  /// bucket-list item or stay of one trip (here, or earlier in the feed) to another: an id
  /// names one row for its whole life, and no writer moves a row between trips, so such a
  /// feed is refused whole. A row the feed deletes first may come back anywhere.
  ///
  /// Cost: per 500 plan rows the feed names, one query for those here and one for their
  /// trips; O(changes) after that.
  private func checkOwners(of feed: SyncFeed) throws {
    var itemIDs: Set<UUID> = []
    var stayIDs: Set<UUID> = []
    for change in feed.changes where change.kind != .delete {
      switch change.subject {
      case .trip: break
      case .bucketListItem(let id, _, _): itemIDs.insert(id)
      case .livingAccommodation(let id, _, _): stayIDs.insert(id)
      }
    }
    guard !itemIDs.isEmpty || !stayIDs.isEmpty else { return }
    var owners: [UUID: UUID] = [:]  // a row's trip: here, then as the feed says
    func readOwners<Row: PersistentModel>(
      _ ids: Set<UUID>, _ fetch: ([UUID]) throws -> [Row], _ owner: (Row) -> (UUID, UUID?)
    ) throws {
      let all = Array(ids)
      for start in stride(from: 0, to: all.count, by: 500) {
        for row in try fetch(Array(all[start..<min(start + 500, all.count)])) {
          let (id, trip) = owner(row)
          if let trip { owners[id] = trip }
        }
      }
    }
    try context.withSnapshot {
      try readOwners(
        itemIDs,
        { ids in
          var descriptor = FetchDescriptor<BucketListItem>(
            predicate: #Predicate { ids.contains($0.id) })
          descriptor.relationshipKeyPathsForPrefetching = [\.trip]
          return try context.fetch(descriptor)
        }, { (row: BucketListItem) in (row.id, row.trip?.id) })
      try readOwners(
        stayIDs,
        { ids in
          var descriptor = FetchDescriptor<LivingAccommodation>(
            predicate: #Predicate { ids.contains($0.id) })
          descriptor.relationshipKeyPathsForPrefetching = [\.trip]
          return try context.fetch(descriptor)
        }, { (row: LivingAccommodation) in (row.id, row.trip?.id) })
    }
    for change in feed.changes {
      let what: String
      switch change.subject {
      case .trip: continue
      case .bucketListItem: what = "bucket-list item"
      case .livingAccommodation: what = "stay"
      }
      let id = change.row.id
      guard change.kind != .delete else {
        owners[id] = nil
        continue
      }
      guard let tripID = change.tripID else { continue }
      if let owner = owners[id], owner != tripID {
        throw TripPlannerError(
          code: .invalidInput,
          message:
            "\(what) \(id.lowercasedString) belongs to trip \(owner.lowercasedString), and a change of \(change.token) gives it to trip \(tripID.lowercasedString); an id names one row for its whole life, so nothing was applied"
        )
      }
      owners[id] = tripID
    }
  }

  private func localTrip(_ id: UUID) throws -> Trip? {
    try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id })).first
  }

  /// One change of ``apply(_:)``, unsaved; `inserted` holds the trips inserted since the last
  /// save (a fetch does not see them), for the plan rows that follow them.
  private func apply(
    _ change: FeedChange, to result: inout SyncResult, inserted: inout [UUID: Trip]
  ) throws {
    switch change.subject {
    case .trip(let id, let record):
      let local = try localTrip(id)
      guard try wins(change, over: local, id: id, \Trip.id, json: { TripJSON.object($0.record) })
      else {
        result.skipped += 1
        return
      }
      if let record {
        if let local {
          if local.record == record {
            result.skipped += 1
            return
          }
          local.apply(record)
        } else {
          let trip = Trip(record)
          context.insert(trip)
          inserted[id] = trip
        }
        result.applied += 1
      } else if let local {
        context.delete(local)
        result.applied += 1
      } else {
        result.skipped += 1
      }
    case .bucketListItem(let id, let record, _):
      var descriptor = FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.id == id })
      descriptor.relationshipKeyPathsForPrefetching = [\.trip]
      let local = try context.fetch(descriptor).first
      guard
        let trip = try planRowTrip(
          change, over: local, id: id, \BucketListItem.id,
          json: { TripJSON.object(FieldValues($0)) },
          hasValues: record != nil, to: &result, inserted: inserted),
        let record
      else { return }
      if let local {
        if FieldValues(local) == record, local.trip === trip {
          result.skipped += 1
          return
        }
        if let owner = local.trip, owner !== trip {
          throw TripStore.ownedElsewhere("bucket-list item", id, owner: owner.id)
        }
        record.apply(to: local)
        if local.trip == nil { local.trip = trip }
      } else {
        let item = record.newModel()
        context.insert(item)
        item.trip = trip
      }
      result.applied += 1
    case .livingAccommodation(let id, let record, _):
      var descriptor = FetchDescriptor<LivingAccommodation>(predicate: #Predicate { $0.id == id })
      descriptor.relationshipKeyPathsForPrefetching = [\.trip]
      let local = try context.fetch(descriptor).first
      guard
        let trip = try planRowTrip(
          change, over: local, id: id, \LivingAccommodation.id,
          json: { TripJSON.object(FieldValues($0)) }, hasValues: record != nil, to: &result,
          inserted: inserted),
        let record
      else { return }
      if let local, FieldValues(local) == record, local.trip === trip {
        result.skipped += 1
        return
      }
      if let owner = local?.trip, owner !== trip {
        throw TripStore.ownedElsewhere("stay", id, owner: owner.id)
      }
      // A trip has one stay: another one here gives way only to a later change.
      if let other = trip.livingAccommodation, other !== local {
        guard
          try wins(
            change, over: other, id: other.id, \LivingAccommodation.id,
            json: { TripJSON.object(FieldValues($0)) })
        else {
          result.skipped += 1
          return
        }
        context.delete(other)
      }
      if let local {
        record.apply(to: local)
        if local.trip !== trip { trip.livingAccommodation = local }
      } else {
        let stay = record.newModel()
        context.insert(stay)
        trip.livingAccommodation = stay
      }
      result.applied += 1
    }
  }

  /// The steps a plan row's change shares: the rule (a change older than the row's here is
  /// skipped), a change without values (a delete: done here), and the trip its values go to (nil when it was deleted
  /// here: skipped). Nil when the change is done; else the trip to apply the values with.
  private func planRowTrip<Row: PersistentModel>(
    _ change: FeedChange, over local: Row?, id: UUID, _ idPath: KeyPath<Row, UUID>,
    json: (Row) -> JSONValue, hasValues: Bool, to result: inout SyncResult,
    inserted: [UUID: Trip]
  ) throws -> Trip? {
    guard try wins(change, over: local, id: id, idPath, json: json) else {
      result.skipped += 1
      return nil
    }
    guard hasValues, let tripID = change.tripID else {
      if let local {
        context.delete(local)
        result.applied += 1
      } else {
        result.skipped += 1
      }
      return nil
    }
    guard let trip = try inserted[tripID] ?? planTrip(tripID, of: change) else {
      result.skipped += 1
      return nil
    }
    return trip
  }

  /// The trip a plan row's change points to; nil when it was deleted here (the change is
  /// skipped); throws when this store never had it (``checkTrips(of:)`` refuses such a feed
  /// before writing, so only a writer in between gets here).
  private func planTrip(_ id: UUID, of change: FeedChange) throws -> Trip? {
    if let trip = try localTrip(id) { return trip }
    if try context.lastDeletionDate(of: Trip.self, where: \.id, equals: id) != nil { return nil }
    throw TripPlannerError(
      code: .invalidInput,
      message:
        "a change of \(change.row.id.lowercasedString) belongs to trip \(id.lowercasedString), which is not in this store"
    )
  }

  /// Whether `change` beats this store's version of its row (`local`, nil when it is not
  /// here), by ``Self/wins(_:overValues:changedAt:)``; true when history knows nothing of the
  /// row here.
  private func wins<Model: PersistentModel>(
    _ change: FeedChange, over local: Model?, id: UUID, _ idPath: KeyPath<Model, UUID>,
    json: (Model) -> JSONValue
  ) throws -> Bool {
    let here: Date?
    if let local {
      here = try context.persistentIdentifier(for: local).flatMap {
        try context.lastChangeDate(for: $0)
      }
    } else {
      here = try context.lastDeletionDate(of: Model.self, where: idPath, equals: id)
    }
    guard let here else { return true }
    return Self.wins(
      change, overValues: local.map { json($0).rendered() },
      changedAt: FeedChange.milliseconds(here))
  }

  /// Whether `change` beats a row here whose values render as `localJSON` (nil when deleted
  /// here), last changed at `localTime` (milliseconds): later wins; at the same millisecond a
  /// delete, then the version whose JSON sorts last.
  static func wins(_ change: FeedChange, overValues localJSON: String?, changedAt localTime: Int64)
    -> Bool
  {
    let time = FeedChange.milliseconds(change.time)
    if time != localTime { return time > localTime }
    guard let localJSON else { return false }  // deleted here at the same time: the delete stays
    guard let values = change.valuesJSON else { return true }  // a delete wins a tie
    return values > localJSON
  }
}
