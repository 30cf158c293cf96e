import Foundation
import Persistence

extension TripStore {
  /// The model types a sync feed carries: trips and their plans (``Trip/modelTypes``).
  static let syncedModelTypes = Trip.modelTypes
  /// Their entities' names, in the same order.
  static let syncedEntityNames = Trip.modelTypes.map { entityName(of: $0) }

  private static func entityName<Model: PersistentModel>(of _: Model.Type) -> String {
    Model.schema.name
  }

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
  /// - Throws: `PersistenceError` with `historyTokenExpired` when the store no longer
  ///   keeps the history after `token`: do a full export instead.
  public func changeFeed(
    after token: DefaultHistoryToken?, excludingAuthor excludedAuthor: String? = nil
  )
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
  public func checkFeedToken(_ token: DefaultHistoryToken?) throws {
    guard token != nil else { return }
    var descriptor = HistoryDescriptor(after: token)
    descriptor.fetchLimit = 0
    _ = try context.fetchHistory(descriptor)
  }

  /// Writes ``changeFeed(after:excludingAuthor:)`` as JSON lines (``SyncFeed/jsonLines``) to
  /// `sink`, `batchSize` lines at a time, then the resume line, as the changes are read
  /// (``forEachFeedChange(after:excludingAuthor:_:)``): the feed is never held whole. Returns
  /// how many changes it wrote and the token to resume from.
  @discardableResult
  public func writeChangeFeed(
    after token: DefaultHistoryToken?, excludingAuthor excludedAuthor: String? = nil,
    batchSize: Int = 1000, to sink: ([UInt8]) throws -> Void
  ) throws -> (count: Int, resumeToken: DefaultHistoryToken) {
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
    after token: DefaultHistoryToken?, excludingAuthor excludedAuthor: String? = nil,
    _ body: (FeedChange) throws -> Void
  ) throws -> DefaultHistoryToken {
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
        var read: DefaultHistoryToken?
        try context.enumerateHistory(descriptor) { transaction, change in
          let row = RowKey(
            entity: change.changedPersistentIdentifier.entityName,
            key: change.changedPersistentIdentifier.primaryKey)
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
            entity: change.changedPersistentIdentifier.entityName,
            key: change.changedPersistentIdentifier.primaryKey)
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
    }
  }

  /// The row a delete is of, by its tombstone's id; nil when it kept none.
  private static func deletedRow(_ change: HistoryChange) -> FeedRow? {
    let name = change.changedPersistentIdentifier.entityName
    if name == Trip.schema.name {
      return (change.tombstone(as: Trip.self)?[\.id] as? UUID).map { FeedRow(Trip.self, id: $0) }
    }
    func row<Part: TripPlanPart>(_: Part.Type) -> FeedRow? {
      (change.tombstone(as: Part.self)?[Part.idPath] as? UUID).map { FeedRow(Part.self, id: $0) }
    }
    return Trip.planPart(entityName: name).flatMap { row($0) }
  }

  /// The row of the store with `row`'s id now, if any. One lookup by the unique id.
  private static func currentRow(_ row: FeedRow, in context: ModelContext) throws
    -> PersistentIdentifier?
  {
    let id = row.id
    if row.model == ObjectIdentifier(Trip.self) {
      return try context.fetch(
        FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id }).storedOnly
      )
      .first.flatMap { context.persistentIdentifier(for: $0) }
    }
    func current<Part: TripPlanPart>(_: Part.Type) throws -> PersistentIdentifier? {
      try context.fetch(FetchDescriptor<Part>(predicate: Part.predicate(idIn: [id])).storedOnly)
        .first.flatMap { context.persistentIdentifier(for: $0) }
    }
    guard let part = Trip.planParts.first(where: { ObjectIdentifier($0) == row.model }) else {
      return nil
    }
    return try current(part)
  }

  /// What a history change is about, with the row's current values, and the primary key of
  /// the trip a plan row's insert or update belongs to (nil for a trip's change and for a
  /// delete); nil for a row deleted since (outside the history read: the next feed has it) or
  /// of another model.
  private static func subjectAndTrip(of change: HistoryChange, in context: ModelContext) throws
    -> (subject: FeedChange.Subject, tripKey: Int64?)?
  {
    let identifier = change.changedPersistentIdentifier
    switch identifier.entityName {
    case Trip.schema.name:
      if change.kind == .delete {
        return (change.tombstone(as: Trip.self)?[\.id] as? UUID).map { (.trip(id: $0, nil), nil) }
      }
      // Read as a value: no model is made or kept for a feed's row.
      guard let record = try context.fetch([identifier], as: TripRecord.self).first,
        let id = record.id
      else { return nil }
      return (.trip(id: id, record), nil)
    default:
      guard let part = Trip.planPart(entityName: identifier.entityName) else { return nil }
      return try partAndTrip(part, of: change, in: context)
    }
  }

  /// ``subjectAndTrip(of:in:)`` for a plan part's change.
  @_specialize(where Part == BucketListItem)  // see carriedParts
  @_specialize(where Part == LivingAccommodation)
  private static func partAndTrip<Part: TripPlanPart>(
    _: Part.Type, of change: HistoryChange, in context: ModelContext
  ) throws -> (subject: FeedChange.Subject, tripKey: Int64?)? {
    if change.kind == .delete {
      return (change.tombstone(as: Part.self)?[Part.idPath] as? UUID).map {
        (Part.subject(id: $0, nil, tripID: nil), nil)
      }
    }
    // The trip loaded where a failure is thrown (the property would trap).
    guard let part = try context.model(for: change.changedPersistentIdentifier, as: Part.self)
    else {
      return nil
    }
    try context.prefetch([Part.tripPath], of: [part])
    guard let trip = part.trip else { return nil }
    try context.resolveFaults(CollectionOfOne(part))
    return (
      Part.subject(id: part.id, FieldValues(part), tripID: trip.id),
      context.persistentIdentifier(for: trip)?.primaryKey
    )
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
      let trip = try context.fetch(
        FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id }).storedOnly
      )
      .first
    else { return [] }
    var rows: [FeedChange] = []
    // Loaded here, where a failure is thrown, not by the properties (which trap).
    try context.prefetch(Trip.planParts.map { $0.planPath }, of: [trip])
    for part in Trip.planParts {
      try carriedParts(part, of: trip, by: change, in: context, isListed: isListed, into: &rows)
    }
    return rows
  }

  /// ``plan(ofTrip:carriedBy:in:isListed:)`` for one part. Specialized for each part: called
  /// through `Trip.planParts`, a generic body would look up its types' metadata at every
  /// call (measured: 4 % more instructions for a feed).
  @_specialize(where Part == BucketListItem)
  @_specialize(where Part == LivingAccommodation)
  private static func carriedParts<Part: TripPlanPart>(
    _: Part.Type, of trip: Trip, by change: FeedChange, in context: ModelContext,
    isListed: (any PersistentModel, FeedRow) throws -> Bool, into rows: inout [FeedChange]
  ) throws {
    let parts = try Part.parts(of: trip).filter {
      try !isListed($0, FeedRow(Part.self, id: $0.id))
    }
    try context.resolveFaults(parts)
    for part in parts {
      let time = try context.persistentIdentifier(for: part).flatMap {
        try context.lastChangeDate(for: $0)
      }
      rows.append(
        FeedChange(
          token: change.token, author: change.author, time: time ?? change.time, kind: .update,
          subject: Part.subject(id: part.id, FieldValues(part), tripID: trip.id)))
    }
  }
}
