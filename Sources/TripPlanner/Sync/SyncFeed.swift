import Foundation
import Persistence

/// One change of a trip or of its plan, as a sync feed carries it: when, by whom, what kind,
/// and the row's current values (history keeps only attribute names, as SwiftData's does).
public struct FeedChange: Hashable, Sendable {
  /// The history token of the change's transaction in the source store.
  public var token: DefaultHistoryToken
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
    token: DefaultHistoryToken, author: String?, time: Date, kind: HistoryChange.Kind,
    subject: Subject
  ) {
    self.token = token
    self.author = author
    self.time = time
    self.kind = kind
    self.subject = subject
  }

  /// Creates a change of a trip.
  public init(
    token: DefaultHistoryToken, author: String?, time: Date, kind: HistoryChange.Kind, tripID: UUID,
    trip: TripRecord?
  ) {
    self.init(
      token: token, author: author, time: time, kind: kind, subject: .trip(id: tripID, trip))
  }

  /// The trip the change is about, or the trip of the item or stay it is about (nil for an
  /// item's or a stay's delete).
  public var tripID: UUID? {
    if case .trip(let id, _) = subject { return id }
    return subject.partTripID
  }

  /// A trip change's values; nil for a delete and for changes of a plan.
  public var trip: TripRecord? {
    if case .trip(_, let record) = subject { return record }
    return nil
  }

  /// The changed row's model and id: a row of a feed is named by both.
  var row: FeedRow {
    FeedRow(subject.partType ?? Trip.self, id: subject.rowID)
  }

  /// The change's values as a JSON object, for ties between versions (nil for a delete).
  var valuesJSON: String? {
    if case .trip(_, let record) = subject { return record.map { TripJSON.object($0).rendered() } }
    func json(_ part: some AnyPartChange) -> String? {
      part.change.values.map { JSONValue.object($0.jsonMembers()).rendered() }
    }
    return subject.part.flatMap { json($0) }
  }
}

/// A row a feed names: its model and its id.
struct FeedRow: Hashable {
  /// The row's model type.
  var model: ObjectIdentifier
  var id: UUID

  init(_ model: any PersistentModel.Type, id: UUID) {
    self.model = ObjectIdentifier(model)
    self.id = id
  }
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
  public var resumeToken: DefaultHistoryToken

  /// Creates a feed.
  public init(changes: [FeedChange], resumeToken: DefaultHistoryToken) {
    self.changes = changes
    self.resumeToken = resumeToken
  }

  /// The feed as JSON lines (``TripStore/writeChangeFeed(after:excludingAuthor:batchSize:to:)``
  /// writes the same lines without holding the feed).
  public var jsonLines: String {
    changes.map(Self.line(for:)).joined() + Self.resumeLine(resumeToken)
  }

  /// The feed's last line, with the token to resume from.
  static func resumeLine(_ token: DefaultHistoryToken) -> String {
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
    if case .trip(_, let record) = change.subject {
      members.append(("trip", record.map(TripJSON.object) ?? .null))
    } else if let part = change.subject.part {
      appendMembers(of: part, to: &members)
    }
    return JSONValue.object(members).rendered() + "\n"
  }

  /// A part's id and values members of ``line(for:)``. Specialized for each part (as
  /// `TripStore.carriedParts` is).
  @_specialize(where Change == PartChange<BucketListItem>)
  @_specialize(where Change == PartChange<LivingAccommodation>)
  private static func appendMembers<Change: AnyPartChange>(
    of part: Change, to members: inout [(String, JSONValue)]
  ) {
    let key = Change.Part.memberName
    members.append((key + "Id", .string(part.id.lowercasedString)))
    members.append((key, part.change.values.map { .object($0.jsonMembers()) } ?? .null))
  }

  /// Reads JSON lines; throws ``TripPlannerError/Code/invalidInput`` listing every bad line.
  public static func parse(_ data: Data, file: String) throws -> SyncFeed {
    var reader = LineReader(file: file)
    var changes: [FeedChange] = []
    var resume: DefaultHistoryToken?
    // A line ends at LF or CRLF; its bytes are parsed as they are (invalid UTF-8 is a bad
    // line, not replacement characters).
    var splitter = LineSplitter()
    func take(_ line: ArraySlice<UInt8>) {
      switch reader.read(line) {
      case .change(let change): changes.append(change)
      case .resume(let token): resume = token
      case nil: break
      }
    }
    try splitter.feed(ArraySlice(data), take)
    try splitter.finish(take)
    try reader.finish(resumed: resume != nil)
    return SyncFeed(changes: changes, resumeToken: resume!)  // set: `finish` checked it
  }

  /// Reads a feed line by line, as it arrives: each change, or the resume token; the problems
  /// of bad lines are kept, by line number, for ``throwIfAny()`` and ``finish(resumed:)``.
  /// What ``parse(_:file:)`` and a pull that applies a feed in batches as it streams in use.
  struct LineReader {
    /// What one line is.
    enum Line {
      case change(FeedChange)
      case resume(DefaultHistoryToken)
    }

