import Foundation
import Observation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

/// `NoteV2` as a program that made its tag required declares it: a `NULL` stored by the
/// older declaration cannot be read as a `String`.
@Observable final class NoteRequiredTag: PersistentModel {
  var key = ""
  var text = ""
  var group = ""
  var priority = 3
  var tag = ""
  init() {}
  static let schema = ModelSchema<NoteRequiredTag>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text"),
    .attribute(\.group, "grp", .indexed),
    .attribute(\.priority, "priority"),
    .attribute(\.tag, "tag"))
}

@Suite("Typed attribute access")
struct TypedAccessTests {
  @Test("a snapshot slot holds its own type: stored, read back, compared and restored")
  func slots() throws {
    let layout = SnapshotLayout([
      .init(size: 1, alignment: 1, type: ObjectIdentifier(Bool.self), destroy: nil),
      .init(
        size: MemoryLayout<String>.size, alignment: MemoryLayout<String>.alignment,
        type: ObjectIdentifier(String.self),
        destroy: SlotKind<String>.self),
      .init(size: 16, alignment: 16, type: ObjectIdentifier(SIMD4<Float>.self), destroy: nil),
    ])
    #expect(layout.offsets == [0, 8, 32])
    #expect(layout.alignment == 16)
    let storage = UnsafeMutableRawPointer.allocate(byteCount: layout.storageBytes, alignment: 8)
    defer { storage.deallocate() }
    let snapshot = layout.start(in: storage)
    #expect(Int(bitPattern: snapshot) % 16 == 0)
    layout.slot(0, of: snapshot, isInitialized: false).store(true)
    layout.slot(1, of: snapshot, isInitialized: false).store(
      "Zürich" + String(repeating: "!", count: 40))
    layout.slot(2, of: snapshot, isInitialized: false).store(SIMD4<Float>(1, 2, 3, 4))
    layout.slot(1, of: snapshot, isInitialized: true).store("Kyoto")
    #expect(layout.slot(0, of: snapshot, isInitialized: true).load(as: Bool.self))
    #expect(layout.slot(1, of: snapshot, isInitialized: true).load(as: String.self) == "Kyoto")
    #expect(
      layout.slot(2, of: snapshot, isInitialized: true).load(as: SIMD4<Float>.self)
        == SIMD4(1, 2, 3, 4))
    layout.destroy(snapshot, initialized: 3)
  }

  #if DEBUG
    @Test("storing a value of another type in a snapshot slot traps in debug builds")
    func wrongSlotTypeTraps() async {
      await #expect(processExitsWith: .failure) {
        let layout = SnapshotLayout([
          .init(size: 8, alignment: 8, type: ObjectIdentifier(Int.self), destroy: nil)
        ])
        let storage = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8)
        layout.slot(0, of: storage, isInitialized: false).store(2.5)
      }
    }

    @Test("reading a snapshot slot as another type traps in debug builds")
    func wrongSlotReadTraps() async {
      await #expect(processExitsWith: .failure) {
        let layout = SnapshotLayout([
          .init(size: 8, alignment: 8, type: ObjectIdentifier(Int.self), destroy: nil)
        ])
        let storage = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8)
        layout.slot(0, of: storage, isInitialized: false).store(7)
        _ = layout.slot(0, of: storage, isInitialized: true).load(as: Double.self)
      }
    }
  #endif

  @Test("an attribute that answers an operation with another kind of answer traps")
  func wrongAnswerTraps() async {
    // Attributes whose closures answer with the wrong kind: asked for the stored value, the
    // caller stops rather than guess (a failed cast used to read as "changed").
    await #expect(processExitsWith: .failure) {
      let attribute = ModelAttribute<Note>(
        name: "text", options: [], storageType: .text, isOptional: false, isCodable: false,
        valueType: String.self, slot: String.self, keyPath: \Note.text
      ) { _, _ in .done }
      _ = try? attribute.value(Note())
    }
    await #expect(processExitsWith: .failure) {
      let attribute = ModelAttribute<Note>(
        name: "text", options: [], storageType: .text, isOptional: false, isCodable: false,
        valueType: String.self, slot: String.self, keyPath: \Note.text
      ) { _, _ in .matches(true) }
      _ = try? attribute.value(Note())
    }
  }

  @Test("a keyed attribute answers its own key path")
  func keyPaths() {
    #expect(Note.schema.attributes.map(\.keyPath) == [\Note.key, \Note.text, \Note.group])
  }

  @Test("a blob in a REAL column and NULL in a non-optional one are errors naming row and column")
  func moreStorageMismatches() throws {
    let folder = TemporaryDirectory()
    let url = folder.file("mismatch.store")
    do {
      let context = ModelContext(
        try ModelContainer(for: Sample.self, configurations: ModelConfiguration(url: url)))
      context.insert(Sample())
      try context.save()
      let outside = try Database(path: url.path, flags: 2)
      try outside.execute("UPDATE samples SET score = x'0102'")
      let error = try #require(throws: PersistenceError.self) {
        try ModelContext(context.container).fetch(FetchDescriptor<Sample>())
      }
      #expect(error.code == .invalidValue)
      #expect(error.attribute == "score")
      #expect(error.row != nil)
    }
    let notes = folder.file("notes.store")
    do {
      let context = ModelContext(
        try ModelContainer(for: NoteV2.self, configurations: ModelConfiguration(url: notes)))
      let note = NoteV2()
      note.key = "k"
      context.insert(note)
      try context.save()
    }
    let strict = ModelContext(
      try ModelContainer(
        for: NoteRequiredTag.self, configurations: ModelConfiguration(url: notes)))
    let error = try #require(throws: PersistenceError.self) {
      try strict.fetch(FetchDescriptor<NoteRequiredTag>())
    }
    #expect(error.code == .invalidValue)
    #expect(error.attribute == "tag")
    #expect(error.row?.contains("k") == true, "\(error)")
  }
}
