import Foundation

/// Reads RFC 4180 CSV: comma-separated fields, fields in double quotes may hold commas, line
/// breaks and doubled quotes; records end with LF or CRLF; a UTF-8 byte-order mark is skipped.
/// Blank lines are skipped.
///
/// Cost: one pass over the bytes, O(input) time and memory.
public struct CSVReader {
  /// One record and the line it starts on.
  public struct Record: Equatable, Sendable {
    /// The 1-based line where the record starts.
    public var line: Int
    /// The fields, unquoted.
    public var fields: [String]
  }

  /// A syntax error, with the 1-based line where it was found.
  public struct SyntaxError: Error, Equatable, Sendable {
    /// Where.
    public var line: Int
    /// What.
    public var reason: String
  }

  /// Parses `data`; throws the first syntax error.
  public static func records(_ data: Data) throws(SyntaxError) -> [Record] {
    var bytes = [UInt8](data)
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
    guard String(validating: bytes, as: UTF8.self) != nil else {
      let line = firstInvalidUTF8Line(bytes)
      throw SyntaxError(line: line, reason: "the file is not valid UTF-8")
    }
    var records: [Record] = []
    var fields: [String] = []
    var field: [UInt8] = []
    var line = 1
    var recordLine = 1
    var index = 0
    var inQuotes = false
    var quoted = false  // the current field was quoted (and its closing quote seen)
    var fieldHasContent = false

    func endField() {
      fields.append(String(decoding: field, as: UTF8.self))
      field.removeAll(keepingCapacity: true)
      quoted = false
      fieldHasContent = false
    }
    var recordHasContent = false  // anything but a line end was read for this record
    func endRecord() {
      endField()
      if recordHasContent { records.append(Record(line: recordLine, fields: fields)) }
      fields.removeAll(keepingCapacity: true)
      recordHasContent = false
    }

    while index < bytes.count {
      let byte = bytes[index]
      if byte == 0 {
        throw SyntaxError(line: line, reason: "the file contains a NUL byte")
      }
      if inQuotes {
        if byte == UInt8(ascii: "\"") {
          if index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "\"") {
            field.append(byte)
            index += 2
            continue
          }
          inQuotes = false
          quoted = true
        } else {
          if byte == UInt8(ascii: "\n") { line += 1 }
          field.append(byte)
        }
        index += 1
        continue
      }
      switch byte {
      case UInt8(ascii: ","):
        recordHasContent = true
        endField()
      case UInt8(ascii: "\r"):
        guard index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\n") else {
          throw SyntaxError(
            line: line, reason: "a carriage return outside quotes is not followed by a line feed")
        }
      case UInt8(ascii: "\n"):
        endRecord()
        line += 1
        recordLine = line
      case UInt8(ascii: "\""):
        guard !fieldHasContent && !quoted else {
          throw SyntaxError(
            line: line,
            reason:
              "a double quote inside an unquoted field; quote the whole field and double the quote (\"\")"
          )
        }
        inQuotes = true
        recordHasContent = true
        fieldHasContent = true
      default:
        if quoted {
          throw SyntaxError(
            line: line,
            reason:
              "text after a closing double quote; a quoted field must end at a comma or line end")
        }
        field.append(byte)
        fieldHasContent = true
        recordHasContent = true
      }
      index += 1
    }
    if inQuotes {
      throw SyntaxError(
        line: recordLine, reason: "a quoted field is not closed before the end of the file")
    }
    if recordHasContent { endRecord() }
    return records
  }

  private static func firstInvalidUTF8Line(_ bytes: [UInt8]) -> Int {
    var line = 1
    var start = 0
    for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: "\n") {
      if String(validating: bytes[start..<index], as: UTF8.self) == nil { return line }
      line += 1
      start = index + 1
    }
    return line
  }
}
