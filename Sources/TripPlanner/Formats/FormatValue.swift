import Foundation
import Persistence

/// A type a model's field may have for the trip formats to carry it: how JSON writes and reads
/// it, what JSON Schema says of it, what an input leaving it out means, and how a value row
/// reads it. One conformance per type (and `Optional` of any of them) serves every field of
/// that type on every model: ``FieldValues``, its JSON reader and writer, ``FieldSchema`` and
/// the store's plan reads are written once over it.
public protocol FormatValue: Sendable {
  /// The value as JSON writes it.
  var jsonValue: JSONValue { get }
  /// The value `json` holds; nil when it holds no value of this type.
  init?(jsonValue json: JSONValue)
  /// What a member that holds no value of this type must be, for messages: `a number`.
  static var expectation: String { get }
  /// The value a text holds, as a command line or a CSV field gives it; nil when it holds
  /// none. By default the text as a JSON string holds it (text, ids, dates).
  init?(text: String)
  /// A placeholder for the value in a command's help: `text`, `number`.
  static var placeholder: String { get }
  /// The value of a member an input leaves out; nil when the member is required.
  static var valueWhenAbsent: Self? { get }
  /// Whether the value is text that the formats' text rules apply to (no control characters,
  /// at most ``TripRecord/maximumTextLength`` scalars).
  static var isText: Bool { get }
  /// JSON Schema's members (OpenAPI 3.0's dialect) for the value: `type` and `format`.
  static var schemaMembers: [(String, JSONValue)] { get }
  /// The JSON of a stored value of this type (or its optional when `optional`); nil when the
  /// type is not kept natively (`.codable`), whose rows are read with ``read(_:at:)``.
  static func json(stored: SQLValue, optional: Bool) throws -> JSONValue?
  /// The value of column `index` of a value row.
  static func read<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self
  /// The value of column `index` of a value row, nil for `NULL`.
  static func readOptional<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self?
  /// The JSON of the next attribute of a model's row, `keyPath` (of this type, or its optional
  /// when `optional`): how ``FieldValues`` is a `ModelValue`.
  static func next<Model>(_ row: inout ModelRow<Model>, _ keyPath: AnyKeyPath, optional: Bool)
    throws -> JSONValue
  /// What `json` holds for an optional field of this type: `.some(nil)` for none, nil when it
  /// holds no value of this type. By default `null` is none.
  static func optional(jsonValue json: JSONValue) -> Self??
}

extension FormatValue {
  public init?(text: String) {
    guard let value = Self(jsonValue: .string(text)) else { return nil }
    self = value
  }
  public static var placeholder: String { "text" }
  public static var valueWhenAbsent: Self? { nil }
  public static var isText: Bool { false }
  public static func optional(jsonValue json: JSONValue) -> Self?? {
    json == .null ? .some(nil) : Self(jsonValue: json).map { .some($0) }
  }

  /// The JSON of the property `keyPath` of `model` (of this type, or its optional when
  /// `optional`); nil when the key path is not one.
  static func json<Model>(of model: Model, at keyPath: AnyKeyPath, optional: Bool) -> JSONValue? {
    if optional {
      guard let keyPath = keyPath as? KeyPath<Model, Self?> else { return nil }
      return model[keyPath: keyPath]?.jsonValue ?? .null
    }
    guard let keyPath = keyPath as? KeyPath<Model, Self> else { return nil }
    return model[keyPath: keyPath].jsonValue
  }

  /// Sets the property `keyPath` of `model` to the value `json` holds; false when the key path
  /// is not one or `json` holds no value of the property's type.
  static func assign<Model>(
    _ json: JSONValue, to model: Model, at keyPath: AnyKeyPath, optional: Bool
  )
    -> Bool
  {
    if optional {
      guard let keyPath = keyPath as? ReferenceWritableKeyPath<Model, Self?>,
        let value = Self.optional(jsonValue: json)
      else { return false }
      model[keyPath: keyPath] = value
      return true
    }
    guard let keyPath = keyPath as? ReferenceWritableKeyPath<Model, Self>,
      let value = Self(jsonValue: json)
    else { return false }
    model[keyPath: keyPath] = value
    return true
  }

