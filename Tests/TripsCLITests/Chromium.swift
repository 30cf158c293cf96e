import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A headless Chromium driven through the DevTools protocol over a pipe
/// (`--remote-debugging-pipe`: commands on descriptor 3, answers and events on 4, each a JSON
/// message ended by a NUL byte): one page, its console and exceptions collected, JavaScript
/// evaluated, screenshots taken. A real browser, as a person's.
final class Chromium: @unchecked Sendable {
  static let executable = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }

  private let pid: pid_t
  private let commands: Int32
  private let answers: Int32
  private let profile: URL
  private var nextID = 0
  private var session = ""
  /// What the browser sent: answers by command id, problems the page reported, and whether
  /// the pipe closed.
  final class Inbox: @unchecked Sendable {
    let state = Mutex<(replies: [Int: Data], problems: [String], closed: Bool)>(
      ([:], [], false))
  }
  private let inbox = Inbox()
  private let reader: Thread

  /// Errors the page reported: console errors, uncaught exceptions, failed loads.
  var problems: [String] { inbox.state.withLock { $0.problems } }

  struct Failure: Error, CustomStringConvertible {
    var description: String
  }

  /// Starts Chromium with a page of `width` × `height` CSS pixels.
  init(width: Int, height: Int) throws {
    guard let executable = Self.executable else { throw Failure(description: "no chromium") }
    profile = FileManager.default.temporaryDirectory.appendingPathComponent(
      "chromium-\(UUID().uuidString)")
    var toChrome: [Int32] = [0, 0]
    var fromChrome: [Int32] = [0, 0]
    guard pipe(&toChrome) == 0, pipe(&fromChrome) == 0 else {
      throw Failure(description: "pipe failed")
    }
    // Our ends must not leak into the child (nor into other tests' children).
    _ = fcntl(toChrome[1], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fromChrome[0], F_SETFD, FD_CLOEXEC)
    // Out of the way of descriptors 3 and 4, which the child gets them as.
    let childRead = fcntl(toChrome[0], F_DUPFD_CLOEXEC, 10)
    let childWrite = fcntl(fromChrome[1], F_DUPFD_CLOEXEC, 10)
    Glibc.close(toChrome[0])
    Glibc.close(fromChrome[1])
    commands = toChrome[1]
    answers = fromChrome[0]
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, childRead, 3)
    posix_spawn_file_actions_adddup2(&actions, childWrite, 4)
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let arguments = [
      executable, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
      "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
      "--user-data-dir=\(profile.path)", "--window-size=\(width),\(height)", "about:blank",
    ]
    var argv = arguments.map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    var child: pid_t = 0
    let result = posix_spawn(&child, executable, &actions, nil, &argv, environ)
    Glibc.close(childRead)
    Glibc.close(childWrite)
    guard result == 0 else { throw Failure(description: "posix_spawn: \(result)") }
    pid = child
    let answers = self.answers
    let inbox = self.inbox
    reader = Thread {
      var buffer: [UInt8] = []
      var chunk = [UInt8](repeating: 0, count: 65_536)
      while true {
        let count = read(answers, &chunk, chunk.count)
        if count <= 0 { break }
        buffer += chunk[0..<count]
        while let end = buffer.firstIndex(of: 0) {
          let message = Data(buffer[..<end])
          buffer.removeSubrange(...end)
          guard let object = try? JSONSerialization.jsonObject(with: message) as? [String: Any]
          else { continue }
          Self.route(object, message, into: inbox)
        }
      }
      inbox.state.withLock { $0.closed = true }
    }
    reader.start()
    try open(width: width, height: height)
  }

  private static func route(_ object: [String: Any], _ message: Data, into inbox: Inbox) {
    if let id = object["id"] as? Int {
      inbox.state.withLock { $0.replies[id] = message }
      return
    }
    let params = object["params"] as? [String: Any] ?? [:]
    var problem: String?
    switch object["method"] as? String {
    case "Runtime.consoleAPICalled" where params["type"] as? String == "error":
      let arguments = params["args"] as? [[String: Any]] ?? []
      problem =
        "console.error: "
        + arguments.map { "\($0["value"] ?? $0["description"] ?? "?")" }.joined(separator: " ")
    case "Runtime.exceptionThrown":
      let details = params["exceptionDetails"] as? [String: Any] ?? [:]
      let exception = details["exception"] as? [String: Any] ?? [:]
      problem = "exception: \(exception["description"] ?? details["text"] ?? "?")"
    case "Log.entryAdded":
      let entry = params["entry"] as? [String: Any] ?? [:]
      if entry["level"] as? String == "error" {
        problem = "log: \(entry["text"] ?? "?") \(entry["url"] ?? "")"
      }
    default: break
    }
    if let problem { inbox.state.withLock { $0.problems.append(problem) } }
  }

  /// Sends a command and waits up to 20 s for its answer's `result`.
  @discardableResult
  func send(_ method: String, _ params: [String: Any] = [:], inPage: Bool = true) throws
    -> [String: Any]
  {
    nextID += 1
    let id = nextID
    var message: [String: Any] = ["id": id, "method": method, "params": params]
    if inPage && !session.isEmpty { message["sessionId"] = session }
    var data = try JSONSerialization.data(withJSONObject: message)
    data.append(0)
    let written = data.withUnsafeBytes { write(commands, $0.baseAddress, $0.count) }
    guard written == data.count else { throw Failure(description: "the browser went away") }
    let deadline = Date().addingTimeInterval(20)
    while Date() < deadline {
      if let message = inbox.state.withLock({ $0.replies.removeValue(forKey: id) }),
        let reply = try JSONSerialization.jsonObject(with: message) as? [String: Any]
      {
        if let error = reply["error"] { throw Failure(description: "\(method): \(error)") }
        return reply["result"] as? [String: Any] ?? [:]
      }
      if inbox.state.withLock({ $0.closed }) { throw Failure(description: "the browser went away") }
      Thread.sleep(forTimeInterval: 0.005)
    }
    throw Failure(description: "\(method): no answer in 20 s")
  }

  private func open(width: Int, height: Int) throws {
    let target = try send("Target.createTarget", ["url": "about:blank"], inPage: false)
    guard let targetID = target["targetId"] as? String else {
      throw Failure(description: "no target")
    }
    let attached = try send(
      "Target.attachToTarget", ["targetId": targetID, "flatten": true], inPage: false)
    session = attached["sessionId"] as? String ?? ""
    try send("Runtime.enable")
    try send("Log.enable")
    try send("Page.enable")
    try send(
      "Emulation.setDeviceMetricsOverride",
      ["width": width, "height": height, "deviceScaleFactor": 1, "mobile": false])
  }

  /// Loads `url` in the page.
  func navigate(_ url: String) throws {
    let result = try send("Page.navigate", ["url": url])
    if let error = result["errorText"] as? String { throw Failure(description: error) }
  }

  /// The value of a JavaScript expression (JSON-compatible values only).
  func evaluate(_ expression: String) throws -> Any? {
    let result = try send(
      "Runtime.evaluate", ["expression": expression, "returnByValue": true])
    return (result["result"] as? [String: Any])?["value"]
  }

  /// A PNG of the page as it is drawn now.
  func screenshot() throws -> Data {
    let result = try send("Page.captureScreenshot", ["format": "png"])
    guard let text = result["data"] as? String, let data = Data(base64Encoded: text) else {
      throw Failure(description: "no screenshot")
    }
    return data
  }

  /// Closes the browser and waits for it.
  func close() {
    _ = try? send("Browser.close", inPage: false)
    let deadline = Date().addingTimeInterval(5)
    var status: Int32 = 0
    while waitpid(pid, &status, WNOHANG) == 0 {
      if Date() > deadline {
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        break
      }
      Thread.sleep(forTimeInterval: 0.02)
    }
    Glibc.close(commands)
    Glibc.close(answers)
    try? FileManager.default.removeItem(at: profile)
  }
}
