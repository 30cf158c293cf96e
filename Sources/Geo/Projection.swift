internal import CProj
import Foundation
import Synchronization

/// A transformation from WGS 84 longitude/latitude to a coordinate reference system PROJ
/// knows, such as `EPSG:3857`, `EPSG:32633` or a PROJ string.
///
/// PROJ contexts must not be used by two threads at once: each `Projection` owns its own
/// context and PROJ object, guarded by a mutex, so a `Projection` is `Sendable` and can be
/// shared. Both are destroyed with it. PROJ's errors become ``GeoError``s carrying PROJ's
/// message.
public final class Projection: Sendable {
  /// The target CRS as given.
  public let crs: String
  private let state: Mutex<State>

  /// The context and the transformation, each freed exactly once by its owner, the
  /// transformation first (it keeps its context alive).
  fileprivate struct State {
    let context: ProjContext
    let transform: ProjObject
  }

  /// Creates the transformation from `EPSG:4326` (in longitude, latitude order) to `crs`.
  ///
  /// Every PROJ object made here has one owner (`ProjContext`, `ProjObject`) that frees it
  /// once, objects before their context, on success and on every failure path alike.
  ///
  /// - Throws: ``GeoError/Code/unknownCRS`` when PROJ does not know `crs`.
  public init(to crs: String) throws {
    self.crs = crs
    guard let context = ProjContext() else {
      throw GeoError(
        code: .projectionFailed, message: "PROJ could not create a context (out of memory?).")
    }
    func failure(_ what: String) -> GeoError {
      let code = proj_context_errno(context.pointer)
      let message =
        context.log.last
        ?? proj_context_errno_string(context.pointer, code).map { String(cString: $0) }
        ?? "unknown error"
      return GeoError(
        code: .unknownCRS,
        message:
          "PROJ does not know the coordinate reference system '\(crs)' (\(what)): \(message). Use a code such as EPSG:3857, or a PROJ string.",
        cause: ProjError(code: code, message: message))
    }
    // "+proj=merc +lon_0=150" names an operation; with +type=crs it is the CRS users mean.
    var definition = crs
    if crs.hasPrefix("+proj=") && !crs.contains("+type=crs") { definition += " +type=crs" }
    guard !crs.isEmpty, !crs.contains("\0"),
      let target = ProjObject(proj_create(context.pointer, definition), context: context)
    else {
      throw failure("not recognised")
    }
    guard proj_is_crs(target.pointer) != 0 else {
      throw GeoError(
        code: .unknownCRS,
        message:
          "'\(crs)' is a PROJ operation, not a coordinate reference system. Use a CRS such as EPSG:3857."
      )
    }
    guard
      let raw = ProjObject(
        proj_create_crs_to_crs(context.pointer, "EPSG:4326", definition, nil), context: context)
    else {
      throw failure("no transformation from EPSG:4326")
    }
    guard
      let normalized = ProjObject(
        proj_normalize_for_visualization(context.pointer, raw.pointer), context: context)
    else {
      throw failure("cannot normalise axis order")
    }
    context.stopLogging()
    state = Mutex(State(context: context, transform: normalized))
  }

  /// Whether the target is Web Mercator (EPSG:3857 and its aliases), which has closed forms.
  public var isWebMercator: Bool {
    ["EPSG:3857", "EPSG:900913", "EPSG:3785", "EPSG:102100"].contains(crs.uppercased())
  }

  /// Projects one point.
  public func project(_ coordinate: Coordinate) throws -> (x: Double, y: Double) {
    try transform(coordinate.longitude, coordinate.latitude, PJ_FWD) {
      "PROJ cannot project \(coordinate.latitude), \(coordinate.longitude) to \(crs)."
    }
  }

  /// The longitude and latitude of the point at `x`, `y` of the target CRS (in the order
  /// `project` gives them): the inverse of ``project(_:)``.
  ///
  /// - Throws: ``GeoError/Code/projectionFailed`` when the point has no geographic position.
  public func unproject(x: Double, y: Double) throws -> Coordinate {
    let (longitude, latitude) = try transform(x, y, PJ_INV) {
      "PROJ cannot take \(x), \(y) of \(crs) back to longitude and latitude."
    }
    return Coordinate(latitude: latitude, longitude: longitude)
  }

  /// One point through the transformation in `direction`, or ``GeoError/Code/projectionFailed``
  /// with `message` and PROJ's reason when the result is not finite.
  private func transform(
    _ first: Double, _ second: Double, _ direction: PJ_DIRECTION, _ message: () -> String
  ) throws -> (Double, Double) {
    try state.withLock { state in
      let output = proj_trans(state.transform.pointer, direction, proj_coord(first, second, 0, 0))
      guard output.v.0.isFinite, output.v.1.isFinite else {
        let code = proj_errno(state.transform.pointer)
        proj_errno_reset(state.transform.pointer)
        throw GeoError(
          code: .projectionFailed, message: message(),
          cause: ProjError(code: code, message: Self.message(state.context.pointer, code)))
      }
      return (output.v.0, output.v.1)
    }
  }

