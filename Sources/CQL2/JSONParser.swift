import Foundation

extension CQL2Expression {
  /// Parses a CQL2 JSON filter (OGC 21-065r2, the `cql2-json` encoding): `{"op": …, "args":
  /// […]}` for operators and functions, `{"property": …}`, `{"date": …}`,
  /// `{"timestamp": …}`, `{"interval": […]}`, `{"bbox": […]}`, GeoJSON geometries, and JSON
  /// strings, numbers and booleans as literals.
  ///
  /// Throws ``CQL2Error`` naming the member at fault by its path (`$.args[1]`). Cost:
  /// O(size of the document); nesting deeper than 100 operators is refused.
  public init(json: Data) throws {
    // Refused before decoding: Foundation's decoder costs about O(depth²) and calls a document
    // past its own limit (about 256 levels) not JSON. An expression level is at most two JSON
    // levels (an object and its args), and a geometry's coordinates add four.
    let levels = Self.jsonNesting(json)
    guard levels <= 2 * CQL2TextParser.maximumDepth + 4 else {
      throw CQL2Error(
        "The filter nests deeper than \(CQL2TextParser.maximumDepth) levels.", at: .path("$"))
    }
    let value: JSONValue
    do {
      value = try JSONDecoder().decode(JSONValue.self, from: json)
    } catch {
      throw CQL2Error("The filter is not JSON.", at: .path("$"))
    }
    var parser = CQL2JSONParser()
    self = try parser.expression(value, at: "$")
  }
}

extension CQL2Expression {
  /// The deepest nesting of objects and arrays in `json`, strings skipped (escapes included).
  /// O(bytes), no allocation.
  static func jsonNesting(_ json: Data) -> Int {
    var deepest = 0
    var depth = 0
    var inString = false
    var escaped = false
    for byte in json {
      if inString {
        if escaped {
          escaped = false
        } else if byte == UInt8(ascii: "\\") {
          escaped = true
        } else if byte == UInt8(ascii: "\"") {
          inString = false
        }
        continue
      }
      switch byte {
      case UInt8(ascii: "\""): inString = true
      case UInt8(ascii: "["), UInt8(ascii: "{"):
        depth += 1
        deepest = max(deepest, depth)
      case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
      default: break
      }
    }
    return deepest
  }
}

/// A JSON document as a tree.
enum JSONValue: Decodable, Equatable {
  case null
  case bool(Bool)
  case number(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

  init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if container.decodeNil() {
      self = .null
    } else if let bool = try? container.decode(Bool.self) {
      self = .bool(bool)
    } else if let number = try? container.decode(Double.self) {
      self = .number(number)
    } else if let string = try? container.decode(String.self) {
      self = .string(string)
    } else if let array = try? container.decode([JSONValue].self) {
      self = .array(array)
    } else {
      self = .object(try container.decode([String: JSONValue].self))
    }
  }
}

/// Reads CQL2 JSON from its tree, with the path of each member for errors.
struct CQL2JSONParser {
  private var depth = 0

  private func fail(_ reason: String, _ path: String) -> CQL2Error {
    CQL2Error(reason, at: .path(path))
  }

