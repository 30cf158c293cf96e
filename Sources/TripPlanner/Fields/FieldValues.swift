import Foundation
import Persistence
import Synchronization

/// A field's ``FormatValue`` type (its value's type, optional unwrapped), nil when the formats
/// cannot carry it (a test checks that every field of the domain's models has one).
public func formatType<Model>(of field: ModelField<Model>) -> (any FormatValue.Type)? {
  field.valueType as? any FormatValue.Type
}

/// What ``FieldValues`` needs of a model's fields, made once per model type: each field's
/// name, ``FormatValue`` type, key path, optionality and whether it is the identity, and the
/// index of each field by key path and by name.
final class FieldTable: Sendable {
  struct Entry: Sendable {
    let name: String
    let type: (any FormatValue.Type)?
    nonisolated(unsafe) let keyPath: AnyKeyPath
    let isOptional: Bool
    let isIdentity: Bool
    let isCodable: Bool
    /// The field's member name as compact JSON writes it, with its colon (`"name":`): written
    /// for every field of every object of a page.
    let compactKey: [UInt8]
  }

  let entries: [Entry]
  nonisolated(unsafe) let byKeyPath: [AnyKeyPath: Int]
  let byName: [String: Int]
  /// The index of the identity, if the model has one.
  let identity: Int?
  /// A new model's values, but for its identity (``FieldValues/init()``), once made.
  let newValues = Mutex<[FieldValue?]?>(nil)

  private init<Model>(_ fields: [ModelField<Model>]) {
    entries = fields.map {
      var key: [UInt8] = []
      JSONValue.writeString($0.name, into: &key)
      key.append(UInt8(ascii: ":"))
      return Entry(
        name: $0.name, type: formatType(of: $0), keyPath: $0.keyPath, isOptional: $0.isOptional,
        isIdentity: $0.isIdentity, isCodable: $0.isCodable, compactKey: key)
    }
    byKeyPath = Dictionary(
      fields.enumerated().map { ($0.element.keyPath as AnyKeyPath, $0.offset) },
      uniquingKeysWith: { first, _ in first })
    byName = Dictionary(
      fields.enumerated().map { ($0.element.name, $0.offset) },
      uniquingKeysWith: { first, _ in first })
    identity = fields.firstIndex { $0.isIdentity }
  }

  private static let tables = Mutex<[ObjectIdentifier: FieldTable]>([:])

