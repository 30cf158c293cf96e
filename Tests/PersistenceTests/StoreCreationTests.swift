import Dispatch
import Foundation
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import PersistenceSQLite

@Suite("A new store made by several writers at once, and taken back when nothing was written")
struct StoreCreationTests {
  @Test("four containers opening one new file at once all open it, and each one's save lands")
  func concurrentCreation() throws {
    let directory = TemporaryDirectory()
    let failures = Mutex<[String]>([])
    for round in 0..<25 {
      let url = directory.file("store-\(round).sqlite")
      DispatchQueue.concurrentPerform(iterations: 4) { index in
        do {
          let container = try ModelContainer(for: Note.self, configurations: .init(url: url))
          let context = ModelContext(container)
          context.insert(Note(key: "\(index)", text: "round \(round)"))
          try context.save()
        } catch {
          failures.withLock { $0.append("round \(round), writer \(index): \(error)") }
        }
      }
      let container = try ModelContainer(for: Note.self, configurations: .init(url: url))
      #expect(try ModelContext(container).fetchCount(FetchDescriptor<Note>()) == 4)
    }
    #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(3))")
  }

  @Test("a store removed while a container has it open refuses the next save; nothing is lost")
  func removedWhileOpen() throws {
    let directory = TemporaryDirectory()
    let url = directory.file("store.sqlite")
    let container = try ModelContainer(for: Note.self, configurations: .init(url: url))
    let context = ModelContext(container)
    context.insert(Note(key: "a", text: "kept"))
    try context.save()
    let moved = directory.file("moved.sqlite")
    try FileManager.default.moveItem(at: url, to: moved)
    context.insert(Note(key: "b", text: "would vanish"))
    let error = try #require(throws: PersistenceError.self) { try context.save() }
    #expect(error.code == .cannotOpen)
    #expect(error.message.contains("was removed or replaced after it was opened"))
    // A new file at the path does not take the writes either.
    _ = try ModelContainer(for: Note.self, configurations: .init(url: url))
    #expect(throws: PersistenceError.self) { try context.save() }
  }

  @Test("only a store nothing was committed to is taken back; a written or foreign one stays")
  func removeIfUnwritten() throws {
    let directory = TemporaryDirectory()
    let fresh = directory.file("fresh.sqlite")
    do { _ = try ModelContainer(for: Note.self, configurations: .init(url: fresh)) }
    #expect(removeStoreIfUnwritten(at: fresh))
    for suffix in ["", "-wal", "-shm"] {
      #expect(!FileManager.default.fileExists(atPath: fresh.path + suffix))
    }

    let empty = directory.file("empty.sqlite")
    #expect(FileManager.default.createFile(atPath: empty.path, contents: Data()))
    #expect(removeStoreIfUnwritten(at: empty))
    #expect(!FileManager.default.fileExists(atPath: empty.path))

    let written = directory.file("written.sqlite")
    do {
      let container = try ModelContainer(for: Note.self, configurations: .init(url: written))
      let context = ModelContext(container)
      context.insert(Note(key: "a", text: "x"))
      try context.save()
      context.insert(Note(key: "b", text: "y"))
      try context.save()
      // Even with its history pruned, a store that was written is kept.
      let last = try #require(context.fetchHistory().last?.token)
      #expect(try context.deleteHistory(before: last) == 1)
    }
    #expect(!removeStoreIfUnwritten(at: written))
    #expect(FileManager.default.fileExists(atPath: written.path))

    let foreign = directory.file("foreign.sqlite")
    do {
      let database = try Database(path: foreign.path, flags: 6)  // read-write, create
      try database.execute("CREATE TABLE other (x)")
    }
    #expect(!removeStoreIfUnwritten(at: foreign))
    let garbage = directory.file("garbage.sqlite")
    #expect(FileManager.default.createFile(atPath: garbage.path, contents: Data("not SQL".utf8)))
    #expect(!removeStoreIfUnwritten(at: garbage))
    #expect(!removeStoreIfUnwritten(at: directory.file("missing.sqlite")))
    #expect(!SQLiteEngine().removeStoreIfUnwritten(ModelConfiguration(isStoredInMemoryOnly: true)))

    // Another connection holding the write lock past the timeout: kept, not waited for forever.
    let locked = directory.file("locked.sqlite")
    do { _ = try ModelContainer(for: Note.self, configurations: .init(url: locked)) }
    let writer = try Database(path: locked.path, flags: 2)
    try writer.execute("BEGIN IMMEDIATE")
    #expect(!removeStoreIfUnwritten(at: locked, busyTimeout: .milliseconds(50)))
    try writer.execute("ROLLBACK")
    #expect(FileManager.default.fileExists(atPath: locked.path))
  }
}

/// The SQLite engine's ``StoreEngine/removeStoreIfUnwritten(_:)`` for the store file at `url`.
private func removeStoreIfUnwritten(at url: URL, busyTimeout: Duration = .seconds(5)) -> Bool {
  SQLiteEngine().removeStoreIfUnwritten(ModelConfiguration(url: url, busyTimeout: busyTimeout))
}