  mutating func expression(_ value: JSONValue, at path: String) throws -> CQL2Expression {
    depth += 1
    defer { depth -= 1 }
    guard depth <= CQL2TextParser.maximumDepth else {
      throw fail("The filter nests deeper than \(CQL2TextParser.maximumDepth) levels.", path)
    }
    func at(_ node: CQL2Expression.Node) -> CQL2Expression { CQL2Expression(node, at: .path(path)) }
    switch value {
    case .bool(let bool): return at(.boolean(bool))
    case .number(let number): return at(.number(number))
    case .string(let string): return at(.string(string))
    case .null: throw fail("null is not a CQL2 expression.", path)
    case .array: throw fail("A list is an expression only as the second argument of 'in'.", path)
    case .object(let members):
      if let name = members["property"] {
        guard members.count == 1, case .string(let property) = name, !property.isEmpty else {
          throw fail("A property is {\"property\": \"name\"}.", path)
        }
        return at(.property(property))
      }
      if let text = members["date"] {
        guard members.count == 1, case .string(let day) = text, CQL2Instant.day(day) != nil else {
          throw fail("A date is {\"date\": \"yyyy-mm-dd\"}.", path)
        }
        return at(.date(day))
      }
      if let text = members["timestamp"] {
        guard members.count == 1, case .string(let stamp) = text,
          let date = CQL2Instant.timestamp(stamp)
        else { throw fail("A timestamp is {\"timestamp\": \"RFC 3339 instant\"}.", path) }
        return at(.timestamp(date))
      }
      if let ends = members["interval"] {
        guard members.count == 1, case .array(let pair) = ends, pair.count == 2 else {
          throw fail("An interval is {\"interval\": [start, end]}.", path)
        }
        return at(
          .interval(
            try intervalEnd(pair[0], at: path + ".interval[0]"),
            try intervalEnd(pair[1], at: path + ".interval[1]")))
      }
      if let box = members["bbox"] {
        guard members.count == 1, case .array(let items) = box else {
          throw fail("A bbox is {\"bbox\": [west, south, east, north]}.", path)
        }
        let numbers = try items.enumerated().map { offset, item in
          guard case .number(let number) = item else {
            throw fail("A bbox holds numbers only.", path + ".bbox[\(offset)]")
          }
          return number
        }
        return at(.geometry(try CQL2Geometry.box(numbers, at: .path(path))))
      }
      if members["type"] != nil {
        return at(.geometry(try geometry(members, at: path)))
      }
      if let op = members["op"] {
        return try operation(op, members, at: path)
      }
      throw fail(
        "Expected an operation ({\"op\", \"args\"}), a property, a date, a timestamp, an interval, a bbox or a geometry.",
        path)
    }
  }

  private mutating func intervalEnd(_ value: JSONValue, at path: String) throws -> CQL2Expression {
    if case .string(let text) = value {
      if text == ".." { return CQL2Expression(.unbounded, at: .path(path)) }
      if CQL2Instant.day(text) != nil { return CQL2Expression(.date(text), at: .path(path)) }
      if let date = CQL2Instant.timestamp(text) {
        return CQL2Expression(.timestamp(date), at: .path(path))
      }
      throw fail(
        "'\(text)' is not an instant: give a date (yyyy-mm-dd), a timestamp (RFC 3339) or '..'.",
        path)
    }
    return try expression(value, at: path)
  }

  private mutating func operation(
    _ op: JSONValue, _ members: [String: JSONValue], at path: String
  ) throws -> CQL2Expression {
    guard case .string(let name) = op else { throw fail("'op' is not a string.", path + ".op") }
    guard members.count == 2, case .array(let raw) = members["args"] else {
      throw fail("An operation is {\"op\": \"\(name)\", \"args\": [...]}.", path)
    }
    func at(_ node: CQL2Expression.Node) -> CQL2Expression { CQL2Expression(node, at: .path(path)) }
    func count(_ expected: Int) throws {
      guard raw.count == expected else {
        throw fail(
          "'\(name)' takes \(expected) argument\(expected == 1 ? "" : "s"), not \(raw.count).", path
        )
      }
    }
    if name == "in" {
      try count(2)
      guard case .array(let list) = raw[1], !list.isEmpty else {
        throw fail("The second argument of 'in' is a list of at least one item.", path + ".args[1]")
      }
      let value = try expression(raw[0], at: path + ".args[0]")
      let items = try list.enumerated().map { offset, item in
        try expression(item, at: path + ".args[1][\(offset)]")
      }
      return at(.in(value, items))
    }
    var args: [CQL2Expression] = []
    for (offset, item) in raw.enumerated() {
      args.append(try expression(item, at: path + ".args[\(offset)]"))
    }
    switch name {
    case "and", "or":
      guard args.count >= 2 else { throw fail("'\(name)' takes at least 2 arguments.", path) }
      return at(name == "and" ? .and(args) : .or(args))
    case "not":
      try count(1)
      return at(.not(args[0]))
    case "like":
      try count(2)
      return at(.like(args[0], args[1]))
    case "between":
      try count(3)
      return at(.between(args[0], args[1], args[2]))
    case "isNull":
      try count(1)
      return at(.isNull(args[0]))
    case "casei", "accenti":
      try count(1)
      return at(name == "casei" ? .caseInsensitive(args[0]) : .accentInsensitive(args[0]))
    default:
      break
    }
    if let comparison = CQL2Expression.ComparisonOperator(rawValue: name) {
      try count(2)
      return at(.comparison(comparison, args[0], args[1]))
    }
    if let arithmetic = CQL2Expression.ArithmeticOperator(rawValue: name) {
      try count(2)
      return at(.arithmetic(arithmetic, args[0], args[1]))
    }
    if let spatial = CQL2Expression.SpatialFunction(rawValue: name) {
      try count(2)
      return at(.spatial(spatial, args[0], args[1]))
    }
    if let temporal = CQL2Expression.TemporalFunction(rawValue: name) {
      try count(2)
      return at(.temporal(temporal, args[0], args[1]))
    }
    return at(.function(name, args))
  }

