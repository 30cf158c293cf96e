import Foundation
import Geo
import Persistence
import TripPlanner

// Content negotiation, base URLs and CORS preflight.

extension FeaturesAPI {
  // MARK: Negotiation

  /// Checks the format asked for with `f` or `Accept`: JSON in its flavours; anything else is
  /// 400 (`f`) or 406 (`Accept`).
  func negotiate(_ request: HTTPRequest, route: Route) throws {
    if let format = request.queryValues("f").last {
      guard ["json", "geojson", "application/json", "application/geo+json"].contains(format)
      else {
        throw ServiceError.request(
          400, "Invalid value '\(HTTPServer.loggable(format))' for 'f': this service speaks json.")
      }
      return
    }
    if let accept = request.header("Accept"), !accept.isEmpty {
      var isStream = false
      var json = [
        "application/json", "application/geo+json", "application/vnd.oai.openapi+json",
        "application/problem+json", "application/schema+json",
      ]
      switch route {
      case .boundsStream, .itemsStream, .staysStream: isStream = true
      // A change feed is JSON lines, and its refusals JSON.
      case .changes: json.append(Self.jsonLines)
      default: break
      }
      // Streams are Server-Sent Events: a browser's EventSource asks for text/event-stream.
      let offered = isStream ? ["text/event-stream"] : json
      guard Self.accepts(accept, anyOf: offered) else {
        throw ServiceError.request(
          406,
          isStream
            ? "This stream answers with Server-Sent Events (text/event-stream); the request accepts only \(HTTPServer.loggable(accept))."
            : "This service answers with JSON (application/json, application/geo+json); the request accepts only \(HTTPServer.loggable(accept))."
        )
      }
    }
  }

  /// Whether an `Accept` header gives one of `offered` a weight above 0 (RFC 9110 §12.5.1):
  /// each type takes the `q` of the most specific range that matches it (`type/subtype`, then
  /// `type/*`, then `*/*`; default 1), so `application/json;q=0` refuses JSON even beside
  /// `*/*`. A weight that is not a number from 0 to 1 counts as 1. Cost: O(ranges × offered).
  static func accepts(_ accept: String, anyOf offered: [String]) -> Bool {
    let ranges = accept.split(separator: ",").map { item -> (type: String, q: Double) in
      let parts = item.split(separator: ";").map {
        $0.trimmingCharacters(in: .whitespaces).lowercased()
      }
      var q = 1.0
      for parameter in parts.dropFirst() where parameter.hasPrefix("q=") {
        if let value = Double(parameter.dropFirst(2)), (0...1).contains(value) { q = value }
      }
      return (parts.first ?? "", q)
    }
    return offered.contains { type in
      let group = String(type.prefix { $0 != "/" }) + "/*"
      for candidate in [type, group, "*/*"] {
        let weights = ranges.filter { $0.type == candidate }.map(\.q)
        if !weights.isEmpty { return weights.max()! > 0 }
      }
      return false
    }
  }

  /// `scheme://host` as the client addressed the service (links are absolute).
  func baseURL(_ request: HTTPRequest) -> String {
    let scheme = configuration.tls == nil ? "http" : "https"
    if let host = request.header("Host"), !host.isEmpty, host.count <= 255,
      host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-:[]".contains($0)) })
    {
      return "\(scheme)://\(host)"
    }
    let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
    return "\(scheme)://\(host):\(configuration.port)"
  }

  func preflight(_ route: Route) -> HTTPResponse {
    var headers: [(name: String, value: String)] = [
      ("Allow", methods(route).joined(separator: ", "))
    ]
    if configuration.corsOrigin != nil {
      headers += [
        ("Access-Control-Allow-Methods", methods(route).joined(separator: ", ")),
        (
          "Access-Control-Allow-Headers",
          "Authorization, Content-Type, Last-Event-ID, If-Match, If-None-Match"
        ),
        ("Access-Control-Max-Age", "600"),
      ]
    }
    return HTTPResponse(status: 204, headers: headers)
  }
}
