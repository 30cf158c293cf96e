import Foundation
import Geo
import Persistence

// Importing trips with their plans.

extension TripStore {
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
}
