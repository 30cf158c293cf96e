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
    let tripIDs = records.compactMap(\.record.id)
    let existingTrips = try Self.byID(
      tripIDs,
      fetch: { ids in
        try context.fetch(
          FetchDescriptor<Trip>(predicate: #Predicate { ids.contains($0.id) }).storedOnly)
      }, id: \.id)
    var problems: [TripPlannerError.Problem] = []
    for part in Trip.planParts {
      problems += try planProblems(part, in: records, file: file, trips: existingTrips)
    }
    guard problems.isEmpty else {
      throw TripPlannerError(
        code: .invalidInput, message: "\(file): nothing was imported.", problems: problems)
    }
    // The plans to be replaced, loaded in one query per part (not one per trip).
    let replaced = records.compactMap { $0.record.plan == nil ? nil : $0.record.id }
      .compactMap { existingTrips[$0] }
    try context.prefetch(Trip.planParts.map { $0.planPath }, of: replaced)
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
      if let plan {
        for part in Trip.planParts { replaceParts(part, of: trip, with: plan) }
      }
      if let progress, index % 10_000 == 0 { progress(index) }
    }
  }

  /// What is wrong with `records`' parts of one kind, each naming its line: an id twice in the
  /// file, an id of a row of another trip in the store, or one a deleted row of another trip
  /// had. Cost: one query per 500 ids named, one tombstone lookup per 500 new ids, and a
  /// lookup of the former trip of each id a deletion had.
  private func planProblems<Part: TripPlanPart>(
    _: Part.Type, in records: [(line: Int?, record: TripRecord)], file: String,
    trips existingTrips: [UUID: Trip]
  ) throws -> [TripPlannerError.Problem] {
    var problems: [TripPlannerError.Problem] = []
    // Each part of the file: its id, its line, its trip.
    var named: [(id: UUID, line: Int?, trip: UUID?)] = []
    var lines: [UUID: Int?] = [:]
    for (line, record) in records {
      guard let plan = record.plan else { continue }
      for values in Part.values(in: plan) {
        guard let id = values[dynamicMember: Part.idPath] else { continue }
        if let earlier = lines[id] {
          let place = earlier.map { "on line \($0)" } ?? "earlier in \(file)"
          problems.append(
            .init(
              file: file, line: line,
              reason:
                "the \(Part.noun) id \(id.lowercasedString) is also \(place); each may appear once"
            ))
        } else {
          lines[id] = line
          named.append((id, line, record.id))
        }
      }
    }
    let existing = try Self.byID(
      Array(lines.keys),
      fetch: { ids in
        try context.fetch(FetchDescriptor<Part>(predicate: Part.predicate(idIn: ids)).storedOnly)
      },
      id: Part.idPath)
    func tripKey(_ id: UUID?) -> Int64? {
      id.flatMap { existingTrips[$0] }.flatMap { context.persistentIdentifier(for: $0) }?
        .primaryKey
    }
    // An id a deleted row of another trip had: it named that row for its whole life. Most ids
    // are new: their tombstones are looked up 500 at a time, and only the ids some deletion
    // had are followed to their former trip.
    let new = named.filter { existing[$0.id] == nil }
    let deleted = try context.lastTombstones(of: Part.self, where: Part.idPath, in: new.map(\.id))
    for (id, line, trip) in new {
      guard let tombstone = deleted[id] else { continue }
      if let owner = try formerOwner(
        Part.self, Part.idPath, Part.tripPath, id, trip: trip, tripKey: tripKey(trip),
        tombstone: tombstone)
      {
        problems.append(.init(file: file, line: line, reason: Self.reused(Part.noun, id, owner)))
      }
    }
    // A row of another trip: moving it silently would take it from that trip.
    for (line, record) in records {
      guard let plan = record.plan else { continue }
      for values in Part.values(in: plan) {
        if let id = values[dynamicMember: Part.idPath], let owner = existing[id]?.trip?.id,
          owner != record.id
        {
          problems.append(
            .init(
              file: file, line: line,
              reason:
                "the \(Part.noun) id \(id.lowercasedString) belongs to trip \(owner.lowercasedString) in the store"
            ))
        }
      }
    }
    return problems
  }

  /// `trip`'s parts of one kind replaced by `plan`'s (see ``importWithPlans(_:file:progress:)``):
  /// a part whose id the trip has (or, for a part a trip has one of, given without an id) keeps
  /// its row and takes the file's values; the others are new; the trip's parts the plan does
  /// not list are deleted.
  private func replaceParts<Part: TripPlanPart>(_: Part.Type, of trip: Trip, with plan: TripPlan) {
    let current = Part.parts(of: trip)
    var parts: [Part] = []
    for values in Part.values(in: plan) {
      let match =
        values[dynamicMember: Part.idPath].flatMap { id in current.first { $0.id == id } }
        ?? (Part.isOnePerTrip && values[dynamicMember: Part.idPath] == nil ? current.first : nil)
      if let match {
        values.apply(to: match, leaving: ["id"])
        parts.append(match)
      } else {
        parts.append(values.newModel())
      }
    }
    for old in current where !parts.contains(where: { $0 === old }) { context.delete(old) }
    Part.setParts(parts, of: trip)
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
