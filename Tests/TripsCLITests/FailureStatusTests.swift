import Foundation
import Persistence
import PersistenceCore
import Testing
import TripPlanner

@testable import TripService
@testable import TripsCLI

/// One table (`FailureStatus`) gives a failure its exit status and its HTTP status: the command
/// line and the service agree for every code, and the layer's errors reach both as thrown.
@Suite struct FailureStatusTests {
  @Test("every code of the layer: the CLI's exit status and the service's HTTP status")
  func everyPersistenceCode() {
    for code in PersistenceError.Code.known {
      let error = PersistenceError(code: code, message: "Something about \(code).")
      let status = FailureStatus(of: error)
      #expect(cliError(error).exitCode == status.exit, "\(code)")
      #expect(FeaturesAPI.failure(error).status == status.http, "\(code)")
      // The kind decides what the table does not say code by code.
      switch code.kind {
      case .data: #expect(status.exit == 65, "\(code)")
      case .conflict: #expect(status.http == 409, "\(code)")
      case .misuse: #expect(status.http == 500, "\(code)")
      case .notFound: #expect(status.http == 404, "\(code)")
      case .transient: #expect([500, 503, 507].contains(status.http), "\(code)")
      }
    }
  }

  @Test("every code of the trip library: the CLI's exit status and the service's HTTP status")
  func everyTripPlannerCode() {
    let codes: [(TripPlannerError.Code, exit: Int32, http: Int)] = [
      (.invalidTrip, 65, 400), (.invalidInput, 65, 400), (.missingInput, 66, 400),
      (.notFound, 1, 404), (.store, 1, 500), (.output, 1, 500),
    ]
    for (code, exit, http) in codes {
      let error = TripPlannerError(code: code, message: "Something about \(code).")
      #expect(FailureStatus(of: error) == FailureStatus(exit: exit, http: http), "\(code)")
      #expect(cliError(error).exitCode == exit, "\(code)")
      #expect(FeaturesAPI.failure(error).status == http, "\(code)")
    }
  }

  @Test("a sync server's failure: its kind from the server's status, one exit status and 502")
  func serverSyncFailures() {
    let rows: [(status: Int?, kind: FailureKind, exit: Int32)] = [
      (nil, .transient, 1), (408, .transient, 1), (429, .transient, 1), (500, .transient, 1),
      (503, .transient, 1), (404, .notFound, 1), (409, .conflict, 1), (400, .data, 65),
      (410, .data, 65), (413, .data, 65), (422, .data, 65), (401, .misuse, 1), (403, .misuse, 1),
    ]
    for row in rows {
      let error = ServerSyncError(
        status: row.status, message: "The server said \(row.status ?? 0).")
      #expect(error.kind == row.kind, "\(row.status ?? 0)")
      #expect(FailureStatus(of: error) == FailureStatus(exit: row.exit, http: 502))
      #expect(cliError(error).exitCode == row.exit, "\(row.status ?? 0)")
      #expect(cliError(error).message == error.message)
      #expect(FeaturesAPI.failure(error).status == 502, "\(row.status ?? 0)")
    }
  }

  @Test("a store's failure reaches the caller of TripStore as the layer threw it, with its status")
  func unwrappedThroughTripStore() throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
      "failure-status-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    // Not a store: a text file where the store should be.
    let file = folder.appendingPathComponent("notes.sqlite")
    try Data("not a database, just notes\n".utf8).write(to: file)
    let error = try #require(throws: PersistenceError.self) {
      _ = try TripStore(url: file, author: "test")
    }
    #expect(error.code == .notAStore)
    #expect(cliError(error).exitCode == 65)
    // A history token of another store: refused bare too.
    let store = try TripStore(url: folder.appendingPathComponent("trips.sqlite"), author: "test")
    let token = try #require(throws: PersistenceError.self) {
      try store.checkFeedToken(DefaultHistoryToken(storeIdentifier: UUID(), value: 1))
    }
    #expect(token.code == .historyTokenForeign)
    #expect(FeaturesAPI.failure(token).status == 400)
    #expect(cliError(token).exitCode == 65)
  }
}
