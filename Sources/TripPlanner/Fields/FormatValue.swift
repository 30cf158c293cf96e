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
  /// The value as ``FieldValues`` holds it; its ``FieldValue/jsonValue`` is ``jsonValue``. By
  /// default ``FieldValue/json(_:)``.
  var fieldValue: FieldValue { get }
  /// The value `value` holds; nil when it holds no value of this type.
  init?(fieldValue value: FieldValue)
  /// What a member that holds no value of this type must be, for messages: `a number`.
  static var expectation: String { get }
  /// The value a text holds, as a command line or a CSV field gives it; nil when it holds
  /// none. By default the text as a JSON string holds it (text, ids, dates).
  init?(text: String)
  /// What a text that holds no value of this type must be, for messages: `a decimal number
  /// (such as -33.86 or 151.2)`. By default ``expectation``.
  static var textExpectation: String { get }
  /// A placeholder for the value in a command's help: `text`, `number`.
  static var placeholder: String { get }
  /// The value of a member an input leaves out; nil when the member is required.
  static var valueWhenAbsent: Self? { get }
  /// Whether the value is text that the formats' text rules apply to (no control characters,
  /// at most ``TripRecord/maximumTextLength`` scalars).
  static var isText: Bool { get }
  /// JSON Schema's members (OpenAPI 3.0's dialect) for the value: `type` and `format`.
  static var schemaMembers: [(String, JSONValue)] { get }
  /// The field value of a stored value of this type (or its optional when `optional`); nil
  /// when the type is not kept natively (`.codable`), whose rows are read with
  /// ``read(_:at:)``.
  static func fieldValue(stored: SQLValue, optional: Bool) throws -> FieldValue?
  /// The value of column `index` of a value row.
  static func read<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self
  /// The value of column `index` of a value row, nil for `NULL`.
  static func readOptional<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self?
  /// The field value of the next attribute of a model's row, `keyPath` (of this type, or its
  /// optional when `optional`): how ``FieldValues`` is a `ModelValue`.
  static func next<Model>(_ row: inout ModelRow<Model>, _ keyPath: AnyKeyPath, optional: Bool)
    throws -> FieldValue
  /// What `json` holds for an optional field of this type: `.some(nil)` for none, nil when it
  /// holds no value of this type. By default `null` is none.
  static func optional(jsonValue json: JSONValue) -> Self??
}

extension FormatValue {
  public var fieldValue: FieldValue { .json(jsonValue) }
  public init?(fieldValue value: FieldValue) {
    guard case .json(let json) = value, let result = Self(jsonValue: json) else { return nil }
    self = result
  }
  public init?(text: String) {
    guard let value = Self(jsonValue: .string(text)) else { return nil }
    self = value
  }
  public static var placeholder: String { "text" }
  public static var textExpectation: String { expectation }
  public static var valueWhenAbsent: Self? { nil }
  public static var isText: Bool { false }
  public static func optional(jsonValue json: JSONValue) -> Self?? {
    json == .null ? .some(nil) : Self(jsonValue: json).map { .some($0) }
  }

  /// The field value of the property `keyPath` of `model` (of this type, or its optional when
  /// `optional`); nil when the key path is not one.
  static func fieldValue<Model>(of model: Model, at keyPath: AnyKeyPath, optional: Bool)
    -> FieldValue?
  {
    if optional {
      guard let keyPath = keyPath as? KeyPath<Model, Self?> else { return nil }
      return model[keyPath: keyPath]?.fieldValue ?? .null
    }
    guard let keyPath = keyPath as? KeyPath<Model, Self> else { return nil }
    return model[keyPath: keyPath].fieldValue
  }

  /// Sets the property `keyPath` of `model` to the value `value` holds; false when the key
  /// path is not one or `value` holds no value of the property's type.
  static func assign<Model>(
    _ value: FieldValue, to model: Model, at keyPath: AnyKeyPath, optional: Bool
  ) -> Bool {
    if optional {
      guard let keyPath = keyPath as? ReferenceWritableKeyPath<Model, Self?> else { return false }
      if value == .null {
        model[keyPath: keyPath] = nil
        return true
      }
      guard let held = Self(fieldValue: value) else { return false }
      model[keyPath: keyPath] = held
      return true
    }
    guard let keyPath = keyPath as? ReferenceWritableKeyPath<Model, Self>,
      let held = Self(fieldValue: value)
    else { return false }
    model[keyPath: keyPath] = held
    return true
  }

