import Foundation

/// Runs PROJ's own `cs2cs` (proj-bin: the tests' independent projection) from EPSG:4326 on
/// `points` (latitude, longitude, as EPSG orders them) to `crs`, and returns x, y pairs.
public func cs2cs(_ crs: String, _ points: [(Double, Double)]) throws -> [(Double, Double)] {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/cs2cs")
  process.arguments = ["-f", "%.6f", "EPSG:4326", crs]
  let input = Pipe()
  let output = Pipe()
  process.standardInput = input
  process.standardOutput = output
  try process.run()
  let text = points.map { "\($0.0) \($0.1)" }.joined(separator: "\n") + "\n"
  input.fileHandleForWriting.write(Data(text.utf8))
  try input.fileHandleForWriting.close()
  let data = output.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  return String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
    let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
    return (Double(parts[0]) ?? .nan, Double(parts[1]) ?? .nan)
  }
}
