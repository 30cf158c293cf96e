import Geo
import Persistence

/// How a failure is reported: a command's exit status (sysexits) and a request's HTTP status,
/// from one table by the error's code, so that a failure reads the same from the command line
/// and from the service, however deep in the layers it arose.
///
/// | kind (`FailureKind`) | exit | HTTP |
/// |---|---|---|
/// | data in a request or a file (``TripPlannerError/Code/invalidTrip``, `invalidInput`) | 65 | 400 |
/// | data the store holds or is (a damaged row, not a store, a newer store) | 65 | 500 |
/// | a history token (expired: 410, foreign or unknown: 400) | 65 | 410, 400 |
/// | a missing input file | 66 | 400 |
/// | not found | 1 | 404 |
/// | a conflict (a unique value taken, a relationship's rule) | 1 | 409 |
/// | transient: busy or out of time (503), full (507), the engine or opening failed (500) | 1 | 503, 507, 500 |
/// | misuse | 1 | 500 |
/// | a sync server's failure (``ServerSyncError``): data 65, else 1 | 65, 1 | 502 |
///
/// The layer's errors reach callers as it throws them (``TripStore`` does not wrap them), so
/// each code has one row here. Cost: O(1).
public struct FailureStatus: Hashable, Sendable {
  /// The exit status of a command that fails with the error.
  public var exit: Int32
  /// The HTTP status of a request that fails with the error.
  public var http: Int

  /// A row of the table.
  public init(exit: Int32, http: Int) {
    self.exit = exit
    self.http = http
  }

  /// The statuses of `error`; 1 and 500 for an error the table does not know.
  public init(of error: any Error) {
    switch error {
    case let error as PersistenceError: self = Self.of(error.code)
    case let error as TripPlannerError: self = Self.of(error.code)
    case let error as ServerSyncError: self = Self.of(error)
    case is GeoError: self = FailureStatus(exit: 1, http: 400)
    default: self = FailureStatus(exit: 1, http: 500)
    }
  }

  /// The statuses of a failure of the layer's with `code`.
  public static func of(_ code: PersistenceError.Code) -> FailureStatus {
    switch code {
    case .historyTokenExpired: FailureStatus(exit: 65, http: 410)
    case .historyTokenForeign, .historyTokenUnknown, .outOfRange: FailureStatus(exit: 65, http: 400)
    case .busy, .timedOut, .abandoned: FailureStatus(exit: 1, http: 503)
    case .storeFull: FailureStatus(exit: 1, http: 507)
    case .engine, .cannotOpen: FailureStatus(exit: 1, http: 500)
    default: of(code.kind, inRequest: false)
    }
  }

  /// The statuses of a failure of the trip library's with `code`.
  public static func of(_ code: TripPlannerError.Code) -> FailureStatus {
    switch code {
    case .missingInput: FailureStatus(exit: 66, http: 400)
    // What the store holds, or an output file that could not be written: the server's or the
    // machine's, never the request's.
    case .store, .output: FailureStatus(exit: 1, http: 500)
    default: of(code.kind, inRequest: true)
    }
  }

  /// The statuses of a sync server's failure: by its kind for the exit status; as a request's
  /// failure, a gateway's (502), whatever the other server answered.
  public static func of(_ error: ServerSyncError) -> FailureStatus {
    FailureStatus(exit: error.kind == .data ? 65 : 1, http: 502)
  }

  /// By kind: data is the client's (400) when it came in the request, the server's (500) when
  /// the store holds it.
  static func of(_ kind: FailureKind, inRequest: Bool) -> FailureStatus {
    switch kind {
    case .data: FailureStatus(exit: 65, http: inRequest ? 400 : 500)
    case .notFound: FailureStatus(exit: 1, http: 404)
    case .conflict: FailureStatus(exit: 1, http: 409)
    case .transient: FailureStatus(exit: 1, http: 503)
    case .misuse: FailureStatus(exit: 1, http: 500)
    }
  }
}

extension TripPlannerError.Code {
  /// What kind of failure the code is (the same classification as the layer's codes).
  public var kind: FailureKind {
    switch self {
    case .invalidTrip, .invalidInput, .missingInput: .data
    case .notFound: .notFound
    // An output file that could not be written (a full disk): may succeed later.
    case .output: .transient
    // A store that holds what the library cannot use, or a type the formats cannot carry.
    default: .misuse
    }
  }
}
