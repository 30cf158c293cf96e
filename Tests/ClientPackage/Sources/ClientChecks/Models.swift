import Foundation
import Observation
import Persistence

/// A library holds shelves; deleting it deletes them.
@Observable final class Library: PersistentModel {
  var name = ""
  let shelvesLink = ToMany<Shelf>()
  var shelves: [Shelf] {
    get { shelvesLink.value(of: self) }
    set { shelvesLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<Library>(
    "libraries",
    .attribute(\.name, "name", .unique),
    .toMany(
      \.shelves, "shelves", link: \.shelvesLink, inverse: \.library, deleteRule: .cascade,
      orderBy: \.name))
}

/// Where a shelf stands, kept as JSON.
struct Place: Codable, Hashable, Comparable, Sendable {
  var room: String
  var wall: Int
  static func < (a: Place, b: Place) -> Bool { (a.room, a.wall) < (b.room, b.wall) }
}

/// A shelf in a library, holding books.
@Observable final class Shelf: PersistentModel {
  var name = ""
  var code: Int?
  var place: Place?
  let libraryLink = ToOne<Library>()
  var library: Library? {
    get { libraryLink.value(of: self) }
    set { libraryLink.set(newValue, of: self) }
  }
  let booksLink = ToMany<Book>()
  var books: [Book] {
    get { booksLink.value(of: self) }
    set { booksLink.set(newValue, of: self) }
  }
  /// Not stored: the store cannot sort by it.
  var label: String { name.uppercased() }
  init() {}
  static let schema = ModelSchema<Shelf>(
    "shelves",
    .attribute(\.name, "name", .unique),
    .attribute(\.code, "code"),
    .codable(\.place, "place"),
    .toOne(\.library, "library", link: \.libraryLink, inverse: \.shelves),
    .toMany(\.books, "books", link: \.booksLink, inverse: \.shelf, orderBy: \.title))
}

/// A book, on a shelf or none.
@Observable final class Book: PersistentModel {
  var title = ""
  var pages = 0
  let shelfLink = ToOne<Shelf>()
  var shelf: Shelf? {
    get { shelfLink.value(of: self) }
    set { shelfLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<Book>(
    "books",
    .attribute(\.title, "title"),
    .attribute(\.pages, "pages"),
    .toOne(\.shelf, "shelf", link: \.shelfLink, inverse: \.books))
}

/// A visitor, declared as a SwiftData user declares a model: `@Model`, an initializer of its
/// own, a transient flag.
@Model final class Visitor {
  var name: String
  var visits = 0
  var lastSeen: Date?
  @Transient var isHighlighted = false

  init(name: String, visits: Int, lastSeen: Date? = nil) {
    self.name = name
    self.visits = visits
    self.lastSeen = lastSeen
  }
}

/// A guide and the tours they lead (deleted with them), related with `@Relationship`.
@Model final class Guide {
  var name: String
  @Relationship(deleteRule: .cascade, inverse: \Tour.guide) var tours: [Tour] = []

  init(name: String) { self.name = name }
}

/// A tour, led by a guide.
@Model final class Tour {
  var title: String
  var minutes: Int
  @Relationship var guide: Guide?

  init(title: String, minutes: Int) {
    self.title = title
    self.minutes = minutes
  }
}
