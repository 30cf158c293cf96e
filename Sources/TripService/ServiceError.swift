import Foundation
import TripPlanner

/// A failure of the trip service: it cannot start (the address, the token file, TLS), or a
/// request is refused (the HTTP status and a description, sent as OGC API's JSON exception).
public struct ServiceError: Error, Sendable, CustomStringConvertible {
  /// What kind of failure this is.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }
    /// The server cannot listen on the address asked for.
    public static let cannotListen = Code("cannotListen")
    /// The token file is missing, unreadable, readable by others, or malformed.
    public static let badTokenFile = Code("badTokenFile")
    /// The TLS certificate or key cannot be read.
    public static let badTLS = Code("badTLS")
    /// The configuration is unsafe or contradictory (tokens over plain HTTP off loopback).
    public static let unsafeConfiguration = Code("unsafeConfiguration")
    /// A request was refused; ``ServiceError/status`` says how.
    public static let badRequest = Code("badRequest")
    /// The code's name.
    public var description: String { name }
  }

  /// The kind of failure.
  public var code: Code
  /// What went wrong and what to do about it.
  public var message: String
  /// For a refused request, the HTTP status (400, 401, 404, 405, 406, 413…).
  public var status: Int
  /// The underlying error, if any.
  public var cause: (any Error & Sendable)?

  /// Creates an error.
  public init(
    code: Code, message: String, status: Int = 500, cause: (any Error & Sendable)? = nil
  ) {
    self.code = code
    self.message = message
    self.status = status
    self.cause = cause
  }

  /// A refused request with its status.
  static func request(_ status: Int, _ message: String) -> ServiceError {
    ServiceError(code: .badRequest, message: message, status: status)
  }

  /// The message.
  public var description: String { message }

  /// The OGC API exception document for a status: `{"code", "description"}`.
  static func response(status: Int, description: String) -> HTTPResponse {
    let value = JSONValue.object([
      ("code", .string(reason(status))), ("description", .string(description)),
    ])
    return HTTPResponse(
      status: status, headers: [("Content-Type", "application/json")],
      body: Data((value.rendered(pretty: false) + "\n").utf8))
  }

  /// The answer to a request its deadline stopped (``HTTPLimits/requestSeconds``,
  /// `--request-timeout`), or whose client went: 503 with `Retry-After: 5`, `message` (the
  /// deadline's) and what the client can do. The one place that answer is written.
  static func deadlineResponse(_ message: String, advice: String) -> HTTPResponse {
    var response = Self.response(status: 503, description: message + " " + advice)
    response.headers.append(("Retry-After", "5"))
    return response
  }

  /// The reason phrase used as the exception's code.
  static func reason(_ status: Int) -> String {
    switch status {
    case 400: "InvalidParameterValue"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "NotFound"
    case 405: "MethodNotAllowed"
    case 406: "NotAcceptable"
    case 409: "Conflict"
    case 410: "Gone"
    case 412: "PreconditionFailed"
    case 413: "PayloadTooLarge"
    case 415: "UnsupportedMediaType"
    case 422: "InvalidTrip"
    case 428: "PreconditionRequired"
    case 429: "TooManyRequests"
    case 414: "URITooLong"
    case 431: "RequestHeaderFieldsTooLarge"
    case 507: "InsufficientStorage"
    case 503: "ServiceUnavailable"
    default: "ServerError"
    }
  }
}
