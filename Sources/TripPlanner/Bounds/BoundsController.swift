import Foundation
import Geo
import Observation
import Persistence
import Synchronization

/// Keeps the bounding region of a set of trips current as the store changes: the trip
/// library's `MapCameraController`.
///
/// It subscribes through a `ResultsObserver` of the trips matching a ``TripQuery`` (all
/// trips by default), and applies each update's removed and inserted trips to a
/// `CoordinateCover`: one added, moved or deleted trip costs O(log n), with no rescan. The
/// projected extent is then recomputed from the box (O(1) for Web Mercator; for other CRSs one
/// PROJ call per changed trip, kept in a `ProjectedPointCover` in O(log n), and one
/// densified `proj_trans_bounds` of the box). ``report`` is observable and changes only when the report does.
///
/// Changes arrive from any context of the container and from other processes writing the same
/// file.
public final class BoundsController: Observable, Sendable {
  private struct State: Sendable {
    var cover = CoordinateCover()
    /// The trips' own projections, outside Web Mercator (see `BoundsReport`).
    var points: ProjectedPointCover?
    var version = 0
    var report: BoundsReport
    var lastError: (any Error & Sendable)?
  }

  private let registrar = ObservationRegistrar()
  private let state: Mutex<State>
  private let observer: ResultsObserver<Trip>
  private let projection: Projection
  private let viewport: Viewport?
  private let token = Mutex<ObservationTrackingToken?>(nil)

  /// Starts following the trips of `container` that match `query`, reporting in `crs`.
  ///
  /// - Throws: `GeoError` for an unknown CRS, `PersistenceError` when the store fails.
  public init(
    container: ModelContainer, query: TripQuery = TripQuery(), crs: String = "EPSG:3857",
    viewport: Viewport? = nil
  ) throws {
    projection = try Projection(to: crs)
    self.viewport = viewport
    var descriptor = query.fetchDescriptor
    descriptor.sortBy = []
    descriptor.fetchLimit = query.limit
    descriptor.fetchOffset = query.offset
    observer = try ResultsObserver(descriptor, container: container)
    let results = observer.results
    let cover = CoordinateCover(
      results.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) })
    let projection = self.projection
    let points =
      projection.isWebMercator
      ? nil
      : projection.pointCover(
        results.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) })
    var initial = State(
      cover: cover, points: points, version: observer.version,
      report: try BoundsReport(count: 0, box: nil, projection: projection, viewport: viewport))
    initial.report = try BoundsReport(
      count: initial.cover.count, box: initial.cover.box, projection: projection,
      viewport: viewport,
      points: initial.points)
    state = Mutex(initial)
    let observer = self.observer
    let started = withContinuousObservation { [weak self] in
      let version = observer.version
      let failure = observer.lastError
      self?.catchUp(to: version, observerError: failure)
    }
    token.withLock { $0 = started }
  }

  deinit { token.withLock { $0?.cancel() } }

  /// The current report.
  public var report: BoundsReport {
    registrar.access(self, keyPath: \.report)
    return state.withLock { $0.report }
  }

  /// Why the report could not be kept current, or nil while it can: the store could not be
  /// read (the results observer's `lastError`) or the box could not be projected. ``report``
  /// keeps its last good value meanwhile. Observable.
  public var lastError: (any Error & Sendable)? {
    registrar.access(self, keyPath: \.lastError)
    return state.withLock { $0.lastError }
  }

  /// Blocks until every commit announced so far is reflected in ``report``.
  public func waitForPendingUpdates() {
    observer.waitForPendingUpdates()
    catchUp(to: observer.version, observerError: observer.lastError)
  }

  private func catchUp(to version: Int, observerError: PersistenceError?) {
    let (updated, errorChanged) = state.withLock { state -> (BoundsReport?, Bool) in
      let before = state.lastError.map { "\($0)" }
      var updated: BoundsReport?
      if let observerError {
        state.lastError = observerError
      } else if state.lastError is PersistenceError {
        state.lastError = nil
      }
      if version > state.version {
        apply(to: &state, upTo: version)
        do {
          let report = try BoundsReport(
            count: state.cover.count, box: state.cover.box, projection: projection,
            viewport: viewport, points: state.points)
          if !(state.lastError is PersistenceError) { state.lastError = nil }
          if report != state.report {
            // The report is in place before observers hear of it (see ResultsObserver).
            state.report = report
            updated = report
          }
        } catch {
          state.lastError = error
        }
      }
      return (updated, before != state.lastError.map { "\($0)" })
    }
    if errorChanged { registrar.withMutation(of: self, keyPath: \.lastError) {} }
    if updated != nil { registrar.withMutation(of: self, keyPath: \.report) {} }
  }

  /// Applies the observer's changes after the state's version up to `version`, or rebuilds the
  /// cover when they are no longer kept.
  private func apply(to state: inout State, upTo version: Int) {
    if let changes = observer.changes(after: state.version) {
      for change in changes where change.version <= version {
        for trip in change.removed {
          state.cover.remove(Self.coordinate(trip))
          state.points?.remove(projection.projectIfPossible(Self.coordinate(trip)))
        }
        for trip in change.inserted {
          state.cover.insert(Self.coordinate(trip))
          state.points?.insert(projection.projectIfPossible(Self.coordinate(trip)))
        }
        state.version = change.version
      }
    } else {
      let coordinates = observer.results.map(Self.coordinate)
      state.cover = CoordinateCover(coordinates)
      if state.points != nil { state.points = projection.pointCover(coordinates) }
      state.version = observer.version
    }
  }

  private static func coordinate(_ trip: Trip) -> Coordinate {
    Coordinate(latitude: trip.latitude, longitude: trip.longitude)
  }
}
