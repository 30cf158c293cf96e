import Foundation
import Testing
import TripPlanner

@Suite("The map page in a real browser")
struct MapPageTests {
  /// The page's own account of what it drew (`#state`).
  func pageState(_ browser: Chromium) throws -> [String: Any] {
    let text = try browser.evaluate("document.getElementById('state').textContent") as? String
    return (try? JSONSerialization.jsonObject(with: Data((text ?? "{}").utf8)) as? [String: Any])
      ?? [:]
  }

  @Test(
    "while attackers hold every live-query slot they can (16 distinct item and bounds streams from four addresses, each past its share), /map in headless Chromium still gets its streams: the box, the camera fit and the markers"
  )
  func mapUnderStreamAttack() throws {
    _ = try #require(Chromium.executable, "Tools/install-dependencies.sh --tests installs chromium")
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    var held: [BoundedStreamsTests.Listener] = []
    defer { for listener in held { listener.stop() } }
    for index in 0..<24 {
      let box = "0,0,1.\(100 + index),1"
      let from = "127.0.0.\(2 + index % 4)"
      for kind in ["items", "bounds"] {
        held.append(
          try BoundedStreamsTests.Listener(
            server.url + "/collections/trips/\(kind)/stream?bbox=" + box, in: scratch,
            seconds: 60, from: from))
      }
    }
    #expect(
      eventually(30) {
        held.allSatisfy { $0.status != nil } && held.filter { $0.status == 200 }.count == 32
      }, "\(held.map(\.status))")
    let browser = try Chromium(width: 1000, height: 640)
    defer { browser.close() }
    try browser.navigate(server.url + "/map")
    var state: [String: Any] = [:]
    let loaded = try eventually(20) {
      state = try pageState(browser)
      return state["ready"] as? Bool == true && (state["boundsEvents"] as? Int ?? 0) >= 1
        && state["box"] is [String: Any]
    }
    #expect(loaded, "\(state)")
    #expect(held.filter { $0.status == 200 }.count == 32, "the attackers still hold their slots")
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

