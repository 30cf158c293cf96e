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
      (
        "time",
        .string(change.time.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
      ),
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
    let lines = String(decoding: data, as: UTF8.self).split(
      separator: "\n", omittingEmptySubsequences: false)
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
  /// Changes skipped because the local trip changed later (last writer wins) or because
  /// nothing was left to do.
  public var skipped = 0
}

extension TripStore {
  /// The changes to trips after `token` (all kept history when nil), leaving out those by
  /// `excludedAuthor`, with the trips' current values (read afresh, in a context of its own).
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
      // The store's token before reading the history: every transaction up to it is in what the
      // history read returns (or left out by author or model type), so resuming from it skips
      // nothing. Read after, it could include a transaction committed after the history read.
      let currentBefore = try context.currentHistoryToken()
      let transactions = try context.fetchHistory(descriptor)
      var changes: [FeedChange] = []
      for transaction in transactions {
        for change in transaction.changes {
          var id: UUID?
          var record: TripRecord?
          if change.kind == .delete {
            id = change.tombstone?[\Trip.id]
          } else if let trip = try context.model(for: change.changedIdentifier, as: Trip.self) {
            id = trip.id
            record = try context.record(of: trip)
          } else {
            continue  // deleted since; the delete follows in the feed (or in a later one)
          }
          guard let id else { continue }
          changes.append(
            FeedChange(
              token: transaction.token, author: transaction.author, time: transaction.timestamp,
              kind: change.kind, tripID: id, trip: record))
        }
      }
      // Resume after what was read, and after left-out transactions up to `currentBefore`.
      let read = transactions.last?.token ?? token ?? currentBefore
      return SyncFeed(changes: changes, resumeToken: max(read, currentBefore))
    } catch let error as PersistenceError {
      throw TripPlannerError(code: .store, message: error.message, cause: error)
    }
  }

  /// Applies a feed in one transaction, idempotently, recording this store's author (so that a
  /// feed exported with `excludingAuthor` does not send the changes back).
  ///
  /// Conflicts: last writer wins per trip, by time. A change is applied unless this store's
  /// history shows the trip changed here, by another author than this store's (the author
  /// syncs record), at a later time than the change. Changes applied by sync do not count: their
  /// history time is when they arrived, not when they were made, so counting them would refuse
  /// an update made while its insert was still on the way. A trip this store no longer has
  /// history for accepts the change. With several sources changing one trip, the feed applied
  /// last wins.
  @discardableResult
  public func apply(_ feed: SyncFeed) throws -> SyncResult {
    var result = SyncResult()
    var touched: [UUID: Trip] = [:]
    do {
      for change in feed.changes {
        let tripID = change.tripID
        let local =
          try touched[tripID]
          ?? context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.id == tripID })).first
        if let local, let identifier = context.persistentIdentifier(for: local),
          let localTime = try context.lastChangeDate(
            for: identifier, excludingAuthor: context.author),
          localTime > change.time,
          !context.insertedOrChanged(local)
        {
          result.skipped += 1
          continue
        }
        switch change.kind {
        case .insert, .update:
          guard let record = change.trip else { continue }
          try record.validate()
          if let local {
            if local.record == record {
              result.skipped += 1
              continue
            }
            local.apply(record)
            touched[tripID] = local
          } else {
            let trip = Trip(record)
            context.insert(trip)
            touched[tripID] = trip
          }
          result.applied += 1
        case .delete:
          guard let local else {
            result.skipped += 1
            continue
          }
          context.delete(local)
          touched[tripID] = nil
          result.applied += 1
        }
      }
      try context.save()
    } catch {
      context.rollback()
      if let error = error as? PersistenceError {
        throw TripPlannerError(code: .store, message: error.message, cause: error)
      }
      throw error
    }
    return result
  }
}
