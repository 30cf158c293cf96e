import Foundation
import Testing
import TripPlanner

@Suite("trips bucket and trips stay: a trip's plan from the terminal")
struct PlanCLITests {
  let scratch = Scratch()
  let suva = "0378f603"

  init() throws {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
  }

  @Test("add, update, move and remove items, set and clear the stay; show and --json show them")
  func plan() throws {
    var run = try trips(
      ["bucket", "add", suva, "--title", "Snorkel at the reef", "--in-plan"], store: scratch.store)
    #expect(run.status == 0)
    #expect(run.stdout == "1. Snorkel at the reef [in plan]\n")
    run = try trips(
      [
        "bucket", "add", suva, "--title", "Kava ceremony", "--details", "Bring a sulu",
        "--reservation", "--at", "1",
      ], store: scratch.store)
    #expect(
      run.stdout
        == "1. Kava ceremony [reservation]: Bring a sulu\n2. Snorkel at the reef [in plan]\n")
    run = try trips(["bucket", "update", suva, "2", "--not-in-plan"], store: scratch.store)
    #expect(run.stdout.hasSuffix("2. Snorkel at the reef\n"))
    run = try trips(["bucket", "move", suva, "2", "--to", "1"], store: scratch.store)
    #expect(
      run.stdout == "1. Snorkel at the reef\n2. Kava ceremony [reservation]: Bring a sulu\n")
    run = try trips(
      [
        "stay", "set", suva, "--name", "Grand Pacific Hotel", "--address", "Victoria Parade",
        "--latitude", "-18.1416", "--longitude", "178.4233",
      ], store: scratch.store)
    #expect(run.status == 0)
    #expect(
      run.stdout.contains("stay:         Grand Pacific Hotel, Victoria Parade (-18.1416, 178.4233)")
    )
    #expect(
      run.stdout.hasSuffix(
        "bucket list:\n1. Snorkel at the reef\n2. Kava ceremony [reservation]: Bring a sulu\n"))

    let json = try trips(["show", suva, "--json"], store: scratch.store)
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
    let list = try #require(object["bucketList"] as? [[String: Any]])
    #expect(list.map { $0["title"] as? String } == ["Snorkel at the reef", "Kava ceremony"])
    #expect(list.map { $0["position"] as? Int } == [0, 1])
    #expect(list.map { $0["hasReservation"] as? Bool } == [false, true])
    let stay = try #require(object["livingAccommodation"] as? [String: Any])
    #expect(stay["name"] as? String == "Grand Pacific Hotel")
    #expect(stay["latitude"] as? Double == -18.1416)

    let items = try trips(["bucket", "list", suva, "--json"], store: scratch.store)
    let ids = try #require(
      try JSONSerialization.jsonObject(with: Data(items.stdout.utf8)) as? [[String: Any]]
    ).compactMap { $0["id"] as? String }
    #expect(ids.count == 2)
    // An id's first characters name it, even when they are all digits (a place past the end).
    run = try trips(
      ["bucket", "update", suva, String(ids[1].prefix(8)), "--details", "Kava"],
      store: scratch.store)
    #expect(run.stdout.hasSuffix("2. Kava ceremony [reservation]: Kava\n"), "\(run.stderr)")
    run = try trips(["bucket", "remove", suva, ids[1]], store: scratch.store)
    #expect(run.stdout == "1. Snorkel at the reef\n")
    run = try trips(["stay", "clear", suva], store: scratch.store)
    #expect(run.stdout.contains("stay:         none"))
    run = try trips(["bucket", "remove", suva, "1"], store: scratch.store)
    #expect(run.stdout == "(no bucket-list items)\n")
  }

  @Test(
    "list, bounds and destinations filter by the plan: --bucket-list, --has-reservation, --not-in-plan; --search reads bucket-list titles"
  )
  func filters() throws {
    let weekend = "241b01ce"
    #expect(
      try trips(
        ["bucket", "add", suva, "--title", "Kava ceremony", "--reservation"], store: scratch.store
      )
      .status == 0)
    #expect(
      try trips(
        ["bucket", "add", weekend, "--title", "Snorkel", "--in-plan"], store: scratch.store
      )
      .status == 0)
    func ids(_ arguments: [String]) throws -> [String] {
      let run = try trips(arguments, store: scratch.store)
      #expect(run.status == 0, "\(arguments): \(run.stderr)")
      return run.stdout.split(separator: "\n").dropFirst().map { String($0.suffix(8)) }
    }
    #expect(try ids(["list", "--has-reservation"]) == [suva])
    #expect(try ids(["list", "--not-in-plan"]) == [suva])
    #expect(try ids(["list", "--bucket-list", "SNORK"]) == [weekend])
    #expect(try ids(["list", "--search", "kava"]) == [suva])
    #expect(try ids(["list", "--bucket-list", "nothing like it"]).isEmpty)
    let bounds = try trips(["bounds", "--has-reservation"], store: scratch.store)
    #expect(bounds.stdout.hasPrefix("Trips:      1\n"))
    let destinations = try trips(
      ["destinations", "--bucket-list", "snorkel"], store: scratch.store)
    #expect(destinations.stdout == "DESTINATION  TRIPS\nSuva         1\n")
  }

  @Test(
    "trips check reads every bucket-list item and stay back: one written around the library that breaks a rule is reported by id, exit 65"
  )
  func damagedPlan() throws {
    #expect(
      try trips(["bucket", "add", suva, "--title", "Kava"], store: scratch.store).status == 0)
    #expect(
      try trips(
        ["stay", "set", suva, "--name", "Inn", "--latitude", "1", "--longitude", "2"],
        store: scratch.store
      ).status == 0)
    #expect(try trips(["check"], store: scratch.store).status == 0)
    try rawSQL(scratch.store, "UPDATE bucket_list_items SET title = '', position = -1")
    try rawSQL(scratch.store, "UPDATE living_accommodations SET latitude = 95")
    let check = try trips(["check"], store: scratch.store)
    #expect(check.status == 65)
    #expect(check.stderr.contains("bucket_list_items id "), "\(check.stderr)")
    #expect(check.stderr.contains("title must not be empty"), "\(check.stderr)")
    #expect(check.stderr.contains("position -1 is negative"), "\(check.stderr)")
    #expect(check.stderr.contains("living_accommodations id "), "\(check.stderr)")
    #expect(check.stderr.contains("latitude 95.0 is not a number"), "\(check.stderr)")
  }

  @Test(
    "a plan row that cannot be read is one clear error for every command that reads the plan: never an empty bucket list or stay, never a crash"
  )
  func unreadablePlan() throws {
    #expect(
      try trips(["bucket", "add", suva, "--title", "Kava"], store: scratch.store).status == 0)
    #expect(
      try trips(
        ["stay", "set", suva, "--name", "Inn", "--latitude", "1", "--longitude", "2"],
        store: scratch.store
      ).status == 0)
    try rawSQL(scratch.store, "UPDATE bucket_list_items SET id = 'not a uuid'")
    for command in [
      ["show", suva], ["show", suva, "--json"], ["update", suva, "--name", "Other"],
      ["bucket", "list", suva], ["bucket", "add", suva, "--title", "More"],
      ["export", "--format", "json"], ["history"],
    ] {
      let run = try trips(command, store: scratch.store)
      #expect(run.status == 65, "\(command): \(run.status) \(run.stderr)")
      #expect(run.stderr.hasPrefix("Error: "), "\(command): \(run.stderr)")
      #expect(run.stderr.contains("bucket_list_items"), "\(command): \(run.stderr)")
      #expect(!run.stderr.contains("Fatal error"), "\(command): \(run.stderr)")
    }
    // Nothing was written: no trip took the new name (a listing reads no plan).
    let list = try trips(["list", "--json"], store: scratch.store)
    #expect(list.status == 0 && !list.stdout.contains("Other"), "\(list.stdout)")
  }

  @Test(
    "a sync feed over a damaged trip whose item changed before it is one clear error (exit 65), not a crash"
  )
  func feedOverDamagedTrip() throws {
    #expect(
      try trips(["bucket", "add", suva, "--title", "Kava"], store: scratch.store).status == 0)
    #expect(try trips(["update", suva, "--name", "Renamed"], store: scratch.store).status == 0)
    try rawSQL(scratch.store, "UPDATE trips SET name = x'ff'")
    let feed = try trips(["sync", "export"], store: scratch.store)
    #expect(feed.status == 65, "\(feed.status) \(feed.stderr)")
    #expect(
      feed.stderr.hasPrefix("Error: ") && !feed.stderr.contains("Fatal error"), "\(feed.stderr)")
  }

  @Test(
    "history shows every transaction, plan-only ones too: the trip, the item or stay, its attributes; after the trip's delete still by its trip"
  )
  func historyOfPlans() throws {
    let first = try trips(["history", "--json"], store: scratch.store)
    let before = try jsonArray(first.stdout).count
    let shown = try trips(["show", suva, "--json"], store: scratch.store)
    let suvaID = try #require(
      (try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])?["id"]
        as? String)
    for arguments in [
      ["bucket", "add", suva, "--title", "Snorkel"],
      ["bucket", "update", suva, "1", "--title", "Reef"],
      ["stay", "set", suva, "--name", "Hut", "--latitude", "-18", "--longitude", "178"],
    ] {
      #expect(try trips(arguments + ["--author", "alice"], store: scratch.store).status == 0)
    }
    let text = try trips(["history", "--by", "alice"], store: scratch.store)
    #expect(text.status == 0)
    let lines = text.stdout.split(separator: "\n").filter { $0.hasPrefix("    ") }
    #expect(lines.count == 3, "\(text.stdout)")
    #expect(lines.allSatisfy { $0.contains(suvaID) })
    #expect(lines[0].contains("insert") && lines[0].contains("item "))
    #expect(lines[1].contains("update") && lines[1].hasSuffix(": title"))
    #expect(lines[2].contains("insert") && lines[2].contains("stay "))
    #expect(try trips(["delete", suva], store: scratch.store).status == 0)
    let all = try jsonArray(trips(["history", "--json"], store: scratch.store).stdout)
    #expect(all.count == before + 4)
    let changes = all.dropFirst(before).flatMap { $0["changes"] as? [[String: Any]] ?? [] }
    #expect(changes.allSatisfy { $0["tripId"] as? String == suvaID })
    #expect(changes.compactMap { $0["bucketListItemId"] as? String }.count == 3)
    #expect(changes.compactMap { $0["livingAccommodationId"] as? String }.count == 2)
  }

  @Test(
    "a write that fails on a store that does not exist leaves no store and no folders behind; one that succeeds keeps it"
  )
  func failedWritesCreateNothing() throws {
    let bad = try scratch.write(
      "bad.csv",
      "name,destination,start,end,latitude,longitude\nBackwards,Oslo,2027-05-09,2027-05-01,59.9,10.7\n"
    )
    // A feed that parses, with a plan row whose trip the store does not have: refused.
    let orphanFeed = try scratch.write(
      "orphan.ndjson",
      #"{"token":"aaaaaaaa-bc82-42b5-ab2f-c9b5ac35a15f:1","author":"m","time":"2027-01-01T00:00:00.000Z","kind":"insert","tripId":"6429f9ad-5919-455a-88f5-8d0a170c4bab","bucketListItemId":"f8d41886-bad3-5262-abdb-8130389f9d47","bucketListItem":{"id":"f8d41886-bad3-5262-abdb-8130389f9d47","title":"x","details":"","hasReservation":false,"isInPlan":true,"position":0}}"#
        + "\n" + #"{"resumeToken":"aaaaaaaa-bc82-42b5-ab2f-c9b5ac35a15f:1"}"# + "\n")
    let commands: [[String]] = [
      ["bucket", "add", "abcd", "--title", "x"], ["bucket", "move", "abcd", "1", "--to", "1"],
      ["bucket", "update", "abcd", "1", "--in-plan"], ["bucket", "remove", "abcd", "1"],
      ["stay", "set", "abcd", "--name", "Hut", "--latitude", "1", "--longitude", "2"],
      ["stay", "clear", "abcd"], ["update", "abcd", "--name", "x"], ["delete", "abcd"],
      ["history", "prune", "--before", "not-a-token"], ["import", bad.path],
      ["sync", "apply", orphanFeed.path],
    ]
    for command in commands {
      let folder = scratch.file("missing-\(UUID().uuidString)")
      let store = folder.appendingPathComponent("deeper/w.sqlite")
      let run = try trips(command, store: store)
      #expect(run.status != 0, "\(command): \(run.stderr)")
      #expect(run.stderr.hasPrefix("Error: "), "\(command): \(run.stderr)")
      #expect(
        !FileManager.default.fileExists(atPath: folder.path),
        "\(command) left \(folder.path) behind")
    }
    let store = scratch.file("made/w.sqlite")
    let added = try trips(
      [
        "add", "--name", "Kept", "--destination", "Oslo", "--start", "2027-05-01", "--end",
        "2027-05-09", "--latitude", "59.9", "--longitude", "10.7",
      ], store: store)
    #expect(added.status == 0, "\(added.stderr)")
    #expect(try trips(["list", "--json"], store: store).stdout.contains("Kept"))
  }

  @Test("bad plan input is one clear error line, a non-zero exit, and nothing written")
  func badInput() throws {
    #expect(
      try trips(["bucket", "add", suva, "--title", "Kava"], store: scratch.store).status == 0)
    let long = String(repeating: "x", count: 257)
    let cases: [([String], Int32, String)] = [
      (["bucket", "add", suva, "--title", ""], 65, "Error: title must not be empty\n"),
      (
        ["bucket", "add", suva, "--title", long], 65,
        "Error: title is 257 characters long; at most 256 are allowed\n"
      ),
      (
        ["bucket", "add", suva, "--title", "a\u{1B}[31m"], 65,
        "Error: title contains the control character U+001B; line breaks, tabs and escape sequences are not allowed\n"
      ),
      (
        ["bucket", "add", suva, "--title", "x", "--at", "3"], 65,
        "Error: --at 3 is past the end of a bucket list of 1 item; give 1 to 2.\n"
      ),
      (
        ["bucket", "move", suva, "1", "--to", "2"], 65,
        "Error: --to 2 is past the end of a bucket list of 1 item.\n"
      ),
      (
        ["bucket", "update", suva, "4", "--in-plan"], 1,
        "Error: The bucket list has 1 item; there is no item 4.\n"
      ),
      (
        ["bucket", "add", "ffffffff", "--title", "x"], 1,
        "Error: No trip id starts with ffffffff.\n"
      ),
      (
        ["stay", "set", suva, "--name", "Inn", "--latitude", "91", "--longitude", "0"], 65,
        "Error: latitude 91.0 is not a number between -90 and 90\n"
      ),
      (["stay", "clear", suva], 1, "Error: The trip has no stay to clear.\n"),
    ]
    for (arguments, status, message) in cases {
      let run = try trips(arguments, store: scratch.store)
      #expect(run.status == status, "\(arguments): \(run.stderr)")
      #expect(run.stderr == message, "\(arguments)")
      #expect(run.stdout.isEmpty, "\(arguments)")
    }
    let unknown = try trips(["bucket", "remove", suva, "00000000"], store: scratch.store)
    #expect(unknown.status == 1)
    #expect(
      unknown.stderr == "Error: No item of the bucket list has an id starting with 00000000.\n")
    let usage: [[String]] = [
      ["bucket"], ["bucket", "add", suva], ["bucket", "move", suva, "1"],
      ["bucket", "move", suva, "1", "--to", "0"],
      ["bucket", "add", suva, "--title", "x", "--at", "x"],
      ["bucket", "update", suva, "1"],
      ["bucket", "update", suva, "1", "--in-plan", "--not-in-plan"],
      ["stay"], ["stay", "set", suva, "--name", "Inn"],
    ]
    for arguments in usage {
      let run = try trips(arguments, store: scratch.store)
      #expect(run.status == 64, "\(arguments): \(run.stderr)")
      #expect(run.stderr.hasPrefix("Error: "), "\(arguments)")
    }
    let list = try trips(["bucket", "list", suva], store: scratch.store)
    #expect(list.stdout == "1. Kava\n")
    #expect(try trips(["show", suva], store: scratch.store).stdout.contains("stay:         none"))
  }

  @Test(
    "sync export and apply carry the plan to another store; a feed whose item's trip is nowhere is exit 65 naming it, nothing applied"
  )
  func syncCarriesThePlan() throws {
    #expect(
      try trips(["bucket", "add", suva, "--title", "Kava ceremony"], store: scratch.store).status
        == 0)
    #expect(
      try trips(
        ["stay", "set", suva, "--name", "Tanoa", "--latitude", "-18.1", "--longitude", "178.4"],
        store: scratch.store
      ).status == 0)
    let feed = try trips(["sync", "export"], store: scratch.store)
    #expect(feed.status == 0, "\(feed.stderr)")
    let other = scratch.file("other.sqlite")
    let applied = try trips(["sync", "apply", "-"], store: other, stdin: Data(feed.stdout.utf8))
    #expect(applied.status == 0, "\(applied.stderr)")
    #expect(applied.stdout == "Applied 242 changes, skipped 0.\n")
    let shown = try trips(["show", suva], store: other).stdout
    #expect(shown.contains("stay:         Tanoa (-18.1, 178.4)"))
    #expect(shown.hasSuffix("bucket list:\n1. Kava ceremony\n"))

    // Only the item's line: its trip is in neither the new store nor the feed.
    let itemLine = try #require(
      feed.stdout.split(separator: "\n").first { $0.contains("\"bucketListItemId\"") })
    let resume = try #require(feed.stdout.split(separator: "\n").last)
    let empty = scratch.file("empty.sqlite")
    let refused = try trips(
      ["sync", "apply", "-"], store: empty, stdin: Data((itemLine + "\n" + resume + "\n").utf8))
    #expect(refused.status == 65)
    #expect(refused.stderr.contains("belongs to trip 0378f603"))
    #expect(refused.stderr.contains("nothing was applied"))
    #expect(try trips(["list"], store: empty).stdout.isEmpty)
  }

  @Test(
    "bounds --with-stays covers a stay far from its trip (text, json, the service's stays=true); with --format geojson it is a usage error; the stream refuses stays"
  )
  func boundsWithStays() throws {
    let store = scratch.file("stays.sqlite")
    let added = try trips(
      [
        "add", "--name", "Kyoto", "--destination", "Kyoto", "--start", "2027-04-01", "--end",
        "2027-04-07", "--latitude", "35", "--longitude", "135.75",
      ], store: store)
    let id = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(
      try trips(
        [
          "stay", "set", id, "--name", "Airport hotel", "--latitude", "34.43", "--longitude",
          "135.23",
        ],
        store: store
      ).status == 0)
    func report(_ extra: [String]) throws -> [String: Any] {
      let run = try trips(["bounds", "--format", "json"] + extra, store: store)
      #expect(run.status == 0, "\(run.stderr)")
      return try #require(
        try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
    }
    let alone = try report([])
    #expect(alone["count"] as? Int == 1)
    #expect(alone["bbox"] as? [Double] == [135.75, 35, 135.75, 35])
    let both = try report(["--with-stays"])
    #expect(both["count"] as? Int == 2 && both["stays"] as? Int == 1)
    #expect(alone["stays"] == nil)
    #expect(both["bbox"] as? [Double] == [135.23, 34.43, 135.75, 35])
    let text = try trips(["bounds", "--with-stays"], store: store).stdout
    #expect(
      text.hasPrefix("Trips:      1\nStays:      1\n") && text.contains("west 135.23000"),
      "\(text)")
    let geojson = try trips(["bounds", "--with-stays", "--format", "geojson"], store: store)
    #expect(geojson.status == 64 && geojson.stderr.contains("--with-stays"))

    let server = try ServerProcess(store: store)
    defer { _ = server.stop() }
    let served = try server.request("/collections/trips/bounds?stays=true").json()
    #expect(served["count"] as? Int == 2 && served["stays"] as? Int == 1)
    #expect(served["bbox"] as? [Double] == [135.23, 34.43, 135.75, 35])
    #expect(
      try server.request("/collections/trips/bounds?stays=false").json()["count"] as? Int == 1)
    #expect(try server.request("/collections/trips/bounds?stays=yes").status == 400)
    #expect(try server.request("HEAD", "/collections/trips/bounds/stream?stays=true").status == 400)
  }

  @Test(
    "stay set and bucket add and update take an option for each declared field, its help the field's documentation, its value read by the field's type"
  )
  func fieldOptions() throws {
    let stayHelp = try trips(["stay", "set", "--help"], store: scratch.store).stdout
    for field in LivingAccommodation.schema.fields where field.name != "id" {
      let option = field.name == "placeIdentifier" ? "--place-id" : "--" + field.name
      #expect(
        stayHelp.contains(option) && stayHelp.contains(field.documentation),
        "\(field.name) in \(stayHelp)")
    }
    let itemHelp = try trips(["bucket", "update", "--help"], store: scratch.store).stdout
    for field in BucketListItem.schema.fields
    where !["id", "hasReservation", "isInPlan", "position"].contains(field.name) {
      #expect(itemHelp.contains("--\(field.name) <text>") && itemHelp.contains(field.documentation))
    }
    // Values read by type: a number, a place identifier ('' is none).
    var run = try trips(
      ["stay", "set", suva, "--name", "Inn", "--latitude", "north", "--longitude", "1"],
      store: scratch.store)
    #expect(run.status == 64)
    #expect(
      run.stderr.contains(
        "Invalid value 'north' for '--latitude': expected a decimal number (such as -33.86 or 151.2)."
      ))
    run = try trips(
      [
        "stay", "set", suva, "--name", "Inn", "--latitude", "1", "--longitude", "2", "--place-id",
        "geonames:2198148",
      ], store: scratch.store)
    #expect(run.status == 0 && run.stdout.contains("Inn (1.0, 2.0) geonames:2198148"), "\(run)")
    run = try trips(
      [
        "stay", "set", suva, "--name", "Inn", "--latitude", "1", "--longitude", "2", "--place-id",
        "",
      ],
      store: scratch.store)
    #expect(run.status == 0 && run.stdout.contains("Inn (1.0, 2.0)\n"), "\(run)")
    // An update changes only the fields given.
    #expect(
      try trips(
        ["bucket", "add", suva, "--title", "Kava", "--details", "sulu"], store: scratch.store
      ).status == 0)
    run = try trips(["bucket", "update", suva, "1", "--details", ""], store: scratch.store)
    #expect(run.status == 0 && run.stdout == "1. Kava\n", "\(run)")
    run = try trips(
      ["bucket", "update", suva, "1", "--title", "Kava ceremony"], store: scratch.store)
    #expect(run.stdout == "1. Kava ceremony\n", "\(run)")
  }
}
