import Persistence

/// Identifies a place in an outside gazetteer, such as `geonames:1850147`.
///
/// It stands for a type the project does not own (like MapKit's `MKMapItem.Identifier`): a
/// class with a raw string, `Codable`, stored whole with a `.codable` attribute and opaque to
/// predicates and sorts.
public final class PlaceIdentifier: Codable, Hashable, Sendable, CustomStringConvertible {
  /// The identifier's text.
  public let rawValue: String

  /// Creates an identifier; nil for an empty or whitespace-only string.
  public init?(rawValue: String) {
    guard !rawValue.allSatisfy(\.isWhitespace) else { return nil }
    self.rawValue = rawValue
  }

  /// An identifier as stored, taken as ``init(from:)`` takes it (without the check of
  /// ``init(rawValue:)``).
  fileprivate init(stored rawValue: String) { self.rawValue = rawValue }

  /// Equal when the raw values are equal.
  public static func == (lhs: PlaceIdentifier, rhs: PlaceIdentifier) -> Bool {
    lhs.rawValue == rhs.rawValue
  }

  /// Hashes the raw value.
  public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

  /// The raw value.
  public var description: String { rawValue }

  private enum CodingKeys: String, CodingKey { case rawValue }

  /// Decodes `{"rawValue": "…"}`, ignoring keys a newer version may add.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    rawValue = try container.decode(String.self, forKey: .rawValue)
  }

  /// Encodes `{"rawValue": "…"}`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(rawValue, forKey: .rawValue)
  }
}

extension PlaceIdentifier: StoredJSONRepresentable {
  /// Writes `{"rawValue": "…"}` as ``encode(to:)`` does, without an encoder's containers.
  public func writeStoredJSON(to object: inout StoredJSONObjectWriter) {
    object.write(rawValue, forKey: "rawValue")
  }

  /// Reads `{"rawValue": "…"}` as ``init(from:)`` does (other keys ignored), without a
  /// decoder's containers.
  public convenience init(storedJSON object: StoredJSONObjectReader) throws {
    self.init(stored: try object.string(forKey: "rawValue"))
  }
}
