import CommandLineKit
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Why writing a command's output stopped.
///
/// No output path uses Foundation's `FileHandle.write(_:)`, which traps on any error: every
/// write goes through ``writeAll(_:to:)``, which throws one of these.
enum OutputError: Error, Equatable {
  /// The reader went away (`EPIPE`: `trips list | head -1`). The command ends quietly with
  /// exit 0, as `cat` and `grep` do when their reader is gone.
  case readerGone
  /// Writing failed for another reason (a full disk, a closed descriptor, an I/O error): a
  /// one-line error, exit 1.
  case failed(String)
}

/// Writes all of `bytes` to the file descriptor, retrying after `EINTR` and partial writes.
func writeAll(_ bytes: [UInt8], to descriptor: Int32) throws(OutputError) {
  var offset = 0
  while offset < bytes.count {
    let written = bytes.withUnsafeBytes { buffer in
      write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
    }
    if written >= 0 {
      offset += written
      continue
    }
    let code = errno
    if code == EINTR || code == EAGAIN { continue }
    if code == EPIPE { throw .readerGone }
    throw .failed(String(cString: strerror(code)))
  }
}

/// The process's standard streams, made safe before anything else opens a file.
enum StandardStreams {
  /// Reopens any of descriptors 0, 1 and 2 that the process was started without (`>&-`) on
  /// `/dev/null`, so that no file the command opens later (the store itself) can take their
  /// number and receive its output. Returns whether standard output was open.
  static func prepare() -> Bool {
    var outputWasOpen = true
    for descriptor: Int32 in 0...2 where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
      if descriptor == 1 { outputWasOpen = false }
      let opened = open("/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY)
      if opened >= 0 && opened != descriptor {
        dup2(opened, descriptor)
        close(opened)
      }
    }
    return outputWasOpen
  }
}

/// Where `--output FILE` writes: a regular file is replaced atomically; anything else (a FIFO,
/// a character device, a symlink to one) is written through; a symlink to a regular file
/// updates its target; `-` is standard output.
enum OutputFile {
  /// Writes `data` to `path` as described on the type.
  static func write(_ data: Data, to path: String, io: TerminalIO) throws {
    try write(to: path, io: io) { sink in try sink([UInt8](data)) }
  }

  /// Writes what `produce` hands its sink, chunk by chunk, to `path` as described on the type:
  /// memory is bound by a chunk, not the document. A regular file is still replaced whole:
  /// the chunks go to a temporary file renamed over it when `produce` returns, and nothing
  /// changes when it throws. Standard output and a FIFO get each chunk as it comes.
  static func write(
    to path: String, io: TerminalIO, _ produce: (_ sink: ([UInt8]) throws -> Void) throws -> Void
  ) throws {
    if path == "-" {
      try produce { try io.writeOutput($0) }
      return
    }
    guard !path.isEmpty else {
      throw CLIError.usage("--output needs a file name, or - for standard output.")
    }
    do {
      try writeFile(to: path, produce)
    } catch let error as CLIError {
      throw error
    } catch let error as OutputError {
      switch error {
      case .readerGone: throw error
      case .failed(let reason):
        throw CLIError(kind: .failure, message: "Cannot write \(path): \(reason).")
      }
    }
  }

  private static func writeFile(
    to path: String, _ produce: (_ sink: ([UInt8]) throws -> Void) throws -> Void
  ) throws {
    var info = stat()
    // Follow symlinks: a link to a regular file updates the target, a link to a device or a
    // FIFO writes through to it.
    if stat(path, &info) != 0 {
      guard errno == ENOENT else { throw OutputError.failed(String(cString: strerror(errno))) }
      // A new file, or a dangling symlink: create it where the path (or the link) points.
      var linkInfo = stat()
      if lstat(path, &linkInfo) == 0 && (linkInfo.st_mode & S_IFMT) == S_IFLNK {
        try writeThrough(to: path, create: true, produce)
      } else {
        try replaceAtomically(at: path, mode: nil, produce)
      }
      return
    }
    switch info.st_mode & S_IFMT {
    case S_IFREG:
      let resolved = realpath(path, nil).map { pointer -> String in
        defer { free(pointer) }
        return String(cString: pointer)
      }
      try replaceAtomically(at: resolved ?? path, mode: info.st_mode & 0o7777, produce)
    case S_IFDIR:
      throw CLIError(kind: .failure, message: "Cannot write \(path): it is a directory.")
    default:
      try writeThrough(to: path, create: false, produce)
    }
  }

