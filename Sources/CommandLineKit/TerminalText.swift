import Foundation

/// `text` as it may be shown to a person: C0 control characters, DEL and C1 control characters
/// are written as escapes (`\n`, `\t`, `\r`, else `\u{1B}`), so data can never move the cursor,
/// change colours, set a window title or split a line. O(length); no copy when there is none.
package func terminalSafe(_ text: String) -> String {
  guard text.unicodeScalars.contains(where: isControl) else { return text }
  var result = ""
  for scalar in text.unicodeScalars {
    guard isControl(scalar) else {
      result.unicodeScalars.append(scalar)
      continue
    }
    switch scalar {
    case "\n": result += "\\n"
    case "\t": result += "\\t"
    case "\r": result += "\\r"
    default: result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
    }
  }
  return result
}

/// C0 (U+0000–U+001F), DEL (U+007F) or C1 (U+0080–U+009F).
package func isControl(_ scalar: Unicode.Scalar) -> Bool {
  scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
}

/// `terminalSafe(_:)` for messages: newlines between lines are kept, every other control
/// character is escaped.
package func terminalSafeMessage(_ text: String) -> String {
  text.split(separator: "\n", omittingEmptySubsequences: false).map { terminalSafe(String($0)) }
    .joined(separator: "\n")
}
