import Foundation
import Persistence

extension TripStore {
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
        let planDeletes = run.filter { $0.kind == .delete && $0.subject.partType != nil }
        let rest = run.filter { !($0.kind == .delete && $0.subject.partType != nil) }
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
      throw error
    }
    return result
  }

  /// Throws the rules' violations of every record in `feed`, each naming its row.
  private static func validate(_ feed: SyncFeed) throws {
    for change in feed.changes {
      if case .trip(_, let record) = change.subject {
        try record?.validate()
      } else if let part = change.subject.part {
        try validate(part)
      }
    }
  }

  /// Throws a part's rules' violations, naming it. Specialized for each part (as
  /// `carriedParts` is).
  @_specialize(where Change == PartChange<BucketListItem>)
  @_specialize(where Change == PartChange<LivingAccommodation>)
  private static func validate<Change: AnyPartChange>(_ part: Change) throws {
    let change = part.change
    try Self.named("\(part.noun) \(change.id.lowercasedString)") {
      try change.values?.validate()
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
      if known[tripID] == false, let part = change.subject.partType {
        let what = "\(part.noun) \(change.row.id.lowercasedString)"
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
    var ids: [ObjectIdentifier: Set<UUID>] = [:]  // per part
    for change in feed.changes where change.kind != .delete {
      guard change.subject.partType != nil else { continue }
      ids[change.row.model, default: []].insert(change.subject.rowID)
    }
    guard !ids.isEmpty else { return }
    var owners: [UUID: UUID] = [:]  // a row's trip: here, then as the feed says
    func readOwners<Part: TripPlanPart>(_: Part.Type) throws {
      let all = Array(ids[ObjectIdentifier(Part.self)] ?? [])
      for start in stride(from: 0, to: all.count, by: 500) {
        var descriptor = FetchDescriptor<Part>(
          predicate: Part.predicate(idIn: Array(all[start..<min(start + 500, all.count)])))
        descriptor.relationshipKeyPathsForPrefetching = [Part.tripPath]
        descriptor.includePendingChanges = false
        for row in try context.fetch(descriptor) {
          if let trip = row.trip?.id { owners[row.id] = trip }
        }
      }
    }
    try context.withSnapshot {
      for part in Trip.planParts { try readOwners(part) }
    }
    for change in feed.changes {
      guard let part = change.subject.partType else { continue }
      let what = part.noun
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
    try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id }).storedOnly)
      .first
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
    default:  // a plan part
      try applyPart(change.subject.part!, of: change, to: &result, inserted: inserted)
    }
  }

  /// A plan part's change of ``apply(_:to:inserted:)``. A part a trip has one of (a stay)
  /// replaces another one there only when the change is later than that one's.
  @_specialize(where Change == PartChange<BucketListItem>)  // as carriedParts is
  @_specialize(where Change == PartChange<LivingAccommodation>)
  private func applyPart<Change: AnyPartChange>(
    _ part: Change, of change: FeedChange, to result: inout SyncResult,
    inserted: [UUID: Trip]
  ) throws {
    let (id, record) = (part.change.id, part.change.values)
    let local = try localPart(Change.Part.self, id: id)
    guard
      let trip = try planRowTrip(
        change, over: local, id: id, hasValues: record != nil, to: &result, inserted: inserted),
      let record
    else { return }
    if let local, FieldValues(local) == record, local.trip === trip {
      result.skipped += 1
      return
    }
    if let owner = local?.trip, owner !== trip {
      throw TripStore.ownedElsewhere(part.noun, id, owner: owner.id)
    }
    if Change.Part.isOnePerTrip,
      let other = Change.Part.parts(of: trip).first, other !== local
    {
      // A trip has one: another one here gives way only to a later change.
      guard try wins(change, over: other, id: other.id) else {
        result.skipped += 1
        return
      }
      context.delete(other)
    }
    if let local {
      record.apply(to: local)
      if local.trip !== trip { local.attach(to: trip) }
    } else {
      let new = record.newModel()
      context.insert(new)
      new.attach(to: trip)
    }
    result.applied += 1
  }

  /// The part with `id` here, its trip loaded; nil when there is none.
  private func localPart<Part: TripPlanPart>(_: Part.Type, id: UUID) throws -> Part? {
    var descriptor = FetchDescriptor<Part>(predicate: Part.predicate(idIn: [id])).storedOnly
    descriptor.relationshipKeyPathsForPrefetching = [Part.tripPath]
    return try context.fetch(descriptor).first
  }

  /// The steps a plan row's change shares: the rule (a change older than the row's here is
  /// skipped), a change without values (a delete: done here), and the trip its values go to (nil when it was deleted
  /// here: skipped). Nil when the change is done; else the trip to apply the values with.
  private func planRowTrip<Part: TripPlanPart>(
    _ change: FeedChange, over local: Part?, id: UUID, hasValues: Bool,
    to result: inout SyncResult, inserted: [UUID: Trip]
  ) throws -> Trip? {
    guard try wins(change, over: local, id: id) else {
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

  /// ``wins(_:over:id:_:json:)`` for a plan part, by its id and its values' JSON.
  private func wins<Part: TripPlanPart>(_ change: FeedChange, over local: Part?, id: UUID)
    throws -> Bool
  {
    try wins(
      change, over: local, id: id, Part.idPath, json: { .object(FieldValues($0).jsonMembers()) })
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
