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
  /// The value of a member an input leaves out; nil when the member is required.
  static var valueWhenAbsent: Self? { get }
  /// Whether the value is text that the formats' text rules apply to (no control characters,
  /// at most ``TripRecord/maximumTextLength`` scalars).
  static var isText: Bool { get }
  /// JSON Schema's members (OpenAPI 3.0's dialect) for the value: `type` and `format`.
  static var schemaMembers: [(String, JSONValue)] { get }
  /// The value of column `index` of a value row.
  static func read<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self
  /// The value of column `index` of a value row, nil for `NULL`.
  static func readOptional<Model>(_ row: borrowing ValueRow<Model>, at index: Int) throws -> Self?
  /// What `json` holds for an optional field of this type: `.some(nil)` for none, nil when it
  /// holds no value of this type. By default `null` is none.
  static func optional(jsonValue json: JSONValue) -> Self??
}

extension FormatValue {
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

extension FormatValue where Self: PersistableValue {
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
}

/// A field's ``FormatValue`` type (its value's type, optional unwrapped), nil when the formats
/// cannot carry it (a test checks that every field of the domain's models has one).
func formatType<Model>(of field: ModelField<Model>) -> (any FormatValue.Type)? {
  field.valueType as? any FormatValue.Type
}

/// A model's values without its identity in a store: what files, requests, sync feeds and the
/// command line carry, written and read once over the model's field table
/// (`Model.schema.fields`), so that a field declared on the model is carried with no other
/// change.
///
/// Each field holds a value or is not given (an input that left it out); read a field through
/// the model's key path:
///
/// ```swift
/// var stay = FieldValues<LivingAccommodation>()  // a new stay's values, no id
/// stay.name = "Hotel Sakura"
/// stay.latitude = 35.0
/// stay.longitude = 135.7
/// print(stay.name ?? "")  // Hotel Sakura
/// print(stay.address ?? "")  // (empty: a new stay's)
/// print(stay.id as Any)  // nil: not given, a new one is made when it is saved
/// ```
///
/// Cost: O(fields) to make from a model or apply to one, each field a key-path access; a
/// read of one field by key path O(fields) to find it.
@dynamicMemberLookup
public struct FieldValues<Model: PersistentModel>: Sendable, Hashable
where Model.SchemaModel == Model {
  /// The given values as JSON, by field name.
  private var members: [String: JSONValue]

  /// The values of a new model (`Model()`), but for its identity (a unique UUID field), which
  /// is not given: a new one is made when the values are saved as a new model.
  public init() {
    self.init(Model())
    for field in Model.schema.fields where field.isIdentity { members[field.name] = nil }
  }

  /// No value given.
  init(none: Void) { members = [:] }

  /// Every field's value in `model`.
  public init(_ model: Model) {
    self.init(none: ())
    for field in Model.schema.fields {
      guard let type = formatType(of: field),
        let json = type.json(of: model, at: field.keyPath, optional: field.isOptional)
      else { continue }
      members[field.name] = json
    }
  }

  /// The field `keyPath` names: its value, or nil when it is not given. Setting nil leaves it
  /// not given. A key path that is not a field (a relationship) reads nil and cannot be set.
  public subscript<Value: FormatValue>(dynamicMember keyPath: KeyPath<Model, Value>) -> Value? {
    get { Self.name(of: keyPath).flatMap { members[$0] }.flatMap(Value.init(jsonValue:)) }
    set {
      guard let name = Self.name(of: keyPath) else {
        preconditionFailure("\(keyPath) is not a field of \(Model.self)")
      }
      members[name] = newValue?.jsonValue
    }
  }

  /// The value of the field named `name` as JSON, nil when it is not given.
  public subscript(name: String) -> JSONValue? {
    get { members[name] }
    set { members[name] = newValue }
  }

  /// The fields' members in declaration order, those named in `leaving` left out and a field
  /// not given as `null`: a JSON object's members as the formats write them.
  public func jsonMembers(leaving: Set<String> = []) -> [(String, JSONValue)] {
    Model.schema.fields.compactMap { field in
      leaving.contains(field.name) ? nil : (field.name, members[field.name] ?? .null)
    }
  }

  /// Sets every given field of `model` but those named in `leaving`.
  public func apply(to model: Model, leaving: Set<String> = []) {
    for field in Model.schema.fields where !leaving.contains(field.name) {
      guard let json = members[field.name], let type = formatType(of: field) else { continue }
      let assigned = type.assign(json, to: model, at: field.keyPath, optional: field.isOptional)
      precondition(assigned, "\(field.name) holds \(json), not a \(field.valueType)")
    }
  }

  /// A new model (`Model()`, of no context) with the given values: a field not given keeps the
  /// initializer's (a new random id when the id is not given).
  public func newModel() -> Model {
    let model = Model()
    apply(to: model)
    return model
  }

  /// Reads a JSON object's members as the fields of `Model`: each member by its field's
  /// type; a member left out takes its type's value when absent (text empty, flags false,
  /// optionals none), or is a problem when the type has none (numbers, dates) — but for the
  /// model's identity (a unique UUID field), which is then not given. A member that names no
  /// field (and is not in `accepting`) is a problem; fields in `leaving` are not read. Problems
  /// go to `line`, each naming `label`. Nil when any was found.
  static func read(
    _ object: JSONValue, label: String, line: Int?, problems: inout ProblemList,
    leaving: Set<String> = []
  ) -> FieldValues? {
    guard case .object(let given) = object else {
      problems.add(line, "\(label) must be an object")
      return nil
    }
    let before = problems.problems.count
    let fields = Model.schema.fields
    for (key, _) in given where !fields.contains(where: { $0.name == key }) {
      problems.add(line, "\(label): unknown member '\(key)'")
    }
    var values = FieldValues(none: ())
    for field in fields where !leaving.contains(field.name) {
      guard let type = formatType(of: field) else { continue }
      let member = given.first { $0.0 == field.name }?.1
      if member == nil || (member == .null && !field.isOptional) {
        if field.isIdentity { continue }
        let absent: (any FormatValue)? = field.isOptional ? nil : type.valueWhenAbsent
        if field.isOptional {
          values.members[field.name] = .null
        } else if let absent {
          values.members[field.name] = absent.jsonValue
        } else {
          problems.add(line, "\(label): \(field.name) is missing")
        }
        continue
      }
      guard let member, let json = type.normalized(member, optional: field.isOptional) else {
        let expected = field.isOptional ? type.expectation + " or null" : type.expectation
        problems.add(line, "\(label): \(field.name) must be \(expected)")
        continue
      }
      values.members[field.name] = json
    }
    return problems.problems.count == before ? values : nil
  }

  /// The fields read from a value row whose columns from `first` on are `Model.schema.fields`
  /// in order (``keyPaths``).
  init(row: borrowing ValueRow<Model>, from first: Int) throws {
    self.init(none: ())
    for (offset, field) in Model.schema.fields.enumerated() {
      guard let type = formatType(of: field) else { continue }
      members[field.name] = try type.readJSON(row, at: first + offset, optional: field.isOptional)
    }
  }

  /// The key paths of `Model.schema.fields`, in order: what a value row must read for
  /// ``init(row:from:)``.
  static var keyPaths: [PartialKeyPath<Model> & Sendable] {
    Model.schema.fields.map(\.keyPath)
  }

  /// The field name of `keyPath`, nil when it is not a field.
  private static func name(of keyPath: AnyKeyPath) -> String? {
    Model.schema.fields.first { $0.keyPath == keyPath }?.name
  }

  public static func == (lhs: FieldValues, rhs: FieldValues) -> Bool {
    lhs.members == rhs.members
  }

  public func hash(into hasher: inout Hasher) {
    for name in members.keys.sorted() {
      hasher.combine(name)
      hasher.combine(members[name]!)
    }
  }
}

extension FormatValue {
  /// `json` as this type writes it (a UUID lowercased), nil when it holds no value of it.
  static func normalized(_ json: JSONValue, optional: Bool) -> JSONValue? {
    optional
      ? Self.optional(jsonValue: json).map { $0?.jsonValue ?? .null }
      : Self(jsonValue: json)?.jsonValue
  }
}

extension ModelField {
  /// Whether the field is the model's identity in files and requests: a unique UUID, which an
  /// input may leave out (a new one is made).
  var isIdentity: Bool { isUnique && valueType == UUID.self && !isOptional }
}

extension FieldValues: CustomStringConvertible {
  /// The values as a JSON object.
  public var description: String { JSONValue.object(jsonMembers()).rendered() }
}

/// A model whose values keep rules beyond their fields' types: what ``FieldValues/validate()``
/// checks, beside the rules every text field keeps.
public protocol FieldRules: PersistentModel where SchemaModel == Self {
  /// The rules `values` break beyond each field's type and the text rules, as (field,
  /// reason); empty when it keeps them. A field not given is not checked.
  static func violations(of values: FieldValues<Self>) -> [(field: String, reason: String)]
}

extension FieldValues where Model: FieldRules {
  /// Every rule the values break, as (field, reason): the model's rules
  /// (``FieldRules/violations(of:)``), then each text field's (no control characters, at most
  /// ``TripRecord/maximumTextLength`` Unicode scalars); empty when they keep them all.
  public var violations: [(field: String, reason: String)] {
    var found = Model.violations(of: self)
    for field in Model.schema.fields {
      guard let type = formatType(of: field), type.isText,
        case .string(let text)? = members[field.name]
      else { continue }
      found += TripRecord.textViolations(text, field: field.name, label: field.name)
    }
    return found
  }

  /// Throws ``TripPlannerError/Code/invalidTrip`` naming the first field at fault, its message
  /// every rule broken.
  public func validate() throws { try TripRecord.throwIfAny(violations) }
}