  /// The field value of column `index` of a value row (a value of this type, or its optional).
  static func readField<Model>(_ row: borrowing ValueRow<Model>, at index: Int, optional: Bool)
    throws -> FieldValue
  {
    optional
      ? try readOptional(row, at: index)?.fieldValue ?? .null
      : try read(row, at: index).fieldValue
  }
}

extension FormatValue {
  /// None: a type without a stored form of its own is read with ``read(_:at:)``.
  public static func fieldValue(stored: SQLValue, optional: Bool) throws -> FieldValue? { nil }
}

extension FormatValue where Self: PersistableValue {
  /// `Self(sqlValue:)`'s field value: no generic type is made per call (a value row read
  /// through ``read(_:at:)`` looked up `Optional<Self>`'s metadata for each optional column).
  public static func fieldValue(stored: SQLValue, optional: Bool) throws -> FieldValue? {
    if optional, stored == .null { return .null }
    return try Self(sqlValue: stored).fieldValue
  }
  public static func next<Model>(
    _ row: inout ModelRow<Model>, _ keyPath: AnyKeyPath, optional: Bool
  ) throws -> FieldValue {
    if optional {
      // swift-format-ignore: NeverForceUnwrap
      return try row.next(keyPath as! KeyPath<Model, Self?>)?.fieldValue ?? .null
    }
    // swift-format-ignore: NeverForceUnwrap
    return try row.next(keyPath as! KeyPath<Model, Self>).fieldValue
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
  public var fieldValue: FieldValue { .text(self) }
  public init?(fieldValue value: FieldValue) {
    guard case .text(let text) = value else { return nil }
    self = text
  }
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
  public var fieldValue: FieldValue { .number(self) }
  public init?(fieldValue value: FieldValue) {
    guard case .number(let number) = value else { return nil }
    self = number
  }
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
  public static var textExpectation: String { "a decimal number (such as -33.86 or 151.2)" }
  public static var schemaMembers: [(String, JSONValue)] {
    [("type", .string("number")), ("format", .string("double"))]
  }
}

extension Int: FormatValue {
  public var jsonValue: JSONValue { .number(Double(self)) }
  public var fieldValue: FieldValue { .integer(self) }
  public init?(fieldValue value: FieldValue) {
    guard case .integer(let integer) = value else { return nil }
    self = integer
  }
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
  public var fieldValue: FieldValue { .flag(self) }
  public init?(fieldValue value: FieldValue) {
    guard case .flag(let flag) = value else { return nil }
    self = flag
  }
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
  public var fieldValue: FieldValue { .uuid(self) }
  public init?(fieldValue value: FieldValue) {
    guard case .uuid(let id) = value else { return nil }
    self = id
  }
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
  public var fieldValue: FieldValue { .date(self) }
  public init?(fieldValue value: FieldValue) {
    guard case .date(let date) = value else { return nil }
    self = date
  }
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
  /// Its raw value, as text.
  public var fieldValue: FieldValue { .text(rawValue) }
  public convenience init?(fieldValue value: FieldValue) {
    guard case .text(let text) = value else { return nil }
    self.init(rawValue: text)
  }
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
  ) throws -> FieldValue {
    if optional {
      // swift-format-ignore: NeverForceUnwrap
      return try row.decoded(keyPath as! KeyPath<Model, PlaceIdentifier?>)?.fieldValue ?? .null
    }
    // swift-format-ignore: NeverForceUnwrap
    return try row.decoded(keyPath as! KeyPath<Model, PlaceIdentifier>).fieldValue
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
  /// The value's, or ``FieldValue/null``.
  public var fieldValue: FieldValue { self?.fieldValue ?? .null }
  public init?(fieldValue value: FieldValue) {
    if value == .null {
      self = .none
    } else if let held = Wrapped(fieldValue: value) {
      self = held
    } else {
      return nil
    }
  }
  public init?(jsonValue json: JSONValue) {
    guard let value = Wrapped.optional(jsonValue: json) else { return nil }
    self = value
  }
  public static var expectation: String { Wrapped.expectation + " or null" }
  /// The wrapped type's: an empty text is none.
  public static var textExpectation: String { Wrapped.textExpectation }
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
  ) throws -> FieldValue {
    try Wrapped.next(&row, keyPath, optional: true)
  }
  public static func fieldValue(stored: SQLValue, optional: Bool) throws -> FieldValue? {
    try Wrapped.fieldValue(stored: stored, optional: true)
  }
}
