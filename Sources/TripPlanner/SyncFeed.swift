import Foundation
import Persistence

/// One change of a trip, as a sync feed carries it: when, by whom, what kind, and the trip's
/// current values (history keeps only attribute names, as SwiftData's does).
public struct FeedChange: Hashable, Sendable {
  /// The history token of the change's transaction in the source store.
  public var token: HistoryToken
  /// Who made it.
  public var author: String?
  /// When it was committed.
  public var time: Date
  /// Insert, update or delete.
  public var kind: HistoryChange.Kind
  /// The trip's id.
  public var tripID: UUID
  /// For inserts and updates, the trip's values when the feed was made.
  public var trip: TripRecord?
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
/// As JSON lines: one object per change,
/// `{"token","author","time","kind","tripId","trip"}` (`trip` as Trip JSON, or `null` for a
/// delete), then a last line `{"resumeToken": "<token>"}`.
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

  /// The feed as JSON lines.
  public var jsonLines: String {
    var text = ""
    for change in changes { text += Self.line(for: change) }
    text += JSONValue.object([("resumeToken", .string(resumeToken.description))]).rendered() + "\n"
    return text
  }

  /// One change's JSON line, with its line end.
  static func line(for change: FeedChange) -> String {
    JSONValue.object([
      ("token", .string(change.token.description)),
      ("author", change.author.map(JSONValue.string) ?? .null),
      ("time", .string(FeedChange.text(of: change.time))),
      ("kind", .string(change.kind.rawValue)),
      ("tripId", .string(change.tripID.lowercasedString)),
      ("trip", change.trip.map(TripJSON.object) ?? .null),
    ]).rendered() + "\n"
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
      guard let value = try? JSONValue.parse(Data(line.utf8)), case .object = value else {
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
      guard case .string(let tokenText)? = value["token"], let token = HistoryToken(tokenText),
        case .string(let timeText)? = value["time"], let time = TripDates.parse(timeText),
        case .string(let kindText)? = value["kind"],
        let kind = HistoryChange.Kind(rawValue: kindText),
        case .string(let idText)? = value["tripId"], let tripID = UUID(uuidString: idText)
      else {
        problems.add(number, "a change needs token, time, kind (insert, update, delete) and tripId")
        continue
      }
      var author: String?
      if case .string(let name)? = value["author"] { author = name }
      var record: TripRecord?
      if kind != .delete {
        guard let trip = value["trip"] else {
          problems.add(number, "an \(kind.rawValue) needs the trip's values")
          continue
        }
        let before = problems.problems.count
        record = TripJSON.record(from: trip, line: number, problems: &problems)
        if problems.problems.count > before { continue }
        if record?.id != tripID {
          problems.add(number, "the trip's id does not match tripId")
          continue
        }
      }
      changes.append(
        FeedChange(
          token: token, author: author, time: time, kind: kind, tripID: tripID, trip: record))
    }
    if resume == nil && problems.problems.isEmpty {
      problems.add(nil, "the feed has no resumeToken line: it may have been cut short")
    }
    try problems.throwIfAny()
    return SyncFeed(changes: changes, resumeToken: resume!)  // set: checked just above
  }
}

/// What applying a feed did.
public struct SyncResult: Hashable, Sendable {
  /// Changes applied.
  public var applied = 0
  /// Changes skipped because the local trip changed later (the last change wins) or because
  /// nothing was left to do.
  public var skipped = 0
}

extension TripStore {
  /// The changes to trips after `token` (all kept history when nil), leaving out those by
  /// `excludedAuthor`: each trip's last change, with the trip's current values, at the time of
  /// that change (read afresh, in a context of its own, in one read transaction, so values and
  /// times agree). Earlier changes of a trip in the same span are left out: its current values
  /// stand for them, and carrying them under their older times would give a receiving store
  /// the newest values under an old time.
  ///
  /// Cost: O(changes after `token`) history rows, and one read by key per trip changed.
  ///
  /// - Throws: ``TripPlannerError`` wrapping `historyTokenExpired` when the store no longer
  ///   keeps the history after `token`: do a full export instead.
  public func changeFeed(after token: HistoryToken?, excludingAuthor excludedAuthor: String? = nil)
    throws -> SyncFeed
  {
    do {
      var descriptor = HistoryDescriptor(after: token, modelTypes: [Trip.self])
      if let excludedAuthor { descriptor.excludedAuthors = [excludedAuthor] }
      // A context of its own: the store's long-lived context may hold instances registered by
      // an earlier feed, whose values would be those of that time, not the current ones.
      let context = ModelContext(container)
      return try context.withSnapshot {
        // The store's token before reading the history: every transaction up to it is in what
        // the history read returns (or left out by author or model type), so resuming from it
        // skips nothing. In one read transaction with the history and the trips.
        let currentBefore = try context.currentHistoryToken()
        let transactions = try context.fetchHistory(descriptor)
        // Each row's last change only (a row is a trip between its insert and its delete).
        var last: [PersistentIdentifier: (Int, Int)] = [:]
        for (t, transaction) in transactions.enumerated() {
          for (c, change) in transaction.changes.enumerated() {
            last[change.changedIdentifier] = (t, c)
          }
        }
        var changes: [FeedChange?] = []
        var byTrip: [UUID: Int] = [:]
        for (t, transaction) in transactions.enumerated() {
          for (c, change) in transaction.changes.enumerated()
          where last[change.changedIdentifier]! == (t, c) {
            var id: UUID?
            var record: TripRecord?
            if change.kind == .delete {
              id = change.tombstone?[\Trip.id]
            } else if let trip = try context.model(for: change.changedIdentifier, as: Trip.self) {
              id = trip.id
              record = try context.record(of: trip)
            } else {
              continue  // deleted since, outside the history read: the next feed has it
            }
            guard let id else { continue }
            // A trip deleted and inserted again (another row, the same id): its last change.
            if let earlier = byTrip[id] { changes[earlier] = nil }
            byTrip[id] = changes.count
            changes.append(
              FeedChange(
                token: transaction.token, author: transaction.author,
                time: transaction.timestamp, kind: change.kind, tripID: id, trip: record))
          }
        }
        // Resume after what was read, and after left-out transactions up to `currentBefore`.
        let read = transactions.last?.token ?? token ?? currentBefore
        return SyncFeed(changes: changes.compactMap { $0 }, resumeToken: max(read, currentBefore))
      }
    } catch let error as PersistenceError {
      throw TripPlannerError(code: .store, message: error.message, cause: error)
    }
  }

