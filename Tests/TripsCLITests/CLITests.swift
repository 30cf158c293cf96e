import Foundation
import TestSupport
import Testing

@Suite("trips: listing and filters", .serialized)
struct ListTests {
  let scratch = Scratch()

  init() throws {
    let run = try trips(["import", sampleTrips.path], store: scratch.store)
    #expect(run.status == 0)
  }

  /// The sample file read independently of the program (Python's csv module wrote it).
  static let sample: [[String: String]] = {
    let text = try! String(contentsOf: sampleTrips, encoding: .utf8)
    var rows: [[String: String]] = []
    var header: [String] = []
    for line in text.split(separator: "\n") {
      var fields: [String] = []
      var field = ""
      var quoted = false
      var previous: Character = " "
      for character in line {
        if character == "\"" {
          if quoted && previous == "\"" { field.append("\"") }
          quoted.toggle()
        } else if character == "," && !quoted {
          fields.append(field)
          field = ""
        } else {
          field.append(character)
        }
        previous = character
      }
      fields.append(field)
      if header.isEmpty {
        header = fields
      } else {
        rows.append(Dictionary(uniqueKeysWithValues: zip(header, fields)))
      }
    }
    return rows
  }()

  @Test("imports the sample file")
  func importsSample() throws {
    let scratch = Scratch()
    let run = try trips(["import", sampleTrips.path], store: scratch.store)
    #expect(run.status == 0)
    #expect(run.stdout == "Imported 240 trips.\n")
    #expect(run.stderr.isEmpty)
  }

