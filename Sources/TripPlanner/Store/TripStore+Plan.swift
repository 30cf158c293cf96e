import Foundation
import Geo
import Persistence

// A trip's plan: its bucket list and its stay. Each call finds the trip as
// `trip(matching:)` does (a whole id or an unambiguous prefix of 4 or more characters), then
// reads or writes in one transaction that holds the store's write lock: nothing is written
// when a call throws.

extension TripStore {
  /// The bucket list of the trip `tripID` names, in order.
  ///
  /// Cost: the trip's lookup, then one query over the items' index on their trip.
  public func bucketList(ofTrip tripID: String) throws -> [BucketListItem] {
    try run { try trip(matching: tripID).bucketList }
  }

  /// Adds an item to the bucket list of the trip `tripID` names, at `position` (0 is first; the
  /// items from there on move down one), or at the end. Returns the item.
  ///
  /// - Throws: ``TripPlannerError/Code/invalidTrip`` for an item that breaks a rule, a
  ///   position past the end (naming the list's length), or an id another item has;
  ///   ``TripPlannerError/Code/notFound`` when no trip matches.
  ///
  /// Cost: the trip's lookup and its bucket list (one query), O(items of the trip) to renumber
  /// them, and the save of the changed items.
  @discardableResult
  public func addBucketListItem(
    _ record: FieldValues<BucketListItem>, toTrip tripID: String, at position: Int? = nil
  ) throws -> BucketListItem {
    try record.validate()
    return try changingPlan {
      let trip = try trip(matching: tripID)
      if let id = record.id, let other = try item(id) {
        let owner = other.trip.map { " (of trip \($0.id.lowercasedString))" } ?? ""
        throw TripPlannerError(
          code: .invalidTrip,
          message:
            "A bucket-list item with the id \(id.lowercasedString) exists already\(owner); an id names one item for its whole life.",
          field: "id")
      }
      if let id = record.id,
        let owner = try formerOwner(
          BucketListItem.self, \.id, \.trip, id, trip: trip.id,
          tripKey: context.persistentIdentifier(for: trip)?.primaryKey)
      {
        throw TripPlannerError(
          code: .invalidInput, message: Self.reused("bucket-list item", id, owner) + ".",
          field: "id")
      }
      var list = trip.bucketList
      let index = try Self.insertionIndex(position, count: list.count)
      let item = record.newModel()
      list.insert(item, at: index)
      Self.renumber(list)
      trip.bucketList = list
      return item
    }
  }

  /// Changes the bucket-list item with this id: `change` edits its values (its id and
  /// position stay), then the result is validated and saved, or nothing is.
  ///
  /// Cost: a lookup by the item's unique id, then the save of one row.
  @discardableResult
  public func updateBucketListItem(
    _ id: UUID, _ change: (inout FieldValues<BucketListItem>) throws -> Void
  ) throws -> BucketListItem {
    try changingPlan {
      let item = try existingItem(id)
      var record = FieldValues(item)
      try change(&record)
      record.id = item.id
      record.position = item.position
      try record.validate()
      record.apply(to: item)
      return item
    }
  }

  /// Moves the bucket-list item with this id to `position` in its trip's list (0 is first),
  /// the others closing up around it.
  ///
  /// - Throws: ``TripPlannerError/Code/invalidTrip`` for a position past the end (naming the
  ///   list's length).
  ///
  /// Cost: the item's lookup and its trip's list, O(items of the trip) renumbered and saved.
  @discardableResult
  public func moveBucketListItem(_ id: UUID, to position: Int) throws -> BucketListItem {
    try changingPlan {
      let item = try existingItem(id)
      guard let trip = item.trip else { throw Self.orphan(id) }
      var list = trip.bucketList
      let length = list.count
      list.removeAll { $0 === item }
      let index = try Self.insertionIndex(position, count: list.count, length: length)
      list.insert(item, at: index)
      Self.renumber(list)
      trip.bucketList = list
      return item
    }
  }

