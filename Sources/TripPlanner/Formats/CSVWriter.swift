import Foundation

/// Writes RFC 4180 CSV with LF line ends, quoting a field only when it needs it.
public enum CSVWriter {
  /// One record as a line, with its line end.
  public static func line(_ fields: [String]) -> String {
    fields.map(escape).joined(separator: ",") + "\n"
  }

  /// A field, quoted when it holds a comma, a quote, a line break, or edge spaces.
  public static func escape(_ field: String) -> String {
    let needsQuotes =
      field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" })
      || field.first == " " || field.last == " "
    guard needsQuotes else { return field }
    return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
  }
}