  /// Applies a feed, idempotently, recording this store's author (so that a feed exported with
  /// `excludingAuthor` does not send the changes back) and the time each change was made at its
  /// source (`ModelContext.historyTimestamp`), so that this store's history, and the feeds it
  /// gives others, say when a change was made, not when it arrived.
  ///
  /// Conflicts: **the last change wins, by the time it was made, deletes included**, on every
  /// store: a change is applied when it was made after the trip's last change here (its
  /// history's newest time, whoever made it, local or synced) or, for a trip this store no
  /// longer has, after its deletion here (the tombstone's time). Times compare to the
  /// millisecond; at the same millisecond a delete wins, and between two versions of a trip
  /// the one whose JSON sorts last, so that every store picks the same. A trip this store has
  /// no history for accepts the change. Every store that has seen the same changes holds the
  /// same trips, in whatever order the changes came. Two limits: a change equal to the trip
  /// here is skipped and leaves the trip's time as it was (two stores that made the same edit
  /// independently); and times are the machines' clocks, so a clock that runs ahead wins
  /// conflicts it should lose.
  ///
  /// All records are validated first (nothing is written when one is invalid); then each run
  /// of changes from one source transaction is applied in one transaction, under the store's
  /// write lock (a writer in between, such as a PATCH on a server, cannot be overwritten by an
  /// older change read before it). A feed cut short by a crash applies again from the start:
  /// what it had applied is skipped.
  ///
  /// Cost: O(changes), each one lookup by id and one by history (or tombstone) index.
  @discardableResult
  public func apply(_ feed: SyncFeed) throws -> SyncResult {
    var result = SyncResult()
    do {
      for change in feed.changes { try change.trip?.validate() }
      let changes = feed.changes
      var start = 0
      while start < changes.count {
        var end = start + 1
        while end < changes.count, changes[end].token == changes[start].token { end += 1 }
        let run = changes[start..<end]
        try context.performExclusively {
          defer { context.historyTimestamp = nil }
          for change in run { try apply(change, to: &result) }
          context.historyTimestamp = FeedChange.date(
            milliseconds: FeedChange.milliseconds(run.first!.time))
          try context.save()
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

  /// One change of ``apply(_:)``, unsaved.
  private func apply(_ change: FeedChange, to result: inout SyncResult) throws {
    let tripID = change.tripID
    let local = try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.id == tripID }))
      .first
    let here: Date?
    if let local {
      here = try context.persistentIdentifier(for: local).flatMap {
        try context.lastChangeDate(for: $0)
      }
    } else {
      here = try context.lastDeletionDate(of: Trip.self, where: \.id, equals: tripID)
    }
    if let here, !Self.wins(change, over: local, changedAt: FeedChange.milliseconds(here)) {
      result.skipped += 1
      return
    }
    switch change.kind {
    case .insert, .update:
      guard let record = change.trip else { return }
      if let local {
        if local.record == record {
          result.skipped += 1
          return
        }
        local.apply(record)
      } else {
        context.insert(Trip(record))
      }
      result.applied += 1
    case .delete:
      guard let local else {
        result.skipped += 1
        return
      }
      context.delete(local)
      result.applied += 1
    }
  }

  /// Whether `change` beats this store's version of its trip (`local`, nil when deleted here),
  /// last changed at `localTime` (milliseconds): later wins; at the same millisecond a delete,
  /// then the version whose JSON sorts last.
  static func wins(_ change: FeedChange, over local: Trip?, changedAt localTime: Int64) -> Bool {
    let time = FeedChange.milliseconds(change.time)
    if time != localTime { return time > localTime }
    guard let local else { return false }  // deleted here at the same time: the delete stays
    guard let record = change.trip else { return true }  // a delete wins a tie
    return TripJSON.object(record).rendered() > TripJSON.object(local.record).rendered()
  }
}