  /// Removes the bucket-list item with this id (its trip's list closes up). Returns its values.
  ///
  /// Cost: the item's lookup and its trip's list, O(items of the trip) renumbered and saved.
  @discardableResult
  public func removeBucketListItem(_ id: UUID) throws -> FieldValues<BucketListItem> {
    try changingPlan {
      let item = try existingItem(id)
      let record = FieldValues(item)
      if let trip = item.trip {
        var list = trip.bucketList
        list.removeAll { $0 === item }
        Self.renumber(list)
      }
      context.delete(item)
      return record
    }
  }

  /// Sets the stay of the trip `tripID` names: the trip's stay takes `record`'s values (a
  /// trip has one stay). One it had is changed in place when `record` has no id or the stay's
  /// own; a `record` with another id replaces it (the old stay is deleted), as an import does.
  /// Returns the stay.
  ///
  /// - Throws: ``TripPlannerError/Code/invalidTrip`` for a value that breaks a rule;
  ///   ``TripPlannerError/Code/invalidInput`` when `record`'s id names a stay of another trip
  ///   (an id names one row for its whole life: the other trip keeps its stay);
  ///   ``TripPlannerError/Code/notFound`` when no trip matches.
  ///
  /// Cost: the trip's lookup, one query for its stay (the unique index on its trip), one
  /// lookup of `record`'s id in the unique index when it names another, the save of one or
  /// two rows.
  @discardableResult
  public func setStay(_ record: FieldValues<LivingAccommodation>, forTrip tripID: String) throws
    -> LivingAccommodation
  {
    try record.validate()
    return try changingPlan {
      let trip = try trip(matching: tripID)
      let current = trip.livingAccommodation
      if let current, record.id == nil || record.id == current.id {
        record.apply(to: current, leaving: ["id"])
        return current
      }
      if let id = record.id, let other = try stayModel(id) {
        throw Self.ownedElsewhere("stay", id, owner: other.trip?.id)
      }
      if let id = record.id,
        let owner = try formerOwner(
          LivingAccommodation.self, \.id, \.trip, id, trip: trip.id,
          tripKey: context.persistentIdentifier(for: trip)?.primaryKey)
      {
        throw TripPlannerError(
          code: .invalidInput, message: Self.reused("stay", id, owner) + ".", field: "id")
      }
      if let current { context.delete(current) }
      let stay = record.newModel()
      trip.livingAccommodation = stay
      return stay
    }
  }