  @Test(
    "hostile names are text: trip, destination and stay names made of markup show as written in every tooltip and run nothing; the page's Content-Security-Policy refuses inline script"
  )
  func hostileNames() throws {
    _ = try #require(Chromium.executable, "Tools/install-dependencies.sh --tests installs chromium")
    let scratch = Scratch()
    let hostile = [
      #"<img src=x onerror="document.body.setAttribute('data-xss','trip')">"#,
      #""><svg onload="document.body.setAttribute('data-xss','svg')"></svg>"#,
      #"<script>document.body.setAttribute('data-xss','script')</script>"#,
    ]
    var ids: [String] = []
    for (index, name) in hostile.enumerated() {
      let run = try trips(
        [
          "add", "--name", name, "--destination", name, "--start", "2027-03-01", "--end",
          "2027-03-09", "--latitude", String(10 + index * 5), "--longitude", String(20 + index * 5),
        ], store: scratch.store)
      #expect(run.status == 0, "\(run.stderr)")
      ids.append(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    let stayName = #"<img src=y onerror="document.body.setAttribute('data-xss','stay')">"#
    #expect(
      try trips(
        ["stay", "set", ids[0], "--name", stayName, "--latitude", "11", "--longitude", "21"],
        store: scratch.store
      ).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    let page = try server.request("/map")
    let policy = try #require(page.headers["content-security-policy"])
    #expect(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"))
    let browser = try Chromium(width: 1000, height: 640)
    defer { browser.close() }
    // Each tooltip opened as soon as it is bound, as a hover opens it (the markers are drawn
    // on a canvas, so there is no element to hover): Leaflet's global is caught as it is
    // made, and its Layer's bindTooltip wrapped once Leaflet defines it.
    try browser.send(
      "Page.addScriptToEvaluateOnNewDocument",
      [
        "source": """
        Object.defineProperty(window, "L", { configurable: true, get() { return undefined; },
          set(leaflet) {
            Object.defineProperty(leaflet, "Layer", { configurable: true, enumerable: true,
              get() { return undefined; },
              set(layer) {
                const bind = layer.prototype.bindTooltip;
                layer.prototype.bindTooltip = function (content, options) {
                  const result = bind.call(this, content, options);
                  const self = this;
                  setTimeout(function () { try { self.openTooltip(); } catch (e) {} }, 0);
                  return result;
                };
                Object.defineProperty(leaflet, "Layer", { value: layer, writable: true,
                  enumerable: true, configurable: true });
              } });
            Object.defineProperty(window, "L", { value: leaflet, writable: true,
              configurable: true });
          } });
        """
      ])
    try browser.navigate(server.url + "/map")
    var state: [String: Any] = [:]
    let loaded = try eventually(15) {
      state = try pageState(browser)
      return state["ready"] as? Bool == true && state["markers"] as? Int == hostile.count
        && state["stays"] as? Int == 1
    }
    #expect(loaded, "\(state)")
    var shown: [String] = []
    let opened = try eventually(5) {
      shown =
        try browser.evaluate(
          "Array.from(document.querySelectorAll('.leaflet-tooltip')).map(function (t) { return t.textContent; })"
        ) as? [String] ?? []
      return shown.count >= hostile.count + 1
    }
    #expect(opened, "\(shown)")
    #expect(Set(shown) == Set(hostile + [stayName]), "each name shown as written: \(shown)")
    #expect(
      try browser.evaluate(
        "document.querySelectorAll('.leaflet-tooltip *, .leaflet-popup-content *').length") as? Int
        == 0, "no element made from a name")
    #expect(try browser.evaluate("document.body.getAttribute('data-xss')") is NSNull)
    #expect(browser.problems.isEmpty, "\(browser.problems)")
    // The policy at work: an inline script the page itself tried to add does not run.
    let ran = try browser.evaluate(
      """
      (function () {
        const s = document.createElement("script");
        s.textContent = "document.body.setAttribute('data-inline', 'ran')";
        document.body.appendChild(s);
        return document.body.getAttribute("data-inline");
      })()
      """)
    #expect(ran is NSNull, "inline script ran: \(String(describing: ran))")
    #expect(
      eventually(5) {
        browser.problems.contains { $0.contains("Content Security Policy") }
      }, "\(browser.problems)")
  }

