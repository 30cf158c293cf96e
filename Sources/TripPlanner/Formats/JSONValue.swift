import Foundation

/// A JSON value: read with `JSONDecoder` (type-strict: `true` is never a number), written with
/// members in the order given.
public indirect enum JSONValue: Decodable, Hashable, Sendable {
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
      // What is left: a string that cannot be text (its decode says why), or a number too
      // large for a Double (`1e999`, which a string decode calls a type mismatch).
      var message = "a number out of range (beyond ±1.8e308, such as 1e999)"
      do {
        _ = try single.decode(String.self)
      } catch DecodingError.typeMismatch {
      } catch {
        message =
          "a string that is not valid UTF-8 (a byte sequence that is not UTF-8, or a \\u escape of half a surrogate pair such as \\ud800)"
      }
      throw JSONValue.ParseError(
        message: message,
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

  /// Hashes the kind and contents (object members in order), as `==` compares them.
  public func hash(into hasher: inout Hasher) {
    switch self {
    case .null: hasher.combine(0)
    case .bool(let value): hasher.combine(value)
    case .number(let value): hasher.combine(value)
    case .string(let value): hasher.combine(value)
    case .array(let values): hasher.combine(values)
    case .object(let members):
      hasher.combine(members.count)
      for (name, value) in members {
        hasher.combine(name)
        hasher.combine(value)
      }
    }
  }

  /// Parses JSON text. An object that names a member twice is refused (RFC 8259 leaves its
  /// meaning open: readers keep the first or the last, so two readers could see two values).
  public static func parse(_ data: Data) throws -> JSONValue {
    let value = try JSONDecoder().decode(JSONValue.self, from: data)
    if let (name, path) = repeatedMember(in: data) {
      throw ParseError(message: "the member '\(name)' appears twice in one object", path: path)
    }
    return value
  }

  /// The first member name that an object of `data` (valid JSON) names twice, with the path to
  /// that object (member names and array indexes), or nil. O(bytes): one pass, a set of names
  /// per open object.
  static func repeatedMember(in data: Data) -> (String, [String])? {
    struct Level {
      var names: Set<String>?  // nil for an array
      var expectsName: Bool
      var index: Int
      var name: String?  // the member (or element) being read
    }
    return data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> (String, [String])? in
      let bytes = buffer.bindMemory(to: UInt8.self)
      var stack: [Level] = []
      var index = 0
      while index < bytes.count {
        let byte = bytes[index]
        switch byte {
        case UInt8(ascii: "{"):
          stack.append(Level(names: [], expectsName: true, index: 0, name: nil))
        case UInt8(ascii: "["):
          stack.append(Level(names: nil, expectsName: false, index: 0, name: "0"))
        case UInt8(ascii: "}"), UInt8(ascii: "]"):
          stack.removeLast()
        case UInt8(ascii: ","):
          if stack.last?.names != nil {
            stack[stack.count - 1].expectsName = true
          } else if !stack.isEmpty {
            stack[stack.count - 1].index += 1
            stack[stack.count - 1].name = String(stack[stack.count - 1].index)
          }
        case UInt8(ascii: "\""):
          let start = index + 1
          var escaped = false
          index += 1
          while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
            if bytes[index] == UInt8(ascii: "\\") {
              escaped = true
              index += 1
            }
            index += 1
          }
          guard let level = stack.last, level.names != nil, level.expectsName else { break }
          let raw = UnsafeRawBufferPointer(rebasing: buffer[start..<index])
          let name =
            escaped
            ? (try? JSONDecoder().decode(String.self, from: Data([0x22] + raw + [0x22])))
              ?? String(decoding: raw, as: UTF8.self)
            : String(decoding: raw, as: UTF8.self)
          if stack[stack.count - 1].names!.insert(name).inserted == false {
            return (name, stack.dropLast().compactMap(\.name))
          }
          stack[stack.count - 1].expectsName = false
          stack[stack.count - 1].name = name
        default:
          break
        }
        index += 1
      }
      return nil
    }
  }

  /// This value with `patch` applied as a JSON Merge Patch (RFC 7396): an object patch sets
  /// each member it names (merged in turn when both are objects), a member `null` in it removes
  /// that member, and a patch that is not an object replaces the value. O(size of both).
  public func merging(_ patch: JSONValue) -> JSONValue {
    guard case .object(let changes) = patch else { return patch }
    var members: [(String, JSONValue)]
    if case .object(let own) = self { members = own } else { members = [] }
    for (name, change) in changes {
      let index = members.firstIndex { $0.0 == name }
      if change == .null {
        if let index { members.remove(at: index) }
      } else if let index {
        members[index].1 = members[index].1.merging(change)
      } else {
        members.append((name, JSONValue.null.merging(change)))
      }
    }
    return .object(members)
  }

  /// The member `key` of an object.
  public subscript(key: String) -> JSONValue? {
    guard case .object(let members) = self else { return nil }
    return members.first { $0.0 == key }?.1
  }

  /// Renders compact JSON, or indented by two spaces when `pretty`.
  public func rendered(pretty: Bool = false) -> String {
    String(decoding: utf8(pretty: pretty), as: UTF8.self)
  }

  /// The rendered text as UTF-8 bytes (see ``rendered(pretty:)``), for writing to a file or a
  /// socket without making a `String` first. Cost: O(size of the text); strings that need no
  /// escape are copied whole.
  public func utf8(pretty: Bool = false) -> [UInt8] {
    var output: [UInt8] = []
    output.reserveCapacity(256)
    write(into: &output, pretty: pretty, depth: 0)
    return output
  }

  static func newline(into output: inout [UInt8], depth: Int) {
    output.append(0x0A)
    output.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * depth))
  }

  fileprivate func write(into output: inout [UInt8], pretty: Bool, depth: Int) {
    switch self {
    case .null: output.append(contentsOf: "null".utf8)
    case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
    case .number(let value): output.append(contentsOf: JSONValue.format(value).utf8)
    case .string(let value): JSONValue.writeString(value, into: &output)
    case .array(let values):
      if values.isEmpty {
        output.append(contentsOf: "[]".utf8)
        return
      }
      output.append(UInt8(ascii: "["))
      for (index, value) in values.enumerated() {
        if index > 0 { output.append(UInt8(ascii: ",")) }
        if pretty { JSONValue.newline(into: &output, depth: depth + 1) }
        value.write(into: &output, pretty: pretty, depth: depth + 1)
      }
      if pretty { JSONValue.newline(into: &output, depth: depth) }
      output.append(UInt8(ascii: "]"))
    case .object(let members):
      if members.isEmpty {
        output.append(contentsOf: "{}".utf8)
        return
      }
      output.append(UInt8(ascii: "{"))
      for (index, (key, value)) in members.enumerated() {
        if index > 0 { output.append(UInt8(ascii: ",")) }
        if pretty { JSONValue.newline(into: &output, depth: depth + 1) }
        JSONValue.writeString(key, into: &output)
        output.append(contentsOf: (pretty ? ": " : ":").utf8)
        value.write(into: &output, pretty: pretty, depth: depth + 1)
      }
      if pretty { JSONValue.newline(into: &output, depth: depth) }
      output.append(UInt8(ascii: "}"))
    }
  }

  /// JSON's text for a number: integers without a fraction, others in Swift's shortest form
  /// that reads back as the same `Double` (`description`, the text interpolation writes, at
  /// a third of its cost), `null` for what JSON cannot hold.
  static func format(_ value: Double) -> String {
    guard value.isFinite else { return "null" }
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return value.description
  }

  /// Writes `value` quoted: `"`, `\\` and control characters escaped, everything else as
  /// UTF-8. A string with nothing to escape (the common case) is copied in one step.
  static func writeString(_ value: String, into output: inout [UInt8]) {
    output.append(UInt8(ascii: "\""))
    var value = value
    value.withUTF8 { bytes in
      let needsEscape = bytes.contains {
        $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\")
      }
      guard needsEscape else {
        output.append(contentsOf: bytes)
        return
      }
      for byte in bytes {
        switch byte {
        case UInt8(ascii: "\""): output.append(contentsOf: "\\\"".utf8)
        case UInt8(ascii: "\\"): output.append(contentsOf: "\\\\".utf8)
        case 0x0A: output.append(contentsOf: "\\n".utf8)
        case 0x0D: output.append(contentsOf: "\\r".utf8)
        case 0x09: output.append(contentsOf: "\\t".utf8)
        case 0..<0x20:
          let hex = Array("0123456789abcdef".utf8)
          output.append(contentsOf: "\\u00".utf8)
          output.append(hex[Int(byte >> 4)])
          output.append(hex[Int(byte & 0xF)])
        default: output.append(byte)
        }
      }
    }
    output.append(UInt8(ascii: "\""))
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

/// A JSON array written an element at a time, byte for byte as ``JSONValue/utf8(pretty:)``
/// writes the whole array at `depth`: what an export streams. O(1) state.
struct JSONArrayWriter {
  let pretty: Bool
  let depth: Int
  private(set) var count = 0

  init(pretty: Bool, depth: Int) {
    self.pretty = pretty
    self.depth = depth
  }

  /// Writes `value` as the array's next element (after its `[`, or a comma).
  mutating func append(_ value: JSONValue, into output: inout [UInt8]) {
    output.append(UInt8(ascii: count == 0 ? "[" : ","))
    if pretty { JSONValue.newline(into: &output, depth: depth + 1) }
    value.write(into: &output, pretty: pretty, depth: depth + 1)
    count += 1
  }

  /// Starts the array's next element (after its `[`, or a comma), which the caller writes at
  /// ``depth`` + 1.
  mutating func beginElement(into output: inout [UInt8]) {
    output.append(UInt8(ascii: count == 0 ? "[" : ","))
    if pretty { JSONValue.newline(into: &output, depth: depth + 1) }
    count += 1
  }

  /// Closes the array (`[]` when nothing was appended).
  func finish(into output: inout [UInt8]) {
    guard count > 0 else {
      output.append(contentsOf: "[]".utf8)
      return
    }
    if pretty { JSONValue.newline(into: &output, depth: depth) }
    output.append(UInt8(ascii: "]"))
  }

  /// Writes an object member's name at `depth` + 1, as an object at `depth` does (the comma
  /// before it, when it is not the first, is the caller's).
  static func memberName(_ name: String, pretty: Bool, depth: Int, into output: inout [UInt8]) {
    if pretty { JSONValue.newline(into: &output, depth: depth + 1) }
    JSONValue.writeString(name, into: &output)
    output.append(contentsOf: (pretty ? ": " : ":").utf8)
  }

  /// Writes `value` at `depth`.
  static func write(_ value: JSONValue, pretty: Bool, depth: Int, into output: inout [UInt8]) {
    value.write(into: &output, pretty: pretty, depth: depth)
  }
}