  @Test("groups by destination in text: sections in code-point order with counts")
  func groupedText() throws {
    let run = try trips(["list", "--group-by", "destination"], store: scratch.store)
    #expect(run.status == 0)
    #expect(run.stderr.isEmpty)
    #expect(!run.stdout.contains("\u{1B}["), "no colour when not on a terminal")
    let headers = run.stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") && !$0.isEmpty }
    let names = headers.map { String($0[..<$0.range(of: " (")!.lowerBound]) }
    let expected = Set(Self.sample.map { $0["destination"]! }).sorted {
      $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars)
    }
    #expect(names == expected)
    let counts = Dictionary(grouping: Self.sample, by: { $0["destination"]! }).mapValues(\.count)
    #expect(headers.first == "Accra (\(counts["Accra"]!) trips)")
    #expect(run.stdout.contains("Sun, sea and \"sand\""))
  }

  @Test("groups by destination in JSON: sections of trips")
  func groupedJSON() throws {
    let run = try trips(["list", "--group-by", "destination", "--json"], store: scratch.store)
    #expect(run.status == 0)
    let sections = try jsonArray(run.stdout)
    #expect(sections.count == Set(Self.sample.map { $0["destination"]! }).count)
    var total = 0
    for section in sections {
      let id = try #require(section["id"] as? String)
      let trips = try #require(section["trips"] as? [[String: Any]])
      #expect(trips.allSatisfy { ($0["destination"] as? String) == id })
      let starts = trips.map { $0["startDate"] as! String }
      #expect(starts == starts.sorted())
      total += trips.count
    }
    #expect(total == 240)
  }

  func listed(_ arguments: [String]) throws -> [String] {
    let run = try trips(["list", "--json"] + arguments, store: scratch.store)
    #expect(run.status == 0, "\(run.stderr)")
    return try jsonArray(run.stdout).map { $0["id"] as! String }
  }

  func expected(
    _ filter: ([String: String]) -> Bool,
    by order: ([String: String], [String: String]) -> Bool = {
      ($0["start_date"]!, $0["name"]!) < ($1["start_date"]!, $1["name"]!)
    }
  ) -> [String] {
    Self.sample.filter(filter).sorted(by: order).map { $0["id"]! }
  }

  @Test("lists by start date, then name, by default")
  func defaultOrder() throws {
    #expect(try listed([]) == expected { _ in true })
  }

  @Test("filters by destination, search text, and date range")
  func filters() throws {
    #expect(try listed(["--destination", "Zürich"]) == expected { $0["destination"] == "Zürich" })
    #expect(
      try listed(["--destination", "Zu\u{308}rich"]) == expected { $0["destination"] == "Zürich" })
    let search = try listed(["--search", "ZURICH"])
    #expect(!search.isEmpty)
    #expect(search == expected { $0["destination"] == "Zürich" || $0["name"]!.contains("Zürich") })
    let conference = try listed(["--search", "conference"])
    #expect(conference == expected { $0["name"]!.lowercased().contains("conference") })
    let window = try listed(["--from", "2027-06-01", "--to", "2027-06-30"])
    #expect(!window.isEmpty)
    #expect(
      window == expected { $0["end_date"]! >= "2027-06-01" && $0["start_date"]! <= "2027-06-30" })
  }

  @Test("sorts, reverses and pages")
  func sortAndPage() throws {
    // Names as people read them (localizedStandardCompare), then the start date.
    let byName: ([String: String], [String: String]) -> Bool = { a, b in
      switch a["name"]!.localizedStandardCompare(b["name"]!) {
      case .orderedSame: a["start_date"]! < b["start_date"]!
      case .orderedAscending: true
      case .orderedDescending: false
      }
    }
    #expect(try listed(["--sort", "name"]) == expected({ _ in true }, by: byName))
    let all = try listed([])
    #expect(try listed(["--reverse"]) == all.reversed())
    #expect(try listed(["--limit", "7", "--offset", "3"]) == Array(all[3..<10]))
    #expect(try listed(["--sort", "end", "--limit", "1"]).count == 1)
  }

  @Test("prints an aligned table")
  func table() throws {
    let run = try trips(["list", "--limit", "3"], store: scratch.store)
    let lines = run.stdout.split(separator: "\n")
    #expect(lines.count == 4)
    #expect(lines[0].hasPrefix("START       END         NAME"))
    let idColumn = lines[0].count - 2
    for line in lines.dropFirst() {
      let id = line.dropFirst(idColumn)
      #expect(id.count == 8 && id.allSatisfy(\.isHexDigit), "'\(line)'")
      #expect(line.dropFirst(12).hasPrefix("2027") || line.dropFirst(12).hasPrefix("2028"))
    }
  }

  @Test("shows a trip by id prefix, as text and JSON")
  func show() throws {
    let first = Self.sample[0]
    let id = first["id"]!
    let run = try trips(["show", String(id.prefix(8))], store: scratch.store)
    #expect(run.status == 0)
    #expect(run.stdout.contains("id:           \(id)"))
    #expect(run.stdout.contains("destination:  \(first["destination"]!)"))
    let json = try trips(["show", id, "--json"], store: scratch.store)
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
    #expect(object["placeIdentifier"] as? String == first["place_id"])
    #expect(object["startDate"] as? String == first["start_date"]! + "T00:00:00Z")
    let missing = try trips(["show", "ffffffff"], store: scratch.store)
    #expect(missing.status == 1)
    #expect(missing.stderr == "Error: No trip id starts with ffffffff.\n")
  }
}