  /// Opens and writes (a FIFO, a device, a new file behind a dangling link).
  private static func writeThrough(
    to path: String, create: Bool, _ produce: (_ sink: ([UInt8]) throws -> Void) throws -> Void
  ) throws {
    let flags = O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0)
    let descriptor = open(path, flags, 0o666)
    guard descriptor >= 0 else { throw OutputError.failed(String(cString: strerror(errno))) }
    defer { close(descriptor) }
    try produce { bytes in
      let result = Result { () throws(OutputError) in try writeAll(bytes, to: descriptor) }
      if case .failure(let error) = result {
        throw error == .readerGone ? OutputError.failed("its reader went away") : error
      }
    }
  }

  /// Writes a temporary file beside `path` and renames it over `path`: readers see the old
  /// file or the new one, never half of it. An existing file's permission bits are kept.
  private static func replaceAtomically(
    at path: String, mode: mode_t?, _ produce: (_ sink: ([UInt8]) throws -> Void) throws -> Void
  ) throws {
    let url = URL(fileURLWithPath: path)
    let prefix = url.deletingLastPathComponent().path + "/." + url.lastPathComponent + "."
    // The name is chosen, and the handler that removes it installed, before the file exists:
    // a signal at any point after the file is made finds its name (made by mkstemp, the file
    // would be there a moment before its name could be handed over).
    var descriptor: Int32 = -1
    var removal: TemporaryRemoval?
    var temporary = ""
    for _ in 0..<100 {
      temporary = prefix + temporarySuffix()
      removal = TemporaryRemoval(temporary)
      descriptor = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
      if descriptor >= 0 || errno != EEXIST { break }
      removal?.end()
      removal = nil
    }
    guard descriptor >= 0, let removal else {
      let reason = String(cString: strerror(errno))
      removal?.end()
      throw OutputError.failed(reason)
    }
    var renamed = false
    defer {
      if !renamed { unlink(temporary) }
      removal.end()
    }
    do {
      defer { close(descriptor) }
      if let mode {
        fchmod(descriptor, mode)
      } else {
        let mask = umask(0)
        umask(mask)
        fchmod(descriptor, 0o666 & ~mask)
      }
      try produce { bytes in try writeAll(bytes, to: descriptor) }
      guard fsync(descriptor) == 0 else {
        throw OutputError.failed(String(cString: strerror(errno)))
      }
    }
    guard rename(temporary, path) == 0 else {
      throw OutputError.failed(String(cString: strerror(errno)))
    }
    renamed = true
  }

  /// Twelve random letters and digits (71 bits): a name no other writer picks.
  private static func temporarySuffix() -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<12).map { _ in
      alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))]
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}

/// The temporary file of an atomic replace, removed when SIGINT, SIGTERM or SIGHUP ends the
/// process before the file is renamed over its target: a stopped export leaves nothing beside
/// the target (which is untouched). While one lives, those signals are caught by a handler
/// that unlinks the file, restores the signal's default action and raises it again, so the
/// process still ends as the signal says (exit status 128 + the signal to a shell). One at a
/// time, as one command writes one output. Only async-signal-safe calls run in the handler. A
/// signal the process ignores stays ignored, and one its parent blocked stays blocked.
final class TemporaryRemoval {
  /// The file's path as a C string (its address; 0 for none), read by the handler.
  private static let path = Atomic<Int>(0)
  private static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]
  private let copy: UnsafeMutablePointer<CChar>?
  private var previous: [sigaction] = []

  /// Starts watching for the signals, with `path` to remove.
  init(_ path: String) {
    copy = strdup(path)
    Self.path.store(Int(bitPattern: copy), ordering: .releasing)
    for number in Self.signals {
      var action = sigaction()
      action.__sigaction_handler.sa_handler = { number in
        let bits = TemporaryRemoval.path.load(ordering: .acquiring)
        if let path = UnsafePointer<CChar>(bitPattern: bits) { unlink(path) }
        signal(number, SIG_DFL)
        raise(number)
      }
      sigemptyset(&action.sa_mask)
      var old = sigaction()
      sigaction(number, &action, &old)
      previous.append(old)
      // A signal the process was told to ignore (`nohup`'s SIGHUP) stays ignored.
      if unsafeBitCast(old.__sigaction_handler.sa_handler, to: Int.self)
        == unsafeBitCast(SIG_IGN, to: Int.self)
      {
        sigaction(number, &old, nil)
      }
    }
  }

  /// Stops watching: the signals' earlier actions come back.
  func end() {
    for (number, old) in zip(Self.signals, previous) {
      var old = old
      sigaction(number, &old, nil)
    }
    previous = []
    Self.path.store(0, ordering: .releasing)
  }

  deinit {
    if !previous.isEmpty { end() }
    free(copy)
  }
}
