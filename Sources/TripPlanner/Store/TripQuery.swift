import Foundation
import Geo
import Persistence

/// Which trips to list, and in what order: the filters of `trips list` and `trips bounds`.
public struct TripQuery: Sendable, Hashable {
  /// The order of a listing.
  public enum Sort: String, Sendable, CaseIterable {
    /// By start date, then name (the default).
    case start
    /// By end date, then name.
    case end
    /// By name as people read it (`localizedStandardCompare`: case and accents ignored,
    /// numbers by value, in SQL and in Swift alike), then start date.
    case name
    /// By destination as people read it, then start date.
    case destination

    /// The trip's field the order is by first.
    public var keyPath: PartialKeyPath<Trip> & Sendable {
      switch self {
      case .start: \Trip.startDate
      case .end: \Trip.endDate
      case .name: \Trip.name
      case .destination: \Trip.destination
      }
    }

    /// That field's declaration (its name, type and documentation).
    public var field: ModelField<Trip> {
      guard let field = Trip.schema.fields.first(where: { $0.keyPath == keyPath }) else {
        preconditionFailure("\(keyPath) is not a field of a trip")
      }
      return field
    }
  }

  /// Trips whose name or destination, or the title of an item of whose bucket list, contains
  /// this text, ignoring case and diacritics (`localizedStandardContains`), as SampleTrips'
  /// search. Cost: a scan of the trips, and for a trip whose name and destination do not match,
  /// its items by the index on their trip.
  public var search: String?
  /// Trips whose bucket list has an item whose title or details contain this text, ignoring
  /// case and diacritics. Cost: as ``search``'s.
  public var bucketListMentions: String?
  /// Only trips with a bucket-list item that needs a reservation.
  public var hasReservation = false
  /// Only trips with a bucket-list item that is not in the plan yet.
  public var hasItemNotInPlan = false
  /// Trips to this destination, matched as a person types it: ignoring case and accents
  /// (`zurich` finds `Zürich`), canonically equal strings alike, but the whole destination
  /// (`zur` does not find `Zürich`: use ``search`` for parts). Cost: a scan of the trips'
  /// destinations (a Swift comparison per row, not the index).
  public var destination: String?
  /// Trips that end on or after this date (overlapping the period from it).
  public var from: Date?
  /// Trips that start on or before this date (overlapping the period up to it).
  public var to: Date?
  /// Trips inside this box (edges included); a box whose west is greater than its east crosses
  /// the antimeridian and selects the trips on both sides of it. Cost: an index search on
  /// longitude (two ranges when the box crosses 180°), then a check of latitude per row found.
  public var bbox: GeographicBox?
  /// Trips matching this CQL2 filter (OGC API – Features Part 3), with the other filters.
  /// Cost: as ``TripFilter`` says of its parts.
  public var filter: TripFilter?
  /// The order.
  public var sort: Sort
  /// Reverse the order.
  public var reverse: Bool
  /// At most this many trips.
  public var limit: Int?
  /// Skip this many first.
  public var offset: Int?

  /// Creates a query; with no arguments, all trips by start date.
  public init(
    search: String? = nil, destination: String? = nil, from: Date? = nil, to: Date? = nil,
    sort: Sort = .start, reverse: Bool = false, limit: Int? = nil, offset: Int? = nil
  ) {
    self.search = search
    self.destination = destination
    self.from = from
    self.to = to
    self.sort = sort
    self.reverse = reverse
    self.limit = limit
    self.offset = offset
    self.bbox = nil
  }

