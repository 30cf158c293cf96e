import SwiftSyntax

extension StoredProperty {
  /// The first paragraph of the property's documentation comment (`///` lines, or a `/** */`
  /// block), its lines trimmed and joined by spaces; empty when it has none. What
  /// `ModelField.documentation` tells formats: a command line's help, a schema's description.
  /// Symbol links (` ``name`` `) become code spans.
  var documentation: String {
    var lines: [Substring] = []
    for piece in declaration.leadingTrivia {
      switch piece {
      case .docLineComment(let text):
        lines.append(text.dropFirst(3))
      case .docBlockComment(let text):
        var body = text.dropFirst(3)
        if body.hasSuffix("*/") { body = body.dropLast(2) }
        for line in body.split(separator: "\n", omittingEmptySubsequences: false) {
          // A block's lines may start with `*`, as Markdown's continuation.
          let trimmed = trimmed(line)
          lines.append(trimmed.hasPrefix("*") ? trimmed.dropFirst() : trimmed)
        }
      default:
        continue
      }
    }
    let paragraph = lines.map(trimmed).drop { $0.isEmpty }.prefix { !$0.isEmpty }
    // A symbol link (``startDate``) reads as code (`startDate`) outside DocC.
    return paragraph.joined(separator: " ").replacing("``", with: "`")
  }
}

/// `text` without the spaces and tabs around it.
private func trimmed(_ text: Substring) -> Substring {
  let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
  guard let first = text.firstIndex(where: { !isSpace($0) }),
    let last = text.lastIndex(where: { !isSpace($0) })
  else { return "" }
  return text[first...last]
}
