import Foundation

/// The instants of CQL2: a day (`yyyy-mm-dd`) and a timestamp (RFC 3339).
public enum CQL2Instant {
  /// The start (00:00 UTC) of the day `text` (`yyyy-mm-dd`, a real day of the Gregorian
  /// calendar), or nil.
  public static func day(_ text: String) -> Date? {
    let bytes = Array(text.utf8)
    guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
      let year = number(bytes[0..<4]), let month = number(bytes[5..<7]),
      let day = number(bytes[8..<10])
    else { return nil }
    return date(year: year, month: month, day: day, seconds: 0)
  }

  /// The instant `text` names: `yyyy-mm-ddThh:mm:ss[.fraction](Z|±hh:mm)` (`t` and `z` too),
  /// or nil.
  public static func timestamp(_ text: String) -> Date? {
    let bytes = Array(text.utf8)
    guard bytes.count >= 20, let start = day(String(decoding: bytes[0..<10], as: UTF8.self)),
      bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
      bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
      let hour = number(bytes[11..<13]), let minute = number(bytes[14..<16]),
      let second = number(bytes[17..<19]), hour < 24, minute < 60, second < 61
    else { return nil }
    var index = 19
    var fraction = 0.0
    if bytes[index] == UInt8(ascii: ".") {
      index += 1
      var scale = 0.1
      let first = index
      while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
        fraction += Double(bytes[index] - UInt8(ascii: "0")) * scale
        scale /= 10
        index += 1
      }
      guard index > first else { return nil }
    }
    guard index < bytes.count else { return nil }
    var offset = 0
    switch bytes[index] {
    case UInt8(ascii: "Z"), UInt8(ascii: "z"):
      guard index + 1 == bytes.count else { return nil }
    case UInt8(ascii: "+"), UInt8(ascii: "-"):
      guard index + 6 == bytes.count, bytes[index + 3] == UInt8(ascii: ":"),
        let hours = number(bytes[(index + 1)..<(index + 3)]),
        let minutes = number(bytes[(index + 4)..<(index + 6)]), hours < 24, minutes < 60
      else { return nil }
      offset = (hours * 60 + minutes) * 60 * (bytes[index] == UInt8(ascii: "-") ? -1 : 1)
    default:
      return nil
    }
    let seconds = Double(hour * 3600 + minute * 60 + second - offset) + fraction
    return start.addingTimeInterval(seconds)
  }

  private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
    var value = 0
    for byte in digits {
      guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
      value = value * 10 + Int(byte - UInt8(ascii: "0"))
    }
    return value
  }

  /// Days from 1970-01-01 to the date (proleptic Gregorian), checked to be a real date.
  private static func date(year: Int, month: Int, day: Int, seconds: Int) -> Date? {
    guard (1...12).contains(month), day >= 1 else { return nil }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    guard day <= lengths[month - 1] else { return nil }
    // Days from civil (Howard Hinnant's algorithm).
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    let days = era * 146_097 + dayOfEra - 719_468
    return Date(timeIntervalSince1970: Double(days * 86_400 + seconds))
  }
}

extension CQL2Position {
  /// A position with finite coordinates, or an error at `location`.
  static func checked(x: Double, y: Double, at location: CQL2Location) throws -> CQL2Position {
    guard x.isFinite, y.isFinite else {
      throw CQL2Error("A coordinate is not a finite number.", at: location)
    }
    return CQL2Position(x: x, y: y)
  }
}

extension CQL2Geometry {
  /// `BBOX` from 4 numbers (west, south, east, north) or 6 (with the lowest and highest
  /// elevation after south and after north, dropped).
  static func box(_ numbers: [Double], at location: CQL2Location) throws -> CQL2Geometry {
    let (west, south, east, north): (Double, Double, Double, Double)
    switch numbers.count {
    case 4: (west, south, east, north) = (numbers[0], numbers[1], numbers[2], numbers[3])
    case 6: (west, south, east, north) = (numbers[0], numbers[1], numbers[3], numbers[4])
    default:
      throw CQL2Error("A BBOX takes 4 numbers (or 6), not \(numbers.count).", at: location)
    }
    guard south <= north else {
      throw CQL2Error("The BBOX's south (\(south)) is above its north (\(north)).", at: location)
    }
    return .box(west: west, south: south, east: east, north: north)
  }

  /// A line of at least 2 positions.
  static func checkedLine(_ line: [CQL2Position], at location: CQL2Location) throws
    -> [CQL2Position]
  {
    guard line.count >= 2 else {
      throw CQL2Error("A line string needs at least 2 positions.", at: location)
    }
    return line
  }

  /// Rings of at least 4 positions, each closed.
  static func checkedRings(_ rings: [[CQL2Position]], at location: CQL2Location) throws
    -> [[CQL2Position]]
  {
    for ring in rings {
      guard ring.count >= 4, ring.first == ring.last else {
        throw CQL2Error(
          "A polygon's ring needs at least 4 positions, the last equal to the first.",
          at: location)
      }
    }
    return rings
  }
}
