import Foundation

/// A JSON value: read with `JSONDecoder` (type-strict: `true` is never a number), written with
/// members in the order given.
public indirect enum JSONValue: Decodable, Equatable, Sendable {
  /// `null`.
  case null
  /// `true` or `false`.
  case bool(Bool)
  /// A number.
  case number(Double)
  /// A string.
  case string(String)
  /// An array.
  case array([JSONValue])
  /// An object, members in order.
  case object([(String, JSONValue)])

  /// Decodes any JSON value.
  public init(from decoder: any Decoder) throws {
    if var array = try? decoder.unkeyedContainer() {
      var values: [JSONValue] = []
      while !array.isAtEnd { values.append(try array.decode(JSONValue.self)) }
      self = .array(values)
      return
    }
    if let object = try? decoder.container(keyedBy: AnyKey.self) {
      self = .object(
        try object.allKeys.map { ($0.stringValue, try object.decode(JSONValue.self, forKey: $0)) })
      return
    }
    let single = try decoder.singleValueContainer()
    if single.decodeNil() {
      self = .null
    } else if let bool = try? single.decode(Bool.self) {
      self = .bool(bool)
    } else if let number = try? single.decode(Double.self) {
      self = .number(number)
    } else if let string = try? single.decode(String.self) {
      self = .string(string)
    } else {
      // The only JSON scalar left is a number too large for a Double (`1e999`).
      throw JSONValue.ParseError(
        message: "a number out of range (beyond ±1.8e308, such as 1e999)",
        path: decoder.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue })
    }
  }

  /// Why a document could not be read as JSON, in words (no Swift type names).
  public struct ParseError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// Where: array indexes and member names from the document's root.
    public var path: [String]

    /// The message, with where it is when known.
    public var description: String {
      path.isEmpty ? message : "\(message) at \(path.joined(separator: "."))"
    }
  }

  /// Describes any error from reading JSON in words, without Swift type names.
  public static func describe(_ error: any Error) -> String {
    switch error {
    case let error as ParseError:
      return error.description
    case DecodingError.dataCorrupted(let context):
      let underlying = (context.underlyingError as? NSError)?.userInfo["NSDebugDescription"]
      return (underlying as? String) ?? "the text is not JSON"
    default:
      return "the text cannot be read as JSON"
    }
  }

  /// Equal when of the same kind and contents (object members compared in order).
  public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
    switch (lhs, rhs) {
    case (.null, .null): true
    case (.bool(let a), .bool(let b)): a == b
    case (.number(let a), .number(let b)): a == b
    case (.string(let a), .string(let b)): a == b
    case (.array(let a), .array(let b)): a == b
    case (.object(let a), .object(let b)):
      a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    default: false
    }
  }

  /// Parses JSON text.
  public static func parse(_ data: Data) throws -> JSONValue {
    try JSONDecoder().decode(JSONValue.self, from: data)
  }

  /// The member `key` of an object.
  public subscript(key: String) -> JSONValue? {
    guard case .object(let members) = self else { return nil }
    return members.first { $0.0 == key }?.1
  }

  /// Renders compact JSON, or indented by two spaces when `pretty`.
  public func rendered(pretty: Bool = false) -> String {
    var output = ""
    write(into: &output, pretty: pretty, depth: 0)
    return output
  }

  private func write(into output: inout String, pretty: Bool, depth: Int) {
    let newline = pretty ? "\n" + String(repeating: "  ", count: depth + 1) : ""
    let closing = pretty ? "\n" + String(repeating: "  ", count: depth) : ""
    switch self {
    case .null: output += "null"
    case .bool(let value): output += value ? "true" : "false"
    case .number(let value): output += JSONValue.format(value)
    case .string(let value): JSONValue.writeString(value, into: &output)
    case .array(let values):
      if values.isEmpty {
        output += "[]"
        return
      }
      output += "["
      for (index, value) in values.enumerated() {
        output += (index == 0 ? "" : ",") + newline
        value.write(into: &output, pretty: pretty, depth: depth + 1)
      }
      output += closing + "]"
    case .object(let members):
      if members.isEmpty {
        output += "{}"
        return
      }
      output += "{"
      for (index, (key, value)) in members.enumerated() {
        output += (index == 0 ? "" : ",") + newline
        JSONValue.writeString(key, into: &output)
        output += pretty ? ": " : ":"
        value.write(into: &output, pretty: pretty, depth: depth + 1)
      }
      output += closing + "}"
    }
  }

  static func format(_ value: Double) -> String {
    guard value.isFinite else { return "null" }
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return "\(value)"
  }

  static func writeString(_ value: String, into output: inout String) {
    output += "\""
    for scalar in value.unicodeScalars {
      switch scalar {
      case "\"": output += "\\\""
      case "\\": output += "\\\\"
      case "\n": output += "\\n"
      case "\r": output += "\\r"
      case "\t": output += "\\t"
      case _ where scalar.value < 0x20:
        output += String(format: "\\u%04x", scalar.value)
      default: output.unicodeScalars.append(scalar)
      }
    }
    output += "\""
  }

  struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }
}

/// Finds the line on which each object at a given nesting depth starts, so that problems in
/// JSON arrays can be reported as `FILE:LINE`.
enum JSONLines {
  /// Lines of the objects that open when `depth` brackets are open (1: the elements of a
  /// top-level array; 2: elements of an array member of a top-level object).
  static func objectStarts(in data: Data, depth target: Int) -> [Int] {
    var lines: [Int] = []
    var line = 1
    var depth = 0
    var inString = false
    var escaped = false
    for byte in data {
      if inString {
        if escaped {
          escaped = false
        } else if byte == UInt8(ascii: "\\") {
          escaped = true
        } else if byte == UInt8(ascii: "\"") {
          inString = false
        } else if byte == UInt8(ascii: "\n") {
          line += 1
        }
        continue
      }
      switch byte {
      case UInt8(ascii: "\""): inString = true
      case UInt8(ascii: "\n"): line += 1
      case UInt8(ascii: "{"):
        if depth == target { lines.append(line) }
        depth += 1
      case UInt8(ascii: "["): depth += 1
      case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
      default: break
      }
    }
    return lines
  }
}