@Suite("trips: writing")
struct WriteTests {
  @Test("adds, updates and deletes a trip, and history records who did what")
  func addUpdateDelete() throws {
    let scratch = Scratch()
    let add = try trips(
      [
        "add", "--name", "Cherry blossoms", "--destination", "Kyoto", "--start", "2027-04-01",
        "--end", "2027-04-07", "--latitude", "35.0116", "--longitude", "135.7681", "--place-id",
        "geonames:1857910", "--author", "alice",
      ], store: scratch.store)
    #expect(add.status == 0, "\(add.stderr)")
    let id = add.stdout.trimmingCharacters(in: .newlines)
    #expect(UUID(uuidString: id) != nil)
    let update = try trips(
      ["update", id, "--name", "Hanami", "--author", "bob"], store: scratch.store)
    #expect(update.status == 0)
    #expect(update.stdout.contains("name:         Hanami"))
    let delete = try trips(["delete", id], store: scratch.store)
    #expect(delete.status == 0)
    #expect(delete.stdout == id + "\n")
    #expect(delete.stderr == "Deleted 1 trip.\n")
    let history = try trips(["history", "--json"], store: scratch.store)
    let transactions = try jsonArray(history.stdout)
    #expect(transactions.map { $0["author"] as? String } == ["alice", "bob", "cli"])
    let kinds = transactions.map { (($0["changes"] as! [[String: Any]])[0]["kind"] as! String) }
    #expect(kinds == ["insert", "update", "delete"])
    let changes = transactions.map { ($0["changes"] as! [[String: Any]])[0] }
    #expect(changes.allSatisfy { $0["tripId"] as? String == id })
    #expect(changes[1]["attributes"] as? [String] == ["name"])
    let byBob = try trips(["history", "--json", "--by", "bob"], store: scratch.store)
    #expect(try jsonArray(byBob.stdout).count == 1)
    // --author names who writes; the history filter is --by, and the old spelling says so.
    let old = try trips(["history", "--author", "bob"], store: scratch.store)
    #expect(old.status == 64)
    #expect(old.stderr.hasPrefix("Error: history filters by author with --by NAME;"))
    // --format json is --json; the two must agree.
    let formatted = try trips(["history", "--format", "json", "--by", "bob"], store: scratch.store)
    #expect(formatted.stdout == byBob.stdout)
    let clash = try trips(["history", "--json", "--format", "text"], store: scratch.store)
    #expect(clash.status == 64 && clash.stderr.contains("--json is --format json"))
    let token = try #require(transactions[1]["token"] as? String)
    let after = try trips(["history", "--json", "--after", token], store: scratch.store)
    #expect(try jsonArray(after.stdout).count == 1)
    let text = try trips(["history"], store: scratch.store)
    #expect(text.stdout.contains("alice"))
    #expect(text.stdout.contains("update  \(id)  name"))
  }

  @Test(
    "refuses invalid trips with exit 65, naming the problem",
    arguments: [
      (["--latitude", "91"], "latitude 91.0 is not a number between -90 and 90"),
      (["--longitude", "-200"], "longitude -200.0 is not a number between -180 and 180"),
      (["--name", " "], "name must not be empty"),
      (["--destination", ""], "destination must not be empty"),
      (
        ["--end", "2027-03-01"],
        "end date 2027-03-01T00:00:00Z is before start date 2027-04-01T00:00:00Z"
      ),
      (
        ["--name", "Evil\u{1B}]0;pwned\u{07}"],
        "name contains the control character U+001B; line breaks, tabs and escape sequences are not allowed"
      ),
      (
        ["--destination", String(repeating: "x", count: 257)],
        "destination is 257 characters long; at most 256 are allowed"
      ),
    ])
  func invalidTrips(change: [String], message: String) throws {
    let scratch = Scratch()
    var fields = [
      "name": "Trip", "destination": "Kyoto", "start": "2027-04-01", "end": "2027-04-07",
      "latitude": "35", "longitude": "135",
    ]
    for pair in stride(from: 0, to: change.count, by: 2) {
      fields[String(change[pair].dropFirst(2))] = change[pair + 1]
    }
    let arguments =
      ["add"] + fields.sorted(by: { $0.key < $1.key }).flatMap { ["--\($0.key)", $0.value] }
    let run = try trips(arguments, store: scratch.store)
    #expect(run.status == 65)
    #expect(run.stderr == "Error: \(message)\n")
    #expect(run.stdout.isEmpty)
    #expect(!FileManager.default.fileExists(atPath: scratch.store.path), "nothing written")
  }

