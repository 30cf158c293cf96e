/// The one error type of the Geo module.
public struct GeoError: Error, Sendable, CustomStringConvertible {
  /// What kind of failure this is.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }
    /// A coordinate is out of range or not finite.
    public static let invalidCoordinate = Code("invalidCoordinate")
    /// PROJ does not know the coordinate reference system.
    public static let unknownCRS = Code("unknownCRS")
    /// A CRS from an untrusted source is of a form that could make PROJ open files (a PROJ
    /// string with `+init=` or a grid, WKT, PROJJSON); see ``Projection/init(reference:)``.
    public static let refusedCRS = Code("refusedCRS")
    /// PROJ failed to transform.
    public static let projectionFailed = Code("projectionFailed")
    /// The viewport is not a positive size.
    public static let invalidViewport = Code("invalidViewport")
    /// The code's name.
    public var description: String { name }
  }
  /// The kind of failure.
  public var code: Code
  /// What went wrong and what to do.
  public var message: String
  /// The underlying error, if any (such as PROJ's own message).
  public var cause: (any Error & Sendable)?

  /// Creates an error.
  public init(code: Code, message: String, cause: (any Error & Sendable)? = nil) {
    self.code = code
    self.message = message
    self.cause = cause
  }

  /// The message, then the cause.
  public var description: String {
    if let cause { return "\(message) (\(cause))" }
    return message
  }
}
