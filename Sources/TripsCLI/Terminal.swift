import CommandLineKit
import Foundation
import Persistence
import Synchronization

/// Where a command reads and writes: the process's streams, or buffers in tests.
public struct TerminalIO: Sendable {
  /// Writes bytes to standard output; throws when they cannot be written (the reader went away,
  /// the disk is full), never traps.
  public var writeOutput: @Sendable ([UInt8]) throws -> Void
  /// Writes to standard error (failures are ignored: there is nowhere left to report them).
  public var err: @Sendable (String) -> Void
  /// Reads all of standard input.
  public var readInput: @Sendable () throws -> Data
  /// The environment (`TRIPS_STORE`, `XDG_DATA_HOME`, `HOME`, `NO_COLOR`).
  public var environment: [String: String]
  /// Whether standard output is a terminal (colour and tables for people).
  public var outIsTerminal: Bool
  /// Whether standard error is a terminal (progress).
  public var errIsTerminal: Bool
  /// The zone days are shown and filtered in: `--time-zone`, else `$TZ`, else UTC. Instants
  /// are stored as they are; only display and day filters follow the zone.
  var timeZone = TimeZone(identifier: "UTC")!
  /// The store a command is creating, removed if the command fails.
  let creation = StoreCreation()

  /// Creates an IO.
  public init(
    writeOutput: @escaping @Sendable ([UInt8]) throws -> Void,
    err: @escaping @Sendable (String) -> Void,
    readInput: @escaping @Sendable () throws -> Data, environment: [String: String],
    outIsTerminal: Bool,
    errIsTerminal: Bool
  ) {
    self.writeOutput = writeOutput
    self.err = err
    self.readInput = readInput
    self.environment = environment
    self.outIsTerminal = outIsTerminal
    self.errIsTerminal = errIsTerminal
  }

  /// The process's own streams and environment.
  ///
  /// Call it before the command opens any file: descriptors 0, 1 and 2 that the process was
  /// started without are reopened on `/dev/null` first, so that no file can take their number.
  public static func process() -> TerminalIO {
    let outputIsOpen = StandardStreams.prepare()
    return TerminalIO(
      writeOutput: { bytes in
        guard outputIsOpen else { throw OutputError.failed("standard output is closed") }
        try writeAll(bytes, to: 1)
      },
      err: { text in try? writeAll(Array(text.utf8), to: 2) },
      readInput: { try FileHandle.standardInput.readToEnd() ?? Data() },
      environment: ProcessInfo.processInfo.environment,
      outIsTerminal: isatty(1) == 1, errIsTerminal: isatty(2) == 1)
  }

  /// Writes text to standard output.
  func out(_ text: String) throws { try writeOutput(Array(text.utf8)) }

  /// Writes bytes to standard output.
  func out(_ data: Data) throws { try writeOutput([UInt8](data)) }

  /// Colour only on a terminal, and never when `NO_COLOR` is set to anything.
  var useColor: Bool { outIsTerminal && (environment["NO_COLOR"] ?? "").isEmpty }

  func bold(_ text: String) -> String { useColor ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
  func dim(_ text: String) -> String { useColor ? "\u{1B}[2m\(text)\u{1B}[0m" : text }
}

/// Aligned text columns, measured in terminal cells (wide CJK and emoji count as two).
///
/// Cells are shown with ``terminalSafe(_:)``, so no row can span two lines or send a control
/// sequence. A column is padded to at most ``maximumColumnWidth`` cells: a longer cell is cut
/// with `…` when `cutsLongCells` (on a terminal) and otherwise printed whole without widening
/// the other rows, so one huge value cannot blow up the whole output.
struct TextTable {
  /// The widest a column is padded to.
  static let maximumColumnWidth = 40

  var rows: [[String]] = []
  /// Cut cells wider than ``maximumColumnWidth`` with `…` (on a terminal).
  var cutsLongCells = false

  /// The column widths for `rows`, each at most ``maximumColumnWidth``. O(cells).
  static func widths(_ rows: [[String]]) -> [Int] {
    var widths: [Int] = []
    for row in rows {
      for (index, cell) in row.enumerated() {
        if index == widths.count { widths.append(0) }
        let width = min(displayWidth(terminalSafe(cell)), maximumColumnWidth)
        widths[index] = max(widths[index], width)
      }
    }
    return widths
  }

  /// One row as a line (without its newline), padded to `widths`.
  static func line(_ row: [String], widths: [Int], cutsLongCells: Bool) -> String {
    var line = ""
    for (index, rawCell) in row.enumerated() {
      var cell = terminalSafe(rawCell)
      var width = displayWidth(cell)
      if cutsLongCells && width > maximumColumnWidth {
        cell = cut(cell, to: maximumColumnWidth)
        width = displayWidth(cell)
      }
      line += cell
      if index < row.count - 1 {
        let target = index < widths.count ? widths[index] : 0
        line += String(repeating: " ", count: max(target - width, 0) + 2)
      }
    }
    while line.last == " " { line.removeLast() }
    return line
  }

  /// `text` shortened to at most `width` cells, ending with `…`.
  static func cut(_ text: String, to width: Int) -> String {
    var result = ""
    var used = 0
    for character in text {
      let cells = displayWidth(String(character))
      if used + cells > width - 1 { break }
      result.append(character)
      used += cells
    }
    return result + "…"
  }

  /// Each row as one line (without newlines).
  func lines() -> [String] {
    let widths = Self.widths(rows)
    return rows.map { Self.line($0, widths: widths, cutsLongCells: cutsLongCells) }
  }

  func render(indent: String = "", header: ((String) -> String)? = nil) -> String {
    var text = ""
    for (index, line) in lines().enumerated() {
      text += indent + (index == 0 ? header.map { $0(line) } ?? line : line) + "\n"
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

/// A store file a command creates on its way to a write (and the folders made for it): removed
/// again, folders deepest first and only when empty, if the command fails, so that a write
/// that fails leaves nothing behind (a mistyped `--store` makes no empty store).
final class StoreCreation: Sendable {
  private let pending = Mutex<(file: URL, folders: [URL])?>(nil)

  /// Notes that the store file `url` is about to be made, with the folders above it that do
  /// not exist yet. Nothing for a file that exists, or a URL that is not a file's.
  func noteCreating(_ url: URL) {
    guard url.isFileURL, !FileManager.default.fileExists(atPath: url.path) else { return }
    var folders: [URL] = []
    var folder = url.deletingLastPathComponent()
    while folder.path != "/", !FileManager.default.fileExists(atPath: folder.path) {
      folders.append(folder)
      folder = folder.deletingLastPathComponent()
    }
    pending.withLock { $0 = (url, folders) }
  }

  /// Removes what ``noteCreating(_:)`` noted: the store's file and SQLite's files beside it
  /// when nothing was ever committed to it, then the folders made for it that are empty.
  /// Called once the store is closed.
  func undo() {
    guard
      let (file, folders) = pending.withLock({ pending in
        defer { pending = nil }
        return pending
      })
    else { return }
    // Only a store no one wrote to: another process may have made the same store meanwhile
    // and written to it, and that is kept (with the folders above it).
    let configuration = ModelConfiguration(url: file)
    let removed = (try? configuration.defaultEngine())?.removeStoreIfUnwritten(configuration)
    guard removed == true || !FileManager.default.fileExists(atPath: file.path)
    else { return }
    for folder in folders {
      guard (try? FileManager.default.contentsOfDirectory(atPath: folder.path))?.isEmpty == true
      else { break }
      try? FileManager.default.removeItem(at: folder)
    }
  }
}
