import Foundation
import Observation
import Persistence

// Checks what a service's package gets from the layer through its own related models, in the
// build it is compiled in (`swift run -c release client-checks …` as well as debug): sorts,
// sections, predicates, prefetch and observers through relationships, and key paths the layer
// cannot run, which must be errors naming them. Each expected answer is computed in Swift from
// the fixture, not read from the store. Then README's and the DocC articles' persistence
// examples run, on SQLite.
//
//   client-checks sqlite FOLDER          a fresh store file in FOLDER
//   client-checks postgresql URL         an empty PostgreSQL database
//
// Prints one line per check and exits 1 when one fails.

let arguments = CommandLine.arguments.dropFirst()
// The child the check "a relationship whose context is gone traps" runs: reads a shelf's books
// after the context it was fetched into is gone.
if arguments.first == "read-after-context" {
  let container = try ModelContainer(
    for: Library.self, Shelf.self, Book.self,
    configurations: ModelConfiguration(url: URL(fileURLWithPath: arguments.last ?? "")))
  let shelves = try ModelContext(container).fetch(FetchDescriptor<Shelf>())
  print(shelves.first?.books.count ?? -1)
  exit(0)
}
guard arguments.count == 2, let engine = arguments.first, let location = arguments.last else {
  FileHandle.standardError.write(Data("usage: client-checks sqlite FOLDER | postgresql URL\n".utf8))
  exit(64)
}
let url: URL
switch engine {
case "sqlite":
  url = URL(fileURLWithPath: location).appendingPathComponent("client.sqlite")
  try? FileManager.default.removeItem(at: url)
case "postgresql":
  guard let given = URL(string: location) else { exit(64) }
  url = given
default:
  exit(64)
}

var failures = 0
@MainActor func check(_ name: String, _ body: () throws -> Bool) {
  do {
    if try body() {
      print("ok    \(engine) \(name)")
      return
    }
    print("FAIL  \(engine) \(name)")
  } catch {
    print("FAIL  \(engine) \(name): \(error)")
  }
  failures += 1
}
/// `body` throws an error whose message names `named`.
@MainActor func refuses(_ name: String, naming named: String, _ body: () throws -> Void) {
  check(name) {
    do {
      try body()
      print("      no error")
      return false
    } catch {
      let message = "\(error)"
      guard message.contains(named) else {
        print("      the error does not name \(named): \(message)")
        return false
      }
      print("      \(message)")
      return true
    }
  }
}

let container = try ModelContainer(
  for: Library.self, Shelf.self, Book.self, Visitor.self, Guide.self,
  configurations: ModelConfiguration(url: url))

// The fixture: (library, shelf, code, place, books as (title, pages)), and a book on no shelf.
let fixture: [(String, String, Int?, Place?, [(String, Int)])] = [
  ("Central", "c-poetry", 3, Place(room: "east", wall: 2), [("Odes", 120), ("Haiku", 80)]),
  ("Central", "a-history", nil, nil, [("Rome", 640), ("Edo", 410), ("Inca", 300)]),
  ("Branch", "b-maps", 1, Place(room: "west", wall: 1), [("Atlas", 90)]),
  ("Branch", "d-empty", 7, Place(room: "east", wall: 1), []),
]
do {
  let context = ModelContext(container)
  var libraries: [String: Library] = [:]
  for (libraryName, shelfName, code, place, books) in fixture {
    let library =
      libraries[libraryName]
      ?? {
        let library = Library()
        library.name = libraryName
        context.insert(library)
        libraries[libraryName] = library
        return library
      }()
    let shelf = Shelf()
    shelf.name = shelfName
    shelf.code = code
    shelf.place = place
    shelf.library = library
    for (title, pages) in books {
      let book = Book()
      book.title = title
      book.pages = pages
      book.shelf = shelf
    }
  }
  let loose = Book()
  loose.title = "Loose"
  loose.pages = 10
  context.insert(loose)
  try context.save()
}

struct Row {
  var title: String
  var pages: Int
  var shelf: String?
  var library: String?
  var code: Int?
}
let rows: [Row] =
  fixture.flatMap { library, shelf, code, _, books in
    books.map { Row(title: $0.0, pages: $0.1, shelf: shelf, library: library, code: code) }
  } + [Row(title: "Loose", pages: 10, shelf: nil, library: nil, code: nil)]

