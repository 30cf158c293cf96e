import Foundation
import Persistence

/// A field's ``FormatValue`` type (its value's type, optional unwrapped), nil when the formats
/// cannot carry it (a test checks that every field of the domain's models has one).
public func formatType<Model>(of field: ModelField<Model>) -> (any FormatValue.Type)? {
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

  /// The value of the model's identity (its unique UUID field), nil when it is not given or
  /// the model has none.
  public var identity: UUID? {
    Model.schema.fields.first(where: \.isIdentity).flatMap { members[$0.name] }.flatMap(
      UUID.init(jsonValue:))
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
  /// The JSON of the value `text` holds (of this type, or its optional when `optional`), nil
  /// when it holds none.
  public static func json(text: String, optional: Bool) -> JSONValue? {
    optional ? Self?(text: text)?.jsonValue : Self(text: text)?.jsonValue
  }

  /// `json` as this type writes it (a UUID lowercased), nil when it holds no value of it.
  static func normalized(_ json: JSONValue, optional: Bool) -> JSONValue? {
    optional
      ? Self.optional(jsonValue: json).map { $0?.jsonValue ?? .null }
      : Self(jsonValue: json)?.jsonValue
  }
}

extension FieldValues: ModelValue {
  /// The values read straight from a model's row by a value fetch (`ModelContext.fetch(_:as:)`):
  /// no model is made; every field is read, its relationships are not. O(fields).
  public init(row: inout ModelRow<Model>) throws {
    self.init(none: ())
    for field in Model.schema.fields {
      guard let type = formatType(of: field) else {
        throw TripPlannerError(
          code: .store,
          message:
            "\(Model.self).\(field.name) is a \(field.valueType), which the formats cannot carry.")
      }
      members[field.name] = try type.next(&row, field.keyPath, optional: field.isOptional)
    }
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
  /// The most Unicode scalars the text field `name` may hold; by default
  /// ``TripRecord/maximumTextLength``.
  static func maximumLength(of name: String) -> Int
}

extension FieldRules {
  public static func maximumLength(of name: String) -> Int { TripRecord.maximumTextLength }
}

extension FieldValues where Model: FieldRules {
  /// Every rule the values break, as (field, reason): the model's rules
  /// (``FieldRules/violations(of:)``), then each text field's (no control characters, at most
  /// ``FieldRules/maximumLength(of:)`` Unicode scalars); empty when they keep them all.
  public var violations: [(field: String, reason: String)] {
    var found = Model.violations(of: self)
    for field in Model.schema.fields {
      guard let type = formatType(of: field), type.isText,
        case .string(let text)? = members[field.name]
      else { continue }
      found += TripRecord.textViolations(
        text, field: field.name, label: field.name, maximum: Model.maximumLength(of: field.name))
    }
    return found
  }

  /// Throws ``TripPlannerError/Code/invalidTrip`` naming the first field at fault, its message
  /// every rule broken.
  public func validate() throws { try TripRecord.throwIfAny(violations) }
}