  private func geometry(_ members: [String: JSONValue], at path: String) throws -> CQL2Geometry {
    guard case .string(let type) = members["type"] else {
      throw fail("A geometry's 'type' is a string.", path + ".type")
    }
    if type == "GeometryCollection" {
      guard case .array(let items) = members["geometries"] else {
        throw fail("A GeometryCollection has 'geometries'.", path)
      }
      return .collection(
        try items.enumerated().map { offset, item in
          guard case .object(let member) = item else {
            throw fail("A geometry is an object.", path + ".geometries[\(offset)]")
          }
          return try geometry(member, at: path + ".geometries[\(offset)]")
        })
    }
    guard let coordinates = members["coordinates"] else {
      throw fail("A \(type) has 'coordinates'.", path)
    }
    let here = path + ".coordinates"
    func position(_ value: JSONValue, _ at: String) throws -> CQL2Position {
      guard case .array(let numbers) = value, (2...3).contains(numbers.count),
        case .number(let x) = numbers[0], case .number(let y) = numbers[1]
      else { throw fail("A position is [x, y] (or [x, y, z]).", at) }
      return try CQL2Position.checked(x: x, y: y, at: .path(at))
    }
    func array(_ value: JSONValue, _ at: String) throws -> [JSONValue] {
      guard case .array(let items) = value else { throw fail("Expected a list.", at) }
      return items
    }
    func positions(_ value: JSONValue, _ at: String) throws -> [CQL2Position] {
      try array(value, at).enumerated().map { try position($1, at + "[\($0)]") }
    }
    func rings(_ value: JSONValue, _ at: String) throws -> [[CQL2Position]] {
      try CQL2Geometry.checkedRings(
        try array(value, at).enumerated().map { try positions($1, at + "[\($0)]") }, at: .path(at))
    }
    switch type {
    case "Point": return .point(try position(coordinates, here))
    case "MultiPoint": return .multiPoint(try positions(coordinates, here))
    case "LineString":
      return .lineString(
        try CQL2Geometry.checkedLine(try positions(coordinates, here), at: .path(here)))
    case "MultiLineString":
      return .multiLineString(
        try array(coordinates, here).enumerated().map {
          try CQL2Geometry.checkedLine(try positions($1, here + "[\($0)]"), at: .path(here))
        })
    case "Polygon": return .polygon(try rings(coordinates, here))
    case "MultiPolygon":
      return .multiPolygon(
        try array(coordinates, here).enumerated().map { try rings($1, here + "[\($0)]") })
    default:
      throw fail("'\(type)' is not a GeoJSON geometry type.", path + ".type")
    }
  }
}
