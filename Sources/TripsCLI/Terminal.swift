import Foundation

/// Where a command reads and writes: the process's streams, or buffers in tests.
public struct TerminalIO: Sendable {
  /// Writes to standard output.
  public var out: @Sendable (String) -> Void
  /// Writes to standard error.
  public var err: @Sendable (String) -> Void
  /// Reads all of standard input.
  public var readInput: @Sendable () throws -> Data
  /// The environment (`TRIPS_STORE`, `XDG_DATA_HOME`, `HOME`, `NO_COLOR`).
  public var environment: [String: String]
  /// Whether standard output is a terminal (colour and tables for people).
  public var outIsTerminal: Bool
  /// Whether standard error is a terminal (progress).
  public var errIsTerminal: Bool

  /// Creates an IO.
  public init(
    out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void,
    readInput: @escaping @Sendable () throws -> Data, environment: [String: String],
    outIsTerminal: Bool,
    errIsTerminal: Bool
  ) {
    self.out = out
    self.err = err
    self.readInput = readInput
    self.environment = environment
    self.outIsTerminal = outIsTerminal
    self.errIsTerminal = errIsTerminal
  }

  /// The process's own streams and environment.
  public static func process() -> TerminalIO {
    TerminalIO(
      out: { FileHandle.standardOutput.write(Data($0.utf8)) },
      err: { FileHandle.standardError.write(Data($0.utf8)) },
      readInput: { FileHandle.standardInput.readDataToEndOfFile() },
      environment: ProcessInfo.processInfo.environment,
      outIsTerminal: isatty(1) == 1, errIsTerminal: isatty(2) == 1)
  }

  /// Colour only on a terminal, and never when `NO_COLOR` is set to anything.
  var useColor: Bool { outIsTerminal && (environment["NO_COLOR"] ?? "").isEmpty }

  func bold(_ text: String) -> String { useColor ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
  func dim(_ text: String) -> String { useColor ? "\u{1B}[2m\(text)\u{1B}[0m" : text }
}

/// Aligned text columns, measured in terminal cells (wide CJK and emoji count as two).
struct TextTable {
  var rows: [[String]] = []

  func render(indent: String = "", header: ((String) -> String)? = nil) -> String {
    guard let columnCount = rows.map(\.count).max() else { return "" }
    var widths = Array(repeating: 0, count: columnCount)
    for row in rows {
      for (index, cell) in row.enumerated() {
        widths[index] = max(widths[index], displayWidth(cell))
      }
    }
    var text = ""
    for (rowIndex, row) in rows.enumerated() {
      var line = ""
      for (index, cell) in row.enumerated() {
        let isLast = index == row.count - 1
        line +=
          isLast
          ? cell : cell + String(repeating: " ", count: widths[index] - displayWidth(cell) + 2)
      }
      while line.last == " " { line.removeLast() }
      if rowIndex == 0, let header { line = header(line) }
      text += indent + line + "\n"
    }
    return text
  }
}

/// The number of terminal cells `text` takes.
func displayWidth(_ text: String) -> Int {
  text.reduce(0) { width, character in
    guard let scalar = character.unicodeScalars.first else { return width }
    if scalar.properties.generalCategory == .control { return width }
    return width + (isWide(scalar.value) ? 2 : 1)
  }
}

private func isWide(_ value: UInt32) -> Bool {
  switch value {
  case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
    0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
    0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x3FFFD:
    true
  default: false
  }
}
