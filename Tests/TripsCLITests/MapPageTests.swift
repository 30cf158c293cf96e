import Foundation
import Testing

@Suite("The map page in a real browser")
struct MapPageTests {
  /// The page's own account of what it drew (`#state`).
  func pageState(_ browser: Chromium) throws -> [String: Any] {
    let text = try browser.evaluate("document.getElementById('state').textContent") as? String
    return (try? JSONSerialization.jsonObject(with: Data((text ?? "{}").utf8)) as? [String: Any])
      ?? [:]
  }

  @Test(
    "headless Chromium: one point per trip, no console error, the box follows a trip added across 180° within 2 s; a stay set and cleared from another process is drawn and removed"
  )
  func liveMap() throws {
    _ = try #require(Chromium.executable, "Tools/install-dependencies.sh --tests installs chromium")
    let scratch = Scratch()
    let places: [(String, Double, Double)] = [
      ("Suva", -18.14, 178.44), ("Nadi", -17.8, 177.42), ("Port Vila", -17.73, 168.32),
      ("Nouméa", -22.27, 166.46), ("Honiara", -9.43, 159.95),
    ]
    for (name, latitude, longitude) in places {
      let run = try trips(
        [
          "add", "--name", name, "--destination", name, "--start", "2027-03-01", "--end",
          "2027-03-09", "--latitude", String(latitude), "--longitude", String(longitude),
        ], store: scratch.store)
      #expect(run.status == 0, "\(run.stderr)")
    }
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    let browser = try Chromium(width: 1000, height: 640)
    defer { browser.close() }
    try browser.navigate(server.url + "/map")
    var state: [String: Any] = [:]
    let loaded = try eventually(15) {
      state = try pageState(browser)
      return state["ready"] as? Bool == true && state["markers"] as? Int == places.count
        && (state["boundsEvents"] as? Int ?? 0) >= 1
    }
    #expect(loaded, "\(state)")
    let first = try #require(state["box"] as? [String: Any])
    #expect(first["west"] as? Double == 159.95 && first["east"] as? Double == 178.44)
    #expect(state["inside"] as? Int == places.count, "every point inside the drawn box")

    // A trip at −170 from another process: the box now crosses the antimeridian.
    let before = Date()
    let add = try trips(
      [
        "add", "--name", "Alofi", "--destination", "Niue", "--start", "2027-04-01", "--end",
        "2027-04-05", "--latitude", "-19.06", "--longitude", "-170",
      ], store: scratch.store)
    #expect(add.status == 0, "\(add.stderr)")
    let moved = try eventually(5) {
      state = try pageState(browser)
      return (state["box"] as? [String: Any])?["east"] as? Double == -170
        && state["markers"] as? Int == places.count + 1
    }
    #expect(moved, "\(state)")
    let changedAt = (state["changedAt"] as? Double ?? 0) / 1000
    #expect(changedAt - before.timeIntervalSince1970 < 2, "the box changed within 2 s")
    let box = try #require(state["box"] as? [String: Any])
    #expect(box["crossesAntimeridian"] as? Bool == true)
    let drawn = try #require(state["drawn"] as? [String: Double])
    let span = drawn["east"]! - drawn["west"]!
    #expect(abs(span - (190 - 159.95)) < 1e-9, "the short way: \(span)°, not around the world")
    #expect(state["inside"] as? Int == places.count + 1, "\(state)")
    // Fitted with the page's 24-pixel padding, inside the page.
    let pixels = try #require(state["pixels"] as? [String: Double])
    #expect(pixels["left"]! >= 23 && pixels["top"]! >= 23)
    #expect(
      pixels["right"]! <= pixels["width"]! - 23 && pixels["bottom"]! <= pixels["height"]! - 23)
    #expect(
      abs(pixels["left"]! - 24) < 2 || abs(pixels["top"]! - 24) < 2,
      "the box touches the padding on one axis: \(pixels)")

    // Stays are drawn beside their trips and follow the store: set, then cleared.
    let suva = try #require(
      try jsonArray(trips(["export", "--format", "json"], store: scratch.store).stdout).first {
        $0["name"] as? String == "Suva"
      }?["id"] as? String)
    #expect(state["stays"] as? Int == 0)
    #expect(
      try trips(
        ["stay", "set", suva, "--name", "Tanoa", "--latitude", "-18.12", "--longitude", "178.45"],
        store: scratch.store
      ).status == 0)
    #expect(try eventually(5) { try pageState(browser)["stays"] as? Int == 1 }, "\(state)")
    let staysShot = try browser.screenshot()
    #expect(try trips(["stay", "clear", suva], store: scratch.store).status == 0)
    #expect(try eventually(5) { try pageState(browser)["stays"] as? Int == 0 })

    state = try pageState(browser)
    #expect((state["errors"] as? [Any])?.isEmpty == true, "\(state)")
    #expect(browser.problems.isEmpty, "\(browser.problems)")
    // Kept after the run (the scratch folder is not): the run's artifact.
    let artifacts = FileManager.default.temporaryDirectory.appendingPathComponent(
      "trips-test-artifacts")
    try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
    let shot = artifacts.appendingPathComponent("map-\(Int(Date().timeIntervalSince1970)).png")
    try browser.screenshot().write(to: shot)
    print("The map page's screenshot: \(shot.path)")
    #expect((try Data(contentsOf: shot)).starts(with: [0x89, 0x50, 0x4E, 0x47]))
    try staysShot.write(
      to: artifacts.appendingPathComponent("map-stay-\(Int(Date().timeIntervalSince1970)).png"))
  }
}