  /// The JSON of column `index` of a value row (a value of this type, or its optional).
  static func readJSON<Model>(_ row: borrowing ValueRow<Model>, at index: Int, optional: Bool)
    throws -> JSONValue
  {
    optional
      ? try readOptional(row, at: index)?.jsonValue ?? .null : try read(row, at: index).jsonValue
  }
}

extension FormatValue {
  /// None: a type without a stored form of its own is read with ``read(_:at:)``.
  public static func json(stored: SQLValue, optional: Bool) throws -> JSONValue? { nil }
}

extension FormatValue where Self: PersistableValue {
  /// `Self(sqlValue:)`'s JSON: no generic type is made per call (a value row read through
  /// ``read(_:at:)`` looked up `Optional<Self>`'s metadata for each optional column).
  public static func json(stored: SQLValue, optional: Bool) throws -> JSONValue? {
    if optional, stored == .null { return .null }
    return try Self(sqlValue: stored).jsonValue
  }
  public static func next<Model>(
    _ row: inout ModelRow<Model>, _ keyPath: AnyKeyPath, optional: Bool
  ) throws -> JSONValue {
    if optional {
      // swift-format-ignore: NeverForceUnwrap
      return try row.next(keyPath as! KeyPath<Model, Self?>).jsonValue
    }
    // swift-format-ignore: NeverForceUnwrap
    return try row.next(keyPath as! KeyPath<Model, Self>).jsonValue
  }
  public static func read<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self {
    try row.value(Self.self, at: index)
  }
  public static func readOptional<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws
    -> Self?
  {
    try row.value(Self?.self, at: index)
  }
}

extension String: FormatValue {
  public var jsonValue: JSONValue { .string(self) }
  public init?(jsonValue json: JSONValue) {
    guard case .string(let text) = json else { return nil }
    self = text
  }
  public static var expectation: String { "a string" }
  /// Text left out is empty.
  public static var valueWhenAbsent: String? { "" }
  public static var isText: Bool { true }
  public static var schemaMembers: [(String, JSONValue)] { [("type", .string("string"))] }
}

extension Double: FormatValue {
  public var jsonValue: JSONValue { .number(self) }
  public init?(jsonValue json: JSONValue) {
    guard case .number(let number) = json else { return nil }
    self = number
  }
  public static var expectation: String { "a number" }
  /// A decimal number as people write coordinates (``TripRecord/parseNumber(_:)``).
  public init?(text: String) {
    guard let number = TripRecord.parseNumber(text) else { return nil }
    self = number
  }
  public static var placeholder: String { "number" }
  public static var schemaMembers: [(String, JSONValue)] {
    [("type", .string("number")), ("format", .string("double"))]
  }
}

extension Int: FormatValue {
  public var jsonValue: JSONValue { .number(Double(self)) }
  /// A whole number that an `Int` holds exactly (below 2⁵³ in magnitude: a JSON number is a
  /// double).
  public init?(jsonValue json: JSONValue) {
    guard case .number(let number) = json, number == number.rounded(),
      abs(number) <= 9_007_199_254_740_992
    else { return nil }
    self = Int(number)
  }
  public static var expectation: String { "a whole number" }
  public init?(text: String) {
    guard let number = Int(text) else { return nil }
    self = number
  }
  public static var placeholder: String { "n" }
  /// A count left out is 0.
  public static var valueWhenAbsent: Int? { 0 }
  public static var schemaMembers: [(String, JSONValue)] { [("type", .string("integer"))] }
}

extension Bool: FormatValue {
  public var jsonValue: JSONValue { .bool(self) }
  public init?(jsonValue json: JSONValue) {
    guard case .bool(let value) = json else { return nil }
    self = value
  }
  public static var expectation: String { "true or false" }
  public init?(text: String) {
    switch text {
    case "true": self = true
    case "false": self = false
    default: return nil
    }
  }
  public static var placeholder: String { "true|false" }
  /// A flag left out is false.
  public static var valueWhenAbsent: Bool? { false }
  public static var schemaMembers: [(String, JSONValue)] { [("type", .string("boolean"))] }
}

extension UUID: FormatValue {
  /// Lowercase, as every format writes ids.
  public var jsonValue: JSONValue { .string(lowercasedString) }
  public init?(jsonValue json: JSONValue) {
    guard case .string(let text) = json, let id = UUID(uuidString: text) else { return nil }
    self = id
  }
  public static var expectation: String { "a UUID" }
  public static var placeholder: String { "uuid" }
  public static var schemaMembers: [(String, JSONValue)] {
    [("type", .string("string")), ("format", .string("uuid"))]
  }
}

