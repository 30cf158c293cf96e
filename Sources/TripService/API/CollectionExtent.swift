import Foundation
import Geo
import Persistence
import Synchronization
import TripPlanner

/// The extent of the whole collection (the smallest box over all trips and the span of their
/// dates), computed from columns without models and cached by the store's history token: the
/// first request after a change pays O(n), the others O(1). Nothing is held per trip.
final class CollectionExtent: Sendable {
  struct Value: Sendable {
    var token: DefaultHistoryToken
    var box: GeographicBox?
    var span: (Date, Date)?
  }
  private let cached = Mutex<Value?>(nil)

  /// The box and the span as of now.
  func current(_ pool: StorePool) throws -> (GeographicBox?, (Date, Date)?) {
    try pool.withStore(author: "service") { store in
      let token = try store.context.currentHistoryToken()
      if let value = cached.withLock({ $0 }), value.token == token {
        return (value.box, value.span)
      }
      let box = GeographicBox.enclosing(try store.coordinates())
      let dates = try store.context.fetchValues(
        FetchDescriptor<Trip>(), \.startDate, \.endDate)
      var span: (Date, Date)?
      if let earliest = dates.lazy.map(\.0).min(), let latest = dates.lazy.map(\.1).max() {
        span = (earliest, latest)
      }
      cached.withLock { $0 = Value(token: token, box: box, span: span) }
      return (box, span)
    }
  }
}