  @Test(
    "rejects bad flags and values with exit 64 and usage",
    arguments: [
      (
        ["list", "--destinaton", "x"],
        "Error: Unknown option '--destinaton'. Did you mean '--destination'?"
      ),
      (["lsit"], "Error: Unknown subcommand 'lsit'. Did you mean 'list'?"),
      (
        ["list", "--limit", "-3"],
        "Error: Invalid value '-3' for '--limit': expected a whole number, 0 or more."
      ),
      (
        ["list", "--sort", "price"],
        "Error: Invalid value 'price' for '--sort': expected start, end, name or destination."
      ),
      (
        ["list", "--from", "tomorrow"],
        "Error: Invalid value 'tomorrow' for '--from': expected a day as YYYY-MM-DD or today, or ISO 8601 with a zone."
      ),
      (["list", "--json=yes"], "Error: The flag '--json' does not take a value."),
      (
        [
          "add", "--name", "x", "--destination", "y", "--start", "2027-01-01", "--end",
          "2027-01-02",
          "--latitude", "0x10", "--longitude", "1",
        ],
        "Error: Invalid value '0x10' for '--latitude': expected a decimal number (such as -33.86 or 151.2)."
      ),
      (
        [
          "add", "--name", "x", "--destination", "y", "--start", "2027-01-01", "--end",
          "2027-01-02",
          "--latitude", "nan", "--longitude", "1",
        ],
        "Error: Invalid value 'nan' for '--latitude': expected a decimal number (such as -33.86 or 151.2)."
      ),
      (
        ["bounds", "--viewport", "1000000000x1"],
        "Error: Invalid value '1000000000x1' for '--viewport': expected WIDTHxHEIGHT in whole pixels from 1 to 100000 each, such as 800x600."
      ),
      (
        ["list", "--store", "postgresql://[::1/trips"],
        "Error: --store is not a valid PostgreSQL URL: postgresql://[::1/trips (for example postgresql://user@host:5432/trips)."
      ),
      (
        ["list", "--store", "ftp://host/trips.sqlite"],
        "Error: --store has the URL scheme 'ftp', which trips cannot open; give the path of a SQLite store file or a postgresql:// URL."
      ),
      (
        ["list", "--time-zone", "Mars/Olympus_Mons"],
        "Error: Invalid value 'Mars/Olympus_Mons' for '--time-zone': expected a time zone such as UTC or Europe/Zurich."
      ),
      (["show"], "Error: Missing expected argument '<id>'."),
      (["list", "--limit"], "Error: Missing value for '--limit <n>'."),
      (["add", "--name", "x"], "Error: Missing expected argument '--destination <text>'."),
      (
        ["update", "abcd"],
        "Error: Nothing to change: give at least one of --name, --destination, --start, --end, --latitude, --longitude, --place-id."
      ),
      (
        ["export", "--format", "xml"],
        "Error: Invalid value 'xml' for '--format': expected csv, json or geojson."
      ),
    ])
  func usageErrors(arguments: [String], message: String) throws {
    let scratch = Scratch()
    let run = try trips(arguments, environment: ["TRIPS_STORE": scratch.store.path])
    #expect(run.status == 64)
    #expect(run.stderr.hasPrefix(message + "\nUsage: trips"))
    #expect(run.stdout.isEmpty)
  }

  @Test("reports a store location it cannot create, with exit 1")
  func unwritableStore() throws {
    let scratch = Scratch()
    let blocker = try scratch.write("file", "not a folder")
    let run = try trips(
      ["import", sampleTrips.path], store: blocker.appendingPathComponent("trips.sqlite"))
    #expect(run.status == 1)
    #expect(run.stderr.hasPrefix("Error: Cannot create the folder"))
  }

  @Test("refuses a file that is not a store with exit 65, leaving it as it was")
  func notAStore() throws {
    let scratch = Scratch()
    let file = try scratch.write("notes.sqlite", "hello, this is not a database\n")
    let run = try trips(["list"], store: file)
    #expect(run.status == 65)
    #expect(run.stderr.contains("is not a SQLite database"))
    #expect(try String(contentsOf: file, encoding: .utf8) == "hello, this is not a database\n")
  }

  @Test("uses $TRIPS_STORE, then $XDG_DATA_HOME, creating folders")
  func defaultStore() throws {
    let scratch = Scratch()
    let xdg = scratch.file("xdg")
    let run = try trips(["import", sampleTrips.path], environment: ["XDG_DATA_HOME": xdg.path])
    #expect(run.status == 0)
    #expect(
      FileManager.default.fileExists(atPath: xdg.appendingPathComponent("trips/trips.sqlite").path))
    let explicit = scratch.file("a/b/c.sqlite")
    let second = try trips(
      ["list", "--json"], environment: ["TRIPS_STORE": explicit.path, "XDG_DATA_HOME": xdg.path])
    #expect(second.status == 0)
    #expect(second.stdout == "[]\n", "a store that does not exist lists as empty")
    #expect(!FileManager.default.fileExists(atPath: explicit.path), "reading creates nothing")
  }
}

