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
      throw error
    }
  }

  /// The item with this id, if the store has one. Cost: one lookup in the unique index.
  /// The item with this id, with its trip and that trip's bucket list loaded (where a failure
  /// is thrown, not trapped by the properties). Cost: one lookup in the unique index on id,
  /// one by key for the trip, one over the items' index on their trip.
  func item(_ id: UUID) throws -> BucketListItem? {
    var descriptor = FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.id == id })
      .storedOnly
    descriptor.relationshipKeyPathsForPrefetching = [\.trip]
    guard let item = try context.fetch(descriptor).first else { return nil }
    if let trip = item.trip { try context.prefetch([\.bucketList], of: [trip]) }
    return item
  }

  /// The stay with this id, its trip loaded. Cost: one lookup in the unique index on id, one
  /// by key for the trip.
  func stayModel(_ id: UUID) throws -> LivingAccommodation? {
    var descriptor = FetchDescriptor<LivingAccommodation>(predicate: #Predicate { $0.id == id })
      .storedOnly
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
    _ id: UUID, trip: UUID?, tripKey: Int64?, tombstone known: HistoryTombstone<Model>? = nil
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
      ?? context.tombstone(of: identifier, as: Trip.self)?[\.id] as? UUID
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
