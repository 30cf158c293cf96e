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
  /// optional fractional seconds. Nil for anything else, including impossible dates.
  public static func parse(_ text: String) -> Date? {
    let text = text.trimmingCharacters(in: .whitespaces)
    if text.count == 10, let day = parseDay(text) { return day }
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