  /// The filters but ``bbox`` as a predicate (see ``boxPredicate``); parts for absent filters
  /// fold away before SQL.
  public var predicate: Predicate<Trip> {
    let search = self.search ?? ""
    let destination = self.destination ?? ""
    let destinationLength = destination.count
    let hasFrom = from != nil
    let from = self.from ?? Date.distantPast
    let hasTo = to != nil
    let to = self.to ?? Date.distantFuture
    return #Predicate<Trip> { trip in
      (search.isEmpty || trip.name.localizedStandardContains(search)
        || trip.destination.localizedStandardContains(search)
        || trip.bucketList.contains { $0.title.localizedStandardContains(search) })
        && (destination.isEmpty
          || (trip.destination.localizedStandardContains(destination)
            && trip.destination.count == destinationLength))
        && (!hasFrom || trip.endDate >= from)
        && (!hasTo || trip.startDate <= to)
    }
  }

  /// The bucket-list filters (``bucketListMentions``, ``hasReservation``,
  /// ``hasItemNotInPlan``) as predicates, one each that is set: `EXISTS` subqueries over the
  /// items' index on their trip.
  public var planPredicates: [Predicate<Trip>] {
    var predicates: [Predicate<Trip>] = []
    if let text = bucketListMentions, !text.isEmpty {
      predicates.append(
        #Predicate<Trip> { trip in
          trip.bucketList.contains {
            $0.title.localizedStandardContains(text) || $0.details.localizedStandardContains(text)
          }
        })
    }
    if hasReservation {
      predicates.append(#Predicate<Trip> { trip in trip.bucketList.contains { $0.hasReservation } })
    }
    if hasItemNotInPlan {
      predicates.append(#Predicate<Trip> { trip in trip.bucketList.contains { !$0.isInPlan } })
    }
    return predicates
  }

  /// The sort descriptors: the chosen key, then a tie-breaker.
  public var sortDescriptors: [SortDescriptor<Trip>] {
    let order: SortOrder = reverse ? .reverse : .forward
    switch sort {
    case .start:
      return [SortDescriptor(\.startDate, order: order), SortDescriptor(\.name, order: order)]
    case .end:
      return [SortDescriptor(\.endDate, order: order), SortDescriptor(\.name, order: order)]
    case .name:
      return [SortDescriptor(\.name, order: order), SortDescriptor(\.startDate, order: order)]
    case .destination:
      return [
        SortDescriptor(\.destination, order: order), SortDescriptor(\.startDate, order: order),
      ]
    }
  }

  /// The ``bbox`` as a predicate, or nil without one: plain ranges of longitude (two, split at
  /// the antimeridian, when the box crosses it), which SQLite answers from the index on
  /// longitude: O(log n + trips in the longitude band).
  public var boxPredicate: Predicate<Trip>? {
    guard let bbox else { return nil }
    let west = bbox.west
    let east = bbox.east
    let south = bbox.south
    let north = bbox.north
    if bbox.crossesAntimeridian {
      // Two bounded ranges (one-sided ones make SQLite prefer scanning in sort order).
      return #Predicate<Trip> { trip in
        ((trip.longitude >= west && trip.longitude <= 180)
          || (trip.longitude >= -180 && trip.longitude <= east))
          && trip.latitude >= south && trip.latitude <= north
      }
    }
    return #Predicate<Trip> { trip in
      trip.longitude >= west && trip.longitude <= east && trip.latitude >= south
        && trip.latitude <= north
    }
  }

  /// Whether the query filters the trips by more than ``bbox``.
  var hasFilters: Bool {
    !(search ?? "").isEmpty || !(destination ?? "").isEmpty || from != nil || to != nil
      || !(bucketListMentions ?? "").isEmpty || hasReservation || hasItemNotInPlan
      || filter != nil
  }

  /// Whether ``TripBoxIndex`` answers the query: a page (``limit``) of a ``bbox`` by start
  /// date, either way, with no other filter.
  var isPagedBox: Bool {
    bbox != nil && limit != nil && sort == .start && (search ?? "").isEmpty
      && (destination ?? "").isEmpty && from == nil && to == nil
      && (bucketListMentions ?? "").isEmpty && !hasReservation && !hasItemNotInPlan
      && filter == nil
  }

  /// The query as a fetch descriptor: ``predicate``, and ``boxPredicate``, ``planPredicates``
  /// and the ``filter``'s predicate as conditions; stored trips only (`includePendingChanges`
  /// false).
  public var fetchDescriptor: FetchDescriptor<Trip> {
    var descriptor = FetchDescriptor(predicate: predicate, sortBy: sortDescriptors)
    descriptor.conditions =
      (boxPredicate.map { [$0] } ?? []) + planPredicates + (filter.map { [$0.predicate] } ?? [])
    switch sort {
    case .name: descriptor.localizedStandardSorts = [\.name]
    case .destination: descriptor.localizedStandardSorts = [\.destination]
    case .start, .end: break
    }
    descriptor.fetchLimit = limit
    descriptor.fetchOffset = offset
    // The stored trips: the store saves each change at once, so a trip inserted in its context
    // and not saved is one whose save failed (or one the caller has not saved yet).
    descriptor.includePendingChanges = false
    return descriptor
  }
}