    private var problems: ProblemList
    private var number = 0

    init(file: String) { problems = ProblemList(file: file) }

    /// Whether a line read so far was bad.
    var hasProblems: Bool { !problems.problems.isEmpty }

    /// The next line (without its line break): nil for a blank line or a bad one (whose
    /// problem is kept).
    mutating func read(_ line: ArraySlice<UInt8>) -> Line? {
      number += 1
      guard !line.allSatisfy({ $0 == 32 || $0 == 9 || $0 == 13 }) else { return nil }
      let value: JSONValue
      do {
        value = try JSONValue.parse(Data(line))
      } catch let error as JSONValue.ParseError {
        problems.add(number, "not a JSON object: \(error)")
        return nil
      } catch {
        problems.add(number, "not a JSON object")
        return nil
      }
      guard case .object = value else {
        problems.add(number, "not a JSON object")
        return nil
      }
      if case .string(let text)? = value["resumeToken"] {
        guard let token = DefaultHistoryToken(text) else {
          problems.add(number, "resumeToken '\(text)' is not a history token")
          return nil
        }
        return .resume(token)
      }
      guard let (token, time, kind) = SyncFeed.header(of: value, line: number, problems: &problems)
      else { return nil }
      var author: String?
      if case .string(let name)? = value["author"] { author = name }
      let before = problems.problems.count
      let subject = SyncFeed.subject(of: value, kind: kind, line: number, problems: &problems)
      guard let subject, problems.problems.count == before else { return nil }
      return .change(
        FeedChange(token: token, author: author, time: time, kind: kind, subject: subject))
    }

    /// Throws ``TripPlannerError/Code/invalidInput`` listing the bad lines read so far, if any.
    func throwIfAny() throws { try problems.throwIfAny() }

    /// At the feed's end: throws for bad lines, and for a feed without its resume line (cut
    /// short).
    mutating func finish(resumed: Bool) throws {
      if !resumed && problems.problems.isEmpty {
        problems.add(nil, "the feed has no resumeToken line: it may have been cut short")
      }
      try problems.throwIfAny()
    }
  }

  /// The members a change line may have: its header, and per subject its id and values.
  static let headerMembers: Set<String> = ["token", "author", "time", "kind"]
  /// Per subject, its id member, its values member and what a person calls it: each plan
  /// part's, then a trip's (last).
  static let subjectMembers: [(id: String, values: String, noun: String)] =
    Trip.planParts.map { ($0.memberName + "Id", $0.memberName, $0.noun) } + [
      ("tripId", "trip", "trip")
    ]

  /// A change line's token, time and kind, each checked on its own so that a problem names
  /// the member and what is wrong with it; nil (with the problems added) when any is wrong.
  static func header(of value: JSONValue, line: Int, problems: inout ProblemList)
    -> (DefaultHistoryToken, Date, HistoryChange.Kind)?
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
    let token = tokenText.flatMap(DefaultHistoryToken.init)
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
          "a change is about one row: this one names both a \(planSubjects[0].noun) and a \(planSubjects[1].noun)"
        )
      } else {
        let subject = planSubjects.first ?? subjectMembers.last!
        var allowed = headerMembers.union([subject.id, subject.values])
        allowed.insert("tripId")
        for (name, _) in members where !allowed.contains(name) {
          let known = subjectMembers.contains { $0.id == name || $0.values == name }
          problems.add(
            line,
            known
              ? "\(name) does not belong in a change of a \(subject.noun)"
              : "unknown member '\(name)' in a change")
        }
      }
    }
    guard let token, let time, let kind, problems.problems.count == before else { return nil }
    return (token, time, kind)
  }

  /// What one change line is about, by which id member it has (`bucketListItemId`,
  /// `livingAccommodationId`, else a trip's `tripId`), with its values for an insert or update.
  static func subject(
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
    func planRow<Part: TripPlanPart>(_: Part.Type) -> FeedChange.Subject? {
      let key = Part.memberName
      let what = Part.noun
      guard case .some(let rowID?) = id(key + "Id", required: true),
        case .some(let tripID) = id("tripId", required: !isDelete)
      else { return nil }
      guard let member = values(key, what: what) else {
        return isDelete ? Part.subject(id: rowID, nil, tripID: tripID) : nil
      }
      guard
        let record = FieldValues<Part>.read(member, label: key, line: line, problems: &problems)
      else { return nil }
      let violations = record.violations
      for violation in violations { problems.add(line, "\(key): \(violation.reason)") }
      guard violations.isEmpty else { return nil }
      guard record.identity == rowID else {
        problems.add(line, "the \(what)'s id does not match \(key)Id")
        return nil
      }
      return Part.subject(id: rowID, record, tripID: tripID)
    }
    if let part = Trip.planParts.first(where: { value[$0.memberName + "Id"] != nil }) {
      return planRow(part)
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
