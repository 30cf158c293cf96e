import Foundation
import Observation
import Persistence

/// A class we do not own in spirit (like `MKMapItem.Identifier`): Codable, not Equatable.
final class PlaceToken: Codable, @unchecked Sendable {
  let raw: String
  init(raw: String) { self.raw = raw }
}

/// A model with every attribute type the layer supports.
@Observable final class Sample: PersistentModel {
  var id = UUID()
  var name = ""
  var note: String? = nil
  var count = 0
  var small = 0
  var score = 0.0
  var rating: Double? = nil
  var flag = false
  var maybe: Bool? = nil
  var when = Date(timeIntervalSinceReferenceDate: 0)
  var whenMaybe: Date? = nil
  var blob = Data()
  var ref: UUID? = nil
  var place: PlaceToken? = nil

  init() {}

  static let schema = ModelSchema<Sample>(
    "samples",
    .attribute(\.id, "id", .unique, .preserveValueOnDeletion),
    .attribute(\.name, "name", .indexed, .preserveValueOnDeletion, storage: \._name),
    .attribute(\.note, "note", storage: \._note),
    .attribute(\.count, "count"),
    .attribute(\.small, "small"),
    .attribute(\.score, "score"),
    .attribute(\.rating, "rating"),
    .attribute(\.flag, "flag"),
    .attribute(\.maybe, "maybe"),
    .attribute(\.when, "when"),
    .attribute(\.whenMaybe, "when_maybe"),
    .attribute(\.blob, "blob"),
    .attribute(\.ref, "ref"),
    .codable(\.place, "place", storage: \._place))
}

/// A small model for store-level tests.
@Observable final class Note: PersistentModel {
  var key = ""
  var text = ""
  var group = ""
  init() {}
  init(key: String, text: String, group: String = "") {
    self.key = key
    self.text = text
    self.group = group
  }
  static let schema = ModelSchema<Note>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text"),
    .attribute(\.group, "grp", .indexed))
}

/// `Note` as a later version of a program declares it: one more attribute.
@Observable final class NoteV2: PersistentModel {
  var key = ""
  var text = ""
  var group = ""
  var priority = 3
  var tag: String? = nil
  init() {}
  static let schema = ModelSchema<NoteV2>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text"),
    .attribute(\.group, "grp", .indexed),
    .attribute(\.priority, "priority"),
    .attribute(\.tag, "tag"))
}

/// `NoteV2` as another program declares it: `priority` as text, not an integer.
@Observable final class NoteV2Text: PersistentModel {
  var key = ""
  var text = ""
  var group = ""
  var priority = ""
  var tag: String? = nil
  init() {}
  static let schema = ModelSchema<NoteV2Text>(
    "notes",
    .attribute(\.key, "key", .unique, .preserveValueOnDeletion),
    .attribute(\.text, "text"),
    .attribute(\.group, "grp", .indexed),
    .attribute(\.priority, "priority"),
    .attribute(\.tag, "tag"))
}

/// A `Hashable` codable value whose every instance hashes alike, so that a cache of encodings
/// must compare values, not hashes; its `SIMD4<Float>` needs 16-byte alignment, so its snapshot
/// slot sits at an aligned offset in a registration's tail.
struct Tile: Codable, Hashable, Sendable {
  var corner: SIMD4<Float>
  var label: String
  static func == (lhs: Tile, rhs: Tile) -> Bool {
    lhs.corner == rhs.corner && lhs.label == rhs.label
  }
  func hash(into hasher: inout Hasher) { hasher.combine(0) }
}

/// A model with shared `Hashable` codable values, optional and not.
@Observable final class Board: PersistentModel {
  var key = ""
  var tile: Tile? = nil
  var base = Tile(corner: .zero, label: "")
  init() {}
  init(key: String, tile: Tile?, base: Tile) {
    self.key = key
    self.tile = tile
    self.base = base
  }
  static let schema = ModelSchema<Board>(
    "boards",
    .attribute(\.key, "key", .unique),
    .codable(\.tile, "tile", .sharesEqualValues),
    .codable(\.base, "base", .sharesEqualValues, storage: \._base))
}

/// A temporary folder removed when the value is released.
final class TemporaryDirectory {
  let url: URL
  init() {
    url = FileManager.default.temporaryDirectory.appendingPathComponent(
      "persistence-tests-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }
  func file(_ name: String) -> URL { url.appendingPathComponent(name) }
  deinit { try? FileManager.default.removeItem(at: url) }
}

/// A model with each `.codable` value twice: decoded when the row loads (`eager…`) and on first
/// access (`lazy…`, kept in a `CodableFault`), of a `Hashable` type and of a class that is not
/// `Equatable`.
@Observable final class Pinned: PersistentModel {
  var key = ""
  var eagerTile: Tile? = nil
  var eagerToken: PlaceToken? = nil
  @ObservationIgnored var _tileFault = CodableFault<Tile>()
  @ObservationIgnored var _tokenFault = CodableFault<PlaceToken>()
  var lazyTile: Tile? {
    get {
      access(keyPath: \.lazyTile)
      return _tileFault.value
    }
    set { withMutation(keyPath: \.lazyTile) { _tileFault.value = newValue } }
  }
  var lazyToken: PlaceToken? {
    get {
      access(keyPath: \.lazyToken)
      return _tokenFault.value
    }
    set { withMutation(keyPath: \.lazyToken) { _tokenFault.value = newValue } }
  }
  init() {}
  init(key: String, tile: Tile?, token: PlaceToken?) {
    self.key = key
    eagerTile = tile
    eagerToken = token
    _tileFault = CodableFault(tile)
    _tokenFault = CodableFault(token)
  }
  static let schema = ModelSchema<Pinned>(
    "pinned",
    .attribute(\.key, "key", .unique),
    .codable(\.eagerTile, "eager_tile", .sharesEqualValues),
    .codable(\.lazyTile, "lazy_tile", .sharesEqualValues, fault: \._tileFault),
    .codable(\.eagerToken, "eager_token", .sharesEqualValues),
    .codable(\.lazyToken, "lazy_token", .sharesEqualValues, fault: \._tokenFault))
}
