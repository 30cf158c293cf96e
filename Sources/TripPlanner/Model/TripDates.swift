import Foundation

/// How trip dates are written and read: ISO 8601 in UTC, or a bare `YYYY-MM-DD` day.
public enum TripDates {
  /// `2027-04-01T00:00:00Z`.
  ///
  /// Whole seconds in years 1583–9999 are written directly, as Foundation's `.iso8601` style
  /// writes them; other dates go through that style (it counts days before the Gregorian
  /// reform of 1582 by the Julian calendar, as ICU does, and the parser reads them back so).
  public static func format(_ date: Date) -> String {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(20)
    guard write(date, into: &bytes) else { return date.formatted(.iso8601) }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// Appends ``format(_:)``'s 20 bytes to `output` when the date is a whole second from 1583
  /// to 9999 (the form every output of the planner writes), else leaves it and returns false.
  package static func write(_ date: Date, into output: inout [UInt8]) -> Bool {
    let seconds = date.timeIntervalSince1970
    // -12212553600 is 1583-01-01T00:00:00Z; 253402300800 is 10000-01-01T00:00:00Z.
    guard seconds == seconds.rounded(.down), seconds >= -12_212_553_600,
      seconds < 253_402_300_800
    else { return false }
    let whole = Int64(seconds)
    let (days, second) = (whole.floorDivided(by: 86_400), whole.floorModulo(86_400))
    let (year, month, day) = civil(days: days)
    // Into 20 bytes on the stack, then one append: this runs twice for every feature served.
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { bytes in
      func put(_ value: Int64, at end: Int, digits: Int) {
        var value = value
        for index in stride(from: end, to: end - digits, by: -1) {
          bytes[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10)
          value /= 10
        }
      }
      put(year, at: 3, digits: 4)
      bytes[4] = UInt8(ascii: "-")
      put(month, at: 6, digits: 2)
      bytes[7] = UInt8(ascii: "-")
      put(day, at: 9, digits: 2)
      bytes[10] = UInt8(ascii: "T")
      put(second / 3600, at: 12, digits: 2)
      bytes[13] = UInt8(ascii: ":")
      put(second / 60 % 60, at: 15, digits: 2)
      bytes[16] = UInt8(ascii: ":")
      put(second % 60, at: 18, digits: 2)
      bytes[19] = UInt8(ascii: "Z")
      output.append(contentsOf: UnsafeBufferPointer(bytes))
    }
    return true
  }

  /// The proleptic Gregorian year, month and day of a count of days since 1970-01-01
  /// (H. Hinnant's `civil_from_days`).
  static func civil(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let shifted = days + 719_468
    let era = shifted.floorDivided(by: 146_097)
    let dayOfEra = shifted - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthIndex = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
    let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
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
    // Foundation's parser rolls impossible fields over (February 30 becomes March 2, hour 99
    // four days later): every field is checked first.
    guard fieldsAreValid(Array(text.utf8)) else { return nil }
    if let date = try? Date(text, strategy: .iso8601) { return date }
    if let date = try? Date(
      text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    {
      return date
    }
    return nil
  }

  /// Whether `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)` names a real day and time: a
  /// day that exists in its month, hours 0–23, minutes and seconds 0–59, a zone within ±23:59.
  /// O(length).
  static func fieldsAreValid(_ bytes: [UInt8]) -> Bool {
    func number(_ range: Range<Int>) -> Int? {
      guard range.upperBound <= bytes.count else { return nil }
      var value = 0
      for index in range {
        guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { return nil }
        value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
      }
      return value
    }
    guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
      bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
      bytes[16] == UInt8(ascii: ":"),
      parseDay(String(decoding: bytes[0..<10], as: UTF8.self)) != nil,
      let hour = number(11..<13), hour <= 23, let minute = number(14..<16), minute <= 59,
      let second = number(17..<19), second <= 59
    else { return false }
    var index = 19
    if bytes[index] == UInt8(ascii: ".") {
      index += 1
      let digits = index
      while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
        index += 1
      }
      guard index > digits else { return false }
    }
    guard index < bytes.count else { return false }
    if bytes[index] == UInt8(ascii: "Z") { return index + 1 == bytes.count }
    guard bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"),
      let zoneHours = number(index + 1..<index + 3), zoneHours <= 23
    else { return false }
    let rest = bytes.count - (index + 3)
    if rest == 3, bytes[index + 3] == UInt8(ascii: ":"),
      let zoneMinutes = number(index + 4..<index + 6)
    {
      return zoneMinutes <= 59
    }
    if rest == 2, let zoneMinutes = number(index + 3..<index + 5) { return zoneMinutes <= 59 }
    return false
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

extension Int64 {
  fileprivate func floorDivided(by divisor: Int64) -> Int64 {
    let quotient = self / divisor
    return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
  }
  fileprivate func floorModulo(_ divisor: Int64) -> Int64 {
    self - floorDivided(by: divisor) * divisor
  }
}
