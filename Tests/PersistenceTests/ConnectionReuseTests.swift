import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

@Suite("Connections reused by contexts")
struct ConnectionReuseTests {
  func container(_ folder: TemporaryDirectory) throws -> ModelContainer {
    try ModelContainer(
      for: Note.self, configurations: ModelConfiguration(url: folder.file("reuse.store")))
  }

  @Test("a released context's connection serves the next, which sees later writes")
  func reusedAndCurrent() throws {
    let folder = TemporaryDirectory()
    let container = try container(folder)
    var first: ObjectIdentifier?
    do {
      let context = ModelContext(container)
      context.insert(Note(key: "a", text: "1"))
      try context.save()
      first = ObjectIdentifier(try context.connection())
    }
    let next = ModelContext(container)
    #expect(ObjectIdentifier(try next.connection()) == first)
    // Written through another connection after the next context took the first one.
    let writer = ModelContext(container)
    #expect(ObjectIdentifier(try writer.connection()) != first)
    writer.insert(Note(key: "b", text: "2"))
    try writer.save()
    #expect(try next.fetch(FetchDescriptor<Note>()).map(\.key).sorted() == ["a", "b"])
  }

  @Test("a connection released inside a transaction or mid-step is not reused")
  func notReusedWhenBusy() throws {
    let folder = TemporaryDirectory()
    let container = try container(folder)
    let seed = ModelContext(container)
    seed.insert(Note(key: "a", text: "1"))
    try seed.save()
    var reading: ObjectIdentifier?
    // Kept alive to the end, so that a closed connection's address cannot come back as a new
    // connection's (which made the identities equal now and then).
    var kept: [AnyObject] = []
    do {
      let context = ModelContext(container)
      let connection = try context.connection()
      try connection.beginReading()
      _ = try context.fetch(FetchDescriptor<Note>())
      reading = ObjectIdentifier(connection)
      kept.append(connection)
    }
    var stepping: ObjectIdentifier?
    var statement: (any StoreStatement)?
    do {
      let context = ModelContext(container)
      let connection = try context.connection()
      statement = try connection.cachedStatement("SELECT key FROM notes")
      #expect(try statement?.step() == true)
      stepping = ObjectIdentifier(connection)
      kept.append(connection)
    }
    // Written meanwhile: a context on a reused snapshot would not see it.
    seed.insert(Note(key: "b", text: "2"))
    try seed.save()
    let next = ModelContext(container)
    let identity = ObjectIdentifier(try next.connection())
    #expect(identity != reading)
    #expect(identity != stepping)
    #expect(try next.fetch(FetchDescriptor<Note>()).count == 2)
    statement?.reset()
    withExtendedLifetime(kept) {}
  }

  @Test("at most a few idle connections are kept")
  func bounded() throws {
    let folder = TemporaryDirectory()
    let container = try container(folder)
    var contexts = (0..<10).map { _ in ModelContext(container) }
    for context in contexts { _ = try context.connection() }
    #expect(container.idleConnectionCount == 0)
    contexts.removeAll()
    #expect(container.idleConnectionCount == ModelContainer.idleConnectionLimit)
    // A context that never used the store gives nothing back and takes nothing.
    _ = ModelContext(container)
    #expect(container.idleConnectionCount == ModelContainer.idleConnectionLimit)
  }
}
