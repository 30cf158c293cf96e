import Foundation
import Persistence

/// Which trips to list, and in what order: the filters of `trips list` and `trips bounds`.
public struct TripQuery: Sendable, Hashable {
  /// The order of a listing.
  public enum Sort: String, Sendable, CaseIterable {
    /// By start date, then name (the default).
    case start
    /// By end date, then name.
    case end
    /// By name, then start date.
    case name
    /// By destination, then start date.
    case destination
  }

  /// Trips whose name or destination contains this text, ignoring case and diacritics
  /// (`localizedStandardContains`).
  public var search: String?
  /// Trips to this destination, matched as a person types it: ignoring case and accents
  /// (`zurich` finds `Zürich`), canonically equal strings alike, but the whole destination
  /// (`zur` does not find `Zürich`: use ``search`` for parts). Cost: a scan of the trips'
  /// destinations (a Swift comparison per row, not the index).
  public var destination: String?
  /// Trips that end on or after this date (overlapping the period from it).
  public var from: Date?
  /// Trips that start on or before this date (overlapping the period up to it).
  public var to: Date?
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
  }

  /// The filters as a predicate; parts for absent filters fold away before SQL.
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
        || trip.destination.localizedStandardContains(search))
        && (destination.isEmpty
          || (trip.destination.localizedStandardContains(destination)
            && trip.destination.count == destinationLength))
        && (!hasFrom || trip.endDate >= from)
        && (!hasTo || trip.startDate <= to)
    }
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

  /// The query as a fetch descriptor.
  public var fetchDescriptor: FetchDescriptor<Trip> {
    var descriptor = FetchDescriptor(predicate: predicate, sortBy: sortDescriptors)
    descriptor.fetchLimit = limit
    descriptor.fetchOffset = offset
    return descriptor
  }
}
