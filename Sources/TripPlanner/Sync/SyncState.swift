import Foundation
import Persistence

/// A sync's state file: JSON, one history token per key (what was last pushed from a store,
/// or pulled from a server), replaced atomically, so that a restart resumes where it stopped.
enum SyncState {
  /// Where a sync writing `store` keeps its state unless told: beside a store file
  /// (`<store>.sync-state.json`); for a database, in the user's data folder
  /// (`trips/sync-state/<host>_<port>_<database>.json`), never at a path made from the URL.
  static func defaultURL(
    for store: URL, environment: [String: String] = ProcessInfo.processInfo.environment
  ) -> URL {
    if store.isFileURL { return URL(fileURLWithPath: store.path + ".sync-state.json") }
    let parts = [store.host ?? "local", store.port.map(String.init) ?? "5432", store.path]
    let name = parts.joined(separator: "_").map { character -> Character in
      character.isASCII && (character.isLetter || character.isNumber || "-.".contains(character))
        ? character : "_"
    }
    return ModelConfiguration.dataFolder(environment: environment)
      .appendingPathComponent("trips/sync-state")
      .appendingPathComponent(String(name) + ".json")
  }

  /// The state file's contents: empty when there is no file yet; an error naming the file when
  /// it cannot be read or is damaged (never a silent restart from the beginning, which would
  /// push every change again).
  static func read(_ stateURL: URL) throws -> [String: String] {
    guard FileManager.default.fileExists(atPath: stateURL.path) else { return [:] }
    guard let data = FileManager.default.contents(atPath: stateURL.path) else {
      throw TripPlannerError(
        code: .invalidInput,
        message: "Cannot read the sync state file \(stateURL.path). Check its permissions.")
    }
    guard let value = try? JSONValue.parse(data), case .object(let members) = value,
      members.allSatisfy({ if case .string = $0.1 { true } else { false } })
    else {
      throw TripPlannerError(
        code: .invalidInput,
        message:
          "The sync state file \(stateURL.path) is damaged (not a JSON object of tokens). Fix or delete it: deleting it pushes every change in kept history again (applying them twice changes nothing)."
      )
    }
    var state: [String: String] = [:]
    for case (let key, .string(let token)) in members { state[key] = token }
    return state
  }

  static func write(_ state: [String: String], to stateURL: URL) throws {
    let data = try JSONSerialization.data(withJSONObject: state, options: [.sortedKeys])
    do {
      try FileManager.default.createDirectory(
        at: stateURL.deletingLastPathComponent(), withIntermediateDirectories: true)
      try data.write(to: stateURL, options: .atomic)
    } catch {
      throw TripPlannerError(
        code: .output, message: "Cannot write the sync state \(stateURL.path).",
        cause: error as NSError)
    }
  }
}