@Suite("trips: import and export")
struct ImportExportTests {
  @Test("export then import gives the same store", arguments: ["csv", "json", "geojson"])
  func roundTrip(format: String) throws {
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let exported = scratch.file("out.\(format)")
    let export = try trips(["export", "--output", exported.path], store: scratch.store)
    #expect(export.status == 0)
    let copy = scratch.file("copy.sqlite")
    let reimport = try trips(["import", exported.path], store: copy)
    #expect(reimport.stdout == "Imported 240 trips.\n")
    let first = try trips(["export", "--format", "json"], store: scratch.store)
    let second = try trips(["export", "--format", "json"], store: copy)
    #expect(first.stdout == second.stdout)
    #expect(try jsonArray(first.stdout).count == 240)
  }

  @Test("imports from standard input")
  func standardInput() throws {
    let scratch = Scratch()
    let run = try trips(
      ["import", "-"], store: scratch.store, stdin: try Data(contentsOf: sampleTrips))
    #expect(run.stdout == "Imported 240 trips.\n")
  }

  @Test("reads CSV edge cases: quoted commas, doubled quotes, CRLF, BOM")
  func csvEdgeCases() throws {
    let scratch = Scratch()
    let text =
      "\u{FEFF}name,destination,start_date,end_date,latitude,longitude,place_id\r\n"
      + "\"Sun, sea and \"\"sand\"\"\",Suva,2027-01-01,2027-01-05,-18.1,178.4,geonames:2198148\r\n"
      + "Plain,\"Nuku‘alofa\",2027-02-01T10:00:00+13:00,2027-02-03,-21.1,-175.2,\r\n"
    let file = try scratch.write("edge.csv", text)
    let run = try trips(["import", file.path], store: scratch.store)
    #expect(run.status == 0, "\(run.stderr)")
    let list = try jsonArray(try trips(["list", "--json"], store: scratch.store).stdout)
    #expect(list.map { $0["name"] as! String } == ["Sun, sea and \"sand\"", "Plain"])
    #expect(list[1]["startDate"] as? String == "2027-01-31T21:00:00Z")
    #expect(list[1]["placeIdentifier"] is NSNull)
  }

  @Test(
    "imports nothing from a bad file and lists every bad row",
    arguments: [
      (
        "",
        [
          "bad.csv: error: the file is empty; a CSV file needs a header line (id,name,destination,start_date,end_date,latitude,longitude,place_id)"
        ]
      ),
      (
        "name,destination,start_date,end_date,latitude\n",
        ["bad.csv:1: error: the required column 'longitude' is missing"]
      ),
      (
        "name,destination,start_date,end_date,latitude,longitude,price\n",
        [
          "bad.csv:1: error: unknown column 'price'; the columns are id, name, destination, start_date, end_date, latitude, longitude, place_id"
        ]
      ),
      (
        "name,destination,start_date,end_date,latitude,longitude\nA,B,2027-01-01,2027-01-02,1,2\n,B,2027-01-01,2027-01-02,1,2\nC,B,2027-01-05,2027-01-02,1,2\n",
        [
          "bad.csv:3: error: name must not be empty",
          "bad.csv:4: error: end date 2027-01-02T00:00:00Z is before start date 2027-01-05T00:00:00Z",
        ]
      ),
      (
        "name,destination,start_date,end_date,latitude,longitude\n\"open,B\n",
        ["bad.csv:2: error: a quoted field is not closed before the end of the file"]
      ),
    ])
  func badFiles(text: String, errors: [String]) throws {
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    _ = try scratch.write("bad.csv", text)
    let run = try trips(
      ["import", "bad.csv"], store: scratch.store, environment: [:], cwd: scratch.url)
    #expect(run.status == 65)
    #expect(run.stderr == "Error: " + errors.joined(separator: "\n") + "\n")
    let count = try jsonArray(try trips(["list", "--json"], store: scratch.store).stdout).count
    #expect(count == 240, "the store is unchanged")
  }

  @Test("reports a missing file with exit 66")
  func missingFile() throws {
    let scratch = Scratch()
    let run = try trips(["import", scratch.file("nope.csv").path], store: scratch.store)
    #expect(run.status == 66)
    #expect(run.stderr == "Error: The file \(scratch.file("nope.csv").path) does not exist.\n")
  }
}