/// Swift's order of optionals: nil first.
func precedes<T: Comparable>(_ a: T?, _ b: T?) -> Bool? {
  switch (a, b) {
  case (nil, nil): return nil
  case (nil, _): return true
  case (_, nil): return false
  case (let a?, let b?): return a == b ? nil : a < b
  }
}

check("sort by \\Book.shelf?.name, then title") {
  let fetched = try ModelContext(container).fetch(
    FetchDescriptor<Book>(sortBy: [SortDescriptor(\.shelf?.name), SortDescriptor(\.title)]))
  let expected = rows.sorted { precedes($0.shelf, $1.shelf) ?? ($0.title < $1.title) }
  return fetched.map(\.title) == expected.map(\.title)
}
check("sort by \\Book.shelf?.name descending") {
  let fetched = try ModelContext(container).fetch(
    FetchDescriptor<Book>(
      sortBy: [SortDescriptor(\.shelf?.name, order: .reverse), SortDescriptor(\.title)]))
  let expected = rows.sorted { precedes($1.shelf, $0.shelf) ?? ($0.title < $1.title) }
  return fetched.map(\.title) == expected.map(\.title)
}
check("sort by \\Book.shelf!.name") {
  let fetched = try ModelContext(container).fetch(
    FetchDescriptor<Book>(sortBy: [SortDescriptor(\.shelf!.name), SortDescriptor(\.title)]))
  let expected = rows.sorted { precedes($0.shelf, $1.shelf) ?? ($0.title < $1.title) }
  return fetched.map(\.title) == expected.map(\.title)
}
check("sort by two steps, \\Book.shelf?.library?.name") {
  let fetched = try ModelContext(container).fetch(
    FetchDescriptor<Book>(
      sortBy: [SortDescriptor(\.shelf?.library?.name), SortDescriptor(\.title)]))
  let expected = rows.sorted { precedes($0.library, $1.library) ?? ($0.title < $1.title) }
  return fetched.map(\.title) == expected.map(\.title)
}
check("sort by an optional attribute through a to-one, \\Book.shelf?.code") {
  let fetched = try ModelContext(container).fetch(
    FetchDescriptor<Book>(sortBy: [SortDescriptor(\.shelf?.code), SortDescriptor(\.title)]))
  let expected = rows.sorted { precedes($0.code, $1.code) ?? ($0.title < $1.title) }
  return fetched.map(\.title) == expected.map(\.title)
}
check("sections by \\Book.shelf?.name") {
  let sections = try ModelContext(container).fetch(
    FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)]), sectionBy: \Book.shelf?.name)
  let names = Set(rows.map(\.shelf))
  let expected = names.sorted { precedes($0, $1) ?? false }.map { name in
    (name, rows.filter { $0.shelf == name }.map(\.title).sorted())
  }
  return sections.map(\.id) == expected.map(\.0)
    && sections.map { $0.map(\.title) } == expected.map(\.1)
}
check("sections by two steps, \\Book.shelf?.library?.name") {
  let sections = try ModelContext(container).fetch(
    FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)]),
    sectionBy: \Book.shelf?.library?.name)
  let names = Set(rows.map(\.library))
  let expected = names.sorted { precedes($0, $1) ?? false }.map { name in
    (name, rows.filter { $0.library == name }.map(\.title).sorted())
  }
  return sections.map(\.id) == expected.map(\.0)
    && sections.map { $0.map(\.title) } == expected.map(\.1)
}
check("sections through a to-one whose attribute's column the sort also names (name, name)") {
  let sections = try ModelContext(container).fetch(
    FetchDescriptor<Shelf>(sortBy: [SortDescriptor(\.name)]), sectionBy: \Shelf.library?.name)
  let libraries = Set(fixture.map(\.0)).sorted()
  return sections.map(\.id) == libraries
    && sections.map { $0.map(\.name) }
      == libraries.map { library in
        fixture.filter { $0.0 == library }.map(\.1).sorted()
      }
}
check("predicate through two to-ones") {
  let fetched = try ModelContext(container).fetch(
    FetchDescriptor<Book>(
      predicate: #Predicate { $0.shelf?.library?.name == "Central" },
      sortBy: [SortDescriptor(\.title)]))
  return fetched.map(\.title) == rows.filter { $0.library == "Central" }.map(\.title).sorted()
}
check("predicate through a to-many") {
  let fetched = try ModelContext(container).fetch(
    FetchDescriptor<Shelf>(
      predicate: #Predicate { $0.books.contains { $0.pages > 350 } },
      sortBy: [SortDescriptor(\.name)]))
  let expected = Set(rows.filter { $0.pages > 350 }.compactMap(\.shelf)).sorted()
  return fetched.map(\.name) == expected
}
check("prefetch of a to-many and a to-one") {
  var descriptor = FetchDescriptor<Shelf>(sortBy: [SortDescriptor(\.name)])
  descriptor.relationshipKeyPathsForPrefetching = [\.books, \.library]
  let context = ModelContext(container)
  let shelves = try context.fetch(descriptor)
  let expected = fixture.sorted { $0.1 < $1.1 }
  return shelves.map(\.name) == expected.map(\.1)
    && shelves.map { $0.books.map(\.title) } == expected.map { $0.4.map(\.0).sorted() }
    && shelves.map { $0.library?.name } == expected.map(\.0)
}
check("relationships read as faults") {
  let context = ModelContext(container)
  let books = try context.fetch(FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)]))
  let expected = rows.sorted { $0.title < $1.title }
  return books.map { $0.shelf?.library?.name } == expected.map(\.library)
    && books.map { $0.shelf?.books.count ?? -1 }
      == expected.map { row in
        row.shelf.map { name in rows.filter { $0.shelf == name }.count } ?? -1
      }
}
check("an observer sorted through a relationship") {
  let observer = try ResultsObserver(
    FetchDescriptor<Book>(sortBy: [SortDescriptor(\.shelf?.name), SortDescriptor(\.title)]),
    container: container)
  let expected = rows.sorted { precedes($0.shelf, $1.shelf) ?? ($0.title < $1.title) }
  return observer.results.map(\.title) == expected.map(\.title)
}