  /// `Model`'s table: made on first use, then a lookup under a lock.
  static func of<Model: PersistentModel>(_: Model.Type) -> FieldTable
  where Model.SchemaModel == Model {
    tables.withLock { tables in
      if let table = tables[ObjectIdentifier(Model.self)] { return table }
      let table = FieldTable(Model.schema.fields)
      tables[ObjectIdentifier(Model.self)] = table
      return table
    }
  }
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
/// Cost: O(fields) to make from a model, a row or JSON, or to apply to a model, each field a
/// key-path access; one field read by key path, a lookup of the key path and the conversion
/// from its JSON. The model's field table is made once per type (`FieldTable`).
@dynamicMemberLookup
public struct FieldValues<Model: PersistentModel>: Sendable, Hashable
where Model.SchemaModel == Model {
  /// Each field's value, in declaration order; nil where it is not given.
  private var values: [FieldValue?]
  /// The model's field table, kept so that a read looks it up without a lock.
  private let fields: FieldTable

  /// The model's field table.
  static var table: FieldTable { FieldTable.of(Model.self) }

  /// The values of a new model (`Model()`), but for its identity (a unique UUID field), which
  /// is not given: a new one is made when the values are saved as a new model.
  ///
  /// The values of `Model()` are read once per model type: an initializer that gives each
  /// new model other values (but for a new random identity) is not read again.
  public init() {
    fields = Self.table
    if let made = fields.newValues.withLock({ $0 }) {
      values = made
      return
    }
    values = Self(Model()).values
    if let identity = fields.identity { values[identity] = nil }
    fields.newValues.withLock { [values] in $0 = values }
  }

  /// No value given.
  init(none: Void) {
    fields = Self.table
    values = Array(repeating: nil, count: fields.entries.count)
  }

  /// Every field's value in `model`.
  public init(_ model: Model) {
    fields = Self.table
    values = fields.entries.map { entry in
      entry.type?.fieldValue(of: model, at: entry.keyPath, optional: entry.isOptional)
    }
  }

  /// The field `keyPath` names: its value, or nil when it is not given. Setting nil leaves it
  /// not given. A key path that is not a field (a relationship) reads nil and cannot be set.
  public subscript<Value: FormatValue>(dynamicMember keyPath: KeyPath<Model, Value>) -> Value? {
    get { fields.byKeyPath[keyPath].flatMap { values[$0] }.flatMap(Value.init(fieldValue:)) }
    set {
      guard let index = fields.byKeyPath[keyPath] else {
        preconditionFailure("\(keyPath) is not a field of \(Model.self)")
      }
      values[index] = newValue?.fieldValue
    }
  }

  /// The value of the model's identity (its unique UUID field), nil when it is not given or
  /// the model has none.
  public var identity: UUID? {
    guard let identity = fields.identity, case .uuid(let id)? = values[identity] else {
      return nil
    }
    return id
  }

  /// The value of the field named `name`, nil when it is not given or there is no such field.
  func fieldValue(named name: String) -> FieldValue? {
    fields.byName[name].flatMap { values[$0] }
  }

  /// The names of the fields the formats carry that are not given, but the one at index
  /// `skipped`, in declaration order.
  func fieldsNotGiven(but skipped: Int?) -> [String] {
    values.indices.compactMap {
      $0 == skipped || values[$0] != nil || fields.entries[$0].type == nil
        ? nil : fields.entries[$0].name
    }
  }

  /// The value of the field named `name` as JSON, nil when it is not given or there is no
  /// such field.
  public subscript(name: String) -> JSONValue? {
    fields.byName[name].flatMap { values[$0]?.jsonValue }
  }

  /// Sets the field named `name` to the value `json` holds (as the field's type reads JSON: a
  /// UUID in any case, `null` for none of an optional), or leaves it not given for nil.
  ///
  /// - Throws: ``TripPlannerError/Code/invalidInput`` naming the field when there is no such
  ///   field or `json` holds no value of its type; the values are unchanged.
  public mutating func set(_ name: String, _ json: JSONValue?) throws {
    guard let index = fields.byName[name], let type = fields.entries[index].type else {
      throw TripPlannerError(
        code: .invalidInput, message: "\(Model.self) has no field '\(name)'.", field: name)
    }
    guard let json else {
      values[index] = nil
      return
    }
    let optional = fields.entries[index].isOptional
    guard let value = type.normalized(json, optional: optional) else {
      let expected = optional ? type.expectation + " or null" : type.expectation
      throw TripPlannerError(
        code: .invalidInput, message: "\(name) must be \(expected).", field: name)
    }
    values[index] = value
  }

  /// The fields' members in declaration order, those named in `leaving` left out and a field
  /// not given as `null`: a JSON object's members as the formats write them.
  public func jsonMembers(leaving: Set<String> = []) -> [(String, JSONValue)] {
    zip(fields.entries, values).compactMap { entry, value in
      leaving.contains(entry.name) ? nil : (entry.name, value?.jsonValue ?? .null)
    }
  }

  /// Each field's name and value (nil when it is not given) in declaration order, those named
  /// in `leaving` left out.
  public func fieldValues(leaving: Set<String> = []) -> [(String, FieldValue?)] {
    zip(fields.entries, values).compactMap { entry, value in
      leaving.contains(entry.name) ? nil : (entry.name, value)
    }
  }

  /// Writes ``jsonMembers(leaving:)`` compactly as a JSON object: the bytes
  /// `JSONValue.object(jsonMembers(leaving:)).utf8()` makes, without making them.
  /// O(size of the text).
  public func writeJSONObject(leaving: Set<String> = [], into output: inout [UInt8]) {
    output.append(UInt8(ascii: "{"))
    writeJSONMembers(leaving: leaving, after: false, into: &output)
    output.append(UInt8(ascii: "}"))
  }

  /// Writes ``jsonMembers(leaving:)``'s `"name":value` pairs compactly, separated by commas,
  /// the first preceded by one when `after` (members written before them).
  public func writeJSONMembers(leaving: Set<String> = [], after: Bool, into output: inout [UInt8]) {
    writeJSONMembers(skipping: Self.mask(leaving), after: after, into: &output)
  }

  /// For each field in declaration order, whether it is named in `names`: made once for a
  /// writer that leaves the same fields out of every object it writes.
  static func mask(_ names: Set<String>) -> [Bool] { table.entries.map { names.contains($0.name) } }

  /// Writes the members of the fields `skipping` does not mark (``mask(_:)``; all for nil), as
  /// ``writeJSONMembers(leaving:after:into:)`` does; indented as an object's members at
  /// `depth` when `pretty`, as ``JSONValue/rendered(pretty:)`` indents them.
  func writeJSONMembers(
    skipping: [Bool]?, after: Bool, pretty: Bool = false, depth: Int = 0,
    into output: inout [UInt8]
  ) {
    var first = !after
    let entries = fields.entries
    // Read in place: no copy of a value (and of its text) per member.
    values.withUnsafeBufferPointer { values in
      for index in values.indices where skipping?[index] != true {
        if !first { output.append(UInt8(ascii: ",")) }
        first = false
        if pretty {
          JSONValue.newline(into: &output, depth: depth + 1)
          JSONValue.writeString(entries[index].name, into: &output)
          output.append(contentsOf: ": ".utf8)
        } else {
          entries[index].compactKey.withUnsafeBufferPointer { output.append(contentsOf: $0) }
        }
        if let value = values[index] {
          value.writeJSON(into: &output)
        } else {
          output.append(contentsOf: "null".utf8)
        }
      }
    }
  }

  /// Sets every given field of `model` but those named in `leaving`.
  public func apply(to model: Model, leaving: Set<String> = []) {
    for (entry, value) in zip(fields.entries, values) where !leaving.contains(entry.name) {
      guard let value, let type = entry.type else { continue }
      let assigned = type.assign(value, to: model, at: entry.keyPath, optional: entry.isOptional)
      precondition(assigned, "\(entry.name) holds \(value), not a \(type)")
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
  /// field, or a field in `leaving` (which are not read), is a problem, unless `other` names
  /// it (members the caller reads). Problems go to `line`, each after `label: ` (nothing for
  /// an empty label). Nil when any was found.
  ///
  /// Cost: O(fields × members).
  static func read(
    _ object: JSONValue, label: String, line: Int?, problems: inout ProblemList,
    leaving: Set<String> = [], other: Set<String> = []
  ) -> FieldValues? {
    let prefix = label.isEmpty ? "" : label + ": "
    guard case .object(let given) = object else {
      problems.add(line, label.isEmpty ? "expected an object" : "\(label) must be an object")
      return nil
    }
    let before = problems.problems.count
    let table = Self.table
    for (key, _) in given
    where (table.byName[key] == nil || leaving.contains(key)) && !other.contains(key) {
      problems.add(line, "\(prefix)unknown member '\(key)'")
    }
    var values = FieldValues(none: ())
    for (index, field) in table.entries.enumerated() where !leaving.contains(field.name) {
      guard let type = field.type else { continue }
      let member = given.first { $0.0 == field.name }?.1
      if member == nil || (member == .null && !field.isOptional) {
        if field.isIdentity { continue }
        if field.isOptional {
          values.values[index] = .null
        } else if let absent = type.valueWhenAbsent {
          values.values[index] = absent.fieldValue
        } else {
          problems.add(line, "\(prefix)\(field.name) is missing")
        }
        continue
      }
      guard let member, let value = type.normalized(member, optional: field.isOptional) else {
        let expected = field.isOptional ? type.expectation + " or null" : type.expectation
        problems.add(line, "\(prefix)\(field.name) must be \(expected)")
        continue
      }
      values.values[index] = value
    }
    return problems.problems.count == before ? values : nil
  }

  /// The fields read from a value row whose columns from `first` on are `Model.schema.fields`
  /// in order (``keyPaths``).
  init(row: borrowing ValueRow<Model>, from first: Int) throws {
    fields = Self.table
    let entries = fields.entries
    values = []
    values.reserveCapacity(entries.count)
    for (offset, entry) in entries.enumerated() {
      guard let type = entry.type else {
        values.append(nil)
        continue
      }
      // A native value through its stored form; a `.codable` one (or a type without a stored
      // form) decoded by the row.
      let stored =
        entry.isCodable
        ? nil
        : try row.storedValue(at: first + offset) {
          try type.fieldValue(stored: $0, optional: entry.isOptional)
        }
      values.append(
        try stored ?? type.readField(row, at: first + offset, optional: entry.isOptional))
    }
  }

  /// The key paths of `Model.schema.fields`, in order: what a value row must read for
  /// ``init(row:from:)``.
  static var keyPaths: [PartialKeyPath<Model> & Sendable] {
    Model.schema.fields.map(\.keyPath)
  }

  /// The fields' values by name, for rules written over them (``FieldRules``).
  var textFields: some Sequence<(name: String, text: String)> {
    zip(fields.entries, values).lazy.compactMap { entry, value in
      guard entry.type?.isText == true, case .text(let text)? = value else { return nil }
      return (entry.name, text)
    }
  }
}

extension FormatValue {
  /// The JSON of the value `text` holds (of this type, or its optional when `optional`), nil
  /// when it holds none.
  public static func json(text: String, optional: Bool) -> JSONValue? {
    optional ? Self?(text: text)?.jsonValue : Self(text: text)?.jsonValue
  }

  /// The field value `json` holds, nil when it holds no value of this type.
  static func normalized(_ json: JSONValue, optional: Bool) -> FieldValue? {
    optional
      ? Self.optional(jsonValue: json).map { $0?.fieldValue ?? .null }
      : Self(jsonValue: json)?.fieldValue
  }
}

extension FieldValues: ModelValue {
  /// The values read straight from a model's row by a value fetch (`ModelContext.fetch(_:as:)`):
  /// no model is made; every field is read, its relationships are not. O(fields).
  public init(row: inout ModelRow<Model>) throws {
    fields = Self.table
    values = []
    values.reserveCapacity(fields.entries.count)
    for entry in fields.entries {
      guard let type = entry.type else {
        throw TripPlannerError(
          code: .store,
          message: "\(Model.self).\(entry.name) has a type the formats cannot carry.")
      }
      if entry.isCodable {
        values.append(try type.next(&row, entry.keyPath, optional: entry.isOptional))
        continue
      }
      // A native value through its stored form (no generic type made per column).
      let value = try row.nextStored { try type.fieldValue(stored: $0, optional: entry.isOptional) }
      guard let value else {
        throw TripPlannerError(
          code: .store, message: "\(Model.self).\(entry.name) has no stored form the formats read.")
      }
      values.append(value)
    }
  }
}

extension ModelField {
  /// Whether the field is the model's identity in files and requests: a unique UUID, which an
  /// input may leave out (a new one is made).
  var isIdentity: Bool { isUnique && valueType == UUID.self && !isOptional }
}

extension FieldValues {
  /// Whether both give the same fields the same values.
  public static func == (lhs: FieldValues, rhs: FieldValues) -> Bool { lhs.values == rhs.values }
  public func hash(into hasher: inout Hasher) { hasher.combine(values) }

  /// The index of the field `keyPath` in the model's field table, nil when it is not a field:
  /// found once, then read and set with ``subscript(field:)`` without a lookup.
  static func index(of keyPath: PartialKeyPath<Model>) -> Int? { table.byKeyPath[keyPath] }

  /// The value of the field at `index` (``index(of:)``), nil when it is not given.
  subscript(field index: Int) -> FieldValue? {
    get { values[index] }
    set { values[index] = newValue }
  }
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
  /// The text fields that must hold something but white space; by default none.
  static var nonBlankFields: [PartialKeyPath<Self> & Sendable] { get }
  /// JSON Schema's members for the field `name` beyond its type's and the text rules' (a
  /// number's `minimum` and `maximum`), for an input's schema; by default none.
  static func schemaMembers(of name: String) -> [(String, JSONValue)]
}

extension FieldRules {
  public static func maximumLength(of name: String) -> Int { TripRecord.maximumTextLength }
  public static var nonBlankFields: [PartialKeyPath<Self> & Sendable] { [] }
  public static func schemaMembers(of name: String) -> [(String, JSONValue)] { [] }
}

extension FieldValues where Model: FieldRules {
  /// Every rule the values break, as (field, reason): the fields that must not be blank
  /// (``FieldRules/nonBlankFields``), the model's rules (``FieldRules/violations(of:)``), then
  /// each text field's (no control characters, at most
  /// ``FieldRules/maximumLength(of:)`` Unicode scalars); empty when they keep them all.
  public var violations: [(field: String, reason: String)] {
    var found: [(String, String)] = []
    for keyPath in Model.nonBlankFields {
      guard let index = fields.byKeyPath[keyPath], case .text(let text)? = values[index],
        TripRecord.isBlank(text)
      else { continue }
      let name = fields.entries[index].name
      found.append((name, "\(name) must not be empty"))
    }
    found += Model.violations(of: self)
    for (name, text) in textFields {
      found += TripRecord.textViolations(
        text, field: name, label: name, maximum: Model.maximumLength(of: name))
    }
    return found
  }

  /// Throws ``TripPlannerError/Code/invalidTrip`` naming the first field at fault, its message
  /// every rule broken.
  public func validate() throws { try TripRecord.throwIfAny(violations) }
}
