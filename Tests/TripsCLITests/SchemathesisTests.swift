import Foundation
import TestSupport
import Testing

@Suite("trips serve: /api is the contract (schemathesis)")
struct SchemathesisTests {
  @Test(
    "schemathesis, generating requests from /api with every check, finds no mismatch and no server error on any read operation, and the store is intact after",
    .timeLimit(.minutes(10))
  )
  func readsMatchTheDocument() throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = [
      repositoryRoot.appendingPathComponent("Tools/schemathesis.sh").path, tripsExecutable.path,
      "8",
    ]
    process.currentDirectoryURL = repositoryRoot
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let failures = text.split(separator: "\n").filter {
      $0.hasPrefix("- ST") || $0.hasPrefix("___") || $0.contains("error")
    }.map { String($0.prefix(300)) }
    #expect(process.terminationStatus == 0, "\(failures.joined(separator: "\n"))")
    #expect(text.contains("ok: 240 trips"), "trips check did not report the store intact")
  }
}
