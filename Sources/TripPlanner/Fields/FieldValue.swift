import Foundation

/// One field's value as ``FieldValues`` holds it: typed, so that a number, a date or an id is
/// kept as the store or an input gave it, and turned into text only when a format writes it
/// (a page of trips makes no date strings to write dates, and a date keeps its whole
/// precision). Each ``FormatValue`` type says which case holds its values
/// (``FormatValue/fieldValue``); a type without a case of its own is held as its JSON.
///
/// Cost: at most 17 bytes of payload (a text's or an id's), no allocation beyond a text's own.
public enum FieldValue: Hashable, Sendable {
  /// None (an optional field's `nil`).
  case null
  /// Text.
  case text(String)
  /// A `Double`.
  case number(Double)
  /// An `Int`.
  case integer(Int)
  /// A `Bool`.
  case flag(Bool)
  /// An id.
  case uuid(UUID)
  /// An instant.
  case date(Date)
  /// A value of a type without a case of its own, as its JSON.
  case json(JSONValue)

  /// The text, nil for another case.
  var text: String? {
    if case .text(let text) = self { text } else { nil }
  }
  /// The `Double`, nil for another case.
  var number: Double? {
    if case .number(let number) = self { number } else { nil }
  }
  /// The date, nil for another case.
  var date: Date? {
    if case .date(let date) = self { date } else { nil }
  }

  /// The id, nil for another case.
  var uuid: UUID? {
    if case .uuid(let id) = self { id } else { nil }
  }

  /// `id`, or ``null``.
  static func uuidOrNull(_ id: UUID?) -> FieldValue { id.map(FieldValue.uuid) ?? .null }

  /// The value as JSON writes it: ids lowercase, dates as RFC 3339 instants (milliseconds when
  /// they have a fraction of a second), as each type's ``FormatValue/jsonValue`` writes them.
  public var jsonValue: JSONValue {
    switch self {
    case .null: .null
    case .text(let text): .string(text)
    case .number(let number): .number(number)
    case .integer(let integer): .number(Double(integer))
    case .flag(let flag): .bool(flag)
    case .uuid(let id): .string(id.lowercasedString)
    case .date(let date): .string(formatFileDate(date, dayOnly: false))
    case .json(let json): json
    }
  }

  /// The value as plain text, as a CSV cell or a terminal shows it: text as it is, nothing
  /// for none, a day for a date at UTC midnight (else an RFC 3339 instant), a number as the
  /// shortest text that reads back to it, an id lowercase.
  public var plainText: String {
    switch self {
    case .null: ""
    case .text(let text): text
    case .number(let number): formatNumber(number)
    case .integer(let integer): String(integer)
    case .flag(let flag): flag ? "true" : "false"
    case .uuid(let id): id.lowercasedString
    case .date(let date): formatFileDate(date, dayOnly: true)
    case .json(let json):
      if case .string(let text) = json { text } else { json.rendered() }
    }
  }

  /// Writes ``jsonValue`` compactly, without making it: the same bytes as
  /// `jsonValue.utf8()`. O(size of the text); an id and a whole-second date go straight from
  /// their bytes.
  func writeJSON(into output: inout [UInt8]) {
    switch self {
    case .null: output.append(contentsOf: "null".utf8)
    case .text(let text): JSONValue.writeString(text, into: &output)
    case .number(let number): JSONValue.writeNumber(number, into: &output)
    case .integer(let integer): JSONValue.writeNumber(Double(integer), into: &output)
    case .flag(let flag): output.append(contentsOf: (flag ? "true" : "false").utf8)
    case .uuid(let id):
      output.append(UInt8(ascii: "\""))
      id.writeLowercased(into: &output)
      output.append(UInt8(ascii: "\""))
    case .date(let date):
      output.append(UInt8(ascii: "\""))
      if TripDates.write(date, into: &output) {
        output.append(UInt8(ascii: "\""))
      } else {
        output.removeLast()
        JSONValue.writeString(formatFileDate(date, dayOnly: false), into: &output)
      }
    case .json(let json): output.append(contentsOf: json.utf8())
    }
  }
}

extension JSONValue {
  /// Writes ``format(_:)``'s text for `value`.
  static func writeNumber(_ value: Double, into output: inout [UInt8]) {
    var text = format(value)
    text.withUTF8 { output.append(contentsOf: $0) }
  }
}
