import Foundation

/// How trip dates are written and read: ISO 8601 in UTC, or a bare `YYYY-MM-DD` day.
public enum TripDates {
  /// `2027-04-01T00:00:00Z`.
  public static func format(_ date: Date) -> String {
    date.formatted(.iso8601)
  }

  /// `2027-04-01` (the UTC day).
  public static func formatDay(_ date: Date) -> String {
    date.formatted(.iso8601.year().month().day())
  }

  /// Parses `YYYY-MM-DD` (UTC midnight) or ISO 8601 with a zone (`Z` or `±hh:mm`), with
  /// optional seconds and fractional seconds (`2027-04-01T22:00-05:00`). Nil for anything
  /// else, including impossible dates.
  public static func parse(_ text: String) -> Date? {
    var text = text.trimmingCharacters(in: .whitespaces)
    if text.count == 10, let day = parseDay(text) { return day }
    // Minutes without seconds: `…T22:00Z`, `…T22:00-05:00`.
    let bytes = Array(text.utf8)
    if bytes.count >= 17, bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
      bytes.count == 17
        || [UInt8(ascii: "Z"), UInt8(ascii: "+"), UInt8(ascii: "-")].contains(bytes[16])
    {
      text = String(decoding: bytes[0..<16] + Array(":00".utf8) + bytes[16...], as: UTF8.self)
      if bytes.count == 16 { return nil }
    }
    if let date = try? Date(text, strategy: .iso8601) { return date }
    if let date = try? Date(
      text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    {
      return date
    }
    return nil
  }

  private static func parseDay(_ text: String) -> Date? {
    let parts = text.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
      parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
      let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
    else { return nil }
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let components = DateComponents(year: year, month: month, day: day)
    guard components.isValidDate(in: calendar), let date = calendar.date(from: components) else {
      return nil
    }
    return date
  }
}
