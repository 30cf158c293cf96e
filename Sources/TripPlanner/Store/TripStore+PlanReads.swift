import Foundation
import Geo
import Persistence

// Reading plans: the stays and bucket-list items across trips, and trips with their plans.

extension TripStore {
  // MARK: Plans across trips

  /// A page of stays, with the id of each one's trip, and how many match: those in `box`
  /// (west > east crosses the antimeridian and selects both sides), of the trip `tripID`
  /// when given, ordered by name then id (a stable order for paging).
  ///
  /// Cost: one query and one count, each a scan of the stays (their coordinates have no
  /// index: a store has at most one stay a trip); with `tripID`, the unique index on a stay's
  /// trip instead. O(matching) to sort, O(page) models.
  public func stays(
    in box: GeographicBox? = nil, ofTrip tripID: UUID? = nil, offset: Int = 0, limit: Int? = nil
  ) throws -> (stays: [(record: FieldValues<LivingAccommodation>, tripID: UUID)], matched: Int) {
    let hasBox = box != nil
    let south = box?.south ?? -90
    let north = box?.north ?? 90
    let west = box?.west ?? -180
    let east = box?.east ?? 180
    let crosses = box?.crossesAntimeridian ?? false
    let hasTrip = tripID != nil
    let trip = tripID ?? UUID()
    var descriptor = FetchDescriptor<LivingAccommodation>(
      predicate: #Predicate { stay in
        (!hasTrip || stay.trip?.id == trip)
          && (!hasBox
            || (stay.latitude >= south && stay.latitude <= north
              && ((!crosses && stay.longitude >= west && stay.longitude <= east)
                || (crosses && (stay.longitude >= west || stay.longitude <= east)))))
      },
      sortBy: [SortDescriptor(\.name), SortDescriptor(\.id)])
    descriptor.relationshipKeyPathsForPrefetching = [\.trip]
    descriptor.includePendingChanges = false
    let (stays, matched) = try page(descriptor, offset: offset, limit: limit)
    return try run {
      try context.resolveFaults(stays)
      return (stays.compactMap { stay in stay.trip.map { (FieldValues(stay), $0.id) } }, matched)
    }
  }

  /// The stay with this id and its trip's id; nil when there is none. Cost: one lookup in the
  /// unique index on id, and one by key for the trip.
  public func stay(_ id: UUID) throws -> (record: FieldValues<LivingAccommodation>, tripID: UUID)? {
    try run {
      guard let stay = try stayModel(id), let trip = stay.trip else { return nil }
      try context.resolveFaults(CollectionOfOne(stay))
      return (FieldValues(stay), trip.id)
    }
  }

  /// A page of bucket-list items, with the id of each one's trip, and how many match: of the
  /// trip `tripID` when given, whose title or details contain `search` (ignoring case and
  /// diacritics) when given, ordered by position then id (with `tripID`, the trip's order).
  ///
  /// Cost: one query and one count over the index on an item's trip with `tripID`, else a scan
  /// of the items; O(matching) to sort, O(page) models.
  public func bucketListItems(
    ofTrip tripID: UUID? = nil, search: String? = nil, offset: Int = 0, limit: Int? = nil
  ) throws -> (items: [(record: FieldValues<BucketListItem>, tripID: UUID)], matched: Int) {
    let hasTrip = tripID != nil
    let trip = tripID ?? UUID()
    let text = search ?? ""
    var descriptor = FetchDescriptor<BucketListItem>(
      predicate: #Predicate { item in
        (!hasTrip || item.trip?.id == trip)
          && (text.isEmpty || item.title.localizedStandardContains(text)
            || item.details.localizedStandardContains(text))
      },
      sortBy: [SortDescriptor(\.position), SortDescriptor(\.id)])
    descriptor.relationshipKeyPathsForPrefetching = [\.trip]
    descriptor.includePendingChanges = false
    let (items, matched) = try page(descriptor, offset: offset, limit: limit)
    return (items.compactMap { item in item.trip.map { (FieldValues(item), $0.id) } }, matched)
  }

  /// One page of `descriptor`'s models and how many match, in one read transaction.
  private func page<Model: PersistentModel>(
    _ descriptor: FetchDescriptor<Model>, offset: Int, limit: Int?
  ) throws -> (models: [Model], matched: Int) {
    var descriptor = descriptor
    return try run {
      try context.withSnapshot {
        let matched = try context.fetchCount(descriptor)
        descriptor.fetchOffset = offset
        descriptor.fetchLimit = limit
        return (try context.fetch(descriptor), matched)
      }
    }
  }

  /// The bucket-list item with this id and its trip's id; nil when there is none. Cost: one
  /// lookup in the unique index on id, and one by key for the trip.
  public func bucketListItem(_ id: UUID) throws -> (
    record: FieldValues<BucketListItem>, tripID: UUID
  )? {
    try run {
      guard let item = try item(id), let trip = item.trip else { return nil }
      return (FieldValues(item), trip.id)
    }
  }

  // MARK: One trip with its plan

  /// Writes the trip `id` names, its plan included, in one transaction that holds the store's
  /// write lock: `make` gets the trip's current values with its plan (nil when no trip has the
  /// id) and returns the values to store, which are validated (the plan's too) and written as
  /// an import of one record writes them: a trip that does not exist is added; a plan given
  /// replaces the trip's (items matched by id keep their identity, in the order given, the
  /// others deleted; the stay given, or none), a plan left nil keeps it. `make` may throw to
  /// refuse (a version that does not match, a trip that must be new): nothing is written.
  /// Returns the trip's values with its plan, as stored.
  ///
  /// - Throws: ``TripPlannerError/Code/invalidTrip`` for a value that breaks a rule,
  ///   ``TripPlannerError/Code/invalidInput`` for an item or stay id that belongs to another
  ///   trip or is given twice; what `make` throws.
  ///
  /// Cost: the trip's lookup by id, a query for each of its bucket list and stay, the lookup
  /// of the ids named, and the save of the rows that change.
  @discardableResult
  public func write(
    _ id: UUID, _ make: (_ current: TripRecord?) throws -> TripRecord
  ) throws -> TripRecord {
    do {
      return try context.performExclusively {
        let trip = try context.fetch(
          FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id }).storedOnly
        ).first
        var current: TripRecord?
        if let trip {
          current = try context.record(of: trip)
          current?.plan = trip.plan
        }
        var record = try make(current)
        record.id = id
        try record.validate()
        try importWithPlans([(nil, record)], file: "the trip", progress: nil)
        try context.save()
        guard
          let saved = try context.fetch(
            FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id }).storedOnly
          ).first
        else {
          throw TripPlannerError(
            code: .store, message: "The trip \(id.lowercasedString) was not found after its save.")
        }
        var stored = try context.record(of: saved)
        stored.plan = saved.plan
        return stored
      }
    } catch {
      context.rollback()
      throw error
    }
  }

  /// `records` (trips' values, each with its id) with each one's plan (an empty one for a
  /// trip that has none, or that is not in the store), read for all of them at once as values,
  /// without models: per 500 trips, one query for their keys, one for their items (ordered by
  /// position, then id) and one for their stays, each over the key column's index, in one
  /// read transaction. A store without any item or stay runs none of them: whether it holds
  /// any is asked once per history token. Cost: O(records + items).
  public func withPlans(_ records: [TripRecord]) throws -> [TripRecord] {
    let ids = records.compactMap(\.id)
    guard !ids.isEmpty else { return records }
    var plans: [UUID: TripPlan] = [:]
    try context.withSnapshot {
      guard try hasPlanRows() else { return }
      var start = 0
      while start < ids.count {
        let batch = Array(ids[start..<min(start + 500, ids.count)])
        start += 500
        try readPlans(of: batch, into: &plans)
      }
    }
    return records.map { record in
      var record = record
      if let id = record.id { record.plan = plans[id] ?? TripPlan() }
      return record
    }
  }

  /// `records` with their plans, read by `keys` (the trips' primary keys, in `records`' order):
  /// per 500 trips one query for their items and one for their stays, each by the trip key
  /// column through its index, no query on the trips; none on a store without any item or
  /// stay. The items of each trip are ordered by position, then id, as ``withPlans(_:)``
  /// orders them. Cost: O(records + items).
  func withPlans(_ records: [TripRecord], keys: [Int64]) throws -> [TripRecord] {
    precondition(records.count == keys.count, "one key per record")
    guard !records.isEmpty else { return records }
    var plans: [Int64: TripPlan] = [:]
    try context.withSnapshot {
      guard try hasPlanRows() else { return }
      let store = context.container.storeIdentifier
      let trips = keys.map {
        PersistentIdentifier(storeIdentifier: store, entityName: Trip.schema.name, primaryKey: $0)
      }
      try context.enumerateValues(
        relatedTo: trips, through: \BucketListItem.trip,
        [\BucketListItem.trip] + FieldValues<BucketListItem>.keyPaths
      ) { row in
        guard let key = try row.value(Int?.self, at: 0) else { return }
        plans[Int64(key), default: TripPlan()].bucketList.append(
          try FieldValues(row: row, from: 1))
      }
      try context.enumerateValues(
        relatedTo: trips, through: \LivingAccommodation.trip,
        [\LivingAccommodation.trip] + FieldValues<LivingAccommodation>.keyPaths
      ) { row in
        guard let key = try row.value(Int?.self, at: 0) else { return }
        plans[Int64(key), default: TripPlan()].livingAccommodation = try FieldValues(
          row: row, from: 1)
      }
    }
    return zip(records, keys).map { record, key in
      var record = record
      var plan = plans[key] ?? TripPlan()
      if plan.bucketList.count > 1 {
        // Each item's position and id read once, not per comparison.
        plan.bucketList = plan.bucketList.map { ($0.position ?? 0, $0.id, $0) }.sorted { a, b in
          a.0 != b.0 ? a.0 < b.0 : Self.precedes(a.1, b.1)
        }.map(\.2)
      }
      record.plan = plan
      return record
    }
  }

  /// Whether `a` sorts before `b` as the store sorts ids: by their 16 bytes (none first; a
  /// stored item always has one).
  static func precedes(_ a: UUID?, _ b: UUID?) -> Bool {
    guard let a, let b else { return a == nil && b != nil }
    return withUnsafeBytes(of: a.uuid) { a in
      withUnsafeBytes(of: b.uuid) { b in a.lexicographicallyPrecedes(b) }
    }
  }

  /// Whether the store holds any bucket-list item or stay, as the current snapshot sees it:
  /// asked of the store once per history token (two lookups of a first row) and remembered,
  /// so that the pages a service reads while nothing is written run no plan query at all.
  /// Every commit that adds a plan row makes a new token; a writer around the library
  /// (without history) is not seen until the next commit. Cost: the token's query, then O(1).
  public func hasPlanRows() throws -> Bool {
    let token = try context.currentHistoryToken()
    if let known = planRows, known.token == token { return known.exist }
    var first = FetchDescriptor<BucketListItem>().storedOnly
    first.fetchLimit = 1
    var firstStay = FetchDescriptor<LivingAccommodation>().storedOnly
    firstStay.fetchLimit = 1
    let exist =
      try !context.fetchIdentifiers(first).isEmpty
      || !context.fetchIdentifiers(firstStay).isEmpty
    planRows = (token, exist)
    return exist
  }

  /// The plans of the trips `ids` (at most a few hundred: their ids are bound one by one), as
  /// values: three queries.
  private func readPlans(of ids: [UUID], into plans: inout [UUID: TripPlan]) throws {
    var tripIDs: [Int64: UUID] = [:]
    try context.enumerateValues(
      FetchDescriptor<Trip>(predicate: #Predicate { ids.contains($0.id) }), [\Trip.id]
    ) { row in
      let id = try row.value(UUID.self, at: 0)
      tripIDs[row.identifier.primaryKey] = id
      plans[id] = TripPlan()
    }
    try context.enumerateValues(
      FetchDescriptor<BucketListItem>(
        predicate: #Predicate { ids.contains($0.trip!.id) },
        sortBy: [SortDescriptor(\.position), SortDescriptor(\.id)]),
      [\BucketListItem.trip] + FieldValues<BucketListItem>.keyPaths
    ) { row in
      guard let key = try row.value(Int?.self, at: 0), let trip = tripIDs[Int64(key)] else {
        return
      }
      plans[trip, default: TripPlan()].bucketList.append(try FieldValues(row: row, from: 1))
    }
    try context.enumerateValues(
      FetchDescriptor<LivingAccommodation>(
        predicate: #Predicate { ids.contains($0.trip!.id) }),
      [\LivingAccommodation.trip] + FieldValues<LivingAccommodation>.keyPaths
    ) { row in
      guard let key = try row.value(Int?.self, at: 0), let trip = tripIDs[Int64(key)] else {
        return
      }
      plans[trip, default: TripPlan()].livingAccommodation = try FieldValues(row: row, from: 1)
    }
  }
}