  /// Clears the stay of the trip `tripID` names (deleting it). Returns its values, or nil
  /// when the trip had none.
  ///
  /// Cost: the trip's lookup, one query for its stay, the delete of one row.
  @discardableResult
  public func clearStay(ofTrip tripID: String) throws -> FieldValues<LivingAccommodation>? {
    try changingPlan {
      let trip = try trip(matching: tripID)
      guard let stay = trip.livingAccommodation else { return nil }
      let record = FieldValues(stay)
      context.delete(stay)
      return record
    }
  }

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
          FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id })
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
            FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id })
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
      throw Self.wrap(error)
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
    do {
      try context.withSnapshot {
        guard try hasPlanRows() else { return }
        var start = 0
        while start < ids.count {
          let batch = Array(ids[start..<min(start + 500, ids.count)])
          start += 500
          try readPlans(of: batch, into: &plans)
        }
      }
    } catch {
      throw Self.wrap(error)
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
    do {
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
    } catch {
      throw Self.wrap(error)
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
    var first = FetchDescriptor<BucketListItem>()
    first.fetchLimit = 1
    var firstStay = FetchDescriptor<LivingAccommodation>()
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

  // MARK: Importing plans

  /// Inserts or updates the trips of `records`, and replaces the plan of each record that
  /// carries one: the file's items (matched by id to the trip's own, or new) in the file's
  /// order, the others deleted; its stay, or none. Unsaved: the caller saves.
  ///
  /// - Throws: ``TripPlannerError/Code/invalidInput`` naming the line of an item or stay whose
  ///   id appears twice in the file or belongs to another trip in the store; nothing is changed.
  ///
  /// Cost: one query per 500 trips, items and stays named, to find those that exist; then
  /// O(records + items), and each trip's old plan read (a query each) when it is replaced.
  func importWithPlans(
    _ records: [(line: Int?, record: TripRecord)], file: String, progress: ((Int) -> Void)?
  ) throws {
    var problems: [TripPlannerError.Problem] = []
    var itemLines: [UUID: Int?] = [:]
    var stayLines: [UUID: Int?] = [:]
    func claim(_ id: UUID?, _ lines: inout [UUID: Int?], line: Int?, what: String) {
      guard let id else { return }
      if let earlier = lines[id] {
        let place = earlier.map { "on line \($0)" } ?? "earlier in \(file)"
        problems.append(
          .init(
            file: file, line: line,
            reason: "the \(what) id \(id.lowercasedString) is also \(place); each may appear once"))
      } else {
        lines[id] = line
      }
    }
    for (line, record) in records {
      guard let plan = record.plan else { continue }
      for item in plan.bucketList {
        claim(item.id, &itemLines, line: line, what: "bucket-list item")
      }
      claim(plan.livingAccommodation?.id, &stayLines, line: line, what: "stay")
    }
    let tripIDs = records.compactMap(\.record.id)
    let existingTrips = try Self.byID(
      tripIDs,
      fetch: { ids in
        try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { ids.contains($0.id) }))
      }, id: \.id)
    let existingItems = try Self.byID(
      Array(itemLines.keys),
      fetch: { ids in
        try context.fetch(
          FetchDescriptor<BucketListItem>(predicate: #Predicate { ids.contains($0.id) }))
      }, id: \.id)
    let existingStays = try Self.byID(
      Array(stayLines.keys),
      fetch: { ids in
        try context.fetch(
          FetchDescriptor<LivingAccommodation>(predicate: #Predicate { ids.contains($0.id) }))
      }, id: \.id)
    // An id a deleted item or stay of another trip had: it named that row for its whole life.
    var newItems: [(UUID, trip: UUID?, line: Int?)] = []
    var newStays: [(UUID, trip: UUID?, line: Int?)] = []
    for (line, record) in records {
      guard let plan = record.plan else { continue }
      for item in plan.bucketList {
        if let id = item.id, existingItems[id] == nil { newItems.append((id, record.id, line)) }
      }
      if let id = plan.livingAccommodation?.id, existingStays[id] == nil {
        newStays.append((id, record.id, line))
      }
    }
    func tripKey(_ id: UUID?) -> Int64? {
      id.flatMap { existingTrips[$0] }.flatMap { context.persistentIdentifier(for: $0) }?
        .primaryKey
    }
    // Most ids are new: their tombstones are looked up 500 at a time, and only the ids some
    // deletion had are followed to their former trip.
    let deletedItems = try context.lastTombstones(
      of: BucketListItem.self, where: \.id, in: newItems.map(\.0))
    let deletedStays = try context.lastTombstones(
      of: LivingAccommodation.self, where: \.id, in: newStays.map(\.0))
    for (id, trip, line) in newItems {
      guard let tombstone = deletedItems[id] else { continue }
      if let owner = try formerOwner(
        BucketListItem.self, \.id, \.trip, id, trip: trip, tripKey: tripKey(trip),
        tombstone: tombstone)
      {
        problems.append(
          .init(file: file, line: line, reason: Self.reused("bucket-list item", id, owner)))
      }
    }
    for (id, trip, line) in newStays {
      guard let tombstone = deletedStays[id] else { continue }
      if let owner = try formerOwner(
        LivingAccommodation.self, \.id, \.trip, id, trip: trip, tripKey: tripKey(trip),
        tombstone: tombstone)
      {
        problems.append(.init(file: file, line: line, reason: Self.reused("stay", id, owner)))
      }
    }
    // An item or stay of another trip: moving it silently would take it from that trip.
    for (line, record) in records {
      guard let plan = record.plan else { continue }
      for item in plan.bucketList {
        if let id = item.id, let owner = existingItems[id]?.trip?.id, owner != record.id {
          problems.append(
            .init(
              file: file, line: line,
              reason:
                "the bucket-list item id \(id.lowercasedString) belongs to trip \(owner.lowercasedString) in the store"
            ))
        }
      }
      if let id = plan.livingAccommodation?.id, let owner = existingStays[id]?.trip?.id,
        owner != record.id
      {
        problems.append(
          .init(
            file: file, line: line,
            reason:
              "the stay id \(id.lowercasedString) belongs to trip \(owner.lowercasedString) in the store"
          ))
      }
    }
    guard problems.isEmpty else {
      throw TripPlannerError(
        code: .invalidInput, message: "\(file): nothing was imported.", problems: problems)
    }
    for (index, entry) in records.enumerated() {
      var record = entry.record
      let plan = record.plan
      record.plan = nil
      let trip: Trip
      if let id = record.id, let existing = existingTrips[id] {
        existing.apply(record)
        trip = existing
      } else {
        trip = Trip(record)
        context.insert(trip)
      }
      if let plan { replacePlan(of: trip, with: plan, existingItems: existingItems) }
      if let progress, index % 10_000 == 0 { progress(index) }
    }
  }

  /// `trip`'s plan replaced by `plan` (see ``importWithPlans(_:file:progress:)``).
  private func replacePlan(
    of trip: Trip, with plan: TripPlan, existingItems: [UUID: BucketListItem]
  ) {
    var list: [BucketListItem] = []
    for (position, record) in plan.bucketList.enumerated() {
      var values = record
      values.position = position
      if let id = record.id, let item = existingItems[id], item.trip === trip {
        values.apply(to: item)
        list.append(item)
      } else {
        list.append(values.newModel())
      }
    }
    trip.bucketList = list  // items no longer listed are deleted (the rule is cascade)
    let current = trip.livingAccommodation
    if let stay = plan.livingAccommodation {
      if let current, stay.id == nil || stay.id == current.id {
        stay.apply(to: current, leaving: ["id"])
      } else {
        if let current { context.delete(current) }
        trip.livingAccommodation = stay.newModel()
      }
    } else if let current {
      context.delete(current)
    }
  }

  /// The models with `ids`, by id: one query per 500 ids.
  private static func byID<Model>(
    _ ids: [UUID], fetch: ([UUID]) throws -> [Model], id: KeyPath<Model, UUID>
  ) throws -> [UUID: Model] {
    var found: [UUID: Model] = [:]
    var start = 0
    while start < ids.count {
      let batch = Array(ids[start..<min(start + 500, ids.count)])
      for model in try fetch(batch) { found[model[keyPath: id]] = model }
      start += 500
    }
    return found
  }

  // MARK: Helpers

  /// `body`, then a save, in one exclusive transaction; on any error nothing is saved and the
  /// context is rolled back. Inside another ``ModelContext/performExclusively(_:)`` (a
  /// request that makes several changes), `body` joins that transaction and the outer call
  /// saves: a request is one transaction, all or nothing, and one history transaction.
  private func changingPlan<T>(_ body: () throws -> T) throws -> T {
    do {
      return try context.performExclusively(body)
    } catch {
      context.rollback()
      throw Self.wrap(error)
    }
  }

  /// The item with this id, if the store has one. Cost: one lookup in the unique index.
  /// The item with this id, with its trip and that trip's bucket list loaded (where a failure
  /// is thrown, not trapped by the properties). Cost: one lookup in the unique index on id,
  /// one by key for the trip, one over the items' index on their trip.
  private func item(_ id: UUID) throws -> BucketListItem? {
    var descriptor = FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.id == id })
    descriptor.relationshipKeyPathsForPrefetching = [\.trip]
    guard let item = try context.fetch(descriptor).first else { return nil }
    if let trip = item.trip { try context.prefetch([\.bucketList], of: [trip]) }
    return item
  }

  /// The stay with this id, its trip loaded. Cost: one lookup in the unique index on id, one
  /// by key for the trip.
  private func stayModel(_ id: UUID) throws -> LivingAccommodation? {
    var descriptor = FetchDescriptor<LivingAccommodation>(predicate: #Predicate { $0.id == id })
    descriptor.relationshipKeyPathsForPrefetching = [\.trip]
    return try context.fetch(descriptor).first
  }

  private func existingItem(_ id: UUID) throws -> BucketListItem {
    guard let item = try item(id) else {
      throw TripPlannerError(
        code: .notFound, message: "No bucket-list item has the id \(id.lowercasedString).")
    }
    return item
  }

  private static func orphan(_ id: UUID) -> TripPlannerError {
    TripPlannerError(
      code: .invalidTrip,
      message: "bucket-list item \(id.lowercasedString) belongs to no trip; add it to a trip",
      field: "trip")
  }

  /// Where `position` inserts into a list of `count` items: at the end when nil. `length` is
  /// the list's length as its owner sees it (an item moved within it counts), for the message.
  private static func insertionIndex(_ position: Int?, count: Int, length: Int? = nil) throws
    -> Int
  {
    guard let position else { return count }
    guard (0...count).contains(position) else {
      let length = length ?? count
      throw TripPlannerError(
        code: .invalidTrip,
        message:
          "position \(position) is past the end of a bucket list of \(length) item\(length == 1 ? "" : "s"); positions go from 0 to \(count)",
        field: "position")
    }
    return position
  }

  /// The error of a write naming `what`'s `id`, which belongs to another trip's row (or to
  /// none): an id names one row for its whole life.
  /// The trip a deleted row of `Model` with this `id` belonged to, when it is not `trip`
  /// (by id, or by `tripKey`, the trip's primary key when it is in the store): an id that
  /// named a row of another trip, which a store that synced before the delete may still
  /// have there. Nil when no kept deletion had the id, or it was of this trip (a trip deleted
  /// and taken back gets its plan back), or its trip is not known.
  ///
  /// Cost: a lookup of the id's tombstones by index, and of the former trip by key (or its
  /// tombstone).
  func formerOwner<Model: PersistentModel>(
    _ type: Model.Type, _ idPath: KeyPath<Model, UUID>, _ tripPath: KeyPath<Model, Trip?>,
    _ id: UUID, trip: UUID?, tripKey: Int64?, tombstone known: HistoryTombstone? = nil
  ) throws -> UUID? {
    guard
      let tombstone = try known
        ?? context.lastTombstones(of: Model.self, where: idPath, in: [id])[id],
      let key = tombstone.key(of: tripPath), key != tripKey
    else { return nil }
    let identifier = PersistentIdentifier(
      storeIdentifier: container.storeIdentifier, entityName: Trip.schema.name, primaryKey: key)
    let owner =
      try context.fetch([identifier], as: TripRecord.self).first?.id
      ?? context.tombstone(of: identifier)?[\Trip.id]
    guard let owner, owner != trip else { return nil }
    return owner
  }

  /// Why an id a deleted row of another trip had is refused.
  static func reused(_ what: String, _ id: UUID, _ owner: UUID) -> String {
    "the \(what) id \(id.lowercasedString) was a \(what) of trip \(owner.lowercasedString), since deleted; an id names one \(what) for its whole life (a store synced before the delete may still have it there), so give the new \(what) no id, or a new one"
  }

  static func ownedElsewhere(_ what: String, _ id: UUID, owner: UUID?) -> TripPlannerError {
    let whose = owner.map { "trip \($0.lowercasedString)" } ?? "no trip"
    return TripPlannerError(
      code: .invalidInput,
      message:
        "The \(what) id \(id.lowercasedString) belongs to \(whose); an id names one \(what) for its whole life, so it cannot be taken by another trip.",
      field: "id")
  }

  /// Numbers `list` 0, 1, 2 … in its order, changing only the items whose position moves.
  private static func renumber(_ list: [BucketListItem]) {
    for (index, item) in list.enumerated() where item.position != index {
      item.position = index
    }
  }
}