  /// Projects one point, or nil when it cannot be projected (outside the CRS's area).
  public func projectIfPossible(_ coordinate: Coordinate) -> (x: Double, y: Double)? {
    try? project(coordinate)
  }

  /// The projections of `coordinates` in one cover (one PROJ call per point).
  public func pointCover(_ coordinates: some Sequence<Coordinate>) -> ProjectedPointCover {
    var cover = ProjectedPointCover()
    for coordinate in coordinates { cover.insert(projectIfPossible(coordinate)) }
    return cover
  }

  /// Points PROJ adds along each edge of a box. PROJ suggests 21; on a 4° UTM box that misses
  /// the southern edge's lowest point by 4 m, so the extent would not cover every trip. 200
  /// points bring that to about a centimetre for little cost.
  static let densifyPoints: Int32 = 200

  /// The extent of a box in the target CRS, densified along its edges by PROJ
  /// (`proj_trans_bounds`, `densifyPoints` per edge). A box crossing the antimeridian is split at 180° and the two
  /// extents joined, since PROJ 9.1 answers such a box with an almost global extent.
  ///
  /// For Web Mercator, see ``ProjectedExtent/webMercator(_:)``, which this does not special-case.
  public func transformBounds(_ box: GeographicBox) throws -> ProjectedExtent {
    if box.crossesAntimeridian {
      let west = try transformBounds(
        GeographicBox(west: box.west, south: box.south, east: 180, north: box.north))
      let east = try transformBounds(
        GeographicBox(west: -180, south: box.south, east: box.east, north: box.north))
      return west.union(east)
    }
    return try state.withLock { state in
      var minX = 0.0
      var minY = 0.0
      var maxX = 0.0
      var maxY = 0.0
      let result = proj_trans_bounds(
        state.context.pointer, state.transform.pointer, PJ_FWD, box.west, box.south, box.east,
        box.north, &minX,
        &minY, &maxX, &maxY, Self.densifyPoints)
      guard result != 0, minX.isFinite, minY.isFinite, maxX.isFinite, maxY.isFinite else {
        let code = proj_context_errno(state.context.pointer)
        throw GeoError(
          code: .projectionFailed,
          message: "PROJ cannot transform the box \(box.bbox) to \(crs); the CRS may not cover it.",
          cause: ProjError(code: code, message: Self.message(state.context.pointer, code)))
      }
      return ProjectedExtent(crs: crs, minX: minX, minY: minY, maxX: maxX, maxY: maxY)
    }
  }

  /// The box's extent in the target CRS: Web Mercator's closed form for EPSG:3857, else
  /// ``transformBounds(_:)``.
  public func extent(of box: GeographicBox) throws -> ProjectedExtent {
    if isWebMercator {
      var extent = ProjectedExtent.webMercator(box)
      extent.crs = crs
      return extent
    }
    return try transformBounds(box)
  }

  private static func message(_ context: OpaquePointer, _ code: Int32) -> String {
    proj_context_errno_string(context, code).map { String(cString: $0) } ?? "error \(code)"
  }
}

/// Receives PROJ's log messages while a projection is created.
final class LogCapture {
  var last: String?
}

/// Owns a PROJ context: destroys it once, when the last ``ProjObject`` made in it and the
/// ``Projection`` are gone. It also owns the log capture its log function points at, so that
/// the capture outlives every message PROJ may log (even while the context is destroyed).
final class ProjContext {
  let pointer: OpaquePointer
  let log = LogCapture()

  init?() {
    guard let pointer = proj_context_create() else { return nil }
    self.pointer = pointer
    proj_log_level(pointer, PJ_LOG_ERROR)
    proj_log_func(pointer, Unmanaged.passUnretained(log).toOpaque()) { data, _, message in
      guard let data, let message else { return }
      Unmanaged<LogCapture>.fromOpaque(data).takeUnretainedValue().last = String(cString: message)
    }
  }

  /// Ends the capture of PROJ's messages (once the projection is made).
  func stopLogging() {
    proj_log_func(pointer, nil, nil)
    proj_log_level(pointer, PJ_LOG_NONE)
  }

  deinit {
    proj_log_func(pointer, nil, nil)
    proj_context_destroy(pointer)
  }
}

/// Owns one PROJ object (`PJ *`): destroys it once, before its context, which it keeps alive.
final class ProjObject {
  let pointer: OpaquePointer
  private let context: ProjContext

  /// Takes ownership of `pointer`; nil (owning nothing) when PROJ returned nil.
  init?(_ pointer: OpaquePointer?, context: ProjContext) {
    guard let pointer else { return nil }
    self.pointer = pointer
    self.context = context
  }

  deinit { proj_destroy(pointer) }
}

/// PROJ's error number and message, as a ``GeoError/cause``.
public struct ProjError: Error, Sendable, CustomStringConvertible {
  /// PROJ's error number.
  public var code: Int32
  /// PROJ's message.
  public var message: String
  /// `PROJ error <code>: <message>`.
  public var description: String { "PROJ error \(code): \(message)" }
}

// SAFETY: the PROJ context and object are only ever touched inside `Projection.state`'s mutex, one
// thread at a time, as PROJ requires.
extension Projection.State: @unchecked Sendable {}
