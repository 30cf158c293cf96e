import Foundation

/// The bearer tokens that may write, read from a token file of `name:token` lines; the name is
/// the author recorded in history for that token's writes.
///
/// The file must not be readable by other users (a token is a password). Blank lines and lines
/// starting with `#` are ignored.
public struct TokenFile: Sendable {
  /// One writer: the author name and its token.
  public struct Entry: Sendable {
    /// The author recorded in history.
    public var name: String
    /// The secret.
    public var token: String
  }

  /// The writers, in file order.
  public var entries: [Entry]

  /// Creates a token list (for embedding without a file).
  public init(entries: [Entry]) { self.entries = entries }

  /// Reads `path`, refusing a file other users can read or write, and malformed lines.
  public init(path: String) throws(ServiceError) {
    var info = stat()
    guard stat(path, &info) == 0 else {
      throw ServiceError(
        code: .badTokenFile, message: "The token file \(path) cannot be read: it does not exist.")
    }
    guard info.st_mode & 0o077 == 0 else {
      throw ServiceError(
        code: .badTokenFile,
        message:
          "The token file \(path) can be read or written by other users (mode \(String(info.st_mode & 0o777, radix: 8))): tokens are passwords. Run: chmod 600 \(path)"
      )
    }
    guard let data = FileManager.default.contents(atPath: path),
      let text = String(data: data, encoding: .utf8)
    else {
      throw ServiceError(
        code: .badTokenFile, message: "The token file \(path) cannot be read as UTF-8 text.")
    }
    var entries: [Entry] = []
    var seen = Set<String>()
    // `\r\n` is one Character in Swift: lines end at either form.
    let lines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
    for (index, raw) in lines.enumerated() {
      // A file saved with CRLF line ends keeps a `\r` on each line: it is not part of a token.
      let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
      if line.isEmpty || line.hasPrefix("#") { continue }
      guard let colon = line.firstIndex(of: ":") else {
        throw ServiceError(
          code: .badTokenFile, message: "\(path):\(index + 1): expected name:token.")
      }
      let name = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
      let token = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
      guard !name.isEmpty, token.count >= 16, !token.contains(where: \.isWhitespace) else {
        throw ServiceError(
          code: .badTokenFile,
          message:
            "\(path):\(index + 1): a writer needs a name and a token of at least 16 characters without spaces."
        )
      }
      guard seen.insert(token).inserted else {
        throw ServiceError(
          code: .badTokenFile, message: "\(path):\(index + 1): the same token is given twice.")
      }
      entries.append(Entry(name: name, token: token))
    }
    guard !entries.isEmpty else {
      throw ServiceError(code: .badTokenFile, message: "The token file \(path) holds no token.")
    }
    self.entries = entries
  }

  /// The writer whose token is `presented`, compared in constant time (every entry is
  /// compared in full, whatever matches), or nil.
  public func writer(for presented: String) -> String? {
    let given = Array(presented.utf8)
    var found: String?
    for entry in entries where Self.constantTimeEqual(Array(entry.token.utf8), given) {
      found = entry.name
    }
    return found
  }

  /// Equal bytes, in time that depends only on the lengths.
  static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
    for index in 0..<max(a.count, b.count) {
      let x = index < a.count ? a[index] : 0
      let y = index < b.count ? b[index] : 0
      difference |= x ^ y
    }
    return difference == 0
  }
}
