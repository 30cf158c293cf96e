import Foundation

/// A store path or a `postgresql://` URL, or an error for a value with another URL scheme
/// (it is never taken for a folder named `https:`). `file://` URLs name files.
package func storeLocation(_ value: String, option: String) throws -> URL {
  guard !value.isEmpty else { throw CLIError.usage("\(option) needs a store path.") }
  for scheme in ["postgresql:", "postgres:"]
  where value.lowercased().hasPrefix(scheme) && !value.contains("://") {
    throw CLIError.usage(
      "\(option) '\(terminalSafe(value))' looks like a PostgreSQL store but is not a URL: write postgresql://user@host:5432/trips (or ./\(terminalSafe(value)) for a file of that name)."
    )
  }
  if let colon = value.range(of: "://") {
    let scheme = value[..<colon.lowerBound]
    let isScheme =
      scheme.first?.isLetter == true
      && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
    if isScheme {
      if scheme.lowercased() == "file", let url = URL(string: value), url.isFileURL {
        return URL(fileURLWithPath: url.path)
      }
      if ["postgresql", "postgres"].contains(scheme.lowercased()) {
        guard let url = URL(string: value) else {
          throw CLIError.usage(
            "\(option) is not a valid PostgreSQL URL: \(value) (for example postgresql://user@host:5432/trips)."
          )
        }
        return url
      }
      throw CLIError.usage(
        "\(option) has the URL scheme '\(scheme)', which trips cannot open; give the path of a SQLite store file or a postgresql:// URL."
      )
    }
  }
  return URL(fileURLWithPath: value)
}
