import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// README's shell examples, run: every ```` ```sh ```` block after a line
/// `<!-- example-run -->` is run command by command (standard output and error together) (`trips` is the built binary, the working
/// folder a scratch one holding `Data/`, `$TRIPS_STORE` a copy of the sample store as
/// `Tools/run-sample.sh` makes it), and each command's output is compared with the `# ` lines
/// that follow it in README. Only ids, history tokens and times may differ; a `# …` line stands
/// for the rest of the output; text after two spaces and a `(` on an output line is a remark.
/// A command README says runs "until Ctrl-C" is stopped with SIGINT after a second and must
/// exit 0. A command ending with `&` runs in the background until the block ends (the next
/// step waits for its first line of output, as a server's "Listening on"); port 8080 becomes a
/// free port.
@Suite("README's shell examples")
struct ReadmeExamplesTests {
  struct Step {
    var command: String
    var expected: [String] = []
    /// True when README shows only the start of the output (`# …`).
    var truncated = false
  }

  /// The marked blocks of README, as steps.
  /// README and the documents it points to for the whole of each part.
  static let pages = ["README.md", "Documentation/CLI.md", "Documentation/Service.md"]

  static func blocks() throws -> [[Step]] {
    let text = try pages.map {
      try String(contentsOf: repositoryRoot.appendingPathComponent($0), encoding: .utf8)
    }.joined(separator: "\n")
    var blocks: [[Step]] = []
    var marked = false
    var current: [Step]?
    var continuation = ""
    // Whether `# ` lines now are output of the command above (no blank line between).
    var attached = false
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
      if current == nil {
        if line == "<!-- example-run -->" {
          marked = true
        } else if line == "```sh", marked {
          current = []
          marked = false
        } else if !line.isEmpty {
          marked = false
        }
        continue
      }
      if line == "```" {
        blocks.append(current!)
        current = nil
        continue
      }
      if line.hasPrefix("# ") || line == "#" {
        // A comment after a blank line is prose, not output.
        guard attached else { continue }
        let output = String(line.dropFirst(2))
        if output == "…" {
          current![current!.count - 1].truncated = true
        } else {
          current![current!.count - 1].expected.append(Self.removeRemark(output))
        }
        continue
      }
      if line.isEmpty {
        attached = false
        continue
      }
      attached = true
      if line.hasSuffix("\\") {
        continuation += String(line.dropLast()) + " "
        continue
      }
      current!.append(Step(command: continuation + line))
      continuation = ""
    }
    return blocks
  }

  /// An output line without README's remark (`   (…)` after the output).
  static func removeRemark(_ line: String) -> String {
    guard let range = line.range(of: "   (", options: .backwards), line.hasSuffix(")") else {
      return line.trimmingCharacters(in: .whitespaces)
    }
    return String(line[..<range.lowerBound]).trimmingCharacters(in: .whitespaces)
  }

  /// Ids, tokens and times replaced by placeholders, trailing spaces dropped.
  static func normalized(_ line: String) -> String {
    var text = line
    let patterns = [
      ("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
      ("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}Z", "<time>"),
      ("\\b[0-9a-f]{8}\\b", "<id>"),
    ]
    for (pattern, replacement) in patterns {
      text = text.replacingOccurrences(
        of: pattern, with: replacement, options: .regularExpression)
    }
    return text.trimmingCharacters(in: .whitespaces)
  }

  @Test("the first command's output is what `list --group-by destination` prints on the sample")
  func firstCommand() throws {
    let text = try String(
      contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
    let start = try #require(text.range(of: "The start of the first command's real output:"))
    let block = try #require(
      text[start.upperBound...].range(of: "```text\n").map { text[$0.upperBound...] })
    let shown = block[..<block.range(of: "```")!.lowerBound].split(
      separator: "\n", omittingEmptySubsequences: false
    ).map(String.init).filter { $0 != "…" }
    let scratch = Scratch()
    #expect(
      try trips(
        ["import", repositoryRoot.appendingPathComponent("Data/sample-trips.csv").path],
        store: scratch.store
      ).status == 0)
    let run = try trips(["list", "--group-by", "destination"], store: scratch.store)
    let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let trimmed = shown.last == "" ? Array(shown.dropLast()) : shown
    #expect(
      Array(lines.prefix(trimmed.count)).map(Self.normalized) == trimmed.map(Self.normalized))
  }

  @Test("run as shown, with the output shown (ids and times aside)")
  func run() throws {
    let blocks = try Self.blocks()
    #expect(blocks.count >= 2, "the marked blocks were found")
    for steps in blocks {
      let scratch = Scratch()
      try FileManager.default.createSymbolicLink(
        at: scratch.file("Data"), withDestinationURL: repositoryRoot.appendingPathComponent("Data"))
      let bin = scratch.file("bin")
      try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
      try FileManager.default.createSymbolicLink(
        at: bin.appendingPathComponent("trips"), withDestinationURL: tripsExecutable)
      // The sample store as Tools/run-sample.sh makes it: the trips, then their plans.
      let sample = scratch.file("trips-sample.sqlite")
      for file in ["Data/sample-trips.csv", "Data/sample-plans.json"] {
        #expect(
          try trips(
            ["import", "--store", sample.path, repositoryRoot.appendingPathComponent(file).path]
          ).status == 0)
      }
      var environment = [
        "PATH": bin.path + ":/usr/bin:/bin", "HOME": scratch.url.path, "TZ": "UTC",
        "TRIPS_STORE": scratch.file("default.sqlite").path,
      ]
      // Port 8080 in README: a free one here.
      let port = String(try freePort())
      var background: [Process] = []
      defer {
        for process in background where process.isRunning {
          kill(process.processIdentifier, SIGKILL)
          process.waitUntilExit()
        }
      }
      for var step in steps {
        step.command = step.command.replacingOccurrences(of: "8080", with: port)
        step.expected = step.expected.map { $0.replacingOccurrences(of: "8080", with: port) }
        let bare = step.command.replacingOccurrences(
          of: "\\s+#\\s.*$", with: "", options: .regularExpression)
        if bare.hasSuffix("&") {
          let process = Process()
          process.executableURL = URL(fileURLWithPath: "/bin/bash")
          process.arguments = ["-c", "exec " + String(bare.dropLast())]
          process.currentDirectoryURL = scratch.url
          process.environment = environment
          let out = Pipe()
          process.standardOutput = out
          process.standardError = FileHandle.nullDevice
          try process.run()
          background.append(process)
          // Ready once it says something (a server's "Listening on"), or after 2 s.
          let ready = DispatchSemaphore(value: 0)
          let handle = out.fileHandleForReading
          handle.readabilityHandler = { _ in ready.signal() }
          _ = ready.wait(timeout: .now() + 2)
          handle.readabilityHandler = nil
          continue
        }
        if step.command.hasPrefix("export TRIPS_STORE=") {
          environment["TRIPS_STORE"] = sample.path  // the store Tools/run-sample.sh made
          continue
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", step.command]
        process.currentDirectoryURL = scratch.url
        process.environment = environment
        // Both streams, as a person at a terminal sees them (notes and counts go to stderr).
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        if step.command.contains("until Ctrl-C") {
          Thread.sleep(forTimeInterval: 1)
          // bash -c runs a single command in place of itself: the signal reaches trips.
          kill(process.processIdentifier, SIGINT)
        }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(step.command)")
        let lines = String(decoding: data, as: UTF8.self).split(
          separator: "\n", omittingEmptySubsequences: false
        ).map(String.init).filter { !$0.isEmpty }
        let shown = step.expected.map(Self.normalized)
        let got = lines.map(Self.normalized)
        if step.truncated {
          #expect(Array(got.prefix(shown.count)) == shown, "\(step.command)")
        } else if !shown.isEmpty {
          #expect(got == shown, "\(step.command)")
        }
      }
    }
  }
}

/// A TCP port nothing listens on now.
func freePort() throws -> UInt16 {
  let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  defer { close(socket) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  let found = withUnsafeMutablePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
      Glibc.bind(socket, pointer, length) == 0 && getsockname(socket, pointer, &length) == 0
    }
  }
  guard found else { throw CocoaError(.fileReadUnknown) }
  return UInt16(bigEndian: address.sin_port)
}
