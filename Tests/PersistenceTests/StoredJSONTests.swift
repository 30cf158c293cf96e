import Foundation
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

/// The `.codable` column's own JSON codec must agree with Foundation's, value by value: the
/// same bytes out (`JSONEncoder` with `.sortedKeys`), the same values in, and Foundation's
/// errors where a value is not decodable.
// Serialized: tests count the direct reads and writes of `Direct` in global counters, which
// another test of the suite running at the same time would add to.
@Suite("Stored JSON: the fast codec agrees with Foundation", .serialized)
struct StoredJSONTests {
  struct Flat: Codable, Equatable {
    var rawValue: String
    var count: Int
    var flag: Bool
    var note: String?
  }

  struct Nested: Codable, Equatable {
    var name: String
    var tags: [String]
    var inner: Flat
    var byKey: [String: Int]
    var levels: [[Int8]]
    var optionalList: [UInt?]
  }

  enum Kind: String, Codable { case city, region }

  struct Mixed: Codable, Equatable {
    var kind: Kind
    var when: Date
    var ratio: Double
    var blob: Data
    var link: URL
  }

  /// A type with a super encoder, which the fast path leaves to Foundation.
  class Base: Codable {
    var base = 1
  }
  final class Derived: Base, @unchecked Sendable {
    var extra = "x"
    enum CodingKeys: String, CodingKey { case extra }
    override init() { super.init() }
    required init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: CodingKeys.self)
      extra = try container.decode(String.self, forKey: .extra)
      try super.init(from: container.superDecoder())
    }
    override func encode(to encoder: any Encoder) throws {
      var container = encoder.container(keyedBy: CodingKeys.self)
      try container.encode(extra, forKey: .extra)
      try super.encode(to: container.superEncoder())
    }
  }

  /// `Flat`'s members, written and read directly (``StoredJSONRepresentable``), counting each
  /// direct write and read (only the test of direct types uses it).
  struct Direct: Codable, Equatable, StoredJSONRepresentable {
    var rawValue: String
    var count: Int
    var flag: Bool
    var note: String?

    static let writes = Atomic<Int>(0)
    static let reads = Atomic<Int>(0)

    init(rawValue: String, count: Int, flag: Bool, note: String?) {
      (self.rawValue, self.count, self.flag, self.note) = (rawValue, count, flag, note)
    }

    func writeStoredJSON(to object: inout StoredJSONObjectWriter) {
      Self.writes.add(1, ordering: .relaxed)
      object.write(count, forKey: "count")
      object.write(flag, forKey: "flag")
      object.writeIfPresent(note, forKey: "note")
      object.write(rawValue, forKey: "rawValue")
    }

    init(storedJSON object: StoredJSONObjectReader) throws {
      rawValue = try object.string(forKey: "rawValue")
      count = try object.integer(forKey: "count")
      flag = try object.bool(forKey: "flag")
      note = try object.stringIfPresent(forKey: "note")
      Self.reads.add(1, ordering: .relaxed)
    }
  }

  /// Writes its keys out of order and declines every read: both go through `Codable`.
  struct Declining: Codable, Equatable, StoredJSONRepresentable {
    var b = "second"
    var a = 1

    init() {}

    func writeStoredJSON(to object: inout StoredJSONObjectWriter) {
      object.write(b, forKey: "b")
      object.write(a, forKey: "a")
    }

    init(storedJSON object: StoredJSONObjectReader) throws { throw CocoaError(.coderInvalidValue) }
  }

  /// Flips, drops or inserts one to three bytes of `bytes`, drawn from JSON's own alphabet.
  static func mutate(_ bytes: inout [UInt8], _ generator: inout SeededGenerator) {
    let alphabet = Array(#"{}[],:"\ u0123456789abcdefnulltruefalse-+.eE/é"#.utf8)
    for _ in 0..<(1 + Int(generator.next() % 3)) {
      let position = Int(generator.next() % UInt64(bytes.count + 1))
      switch generator.next() % 3 {
      case 0 where position < bytes.count:
        bytes[position] = alphabet[Int(generator.next() % UInt64(alphabet.count))]
      case 1 where position < bytes.count: bytes.remove(at: position)
      default:
        bytes.insert(alphabet[Int(generator.next() % UInt64(alphabet.count))], at: position)
      }
    }
  }

  func foundationBytes(_ value: some Encodable) throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return try encoder.encode(value)
  }

  func roundTrips<Value: Codable & Equatable>(_ value: Value) throws {
    let ours = try encodeStoredJSON(value)
    let theirs = try foundationBytes(value)
    #expect(
      ours == theirs,
      "\(String(decoding: ours, as: UTF8.self)) vs \(String(decoding: theirs, as: UTF8.self))")
    #expect(try decodeStoredJSON(Value.self, from: theirs) == value)
    #expect(
      try decodeStoredJSON(Value.self, from: theirs)
        == JSONDecoder().decode(Value.self, from: theirs))
  }

  @Test("flat and nested values: identical bytes and values")
  func identicalBytes() throws {
    try roundTrips(Flat(rawValue: "geonames:2643743", count: -42, flag: true, note: nil))
    try roundTrips(Flat(rawValue: "", count: Int.max, flag: false, note: "x"))
    try roundTrips(
      Nested(
        name: "a/b \"quoted\" back\\slash \n\t\r\u{8}\u{c}\u{1}\u{1f}\u{7f} é 東京 😀 \u{2028}",
        tags: [], inner: Flat(rawValue: "r", count: 0, flag: true, note: "n"),
        byKey: ["Zed": 1, "_x": 2, "a10": 3, "a2": 4, "abc": 5, "z": 6, "B": 7, "b": 8, "": 9],
        levels: [[-128, 127], []], optionalList: [1, nil, UInt.max]))
    try roundTrips(["só": 1, "ä": 2, "z": 3])  // non-ASCII keys: Foundation orders them
    try roundTrips(
      Mixed(
        kind: .region, when: Date(timeIntervalSinceReferenceDate: 1.5), ratio: 0.1,
        blob: Data([0, 1, 2]), link: URL(string: "https://example.com/a?b=c")!))
    try roundTrips([Kind.city, .region])
    try roundTrips("top-level string")
    try roundTrips(12)
    try roundTrips([true, false])
    let derived = try decodeStoredJSON(Derived.self, from: encodeStoredJSON(Derived()))
    #expect(derived.extra == "x" && derived.base == 1)
    #expect(try encodeStoredJSON(Derived()) == foundationBytes(Derived()))
  }

  /// Encodes, at every depth, the coding path it is encoded at, as Foundation reports it.
  struct PathProbe: Codable, Equatable {
    var path = ""
    init() {}
    init(from decoder: any Decoder) throws {
      path = try decoder.singleValueContainer().decode(String.self)
    }
    func encode(to encoder: any Encoder) throws {
      var container = encoder.singleValueContainer()
      try container.encode(encoder.codingPath.map(\.stringValue).joined(separator: "."))
    }
  }
  struct Paths: Codable, Equatable {
    var top = PathProbe()
    var list = [PathProbe(), PathProbe()]
    var nested = ["inner": ["deep": PathProbe()]]
  }

  @Test("values asking for their coding path get Foundation's, at every depth")
  func codingPaths() throws {
    #expect(try encodeStoredJSON(Paths()) == foundationBytes(Paths()))
    #expect(try encodeStoredJSON(PathProbe()) == foundationBytes(PathProbe()))
  }

  @Test(
    "only types that write and read their own JSON take the fast path; every other type goes to Foundation"
  )
  func fastPathCoverage() throws {
    let flat = Flat(rawValue: "geonames:1", count: 3, flag: true, note: nil)
    let nested = Nested(
      name: "n", tags: ["a"], inner: flat, byKey: ["k": 1], levels: [[1]], optionalList: [nil])
    #expect(fastEncodeStoredJSON(flat) == nil)
    #expect(fastEncodeStoredJSON(nested) == nil)
    #expect(fastDecodeStoredJSON(Flat.self, from: try foundationBytes(flat)) == nil)
    #expect(fastDecodeStoredJSON(Nested.self, from: try foundationBytes(nested)) == nil)
    #expect(fastEncodeStoredJSON(Derived()) == nil)
    let direct = Direct(rawValue: "geonames:1", count: 3, flag: true, note: nil)
    #expect(fastEncodeStoredJSON(direct) != nil)
    #expect(fastDecodeStoredJSON(Direct.self, from: try foundationBytes(direct)) == direct)
    #expect(
      fastDecodeStoredJSON(
        Direct.self, from: Data(#"{"rawValue":"a","count":1.0,"flag":true}"#.utf8)) == nil)
    // An object of more than 32 members goes to Foundation (the reader's lookups are linear
    // scans); one of 32 stays on the fast path. Both decode as Foundation decodes.
    for size in [32, 33, 5000] {
      let extra = (0..<(size - 3)).map { #","k\#($0)":\#($0)"# }.joined()
      let bytes = Data((#"{"rawValue":"a","count":1,"flag":true"# + extra + "}").utf8)
      #expect((fastDecodeStoredJSON(Direct.self, from: bytes) == nil) == (size > 32))
      #expect(
        try decodeStoredJSON(Direct.self, from: bytes)
          == JSONDecoder().decode(Direct.self, from: bytes))
    }
    // Duplicate keys go to Foundation, which decides which one wins, at any position.
    for document in [
      #"{"rawValue":"a","rawValue":"b","count":1,"flag":true}"#,
      #"{"count":1,"rawValue":"a","flag":true,"count":2}"#,
      #"{"rawValue":"a","count":1,"flag":true,"note":"x","x":{"x":1,"x":2}}"#,
    ] {
      #expect(fastDecodeStoredJSON(Direct.self, from: Data(document.utf8)) == nil, "\(document)")
    }
    #expect(
      fastDecodeStoredJSON(
        Direct.self, from: Data(#"{"rawValue":"a","count":1,"flag":true,"x":{"count":1}}"#.utf8))
        != nil)
  }

  /// Encodes itself through containers used in unusual but legal ways.
  struct Unusual: Encodable {
    enum Way { case outOfOrder, duplicateKey, interleaved, askedTwice, escapedKeys, empty, nothing }
    struct Key: CodingKey {
      let stringValue: String
      var intValue: Int? { nil }
      init(_ name: String) { stringValue = name }
      init?(stringValue: String) { self.stringValue = stringValue }
      init?(intValue _: Int) { nil }
    }
    struct Nothing: Encodable { func encode(to _: any Encoder) throws {} }
    let way: Way

    func encode(to encoder: any Encoder) throws {
      switch way {
      case .outOfOrder:
        var container = encoder.container(keyedBy: Key.self)
        try container.encode("z", forKey: Key("zz"))
        var inner = container.nestedContainer(keyedBy: Key.self, forKey: Key("m"))
        try inner.encode(2, forKey: Key("b"))
        try inner.encode(1, forKey: Key("a"))
        try container.encode(["y": 1, "x": 2], forKey: Key("a"))
        var list = container.nestedUnkeyedContainer(forKey: Key("B"))
        try list.encode(true)
        try list.encodeNil()
        try container.encodeNil(forKey: Key("a0"))
      case .duplicateKey:
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(1, forKey: Key("a"))
        try container.encode(2, forKey: Key("b"))
        try container.encode(3, forKey: Key("a"))
      case .interleaved:
        var container = encoder.container(keyedBy: Key.self)
        var inner = container.nestedContainer(keyedBy: Key.self, forKey: Key("inner"))
        try container.encode(1, forKey: Key("outer"))
        try inner.encode(2, forKey: Key("late"))
      case .askedTwice:
        var first = encoder.container(keyedBy: Key.self)
        try first.encode(1, forKey: Key("b"))
        var second = encoder.container(keyedBy: Key.self)
        try second.encode(2, forKey: Key("a"))
      case .escapedKeys:
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(1, forKey: Key("a/b"))
        try container.encode(2, forKey: Key("q\"x"))
        try container.encode(3, forKey: Key("a0"))
      case .empty:
        var container = encoder.container(keyedBy: Key.self)
        _ = container.nestedUnkeyedContainer(forKey: Key("list"))
        _ = container.nestedContainer(keyedBy: Key.self, forKey: Key("object"))
      case .nothing:
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(Nothing(), forKey: Key("value"))
      }
    }
  }

  @Test(
    "containers used out of key order, twice, interleaved or empty: Foundation's bytes",
    arguments: [
      Unusual.Way.outOfOrder, .duplicateKey, .interleaved, .askedTwice, .escapedKeys, .empty,
      .nothing,
    ])
  func unusualContainers(_ way: Unusual.Way) throws {
    let value = Unusual(way: way)
    let ours = try encodeStoredJSON(value)
    let theirs = try foundationBytes(value)
    #expect(
      ours == theirs,
      "\(String(decoding: ours, as: UTF8.self)) vs \(String(decoding: theirs, as: UTF8.self))")
  }

  /// Integers wider than 64 bits, which encode themselves through a single-value container.
  struct Wide: Codable, Equatable {
    var big: Int128
    var unsigned: UInt128
    var list: [Int128]
  }

  @Test("128-bit integers: Foundation's bytes, no endless recursion")
  func wideIntegers() throws {
    try roundTrips(Wide(big: .min, unsigned: .max, list: [0, -1, Int128(Int64.max) + 1]))
  }

  /// A JSON-shaped value of any nesting, for comparing encoders on random input.
  indirect enum Shape: Encodable {
    case text(String)
    case number(Int64)
    case flag(Bool)
    case none
    case list([Shape])
    case object([String: Shape])

    func encode(to encoder: any Encoder) throws {
      switch self {
      case .text(let text):
        var container = encoder.singleValueContainer()
        try container.encode(text)
      case .number(let number):
        var container = encoder.singleValueContainer()
        try container.encode(number)
      case .flag(let flag):
        var container = encoder.singleValueContainer()
        try container.encode(flag)
      case .none:
        var container = encoder.singleValueContainer()
        try container.encodeNil()
      case .list(let elements):
        var container = encoder.unkeyedContainer()
        for element in elements { try container.encode(element) }
      case .object(let members):
        try members.encode(to: encoder)
      }
    }
  }

  @Test("random nested values: Foundation's bytes")
  func randomShapes() throws {
    var generator = SeededGenerator(seed: 41)
    let texts = ["", "a", "Zürich", "東京", "a/b", "quote \" here", "tab\t", "😀", "\u{1}"]
    let keys = ["a", "B", "b", "a10", "a2", "_", "zz", "0", ""]
    func shape(_ depth: Int) -> Shape {
      switch generator.next() % (depth > 3 ? 4 : 6) {
      case 0: return .text(texts[Int(generator.next() % UInt64(texts.count))])
      case 1: return .number(Int64(bitPattern: generator.next()) >> (generator.next() % 64))
      case 2: return .flag(generator.next() % 2 == 0)
      case 3: return .none
      case 4: return .list((0..<Int(generator.next() % 4)).map { _ in shape(depth + 1) })
      default:
        var members: [String: Shape] = [:]
        for _ in 0..<Int(generator.next() % 5) {
          members[keys[Int(generator.next() % UInt64(keys.count))]] = shape(depth + 1)
        }
        return .object(members)
      }
    }
    for _ in 0..<500 {
      let value = shape(0)
      let ours = try encodeStoredJSON(value)
      let theirs = try foundationBytes(value)
      #expect(
        ours == theirs,
        "\(String(decoding: ours, as: UTF8.self)) vs \(String(decoding: theirs, as: UTF8.self))")
    }
  }

  @Test("decodes what Foundation decodes, however it is spelled")
  func spellings() throws {
    let documents = [
      #"{"rawValue":"a","count":1,"flag":true}"#,
      #" { "flag" : false , "count" : -0 , "rawValue" : "\u00e9\ud83d\ude00\/\"" , "note" : null } "#,
      #"{"rawValue":"a","count":1.0,"flag":true}"#,
      #"{"rawValue":"a","count":1e2,"flag":true,"extra":[1,{"deep":null}]}"#,
      #"{"rawValue":"a","count":1,"flag":true,"rawValue":"b"}"#,
      #"{"rawValue":"a","rawValue":"b","count":1,"flag":true}"#,
      #"{"count":1,"rawValue":"a","flag":true,"count":2}"#,
    ]
    for document in documents {
      let data = Data(document.utf8)
      #expect(
        try decodeStoredJSON(Flat.self, from: data) == JSONDecoder().decode(Flat.self, from: data))
    }
  }

  @Test(
    "garbage gets Foundation's error, never a value",
    arguments: [
      "", "{", "}", "[1,]", #"{"rawValue":"a","count":01,"flag":true}"#,
      #"{"rawValue":"a","count":99999999999999999999,"flag":true}"#,
      #"{"rawValue":"a","count":1,"flag":"true"}"#, #"{"rawValue":1,"count":1,"flag":true}"#,
      #"{"count":1,"flag":true}"#, #"{"rawValue":"\ud83d","count":1,"flag":true}"#,
      "{\"rawValue\":\"a\u{1}\",\"count\":1,\"flag\":true}",
      #"{"rawValue":"\x","count":1,"flag":true}"#,
      "null", "[]", "nul", #"{"rawValue":"a","count":1,"flag":true} x"#,
      String(repeating: "[", count: 200) + String(repeating: "]", count: 200),
    ])
  func garbage(_ document: String) throws {
    let data = Data(document.utf8)
    #expect(throws: (any Error).self) { try JSONDecoder().decode(Flat.self, from: data) }
    #expect(throws: (any Error).self) { try decodeStoredJSON(Flat.self, from: data) }
  }

  @Test("mutated documents: the fast path never answers what Foundation would not")
  func mutations() throws {
    // Start from real encodings, then flip, drop and insert bytes (a seeded generator, so a
    // failure reproduces): whenever the fast path answers, Foundation must answer the same.
    var generator = SeededGenerator(seed: 2027)
    let seeds: [Data] = [
      try foundationBytes(Direct(rawValue: "geonames:1", count: 7, flag: true, note: "é\n")),
      // Escapes, a surrogate pair, spaces and -0: what the reader's own paths handle.
      Data(#"{ "rawValue" : "a\u00e9\ud83d\ude00\/" , "count":-0,"flag":false,"note":null}"#.utf8),
      // Members the type does not read, nested: the checker walks them.
      Data(#"{"rawValue":"r","count":-1,"flag":false,"x":{"k":[1,-2,null,"s"],"l":{}}}"#.utf8),
    ]
    var answered = 0
    for round in 0..<4000 {
      var bytes = [UInt8](seeds[round % seeds.count])
      Self.mutate(&bytes, &generator)
      let data = Data(bytes)
      if let fast = fastDecodeStoredJSON(Direct.self, from: data) {
        answered += 1
        #expect((try? JSONDecoder().decode(Direct.self, from: data)) == fast, "\(bytes)")
      }
    }
    #expect(answered > 100, "the mutations should leave many documents decodable")
  }

  @Test(
    "types that write and read their own JSON: Foundation's bytes and values, Codable's where they decline, Foundation's errors"
  )
  func directTypes() throws {
    var generator = SeededGenerator(seed: 41)
    let pieces = ["a", "é", "😀", "\"", "\\", "/", "\n", "\u{1}", "\u{7F}", " ", "geonames:", "0"]
    func text() -> String {
      (0..<Int(generator.next() % 6)).map { _ in pieces[Int(generator.next() % 12)] }.joined()
    }
    let (writes, reads) = (
      Direct.writes.load(ordering: .relaxed), Direct.reads.load(ordering: .relaxed)
    )
    for _ in 0..<500 {
      let value = Direct(
        rawValue: text(),
        count: [0, -1, 42, .max, .min][Int(generator.next() % 5)],
        flag: generator.next() % 2 == 0, note: generator.next() % 3 == 0 ? nil : text())
      let theirs = try foundationBytes(value)
      #expect(try encodeStoredJSON(value) == theirs, "\(String(decoding: theirs, as: UTF8.self))")
      #expect(try decodeStoredJSON(Direct.self, from: theirs) == value)
      // Spelled otherwise: spaces, escapes Foundation does not write, the keys reordered, and
      // `null` for the absent note.
      let spelled = Data(
        #"{ "rawValue" : "\u0041\/" , "note" : null, "flag":true, "count" : -7 }"#.utf8)
      #expect(
        try decodeStoredJSON(Direct.self, from: spelled)
          == JSONDecoder().decode(Direct.self, from: spelled))
    }
    #expect(Direct.writes.load(ordering: .relaxed) - writes == 500)
    #expect(Direct.reads.load(ordering: .relaxed) - reads == 1000)
    // Wrong kinds of value: the direct read throws, and Foundation's error is what comes out.
    for text in [
      #"{"rawValue":1,"count":1,"flag":true}"#, #"{"rawValue":"x","count":"1","flag":true}"#,
      #"{"rawValue":"x","count":1.5,"flag":true}"#, #"{"rawValue":"x","count":1,"flag":1}"#,
      #"{"rawValue":"x","count":1,"flag":true,"note":7}"#, #"{"count":1,"flag":true}"#,
      #"{"rawValue":"x","count":99999999999999999999,"flag":true}"#, #"["x"]"#,
    ] {
      #expect(throws: (any Error).self, "\(text)") {
        try decodeStoredJSON(Direct.self, from: Data(text.utf8))
      }
      #expect(throws: (any Error).self) {
        try JSONDecoder().decode(Direct.self, from: Data(text.utf8))
      }
    }
    // Mutations of a direct type's encoding: whenever it answers, Foundation answers the same.
    let seed = [UInt8](
      try foundationBytes(Direct(rawValue: "a\"/é", count: -3, flag: true, note: "n")))
    var answered = 0
    for _ in 0..<3000 {
      var bytes = seed
      Self.mutate(&bytes, &generator)
      if let fast = fastDecodeStoredJSON(Direct.self, from: Data(bytes)) {
        answered += 1
        #expect((try? JSONDecoder().decode(Direct.self, from: Data(bytes))) == fast, "\(bytes)")
      }
    }
    #expect(answered > 100)
    // Declined: keys out of order and a read that throws go through Codable, as Foundation.
    try roundTrips(Declining())
  }

  @Test("the reader's UTF-8 check agrees with the standard library's on random bytes")
  func utf8Check() {
    // Bytes drawn mostly from the edges of UTF-8's ranges: overlong forms, surrogates,
    // code points past U+10FFFF, truncated and stray continuation bytes.
    let edges: [UInt8] = [
      0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1,
      0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
    ]
    var generator = SeededGenerator(seed: 8259)
    var valid = 0
    for _ in 0..<20_000 {
      let bytes = (0..<Int(generator.next() % 6)).map { _ in
        edges[Int(generator.next() % UInt64(edges.count))]
      }
      let expected = String(validating: bytes, as: UTF8.self) != nil
      if expected { valid += 1 }
      #expect(
        bytes.withUnsafeBufferPointer { StoredJSONText.isValidUTF8($0) } == expected, "\(bytes)")
    }
    #expect(valid > 1000 && valid < 19_000, "both answers should be common: \(valid)")
  }

  /// Decodes one member whose key is given at run time.
  struct OneKey: Decodable, Equatable {
    struct Key: CodingKey {
      let stringValue: String
      var intValue: Int? { nil }
      init?(stringValue: String) { self.stringValue = stringValue }
      init?(intValue _: Int) { nil }
    }
    @TaskLocal static var name = ""
    var value: Int?
    var present: Bool
    var keys: [String]
    init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: Key.self)
      let key = Key(stringValue: Self.name)!
      present = container.contains(key)
      value = try container.decodeIfPresent(Int.self, forKey: key)
      keys = container.allKeys.map(\.stringValue).sorted()
    }
  }

  @Test(
    "keys are found as Foundation finds them: escaped, non-ASCII and canonically equal keys",
    arguments: [
      (#"{"K":1,"b":2}"#, "\u{212A}"), (#"{"K":1}"#, "K"), (#"{"\u004b":1}"#, "K"),
      (#"{"é":1}"#, "e\u{301}"), (#"{"é":1}"#, "é"), (#"{"":1,"a":[{"":2}]}"#, ""),
      (#"{ "a" : { "K" : 1 } , "K" : 3 }"#, "K"), (#"{"a":"K","K":"a"}"#, "b"),
    ])
  func keyLookup(_ document: String, _ name: String) {
    let data = Data(document.utf8)
    OneKey.$name.withValue(name) {
      let foundation = try? JSONDecoder().decode(OneKey.self, from: data)
      let ours = try? decodeStoredJSON(OneKey.self, from: data)
      #expect(ours == foundation, "\(document) for \(name)")
    }
  }

  @Test("invalid UTF-8 is refused as Foundation refuses it")
  func invalidUTF8() throws {
    var bytes = Array(#"{"rawValue":"a","count":1,"flag":true}"#.utf8)
    bytes[13] = 0xFF
    let data = Data(bytes)
    #expect(throws: (any Error).self) { try JSONDecoder().decode(Flat.self, from: data) }
    #expect(throws: (any Error).self) { try decodeStoredJSON(Flat.self, from: data) }
  }
}