check("an observer's models read their relationships, and the related models theirs") {
  let observer = try ResultsObserver(
    FetchDescriptor<Shelf>(sortBy: [SortDescriptor(\.name)]), container: container)
  let expected = fixture.sorted { $0.1 < $1.1 }
  return observer.results.map { $0.books.map(\.title) } == expected.map { $0.4.map(\.0).sorted() }
    && observer.results.map { $0.library?.shelves.count }
      == expected.map { shelf in
        fixture.filter { $0.0 == shelf.0 }.count
      }
}
if engine == "sqlite" {
  check("a relationship read after its context is gone traps, naming the model and relationship") {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    child.arguments = ["read-after-context", url.path]
    let errors = Pipe()
    child.standardError = errors
    child.standardOutput = FileHandle.nullDevice
    try child.run()
    let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    let named = message.contains(
      "The relationship 'books' of Shelf cannot be read: its context is gone")
    if !named { print("      \(child.terminationStatus): \(message.prefix(400))") }
    return child.terminationStatus != 0 && named
  }
}

// Key paths the layer cannot run in SQL: an error naming the key path, in every build.
refuses(
  "sort by a computed property through a to-one",
  naming: "\\Book.shelf?.<a property that is not stored>"
) {
  _ = try ModelContext(container).fetch(
    FetchDescriptor<Book>(sortBy: [SortDescriptor(\.shelf?.label)]))
}
refuses("sort by a .codable attribute through a to-one", naming: "'place' of Shelf") {
  _ = try ModelContext(container).fetch(
    FetchDescriptor<Book>(sortBy: [SortDescriptor(\.shelf?.place)]))
}
refuses("sort through a to-many", naming: "\\Shelf.books.<a property that is not stored>?") {
  _ = try ModelContext(container).fetch(
    FetchDescriptor<Shelf>(sortBy: [SortDescriptor(\.books.first?.title)]))
}
refuses("sort by a to-many's count", naming: "\\Shelf.books.<a property that is not stored>,") {
  _ = try ModelContext(container).fetch(
    FetchDescriptor<Shelf>(sortBy: [SortDescriptor(\.books.count)]))
}
refuses(
  "sections by a computed property through a to-one",
  naming: "\\Book.shelf?.<a property that is not stored> is"
) {
  _ = try ModelContext(container).fetch(
    FetchDescriptor<Book>(), sectionBy: \Book.shelf?.label)
}
refuses("sections through a to-many", naming: "\\Shelf.books.<a property that is not stored>?") {
  _ = try ModelContext(container).fetch(
    FetchDescriptor<Shelf>(), sectionBy: \Shelf.books.first?.title)
}

