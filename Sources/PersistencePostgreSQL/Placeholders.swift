/// The core's SQL in PostgreSQL's parameter syntax.
///
/// The core writes parameters as SQLite and the SQL standard do: `?` for the next parameter,
/// `?N` for parameter N (used more than once). PostgreSQL numbers them: `$N`. The rewrite skips
/// string literals (`'…'`, with `''` inside), quoted identifiers (`"…"`) and comments (`--` to
/// the end of the line, `/* … */`), where a `?` is text, not a parameter.
enum Placeholders {
  /// `sql` with every parameter written `$N`, and how many parameters it takes (the highest
  /// number used). A bare `?` takes the number after the highest used before it, as in SQLite.
  ///
  /// Cost: O(length of `sql`).
  static func rewrite(_ sql: String) -> (sql: String, parameterCount: Int) {
    let bytes = Array(sql.utf8)
    var output: [UInt8] = []
    output.reserveCapacity(bytes.count + 8)
    var highest = 0
    var index = 0
    /// Copies bytes up to and including the next `terminator` (or the end).
    func copy(through terminator: UInt8) {
      while index < bytes.count {
        let byte = bytes[index]
        output.append(byte)
        index += 1
        if byte == terminator { return }
      }
    }
    while index < bytes.count {
      let byte = bytes[index]
      switch byte {
      case UInt8(ascii: "'"), UInt8(ascii: "\""):
        // A doubled quote inside is two adjacent literals to this scan, which is the same.
        output.append(byte)
        index += 1
        copy(through: byte)
      case UInt8(ascii: "-") where index + 1 < bytes.count && bytes[index + 1] == byte:
        copy(through: UInt8(ascii: "\n"))
      case UInt8(ascii: "/") where index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "*"):
        output.append(contentsOf: [byte, bytes[index + 1]])
        index += 2
        while index < bytes.count {
          if bytes[index] == UInt8(ascii: "*"), index + 1 < bytes.count,
            bytes[index + 1] == UInt8(ascii: "/")
          {
            output.append(contentsOf: [UInt8(ascii: "*"), UInt8(ascii: "/")])
            index += 2
            break
          }
          output.append(bytes[index])
          index += 1
        }
      case UInt8(ascii: "?"):
        index += 1
        var number = 0
        var digits = 0
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]),
          digits < 6
        {
          number = number * 10 + Int(bytes[index] - UInt8(ascii: "0"))
          index += 1
          digits += 1
        }
        if digits == 0 {
          highest += 1
          number = highest
        } else {
          highest = max(highest, number)
        }
        output.append(UInt8(ascii: "$"))
        output.append(contentsOf: String(number).utf8)
      default:
        output.append(byte)
        index += 1
      }
    }
    return (String(decoding: output, as: UTF8.self), highest)
  }
}