@Suite("trips: help and version")
struct HelpTests {
  @Test("prints help in swift-argument-parser's layout")
  func help() throws {
    let root = try trips(["--help"])
    #expect(root.status == 0)
    #expect(root.stdout.hasPrefix("OVERVIEW: "))
    for section in [
      "\nUSAGE: trips <subcommand>\n", "\nOPTIONS:\n", "\nSUBCOMMANDS:\n", "  list  ",
    ] {
      #expect(root.stdout.contains(section))
    }
    let list = try trips(["help", "list"])
    #expect(list.stdout.hasPrefix("OVERVIEW: Lists trips"))
    #expect(list.stdout.contains("\nUSAGE: trips list "))
    #expect(list.stdout.contains("  --group-by <group-by>   Group the trips"))
    #expect(try trips(["list", "--help"]).stdout == list.stdout)
    #expect(try trips(["--version"]).stdout == "0.1.0\n")
  }
}

@Suite("trips: terminal output")
struct TerminalTests {
  /// Runs `trips` under a pseudo-terminal (util-linux `script`), as a person would.
  func onTerminal(_ command: String, environment: [String: String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
    process.arguments = ["-qec", command, "/dev/null"]
    process.environment = childEnvironment(["PATH": "/usr/bin:/bin", "TERM": "xterm"]).merging(
      environment
    ) { $1 }
    let out = Pipe()
    process.standardOutput = out
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
  }

  @Test(
    "uses colour on a terminal unless NO_COLOR is set",
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
  func colour() throws {
    let scratch = Scratch()
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    let command =
      "\(tripsExecutable.path) list --store \(scratch.store.path) --group-by destination"
    let coloured = try onTerminal(command, environment: [:])
    #expect(coloured.contains("\u{1B}[1mAccra\u{1B}[0m"))
    let plain = try onTerminal(command, environment: ["NO_COLOR": "1"])
    #expect(plain.contains("Accra (4 trips)"))
    #expect(!plain.contains("\u{1B}["))
  }
}

@Suite("trips-generate")
struct GeneratorTests {
  let generator = tripsExecutable.deletingLastPathComponent().appendingPathComponent(
    "trips-generate")

  func generate(_ arguments: [String]) throws -> Data {
    let process = Process()
    process.executableURL = generator
    process.arguments =
      arguments + ["--cities", repositoryRoot.appendingPathComponent("Data/cities.csv").path]
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    return data
  }

  @Test("generates the same trips for the same seed, in the import format")
  func deterministic() throws {
    let first = try generate(["--count", "2000"])
    #expect(first == (try generate(["--count", "2000"])))
    #expect(first != (try generate(["--count", "2000", "--seed", "7"])))
    let scratch = Scratch()
    let file = scratch.file("generated.csv")
    try first.write(to: file)
    let run = try trips(["import", file.path], store: scratch.store)
    #expect(run.stdout == "Imported 2000 trips.\n")
  }

  @Test(
    "with --items and --stays, JSON that imports into trips with their plans, the same for the same seed; the trips are those without plans; CSV refuses plans"
  )
  func plans() throws {
    let scratch = Scratch()
    let file = scratch.file("plans.json")
    var once = try generate(["--count", "300", "--items", "5", "--stays", "--output", file.path])
    #expect(once.isEmpty)
    once = try Data(contentsOf: file)
    _ = try generate(["--count", "300", "--items", "5", "--stays", "--output", file.path])
    #expect(try Data(contentsOf: file) == once)
    let run = try trips(["import", file.path], store: scratch.store)
    #expect(run.stdout == "Imported 300 trips.\n", "\(run.stderr)")
    let exported = try jsonArray(
      trips(["export", "--format", "json"], store: scratch.store).stdout)
    #expect(exported.count == 300)
    #expect(exported.allSatisfy { ($0["bucketList"] as? [Any])?.count == 5 })
    #expect(exported.allSatisfy { $0["livingAccommodation"] is [String: Any] })
    // The trips are the ones the same seed gives without plans.
    let csv = scratch.file("plain.csv")
    try generate(["--count", "300"]).write(to: csv)
    let plain = scratch.file("plain.sqlite")
    #expect(try trips(["import", csv.path], store: plain).status == 0)
    func listed(_ store: URL) throws -> [String] {
      try jsonArray(trips(["export", "--format", "json"], store: store).stdout)
        .compactMap { trip in
          (trip["id"] as? String).map { $0 + " " + (trip["name"] as? String ?? "") }
        }
        .sorted()
    }
    #expect(try listed(plain) == listed(scratch.store))

    let process = Process()
    process.executableURL = generator
    process.arguments = ["--count", "3", "--items", "2"]
    process.standardOutput = FileHandle.nullDevice
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 64)
    #expect(message.contains("CSV holds one row a trip"))
  }

  @Test(
    "--store takes what trips takes: a postgresql:// URL inserts into that database (no file of that name appears), another scheme is a usage error"
  )
  func storeLocations() throws {
    let database = try PostgreSQLCluster.shared.get().makeDatabase("generated")
    let scratch = Scratch()
    let folder = scratch.file("cwd")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    func run(_ arguments: [String]) throws -> (Int32, String) {
      let process = Process()
      process.executableURL = generator
      process.currentDirectoryURL = folder
      process.arguments =
        arguments + ["--cities", repositoryRoot.appendingPathComponent("Data/cities.csv").path]
      let errors = Pipe()
      process.standardError = errors
      process.standardOutput = FileHandle.nullDevice
      try process.run()
      let message = String(
        decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
      process.waitUntilExit()
      return (process.terminationStatus, message)
    }
    let (status, message) = try run(["--count", "250", "--store", database])
    #expect(status == 0, "\(message)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    let listed = try trips(["list", "--json", "--store", database])
    #expect(try jsonArray(listed.stdout).count == 250, "\(listed.stderr)")
    let (refused, why) = try run(["--count", "5", "--store", "https://example.org/trips"])
    #expect(refused == 64)
    #expect(why.contains("URL scheme 'https'"), "\(why)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
  }
}

@Suite("trips-bench")
struct BenchmarkSmokeTests {
  @Test("runs every phase at a tiny size, both sides returning the same results")
  func tinyRun() throws {
    let scratch = Scratch()
    let process = Process()
    process.executableURL = tripsExecutable.deletingLastPathComponent().appendingPathComponent(
      "trips-bench")
    process.arguments = [
      "--size", "300", "--rounds", "1", "--directory", scratch.file("bench").path, "--cities",
      repositoryRoot.appendingPathComponent("Data/cities.csv").path, "--json",
      scratch.file("out.json").path,
    ]
    let out = Pipe()
    process.standardOutput = out
    process.standardError = out
    try process.run()
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "\(text)")
    #expect(!text.contains("results differ"))
    let json = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: scratch.file("out.json")))
        as? [String: Any])
    let phases = try #require(json["phases"] as? [[String: Any]])
    let names = phases.compactMap { $0["phase"] as? String }
    for expected in [
      "insert (insert + one save)", "fetch all sorted by start date",
      "@Model Trip: fetch all / hand-written",
      "sectioned fetch by destination",
      "contains scan (name contains)", "bounds of all from scratch",
      "one-trip change -> bounds current",
      "one-trip change -> trips watch line", "peak memory of fetch all",
      "peak memory of fetch all, read",
    ] {
      #expect(names.contains(expected), "\(names)")
    }
  }

  @Test("runs the plans phase at a tiny size, its checks holding")
  func tinyPlans() throws {
    let scratch = Scratch()
    let process = Process()
    process.executableURL = tripsExecutable.deletingLastPathComponent().appendingPathComponent(
      "trips-bench")
    process.arguments = [
      "--size", "300", "--rounds", "1", "--phases", "plans", "--directory",
      scratch.file("bench").path, "--cities",
      repositoryRoot.appendingPathComponent("Data/cities.csv").path,
    ]
    let out = Pipe()
    process.standardOutput = out
    process.standardError = out
    try process.run()
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "\(text)")
    for phase in [
      "plans: export as JSON", "plans: list every trip", "plans: bbox page of 100, x200",
    ] {
      #expect(text.contains(phase), "\(text)")
    }
  }
}