// A model declared with @Model: saved, fetched by a predicate and a sort, changed, observed.
let visitors: [(String, Int, Double?)] = [
  ("Kei", 3, 10), ("Ana", 1, nil), ("Bo", 5, 20), ("Cy", 2, 5),
]
check("@Model: insert, save, fetch by a predicate sorted; a transient keeps its initial value") {
  let context = ModelContext(container)
  for (name, visits, seen) in visitors {
    let visitor = Visitor(
      name: name, visits: visits, lastSeen: seen.map(Date.init(timeIntervalSinceReferenceDate:)))
    visitor.isHighlighted = true
    context.insert(visitor)
  }
  try context.save()
  let regulars = try ModelContext(container).fetch(
    FetchDescriptor<Visitor>(
      predicate: #Predicate { $0.visits >= 2 }, sortBy: [SortDescriptor(\.name)]))
  let expected = visitors.filter { $0.1 >= 2 }.sorted { $0.0 < $1.0 }
  return regulars.map(\.name) == expected.map(\.0)
    && regulars.map(\.lastSeen)
      == expected.map { $0.2.map(Date.init(timeIntervalSinceReferenceDate:)) }
    && regulars.allSatisfy { !$0.isHighlighted }
}
check("@Model: a change saved is read back; a change to a fetched model is observed") {
  let context = ModelContext(container)
  let ana = try context.fetch(FetchDescriptor<Visitor>(predicate: #Predicate { $0.name == "Ana" }))
  guard let ana = ana.first else { return false }
  final class Flag: @unchecked Sendable { var raised = false }
  let flag = Flag()
  withObservationTracking {
    _ = ana.visits
  } onChange: {
    flag.raised = true
  }
  ana.visits += 10
  try context.save()
  let again = try ModelContext(container).fetch(
    FetchDescriptor<Visitor>(predicate: #Predicate { $0.name == "Ana" }))
  return flag.raised && again.map(\.visits) == [11]
}

// @Model relationships: a container given guides finds tours; a predicate and a prefetch
// through them; a cascade.
let tours: [(guide: String, title: String, minutes: Int)] = [
  ("Aiko", "Temples", 90), ("Aiko", "Markets", 45), ("Ben", "Harbour", 60),
]
check("@Relationship: set, saved, read back, a predicate through the to-one, prefetch") {
  let context = ModelContext(container)
  var guides: [String: Guide] = [:]
  for (name, title, minutes) in tours {
    let guide =
      guides[name]
      ?? {
        let guide = Guide(name: name)
        context.insert(guide)
        guides[name] = guide
        return guide
      }()
    let tour = Tour(title: title, minutes: minutes)
    tour.guide = guide
  }
  try context.save()
  let long = try ModelContext(container).fetch(
    FetchDescriptor<Tour>(
      predicate: #Predicate { $0.guide?.name == "Aiko" && $0.minutes > 50 }))
  var prefetched = FetchDescriptor<Guide>(sortBy: [SortDescriptor(\.name)])
  prefetched.relationshipKeyPathsForPrefetching = [\.tours]
  let listed = try ModelContext(container).fetch(prefetched).map {
    "\($0.name): \($0.tours.map(\.title).sorted().joined(separator: ", "))"
  }
  let expected = Dictionary(grouping: tours, by: \.guide).sorted { $0.key < $1.key }.map {
    "\($0.key): \($0.value.map(\.title).sorted().joined(separator: ", "))"
  }
  return long.map(\.title) == tours.filter { $0.guide == "Aiko" && $0.minutes > 50 }.map(\.title)
    && listed == expected
}
check("@Relationship: deleting a guide deletes their tours") {
  let context = ModelContext(container)
  let aiko = try context.fetch(FetchDescriptor<Guide>(predicate: #Predicate { $0.name == "Aiko" }))
  guard let aiko = aiko.first else { return false }
  context.delete(aiko)
  try context.save()
  let left = try ModelContext(container).fetch(FetchDescriptor<Tour>()).map(\.title)
  return left == tours.filter { $0.guide != "Aiko" }.map(\.title)
}

// SwiftData's SampleTrips, its models in a container of their own (a file of its own on
// SQLite; tables of their own on PostgreSQL).
try checkSampleTrips(
  engine == "sqlite"
    ? URL(fileURLWithPath: location).appendingPathComponent("sample-trips.sqlite") : url,
  { check($0, $1) })

// The 2025 talk's subclasses of `Trip`, in a store of their own (a file on SQLite; on
// PostgreSQL, the trips' tables, which the subclasses' columns are added to).
try checkSampleTripsInheritance(
  engine == "sqlite"
    ? URL(fileURLWithPath: location).appendingPathComponent("sample-trips-2025.sqlite") : url,
  { check($0, $1) })

// SwiftData's contexts: the main context, inserts on relating, change tracking, didSave (a
// store of their own on SQLite; on PostgreSQL, the trips' tables).
try checkContextsAsSwiftData(
  engine == "sqlite"
    ? URL(fileURLWithPath: location).appendingPathComponent("sample-trips-contexts.sqlite") : url,
  { check($0, $1) })

// SwiftData's @ModelActor: an importer with a context of its own, identifiers crossing.
let actorStore =
  engine == "sqlite"
  ? URL(fileURLWithPath: location).appendingPathComponent("sample-trips-actor.sqlite") : url
let actorAnswer = try await checkModelActor(actorStore)
check("@ModelActor: an importer actor saves on its own context; self[id, as:] finds a trip") {
  actorAnswer
}

// A container made as SwiftData's users make it, `ModelContainer(for: Trip.self)`, keeps its
// data in the persistent default store (`default.store` in the user's data folder, here a
// folder of the checks' own): a second container reads what the first saved.
if engine == "sqlite" {
  let data = URL(fileURLWithPath: location).appendingPathComponent("data-home")
  try? FileManager.default.removeItem(at: data)
  setenv("XDG_DATA_HOME", data.path, 1)
  check("ModelContainer(for:) without a configuration keeps its data in default.store") {
    do {
      let context = ModelContext(try ModelContainer(for: SampleTrips.Trip.self))
      context.insert(
        SampleTrips.Trip(
          name: "Kept", destination: "Kyoto", startDate: Date(timeIntervalSince1970: 0),
          endDate: Date(timeIntervalSince1970: 86_400)))
      try context.save()
    }
    let again = ModelContext(try ModelContainer(for: SampleTrips.Trip.self))
    let names = try again.fetch(FetchDescriptor<SampleTrips.Trip>()).map(\.name)
    return names == ["Kept"]
      && FileManager.default.fileExists(
        atPath: data.appendingPathComponent("default.store").path)
  }
  // Xcode's template, as it writes it: the same default store.
  check("Xcode's template: Schema, ModelConfiguration(schema:isStoredInMemoryOnly:)") {
    let sharedModelContainer: ModelContainer = {
      let schema = Schema([SampleTrips.Trip.self])
      let modelConfiguration = ModelConfiguration(schema: schema, isStoredInMemoryOnly: false)
      do {
        return try ModelContainer(for: schema, configurations: [modelConfiguration])
      } catch {
        fatalError("Could not create ModelContainer: \(error)")
      }
    }()
    let names = try ModelContext(sharedModelContainer).fetch(
      FetchDescriptor<SampleTrips.Trip>()
    ).map(\.name)
    return names == ["Kept"] && sharedModelContainer.schema.entityNames.count == 3
  }
  refuses("several different configurations", naming: "different configurations") {
    _ = try ModelContainer(
      for: SampleTrips.Trip.self,
      configurations: ModelConfiguration(isStoredInMemoryOnly: true),
      ModelConfiguration(url: URL(fileURLWithPath: location).appendingPathComponent("x.sqlite")))
  }
  unsetenv("XDG_DATA_HOME")
}

// README's and the articles' persistence examples (Tools/examples.sh copies them here), each
// in a folder of its own, as the page shows it: on a SQLite file named in the example.
if engine == "sqlite" {
  let home = FileManager.default.currentDirectoryPath
  for example in examples {
    let folder = URL(fileURLWithPath: location).appendingPathComponent(example.name)
    try? FileManager.default.removeItem(at: folder)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    _ = FileManager.default.changeCurrentDirectoryPath(folder.path)
    do {
      try await example.run()
      print("ok    \(engine) \(example.name) runs")
    } catch {
      print("FAIL  \(engine) \(example.name): \(error)")
      failures += 1
    }
    _ = FileManager.default.changeCurrentDirectoryPath(home)
  }
}

print(failures == 0 ? "all checks passed (\(engine))" : "\(failures) checks failed (\(engine))")
exit(failures == 0 ? 0 : 1)