extension Date: FormatValue {
  /// An RFC 3339 instant (`2027-01-01T00:00:00Z`).
  public var jsonValue: JSONValue { .string(formatFileDate(self, dayOnly: false)) }
  /// An ISO 8601 instant with a zone, or a day (`YYYY-MM-DD`, its start in UTC).
  public init?(jsonValue json: JSONValue) {
    guard case .string(let text) = json, let date = TripDates.parse(text) else { return nil }
    self = date
  }
  public static var expectation: String { "a date (ISO 8601 with a zone, or YYYY-MM-DD)" }
  public static var placeholder: String { "date" }
  public static var schemaMembers: [(String, JSONValue)] {
    [("type", .string("string")), ("format", .string("date-time"))]
  }
}

extension PlaceIdentifier: FormatValue {
  /// Its raw value.
  public var jsonValue: JSONValue { .string(rawValue) }
  public convenience init?(jsonValue json: JSONValue) {
    guard case .string(let text) = json else { return nil }
    self.init(rawValue: text)
  }
  public static var expectation: String { "a string that is not blank" }
  public static var placeholder: String { "id" }
  public static var isText: Bool { true }
  public static var schemaMembers: [(String, JSONValue)] { [("type", .string("string"))] }
  public static func read<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self {
    guard let value = try readOptional(row, at: index) else {
      throw TripPlannerError(code: .store, message: "A place identifier is missing.")
    }
    return value
  }
  public static func readOptional<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws
    -> Self?
  {
    try row.decoded(Self.self, at: index)
  }
  public static func next<Model>(
    _ row: inout ModelRow<Model>, _ keyPath: AnyKeyPath, optional: Bool
  ) throws -> JSONValue {
    if optional {
      // swift-format-ignore: NeverForceUnwrap
      return try row.decoded(keyPath as! KeyPath<Model, PlaceIdentifier?>).jsonValue
    }
    // swift-format-ignore: NeverForceUnwrap
    return try row.decoded(keyPath as! KeyPath<Model, PlaceIdentifier>).jsonValue
  }
  /// A blank string is no place, as `null` is.
  public static func optional(jsonValue json: JSONValue) -> PlaceIdentifier?? {
    switch json {
    case .null: return .some(nil)
    case .string(let text): return .some(PlaceIdentifier(rawValue: text))
    default: return nil
    }
  }
}

extension Optional: FormatValue where Wrapped: FormatValue {
  /// The value's, or `null`.
  public var jsonValue: JSONValue { self?.jsonValue ?? .null }
  public init?(jsonValue json: JSONValue) {
    guard let value = Wrapped.optional(jsonValue: json) else { return nil }
    self = value
  }
  public static var expectation: String { Wrapped.expectation + " or null" }
  /// An empty text is none (`--notes ''`); a blank place identifier too.
  public init?(text: String) {
    if text.isEmpty {
      self = .none
      return
    }
    if let value = Wrapped(text: text) {
      self = value
    } else if case .some(.none) = Wrapped.optional(jsonValue: .string(text)) {
      self = .none  // text that is none (a blank place identifier)
    } else {
      return nil
    }
  }
  public static var placeholder: String { Wrapped.placeholder }
  /// Left out is none.
  public static var valueWhenAbsent: Wrapped?? { .some(nil) }
  public static var isText: Bool { Wrapped.isText }
  public static var schemaMembers: [(String, JSONValue)] {
    Wrapped.schemaMembers + [("nullable", .bool(true))]
  }
  public static func read<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self {
    try Wrapped.readOptional(row, at: index)
  }
  public static func readOptional<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws
    -> Self?
  {
    .some(try Wrapped.readOptional(row, at: index))
  }
  public static func next<Model>(
    _ row: inout ModelRow<Model>, _ keyPath: AnyKeyPath, optional: Bool
  ) throws -> JSONValue {
    try Wrapped.next(&row, keyPath, optional: true)
  }
  public static func json(stored: SQLValue, optional: Bool) throws -> JSONValue? {
    try Wrapped.json(stored: stored, optional: true)
  }
}
