import Foundation
import Persistence
import TestSupport
import Testing

@testable import PersistenceCore
@testable import PersistenceSQLite

@Suite("Predicate translation: SQL text")
struct PredicateSQLTests {
  func sql(_ predicate: Predicate<Sample>) throws -> (String, [SQLValue])? {
    try PredicateTranslator.whereClause(predicate, schema: Sample.schema).map {
      ($0.sql, $0.bindings.values)
    }
  }

  @Test("binds captured values as parameters, never as SQL text")
  func bindsValues() throws {
    let hostile = "x'; DROP TABLE samples; --"
    let result = try #require(try sql(#Predicate { $0.name == hostile }))
    #expect(result.0 == "(\"name\" = ?)")
    #expect(result.1 == [.text(hostile)])
  }

  @Test("translates comparisons, logic and arithmetic")
  func comparisonsAndLogic() throws {
    let result = try #require(
      try sql(#Predicate { ($0.small * 2 + 1 > 5 && !$0.flag) || $0.score <= 1.5 }))
    #expect(
      result.0 == "(((((\"small\" * ?) + ?) > ?) AND (NOT (\"flag\" <> 0))) OR (\"score\" <= ?))")
    #expect(result.1 == [.integer(2), .integer(1), .integer(5), .real(1.5)])
  }

  @Test("translates optionals: nil tests, ?? and flatMap")
  func optionals() throws {
    #expect(try sql(#Predicate { $0.note == nil })?.0 == "(\"note\" IS NULL)")
    #expect(try sql(#Predicate { $0.note != "a" })?.0 == "(\"note\" IS DISTINCT FROM ?)")
    #expect(try sql(#Predicate { ($0.note ?? "x") == "y" })?.0 == "(COALESCE(\"note\", ?) = ?)")
    let flat = try #require(
      try sql(#Predicate { $0.note.flatMap { $0.starts(with: "a") } == true }))
    #expect(
      flat.0
        == "((CASE WHEN \"note\" IS NULL THEN NULL ELSE (substr(\"note\", 1, length(?)) = ?) END) IS TRUE)"
    )
  }

  @Test("translates string searches and membership")
  func stringsAndMembership() throws {
    let names = ["a", "b"]
    #expect(try sql(#Predicate { $0.name.contains("ab") })?.0 == "(instr(\"name\", ?) > 0)")
    #expect(try sql(#Predicate { names.contains($0.name) })?.0 == "(\"name\" IN (?, ?))")
    #expect(
      try sql(#Predicate { $0.name.localizedStandardContains("ab") })?.0
        == "(swift_localized_standard_contains(\"name\", ?) = 1)")
    #expect(try sql(#Predicate { $0.name.count > 2 })?.0 == "(swift_count(\"name\") > ?)")
  }

