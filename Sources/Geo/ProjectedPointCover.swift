/// The extent of points' own projections, kept as points come and go: what makes a projected
/// extent cover every trip in CRSs whose box edges, densified, can miss a point (a point on an
/// edge between two of PROJ's samples, or the far side of a UTM zone).
///
/// `insert` and `remove` take O(log n) expected time; ``extent(crs:)`` O(log n). Points that do
/// not project (outside the CRS's area of use) are counted in ``unprojectedCount``, not
/// dropped silently.
public struct ProjectedPointCover: Sendable {
  private var xs = SortedMultiset()
  private var ys = SortedMultiset()
  /// How many points could not be projected.
  public private(set) var unprojectedCount = 0

  /// An empty cover.
  public init() {}

  /// Adds a point's projection, or counts it as unprojected when it is nil.
  public mutating func insert(_ point: (x: Double, y: Double)?) {
    guard let point else {
      unprojectedCount += 1
      return
    }
    _ = xs.insert(point.x)
    _ = ys.insert(point.y)
  }

  /// Removes a point added before (the same projection: PROJ is deterministic).
  public mutating func remove(_ point: (x: Double, y: Double)?) {
    guard let point else {
      unprojectedCount = max(0, unprojectedCount - 1)
      return
    }
    _ = xs.remove(point.x)
    _ = ys.remove(point.y)
  }

  /// The smallest extent holding every projected point, or nil when there is none.
  public func extent(crs: String) -> ProjectedExtent? {
    guard let minX = xs.min, let maxX = xs.max, let minY = ys.min, let maxY = ys.max else {
      return nil
    }
    return ProjectedExtent(crs: crs, minX: minX, minY: minY, maxX: maxX, maxY: maxY)
  }
}