  @Test(
    "a store of more trips than the page draws as markers is drawn as vector tiles: clusters with their counts (adding up to the trips on screen), a click on one zooms into its trips, a trip added by another process repaints the tiles, no console error"
  )
  func tiledMap() throws {
    _ = try #require(Chromium.executable, "Tools/install-dependencies.sh --tests installs chromium")
    let scratch = Scratch()
    let file = scratch.file("crowded.json")
    try TripFileFormat.json.encode(TileTests.crowdedTrips(6_000, seed: 5)).write(to: file)
    #expect(try trips(["import", file.path], store: scratch.store).status == 0)
    let server = try ServerProcess(store: scratch.store)
    defer { _ = server.stop() }
    let browser = try Chromium(width: 1000, height: 640)
    defer { browser.close() }
    try browser.navigate(server.url + "/map")
    var state: [String: Any] = [:]
    let loaded = try eventually(15) {
      state = try pageState(browser)
      // The world is on screen (more than once across): every trip is in a drawn cluster or
      // point.
      return state["ready"] as? Bool == true && state["mode"] as? String == "tiles"
        && (state["tileClusters"] as? Int ?? 0) > 0 && state["largestCluster"] is [String: Any]
        && (state["tileTrips"] as? Int ?? 0) >= 6_000
    }
    #expect(loaded, "\(state)")
    #expect(state["markers"] as? Int == 0, "no marker per trip")
    let zoom = try #require(state["zoom"] as? Double)
    let cluster = try #require(state["largestCluster"] as? [String: Double])
    for type in ["mousePressed", "mouseReleased"] {
      _ = try browser.send(
        "Input.dispatchMouseEvent",
        ["type": type, "x": cluster["x"]!, "y": cluster["y"]!, "button": "left", "clickCount": 1])
    }
    let zoomed = try eventually(10) {
      state = try pageState(browser)
      return (state["zoom"] as? Double ?? 0) > zoom + 1
    }
    #expect(zoomed, "a click on a cluster of \(cluster["count"] ?? 0) zooms in: \(state)")
    // A trip added on screen by another process: the tiles on screen are asked again, and the
    // one it is in repainted.
    let center = try #require(state["center"] as? [String: Double])
    let repaints = try #require(state["tileRepaints"] as? Int)
    let fetches = try #require(state["tileFetches"] as? Int)
    #expect(
      try trips(
        [
          "add", "--name", "Late", "--destination", "Suva", "--start", "2027-03-01", "--end",
          "2027-03-09", "--latitude", String(center["latitude"]!), "--longitude",
          String(center["longitude"]!),
        ], store: scratch.store
      ).status == 0)
    let followed = try eventually(10) {
      state = try pageState(browser)
      return (state["tileFetches"] as? Int ?? 0) > fetches
        && (state["tileRepaints"] as? Int ?? 0) > repaints
    }
    #expect(followed, "\(state)")
    #expect((state["errors"] as? [Any])?.isEmpty == true, "\(state)")
    #expect(browser.problems.isEmpty, "\(browser.problems)")
    let artifacts = FileManager.default.temporaryDirectory.appendingPathComponent(
      "trips-test-artifacts")
    try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
    try browser.screenshot().write(
      to: artifacts.appendingPathComponent("map-tiles-\(Int(Date().timeIntervalSince1970)).png"))
  }

  @Test(
    "the map of a large store served by another process (TRIPS_MAP_SERVER, which Tools/Benchmarks/serve-tiles.sh sets): the time until every tile on screen is drawn, the page's JavaScript heap, no console error, and its screenshot (TRIPS_MAP_SCREENSHOT)",
    .enabled(if: ProcessInfo.processInfo.environment["TRIPS_MAP_SERVER"] != nil)
  )
  func largeStoreMap() throws {
    let environment = ProcessInfo.processInfo.environment
    let server = try #require(environment["TRIPS_MAP_SERVER"])
    let browser = try Chromium(width: 1200, height: 700)
    defer { browser.close() }
    try browser.send("Performance.enable")
    let start = Date()
    try browser.navigate(server + "/map")
    var state: [String: Any] = [:]
    var drawnAt = Date()
    let drawn = try eventually(30) {
      state = try pageState(browser)
      drawnAt = Date()
      return state["ready"] as? Bool == true && (state["tiles"] as? Int ?? 0) > 0
        && state["tilesPending"] as? Int == 0 && (state["boundsEvents"] as? Int ?? 0) >= 1
    }
    #expect(drawn, "\(state)")
    let seconds = drawnAt.timeIntervalSince(start)
    let metrics = try browser.send("Performance.getMetrics")["metrics"] as? [[String: Any]] ?? []
    let heap = metrics.first { $0["name"] as? String == "JSHeapUsedSize" }?["value"] as? Double ?? 0
    print(
      "The map page on \(server): every tile on screen drawn \(String(format: "%.2f", seconds)) s after navigating; \(state["tiles"] ?? 0) tiles, \(state["tileClusters"] ?? 0) clusters and \(state["tilePoints"] ?? 0) points holding \(state["tileTrips"] ?? 0) trips; JavaScript heap \(String(format: "%.1f", heap / 1_048_576)) MB"
    )
    #expect((state["errors"] as? [Any])?.isEmpty == true, "\(state)")
    #expect(browser.problems.isEmpty, "\(browser.problems)")
    if let path = environment["TRIPS_MAP_SCREENSHOT"] {
      try browser.screenshot().write(to: URL(fileURLWithPath: path))
    }
  }
}