  @Test("folds the seed's search filter in Swift: empty text means no WHERE clause")
  func foldsConstantConditionals() throws {
    for (text, expected) in [("", nil), ("Par", "(instr(\"name\", ?) > 0)")] {
      let predicate = #Predicate<Sample> {
        if text.isEmpty { return true } else { return $0.name.contains(text) }
      }
      #expect(try sql(predicate)?.0 == expected)
    }
  }

  @Test("names the construct it cannot translate")
  func namesUnsupported() throws {
    let error = try #require(throws: PersistenceError.self) {
      try sql(#Predicate { $0.blob.contains(where: { $0 == 1 }) })
    }
    #expect(error.code == .unsupportedPredicate)
    #expect(error.message.contains("contains(where:) on a sequence that is not a to-many"))
  }

  /// The translator learns each node and constant type's conformances once and keeps them
  /// (`TypeConformances`): what a predicate's values and key paths are must still come from the
  /// predicate itself, on every thread.
  @Test("predicates of one shape keep their own key paths, values and nils, on every thread")
  func sameShapeStaysDistinct() async throws {
    func equalTo(_ value: Int, count: Bool) -> Predicate<Sample> {
      count ? #Predicate { $0.count == value } : #Predicate { $0.small == value }
    }
    func noteIs(_ value: String?) -> Predicate<Sample> { #Predicate { $0.note == value } }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for task in 0..<8 {
        group.addTask {
          for round in 0..<50 {
            let value = task * 1000 + round
            let counted = try #require(try sql(equalTo(value, count: round % 2 == 0)))
            #expect(counted.0 == (round % 2 == 0 ? "(\"count\" = ?)" : "(\"small\" = ?)"))
            #expect(counted.1 == [.integer(Int64(value))])
            let note = round % 3 == 0 ? nil : "n\(value)"
            let noted = try #require(try sql(noteIs(note)))
            #expect(
              noted.0
                == (note == nil ? "(\"note\" IS NULL)" : "(\"note\" IS NOT DISTINCT FROM ?)"))
            #expect(noted.1 == (note.map { [.text($0)] } ?? []))
          }
        }
      }
      try await group.waitForAll()
    }
    // A type that is not a column value is refused as before, however often it is asked.
    struct Opaque: Equatable, Codable { var x = 1 }
    for _ in 0..<2 {
      #expect(throws: PersistenceError.self) { try PredicateTranslator.sqlValue(of: Opaque()) }
    }
    #expect(try PredicateTranslator.sqlValue(of: String?.none as Any) == .null)
    #expect(try PredicateTranslator.sqlValue(of: Optional("a") as Any) == .text("a"))
  }

  /// A translation is reused for a predicate of the same shape (`PredicateTemplate`): the
  /// shape must hold everything its type does not, and a translation whose SQL depends on a
  /// captured value must not be reused.
  @Test("a predicate of a shape translated before reuses its SQL with its own values")
  func reusesTranslations() throws {
    func compare(_ value: Int, _ op: Int) -> Predicate<Sample> {
      if op == 0 { return #Predicate { $0.small < value } }
      if op == 1 { return #Predicate { $0.small > value } }
      if op == 2 { return #Predicate { $0.small <= value } }
      return #Predicate { $0.count >= value }
    }
    func arithmetic(_ value: Int, _ op: Int) -> Predicate<Sample> {
      if op == 0 { return #Predicate { $0.small + value == 3 } }
      if op == 1 { return #Predicate { $0.small - value == 3 } }
      return #Predicate { $0.small * value == 3 }
    }
    let before = PredicateTemplate.reuseCount
    for round in 0..<3 {
      for op in 0..<4 {
        let symbol = ["<", ">", "<=", ">="][op]
        let column = op == 3 ? "count" : "small"
        let result = try #require(try sql(compare(round * 10 + op, op)))
        #expect(result.0 == "(\"\(column)\" \(symbol) ?)")
        #expect(result.1 == [.integer(Int64(round * 10 + op))])
      }
      for op in 0..<3 {
        let symbol = ["+", "-", "*"][op]
        let result = try #require(try sql(arithmetic(round + op, op)))
        #expect(result.0 == "((\"small\" \(symbol) ?) = ?)")
        #expect(result.1 == [.integer(Int64(round + op)), .integer(3)])
      }
    }
    // Types that differ only above their leaves and key paths.
    for round in 0..<3 {
      let name = "n\(round)"
      let equal = try #require(try sql(#Predicate { $0.name == name }))
      let notEqual = try #require(try sql(#Predicate { $0.name != name }))
      #expect(equal.0 == "(\"name\" = ?)" && notEqual.0 == "(\"name\" <> ?)")
      #expect(equal.1 == [.text(name)] && notEqual.1 == [.text(name)])
    }
    // Each of the seven shapes was translated at most once; the other rounds reused it
    // (other tests running at the same time may add to the count, never take from it).
    #expect(PredicateTemplate.reuseCount - before >= 14)

    // Decided on a captured value: translated for each value, whichever came first.
    func search(_ text: String) -> Predicate<Sample> {
      #Predicate { text.isEmpty || $0.name.contains(text) }
    }
    func flag(_ value: Bool) -> Predicate<Sample> {
      #Predicate { $0.note.flatMap { $0.isEmpty } == value }
    }
    for text in ["Par", "", "x", ""] {
      #expect(try sql(search(text))?.0 == (text.isEmpty ? nil : "(instr(\"name\", ?) > 0)"))
    }
    for value in [true, false, true] {
      #expect(
        try sql(flag(value))?.0
          == "((CASE WHEN \"note\" IS NULL THEN NULL ELSE (\"note\" = '') END) IS \(value ? "TRUE" : "FALSE"))"
      )
    }
    // A parameter that becomes nil changes the SQL, and back.
    func noteIs(_ value: String?, _ other: String?) -> Predicate<Sample> {
      #Predicate { $0.note == value || $0.note == other }
    }
    for (value, other) in [("a", "b"), (nil, "b"), ("a", nil), (nil, nil), ("c", "d")] {
      let result = try #require(try sql(noteIs(value, other)))
      let left = value == nil ? "(\"note\" IS NULL)" : "(\"note\" IS NOT DISTINCT FROM ?)"
      let right = other == nil ? "(\"note\" IS NULL)" : "(\"note\" IS NOT DISTINCT FROM ?)"
      #expect(result.0 == "(\(left) OR \(right))")
      #expect(result.1 == [value, other].compactMap { $0.map { SQLValue.text($0) } })
    }
  }

  /// The walk that finds a predicate's shape follows its expression type's `ShapePlan` after
  /// the first walk; values whose type has no column form, and types whose walk fails, still
  /// translate with each predicate's own values.
  @Test("a walk follows its expression type's plan, and keeps each predicate's values")
  func followsShapePlans() throws {
    struct Limits: Codable, Sendable { var low: Int }
    func above(_ low: Int) -> Predicate<Sample> {
      let limits = Limits(low: low)
      return #Predicate { $0.small > limits.low }
    }
    func among(_ names: [String]) -> Predicate<Sample> {
      #Predicate { names.contains($0.name) }
    }
    func named(_ name: String?) -> Predicate<Sample> {
      #Predicate { $0.note == name }
    }
    for round in 0..<3 {
      // A captured struct: its leaf has no column form; the key path on it is folded.
      let folded = try #require(try sql(above(round * 7)))
      #expect(folded.0 == "(\"small\" > ?)" && folded.1 == [.integer(Int64(round * 7))])
      // An `IN` list: its walk fails, by its type; translated each time.
      let names = (0...round).map { "n\($0)" }
      let list = try #require(try sql(among(names)))
      // (Padded to a power of two with the last value: a few statements serve every length.)
      #expect(Array(list.1.prefix(names.count)) == names.map { SQLValue.text($0) })
      #expect(list.1.dropFirst(names.count).allSatisfy { $0 == .text(names[round]) })
      // An optional leaf, nil in one round.
      let value = round == 1 ? nil : "x\(round)"
      let optional = try #require(try sql(named(value)))
      #expect(optional.1 == (value.map { [SQLValue.text($0)] } ?? []))
    }
    let listPlan = try #require(
      ShapePlan.plan(for: ObjectIdentifier(type(of: among([]).expression))))
    #expect(listPlan.fails)
    let foldedPlan = try #require(
      ShapePlan.plan(for: ObjectIdentifier(type(of: above(0).expression))))
    #expect(!foldedPlan.fails && foldedPlan.leaves.count == 1 && foldedPlan.nodes.count == 5)
    #expect(foldedPlan.leaves[0].facts.persistable == nil)
    let optionalPlan = try #require(
      ShapePlan.plan(for: ObjectIdentifier(type(of: named(nil).expression))))
    #expect(optionalPlan.leaves[0].facts.optional != nil)
  }

  /// `FetchDescriptor` keeps its predicate's tree beside it (`predicateParts`) for the counts
  /// and fetches that reuse a kept statement: a predicate or conditions set after the
  /// descriptor was made must be the ones that run.
  @Test("a predicate or conditions set on a descriptor after it was made are the ones that run")
  func descriptorChangedAfterInit() throws {
    let context = ModelContext(
      try ModelContainer(
        for: Sample.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
    for (name, small) in [("a", 1), ("b", 2), ("b", 3), ("c", 4)] {
      let sample = Sample()
      sample.name = name
      sample.small = small
      context.insert(sample)
    }
    try context.save()
    func named(_ name: String) -> Predicate<Sample> { #Predicate { $0.name == name } }
    var descriptor = FetchDescriptor<Sample>(predicate: named("a"))
    for _ in 0..<2 { #expect(try context.fetchCount(descriptor) == 1) }  // kept the second time
    descriptor.predicate = named("b")
    #expect(try context.fetchCount(descriptor) == 2)
    #expect(try context.fetch(descriptor).map(\.small).sorted() == [2, 3])
    descriptor.conditions = [#Predicate { $0.small > 2 }]
    #expect(try context.fetchCount(descriptor) == 1)
    #expect(try context.fetch(descriptor).map(\.small) == [3])
    descriptor.conditions = []
    descriptor.predicate = nil
    #expect(try context.fetchCount(descriptor) == 4)
    var empty = FetchDescriptor<Sample>()
    empty.predicate = named("c")
    #expect(try context.fetchCount(empty) == 1)
  }

  @Test("throws for a sort without a stored key path")
  func refusesComputedSort() throws {
    let context = ModelContext(
      try ModelContainer(
        for: Sample.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
    let error = try #require(throws: PersistenceError.self) {
      try context.fetch(FetchDescriptor<Sample>(sortBy: [SortDescriptor(\.name.count)]))
    }
    #expect(error.code == .unsupportedPredicate)
  }
}

/// Generated data with unicode, empty strings, extremes and nil values.
enum SampleData {
  static let pivotIDs = (1...6).map {
    UUID(uuidString: "\($0)0000000-0000-0000-0000-000000000000")!
  }
  static let strings = [
    "", "a", "A", "ab", "abc", "Paris", "paris", "PARIS", "café", "cafe\u{301}", "Café", "Zürich",
    "Zu\u{308}rich", "日本", "東京", "🙂", "a🙂b", "x'y", "50%_off", "O'Brien, \"Bob\"", "ß", "SS",
    "İstanbul", "istanbul", "naïve", "NAIVE", " a", "a ", "\u{0}null", "ÅÅÅ",
  ]

  static func make(count: Int, seed: UInt64) -> [Sample] {
    var generator = SeededGenerator(seed: seed)
    func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &generator)] }
    let uuids = pivotIDs
    return (0..<count).map { index in
      let sample = Sample()
      sample.name = pick(strings)
      sample.note = Bool.random(using: &generator) ? nil : pick(strings)
      sample.count = pick([Int.min, -1, 0, 1, 2, 42, Int.max, -7, 1000])
      sample.small = Int.random(in: -20...20, using: &generator)
      sample.score = pick([-1.5, -0.0, 0.0, 1.5, 2.25, 1e300, -1e-300, .infinity, -.infinity, 3])
      sample.rating = Bool.random(using: &generator) ? nil : pick([0.5, 1, 4.75, -2])
      sample.flag = Bool.random(using: &generator)
      sample.maybe = pick([nil, true, false])
      sample.when = Date(
        timeIntervalSinceReferenceDate: pick([-1e9, 0, 86400.5, 1e9, 8e8 + Double(index)]))
      sample.whenMaybe =
        Bool.random(using: &generator)
        ? nil : Date(timeIntervalSinceReferenceDate: pick([0, 86400]))
      sample.blob = pick([Data(), Data([0]), Data([1, 2, 3]), Data("abc".utf8)])
      sample.ref = pick([nil] + uuids)
      sample.id = UUID()
      return sample
    }
  }
}

@Suite("Predicate translation: differential against Predicate.evaluate")
struct PredicateDifferentialTests {
  /// One store per engine, filled once (the tests only read it); each test case has a context
  /// of its own, as contexts are not shared between concurrently running tests. PostgreSQL
  /// refuses text with a NUL character (a clear error, tested elsewhere): its data has none.
  static func makeContext(_ engine: TestEngine = .sqlite) throws -> ModelContext {
    let container =
      switch engine {
      case .sqlite: try sqliteStore.get().1
      case .postgreSQL: try postgreSQLStore.get().1
      }
    return ModelContext(container)
  }

  static let sqliteStore = Result { try fill(.sqlite) }
  static let postgreSQLStore = Result { try fill(.postgreSQL) }

  static func fill(_ engine: TestEngine) throws -> (TestStore, ModelContainer) {
    let store = try engine.makeStore()
    let container = try store.container(Sample.self)
    let context = ModelContext(container)
    for sample in SampleData.make(count: 400, seed: 2027) {
      if engine == .postgreSQL {
        sample.name = sample.name.replacingOccurrences(of: "\u{0}", with: "\u{1}")
        sample.note = sample.note?.replacingOccurrences(of: "\u{0}", with: "\u{1}")
      }
      context.insert(sample)
    }
    try context.save()
    return (store, container)
  }

  static let text = "a"
  static let empty = ""
  static let names = ["Paris", "café", "日本", "missing"]
  static let optionalNames: [String?] = [nil, "abc"]
  static let pivotDate = Date(timeIntervalSinceReferenceDate: 86400)
  static let pivotID = SampleData.pivotIDs[3]
  static let blob = Data([1, 2, 3])

  /// Every supported predicate form, with a name for the report.
  static let cases: [(String, Predicate<Sample>)] = {
    let text = Self.text
    let empty = Self.empty
    let names = Self.names
    let optionalNames = Self.optionalNames
    let pivotDate = Self.pivotDate
    let pivotID = Self.pivotID
    let blob = Self.blob
    let maxInt = Int.max
    let minInt = Int.min
    let infinity = Double.infinity
    var cases: [(String, Predicate<Sample>)] = []
    cases.append(("all", #Predicate<Sample> { _ in true }))
    cases.append(("none", #Predicate<Sample> { _ in false }))
    cases.append(("string ==", #Predicate<Sample> { $0.name == "café" }))
    cases.append(("string != decomposed", #Predicate<Sample> { $0.name != "cafe\u{301}" }))
    cases.append(("string <", #Predicate<Sample> { $0.name < "b" }))
    cases.append(("string >= unicode", #Predicate<Sample> { $0.name >= "Zürich" }))
    cases.append(("string <= empty", #Predicate<Sample> { $0.name <= "" }))
    cases.append(("int ==", #Predicate<Sample> { $0.count == 42 }))
    cases.append(("int >", #Predicate<Sample> { $0.count > 0 }))
    cases.append(("int < extreme", #Predicate<Sample> { $0.count < maxInt }))
    cases.append(("int !=", #Predicate<Sample> { $0.count != minInt }))
    cases.append(("double <", #Predicate<Sample> { $0.score < 1.5 }))
    cases.append(("double == -0", #Predicate<Sample> { $0.score == 0 }))
    cases.append(("double >= inf", #Predicate<Sample> { $0.score >= infinity }))
    cases.append(("bool", #Predicate<Sample> { $0.flag }))
    cases.append(("bool ==", #Predicate<Sample> { $0.flag == false }))
    cases.append(("date <", #Predicate<Sample> { $0.when < pivotDate }))
    cases.append(("date >=", #Predicate<Sample> { $0.when >= pivotDate }))
    cases.append(("uuid <", #Predicate<Sample> { $0.id < pivotID }))
    cases.append(("uuid ==", #Predicate<Sample> { $0.ref == pivotID }))
    cases.append(("data ==", #Predicate<Sample> { $0.blob == blob }))
    cases.append(("data !=", #Predicate<Sample> { $0.blob != blob }))
    cases.append(("and", #Predicate<Sample> { $0.flag && $0.small > 0 }))
    cases.append(("or", #Predicate<Sample> { $0.flag || $0.small > 0 }))
    cases.append(("not", #Predicate<Sample> { !($0.small > 0) }))
    cases.append(("arithmetic +*", #Predicate<Sample> { $0.small * 3 + 2 > 10 }))
    cases.append(("arithmetic -", #Predicate<Sample> { $0.small - 5 < -10 }))
    cases.append(("division", #Predicate<Sample> { $0.small / 3 == 2 }))
    cases.append(("remainder", #Predicate<Sample> { $0.small % 4 == -1 }))
    cases.append(("double arithmetic", #Predicate<Sample> { $0.score * 2 > 3 }))
    cases.append(("double division", #Predicate<Sample> { $0.score / 2 > 0.5 }))
    cases.append(("unary minus", #Predicate<Sample> { -$0.small > 3 }))
    cases.append(("contains", #Predicate<Sample> { $0.name.contains("a") }))
    cases.append(("contains captured", #Predicate<Sample> { $0.name.contains(text) }))
    cases.append(("contains empty", #Predicate<Sample> { $0.name.contains(empty) }))
    cases.append(("contains unicode", #Predicate<Sample> { $0.name.contains("ü") }))
    cases.append(("contains quote", #Predicate<Sample> { $0.name.contains("'") }))
    cases.append(("contains percent", #Predicate<Sample> { $0.name.contains("%") }))
    cases.append(("starts", #Predicate<Sample> { $0.name.starts(with: "ca") }))
    cases.append(("starts empty", #Predicate<Sample> { $0.name.starts(with: "") }))
    cases.append(
      (
        "localizedStandardContains",
        #Predicate<Sample> { $0.name.localizedStandardContains("CAFE") }
      ))
    cases.append(
      (
        "localizedStandardContains diacritic",
        #Predicate<Sample> { $0.name.localizedStandardContains("zurich") }
      ))
    cases.append(("in list", #Predicate<Sample> { names.contains($0.name) }))
    cases.append(("in list optional", #Predicate<Sample> { optionalNames.contains($0.note) }))
    cases.append(("literal list", #Predicate<Sample> { ["a", "ab"].contains($0.name) }))
    cases.append(("nil", #Predicate<Sample> { $0.note == nil }))
    cases.append(("not nil", #Predicate<Sample> { $0.note != nil }))
    cases.append(("optional ==", #Predicate<Sample> { $0.note == "abc" }))
    cases.append(("coalesce", #Predicate<Sample> { ($0.note ?? "abc") == "abc" }))
    cases.append(("coalesce double", #Predicate<Sample> { ($0.rating ?? 0) > 1 }))
    cases.append(("flatMap", #Predicate<Sample> { $0.note.flatMap { $0.contains("a") } == true }))
    cases.append(("flatMap count", #Predicate<Sample> { ($0.note.flatMap { $0.count } ?? -1) > 2 }))
    cases.append(("optional bool", #Predicate<Sample> { $0.maybe == true }))
    cases.append(("optional date", #Predicate<Sample> { $0.whenMaybe == pivotDate }))
    cases.append(("count", #Predicate<Sample> { $0.name.count == 4 }))
    cases.append(("isEmpty", #Predicate<Sample> { $0.name.isEmpty }))
    cases.append(
      (
        "seed search empty",
        #Predicate<Sample> {
          if empty.isEmpty { return true } else { return $0.name.contains(empty) }
        }
      ))
    cases.append(
      (
        "seed search text",
        #Predicate<Sample> {
          if text.isEmpty { return true } else { return $0.name.contains(text) }
        }
      ))
    cases.append(("row conditional", #Predicate<Sample> { $0.flag ? $0.small > 0 : $0.small < 0 }))
    cases.append(("column vs column", #Predicate<Sample> { $0.name == ($0.note ?? "") }))
    cases.append(("contains column", #Predicate<Sample> { $0.name.contains($0.note ?? "") }))
    return cases
  }()

  static let sorts: [(String, [SortDescriptor<Sample>])] = [
    ("none", []),
    ("name", [SortDescriptor(\.name)]),
    ("name desc, small", [SortDescriptor(\.name, order: .reverse), SortDescriptor(\.small)]),
    ("note, when desc", [SortDescriptor(\.note), SortDescriptor(\.when, order: .reverse)]),
    ("score, id", [SortDescriptor(\.score), SortDescriptor(\.id)]),
    ("lexical name", [SortDescriptor(\.name, comparator: .lexical)]),
    ("rating desc", [SortDescriptor(\.rating, order: .reverse)]),
  ]

  @Test(
    "fetch equals filtering and sorting in memory, on every engine",
    arguments: TestEngine.allCases, 0..<cases.count)
  func matchesEvaluate(engine: TestEngine, index: Int) throws {
    let (name, predicate) = Self.cases[index]
    let context = try Self.makeContext(engine)
    let all = try context.fetch(FetchDescriptor<Sample>())  // primary-key order
    for (sortName, sorts) in Self.sorts {
      let fetched = try context.fetch(FetchDescriptor(predicate: predicate, sortBy: sorts))
      let expected = try all.filter { try predicate.evaluate($0) }.sorted(using: sorts)
      let same = fetched.map(ObjectIdentifier.init) == expected.map(ObjectIdentifier.init)
      #expect(
        same,
        "predicate \(name), sort \(sortName): \(fetched.count) fetched, \(expected.count) expected")
      let count = try context.fetchCount(FetchDescriptor(predicate: predicate))
      #expect(
        count == expected.count, "predicate \(name): count \(count), expected \(expected.count)")
    }
  }

  @Test("the generated data covers both outcomes of most predicates")
  func dataIsDiscriminating() throws {
    let all = try Self.makeContext().fetch(FetchDescriptor<Sample>())
    var trivial: [String] = []
    for (name, predicate) in Self.cases
    where !["all", "none", "seed search empty", "contains empty", "starts empty"].contains(name) {
      let matches = try all.filter { try predicate.evaluate($0) }.count
      if matches == 0 || matches == all.count { trivial.append(name) }
    }
    #expect(trivial.isEmpty, "predicates that match all or nothing: \(trivial)")
  }
}
