/// The one error type of the trip library.
public struct TripPlannerError: Error, Sendable, CustomStringConvertible {
  /// What kind of failure this is.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }
    /// A trip's values break a rule (``TripPlannerError/field`` names the field).
    public static let invalidTrip = Code("invalidTrip")
    /// An input file or text cannot be read as trips (``TripPlannerError/problems`` lists them).
    public static let invalidInput = Code("invalidInput")
    /// A file to read does not exist or cannot be opened.
    public static let missingInput = Code("missingInput")
    /// No trip has the given id, or a prefix matches several.
    public static let notFound = Code("notFound")
    /// The store holds something the library cannot use (a store's own failures are thrown
    /// as the layer's `PersistenceError`, unwrapped).
    public static let store = Code("store")
    /// Writing an output file failed.
    public static let output = Code("output")
    /// The code's name.
    public var description: String { name }
  }

  /// One problem in an input: where, and what.
  public struct Problem: Sendable, Hashable, CustomStringConvertible {
    /// The file name as given (or `-` for standard input).
    public var file: String
    /// The 1-based line, or nil when the whole input is at fault.
    public var line: Int?
    /// What is wrong.
    public var reason: String
    /// `FILE:LINE: error: reason`.
    public var description: String {
      if let line { return "\(file):\(line): error: \(reason)" }
      return "\(file): error: \(reason)"
    }
  }

  /// The kind of failure.
  public var code: Code
  /// What went wrong and what to do.
  public var message: String
  /// For ``Code/invalidTrip``, the field at fault (`name`, `latitude`, …).
  public var field: String?
  /// For ``Code/invalidInput``, every problem found (nothing was imported).
  public var problems: [Problem]
  /// The underlying error.
  public var cause: (any Error & Sendable)?

  /// Creates an error.
  public init(
    code: Code, message: String, field: String? = nil, problems: [Problem] = [],
    cause: (any Error & Sendable)? = nil
  ) {
    self.code = code
    self.message = message
    self.field = field
    self.problems = problems
    self.cause = cause
  }

  /// The message; for invalid input, one problem per line.
  public var description: String {
    if !problems.isEmpty { return problems.map(\.description).joined(separator: "\n") }
    if let cause { return "\(message) (\(cause))" }
    return message
  }
}
