import Foundation
import SwiftDiagnostics
@_spi(FixItApplier) import SwiftIDEUtils
import SwiftParser
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import Testing

@testable import PersistenceMacros

/// Expands `source` in process with the persistence macros, as the compiler would: the
/// expanded text, and each diagnostic as "line: id: message", each of its notes after it as
/// " [note at line: message]".
func expand(_ source: String) -> (text: String, diagnostics: [String]) {
  let (text, diagnostics, _) = expandWithFixIts(source)
  return (text, diagnostics)
}

/// `source` expanded as ``expand(_:)`` does, and the source with every fix-it of its
/// diagnostics applied (as `FixItApplier`, what SourceKit uses, applies them).
func expandWithFixIts(_ source: String) -> (text: String, diagnostics: [String], fixed: String) {
  let file = Parser.parse(source: source)
  let context = BasicMacroExpansionContext(
    sourceFiles: [file: .init(moduleName: "Expansion", fullFilePath: "Expansion.swift")])
  // `@Model`'s extension role conforms the class as its declaration asks; a source that
  // begins `// subclass` declares a subclass of a model, which conforms already (the compiler
  // then gives the roles no conformance to add).
  let conformances: [TypeSyntax] =
    source.hasPrefix("// subclass\n")
    ? [] : ["PersistentModel", "LinksOnFirstUse", "Hashable", "Identifiable"]
  let specs: [String: MacroSpec] = [
    "Model": MacroSpec(type: ModelMacro.self, conformances: conformances),
    "_PersistedProperty": MacroSpec(type: PersistedPropertyMacro.self),
    "Attribute": MacroSpec(type: MarkerMacro.self),
    "Relationship": MacroSpec(type: MarkerMacro.self),
    "Transient": MacroSpec(type: MarkerMacro.self),
    "Unique": MacroSpec(type: SchemaDeclarationMacro.self),
    "Index": MacroSpec(type: SchemaDeclarationMacro.self),
    "ModelActor": MacroSpec(type: ModelActorMacro.self, conformances: ["ModelActor"]),
  ]
  let expanded = file.expand(
    macroSpecs: specs, contextGenerator: { _ in context }, indentationWidth: .spaces(2))
  let converter = SourceLocationConverter(fileName: "Expansion.swift", tree: file)
  let diagnostics = context.diagnostics.map { diagnostic in
    let id = (diagnostic.diagMessage as? ModelDiagnostic)?.id ?? "?"
    let notes = diagnostic.notes.map {
      " [note at \($0.location(converter: converter).line): \($0.message)]"
    }
    return "\(diagnostic.location(converter: converter).line): \(id): \(diagnostic.message)"
      + notes.joined()
  }
  let fixed = FixItApplier.applyFixes(from: context.diagnostics, filterByMessages: nil, to: file)
  return (expanded.description, diagnostics, fixed)
}

/// The golden expansion `name` (Expansions/`name`.txt): the source, a line `// expands to:`,
/// then the expected text.
func golden(_ name: String) throws -> (source: String, expected: String) {
  let url = try #require(
    Bundle.module.url(forResource: name, withExtension: "txt", subdirectory: "Expansions"))
  let text = try String(contentsOf: url, encoding: .utf8)
  let parts = text.components(separatedBy: "// expands to:\n")
  try #require(parts.count == 2, "\(name) has one '// expands to:' line")
  return (parts[0], parts[1])
}

@Suite("@Model's expansions, read as text")
struct ExpansionTests {
  @Test(
    "golden expansions: plain attributes, options and originalName, .codable, relationships, #Unique and #Index, documentation",
    arguments: ["Plain", "Options", "Relationships"])
  func goldenExpansion(name: String) throws {
    let (source, expected) = try golden(name)
    let (text, diagnostics) = expand(source)
    #expect(diagnostics == [])
    if text != expected {
      // Written beside the test's bundle, to compare or to take as the new golden file.
      let actual = FileManager.default.temporaryDirectory.appendingPathComponent(
        "expansion-\(name).txt")
      try? (source + "// expands to:\n" + text).write(to: actual, atomically: true, encoding: .utf8)
      Issue.record("\(name) expands otherwise; the expansion is in \(actual.path)")
    }
  }
}

@Suite("@Model leaves an undeclared array of an unknown type to the compiler")
struct UndeclaredArrayTests {
  @Test(
    "var tags: [Tag] = [] goes through _ArrayProperty (a to-many if Tag is a model); [String], an annotated or uninitialized array do not"
  )
  func undeclaredArray() {
    let (text, diagnostics) = expand(
      """
      @Model final class Note {
        var tags: [Tag] = []
        var stops: Array<Stop> = []
        var names: [String] = []
        @Relationship var links: [Link] = []
        var later: [Spot]
        init(later: [Spot]) { self.later = later }
      }
      """)
    #expect(diagnostics == [])
    #expect(text.contains("_ArrayProperty.storage([Tag].self, [])"))
    #expect(text.contains("_ArrayProperty.storage(Array<Stop>.self, [])"))
    #expect(text.contains(#"._array(\.tags, "tags", storage: \._tags)"#))
    #expect(text.contains(#"._array(\.stops, "stops", storage: \._stops)"#))
    #expect(!text.contains(#"_array(\.names"#) && !text.contains(#"_array(\.later"#))
    #expect(text.contains(#".toMany(\.links"#))
    // No row loader: the compiler, not the macro, knows which entries have columns.
    #expect(!text.contains("_$persistenceLoading: &row"))
  }
}

/// Each diagnostic `@Model` can give, by its id, from a declaration that earns it.
@Suite("@Model's diagnostics, each by its id")
struct DiagnosticTests {
  static let cases: [(id: String, source: String)] = [
    ("notAClass", "@Model struct S { var a = 0 }"),
    ("notAnActor", "@ModelActor final class Importer {}"),
    (
      "relationshipOriginalName",
      "@Model final class R { @Relationship(originalName: \"h\") var hotel: Hotel?; var a = 0 }"
    ),
    ("generic", "@Model final class G<T> { var a = 0 }"),
    ("table", #"@Model(table: "1bad") final class T { var a = 0 }"#),
    ("lazy", "@Model final class L { lazy var a = 0 }"),
    ("severalBindings", "@Model final class B { var a = 0, b = 1 }"),
    ("constant", "@Model final class C { let a = 0 }"),
    ("observers", "@Model final class O { var a = 0 { didSet {} } }"),
    ("reservedName", "@Model final class R { var schema = 0 }"),
    ("underscore", "@Model final class U { var _a = 0 }"),
    ("transientWithoutValue", "@Model final class T { @Transient var a: Int; init() { a = 0 } }"),
    ("unorderedNumber", "@Model final class A { var a: UInt64 = 0 }"),
    ("notRequired", "@Model class N { var a = 0; init() {} }"),
    ("defaultedInitializer", "@Model final class D { var a = 0; init(a: Int = 0) { self.a = a } }"),
    ("originalName", "@Model final class O { @Attribute(originalName: name) var a = 0 }"),
    ("codableType", "@Model final class C { @Attribute(.codable) var a = Spot() }"),
    ("codableValue", "@Model final class C { @Attribute(.codable) var a: Spot }"),
    ("urlValue", "@Model final class V { var a: URL }"),
    ("constraintList", "@Model final class K { #Unique<K>(list); var a = 0 }"),
    ("constraintKeyPath", #"@Model final class K { #Unique<K>([\.b]); var a = 0 }"#),
    (
      "uniqueTwice",
      #"@Model final class K { #Unique<K>([\.a], [\.a, \.b]); var a = 0; var b = 0 }"#
    ),
    (
      "indexTwice",
      #"@Model final class K { #Index<K>([\.a, \.b], [\.a, \.c]); var a = 0; var b = 0; var c = 0 }"#
    ),
    (
      "relationshipStored",
      "@Model final class H { @Transient @Relationship var rooms: [Room] = [] }"
    ),
    (
      "relationshipAttribute",
      "@Model final class H { @Relationship @Attribute(.unique) var rooms: [Room] = [] }"
    ),
    ("optionalToMany", "@Model final class H { @Relationship var rooms: [Room]? }"),
    ("relationshipType", "@Model final class H { @Relationship var rooms: Room = Room() }"),
    ("toManyStart", "@Model final class H { @Relationship var rooms: [Room] = [Room()] }"),
    (
      "toOneRule",
      "@Model final class R { @Relationship(deleteRule: .cascade) var hotel: Hotel? }"
    ),
    (
      "toOneOrder",
      #"@Model final class R { @Relationship(orderBy: \Hotel.name) var hotel: Hotel? }"#
    ),
    ("toOneStart", "@Model final class R { @Relationship var hotel: Hotel? = Hotel() }"),
  ]

  @Test("each id, from its declaration, and no other error", arguments: cases.map(\.id))
  func diagnostic(id: String) throws {
    let source = try #require(Self.cases.first { $0.id == id }).source
    let ids = expand(source).diagnostics.map {
      $0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)
    }
    #expect(ids.contains(id), "\(source): \(expand(source).diagnostics)")
    #expect(Set(ids) == [id], "\(source): \(expand(source).diagnostics)")
  }

  @Test("two constraints that cannot both be: the error has a note at the other one")
  func notesAtTheOther() {
    let unique = expand(
      "@Model final class K {\n  #Unique<K>([\\.a])\n  #Unique<K>([\\.a, \\.b])\n  var a = 0\n  var b = 0\n}"
    ).diagnostics
    #expect(
      unique.count == 1 && unique[0].hasPrefix("3: uniqueTwice: ")
        && unique[0].hasSuffix(" [note at 2: the other unique constraint on 'a']"), "\(unique)")
    let attribute = expand(
      "@Model final class K {\n  #Unique<K>([\\.a, \\.b])\n  @Attribute(.unique) var a = 0\n  var b = 0\n}"
    ).diagnostics
    #expect(
      attribute.count == 1 && attribute[0].hasPrefix("2: uniqueTwice: ")
        && attribute[0].hasSuffix(" [note at 3: the other unique constraint on 'a']"),
      "\(attribute)")
    let index = expand(
      "@Model final class K {\n  #Index<K>([\\.a, \\.b])\n  #Index<K>([\\.a, \\.c])\n  var a = 0\n  var b = 0\n  var c = 0\n}"
    ).diagnostics
    #expect(
      index.count == 1 && index[0].hasPrefix("1: indexTwice: ")
        && index[0].hasSuffix(
          " [note at 2: an #Index list that begins with 'a'] [note at 3: an #Index list that begins with 'a']"
        ), "\(index)")
  }

  @Test(
    "@ModelActor gives an actor its container, executor and init(modelContainer:), at the actor's access level, and conforms it"
  )
  func modelActor() {
    let (text, diagnostics) = expand("@ModelActor public actor Importer {\n  func run() {}\n}")
    #expect(diagnostics == [])
    for expected in [
      "public nonisolated let modelExecutor: any PersistenceCore.ModelExecutor",
      "public nonisolated let modelContainer: PersistenceCore.ModelContainer",
      "public init(modelContainer: PersistenceCore.ModelContainer) {",
      "self.modelExecutor = PersistenceCore.DefaultSerialModelExecutor(modelContext: modelContext)",
      "extension Importer: PersistenceCore.ModelActor {",
    ] {
      #expect(text.contains(expected), "\(expected)\n\(text)")
    }
    let internalActor = expand("@ModelActor actor Worker {}").text
    #expect(internalActor.contains("\n  nonisolated let modelContainer:"), "\(internalActor)")
    #expect(internalActor.contains("\n  init(modelContainer:"), "\(internalActor)")
  }

  @Test(
    "#Index in SwiftData's typed spelling: .binary and .rtree lists are indexes, as plain lists")
  func typedIndexes() {
    let (text, diagnostics) = expand(
      """
      @Model final class P {
        #Index<P>(.binary([\\.name]), .rtree([\\.latitude, \\.longitude]))
        var name = ""
        var latitude = 0.0
        var longitude = 0.0
      }
      """)
    #expect(diagnostics == [])
    #expect(text.contains(#".attribute(\.name, "name", .indexed, storage:"#), "\(text)")
    #expect(
      text.contains(#".attribute(\.latitude, "latitude", .indexed(with: "longitude"), storage:"#),
      "\(text)")
  }

  @Test("options are matched by their last name, however their type is spelled")
  func qualifiedOptions() {
    let (text, diagnostics) = expand(
      """
      @Model final class Q {
        @PersistenceCore.Attribute(Schema.Attribute.Option.codable) var tags: [String] = []
        @Attribute(Schema.Attribute.Option.unique) var code = ""
        @Relationship(deleteRule: Schema.Relationship.DeleteRule.nullify) var hotel: Hotel?
      }
      """)
    #expect(diagnostics == [])
    #expect(text.contains(#".codable(\.tags, "tags", storage: \._tags)"#), "\(text)")
    #expect(
      text.contains(#".attribute(\.code, "code", Schema.Attribute.Option.unique, storage:"#),
      "\(text)")
    // A qualified `.unique` is one: a `#Unique` that begins with the same property is refused.
    let twice = expand(
      """
      @Model final class Q {
        #Unique<Q>([\\.code, \\.name])
        @Attribute(Schema.Attribute.Option.unique) var code = ""
        var name = ""
      }
      """
    ).diagnostics
    #expect(twice.count == 1 && twice[0].hasPrefix("2: uniqueTwice: "), "\(twice)")
  }

  @Test("originalName: is the literal's value, its escapes read, in the schema and in constraints")
  func originalNameEscapes() {
    let (text, diagnostics) = expand(
      #"""
      @Model final class E {
        #Unique<E>([\.a, \.b])
        @Attribute(originalName: "x\"y") var a = ""
        @Attribute(originalName: "caf\u{E9}") var b = ""
      }
      """#)
    #expect(diagnostics == [])
    // Each column's name written once as a literal: `x"y` and `café`, not their escapes.
    let first = ##".attribute(\.a, #"x"y"#, .unique(with: "café"), storage:"##
    #expect(text.contains(first), "\(text)")
    #expect(text.contains(#".attribute(\.b, "café", storage:"#), "\(text)")
    let empty = expand(#"@Model final class E { @Attribute(originalName: "") var a = "" }"#)
    #expect(empty.diagnostics.count == 1 && empty.diagnostics[0].contains(": originalName: "))
  }

  @Test(
    "a subclass of a model: its schema over its superclass's declarations, its empty initializer calling the superclass's, overrides only where the superclass declares"
  )
  func subclassExpansion() {
    let (text, diagnostics) = expand(
      "// subclass\n@Model class BusinessTrip: Trip {\n  var perdiem = 0.0\n  var code: String\n  init(code: String) {\n    self.code = code\n    super.init()\n  }\n}"
    )
    #expect(diagnostics == [])
    for expected in [
      #"static let _$schema_BusinessTrip = PersistenceCore.ModelSchema<BusinessTrip>(subclassOf: Trip.self, entity: "BusinessTrip", Trip._$declarations_Trip(BusinessTrip.self) + ["#,
      "override class var _$subclassSchema: Any? {",
      "override init(_$persistenceEmpty: Void) {",
      "super.init(_$persistenceEmpty: ())",
      "override class func makeForLoading() -> Self {",
      "static func _$declarations_BusinessTrip<S: BusinessTrip>(_: S.Type) -> [PersistenceCore.ModelAttribute<S>] {",
      #"Trip._$declarations_Trip(S.self) + ["#,
      #".attribute(\S.perdiem, "perdiem", storage: \S._perdiem)"#,
      "required convenience init() {",
    ] {
      #expect(text.contains(expected), "\(expected)")
    }
    // A subclass with no initializer of its own, each property with an initial value, keeps
    // its superclass's initializers: none is declared for it.
    let inheriting = expand(
      "// subclass\n@Model class BusinessTrip: Trip {\n  var perdiem = 0.0\n}")
    #expect(inheriting.diagnostics == [])
    #expect(!inheriting.text.contains("init(_$persistenceEmpty"))
    #expect(!inheriting.text.contains("init() {"))
    #expect(inheriting.text.contains("override class func makeForLoading() -> Self {"))
    // What it inherits is not declared again.
    for inherited in ["static let schema", "var linkOrigin", "linkOriginSlot", "var id:"] {
      #expect(!text.contains(inherited), "\(inherited)")
    }
    let refused = expand(
      "// subclass\n@Model(table: \"b\") class BusinessTrip: Trip { var perdiem = 0.0 }")
    #expect(refused.diagnostics.map { $0.split(separator: ":")[1] } == [" table"])
  }

  @Test("every id the macros can give has a case here, and every case is one of them")
  func everyIDCovered() {
    let catalogue = Set(ModelError.allCases.map(\.rawValue))
    let covered = Set(Self.cases.map(\.id))
    #expect(catalogue == covered, "uncovered: \(catalogue.subtracting(covered))")
  }
}

/// Each fix-it, applied: the declaration it mends, and that the mended class expands with no
/// error.
@Suite("@Model's fix-its, applied")
struct FixItTests {
  static let cases: [(id: String, source: String, fixed: String)] = [
    (
      "constant", "@Model final class C { let a = 0 }",
      "@Model final class C { var a = 0 }"
    ),
    (
      "lazy", "@Model final class L {\n  /// Made once.\n  lazy var a = 0\n}",
      "@Model final class L {\n  /// Made once.\n  @Transient lazy var a = 0\n}"
    ),
    (
      "notRequired", "@Model class N { var a = 0; init() {} }",
      "@Model class N { var a = 0; required init() {} }"
    ),
    (
      "notRequired", "@Model class N { var a = 0\n  @MainActor public init() {} }",
      "@Model class N { var a = 0\n  @MainActor public required init() {} }"
    ),
    (
      "transientWithoutValue",
      "@Model final class T { @Transient var a: Int?; var b = 0 }",
      "@Model final class T { @Transient var a: Int? = nil; var b = 0 }"
    ),
    (
      "optionalToMany", "@Model final class H { @Relationship var rooms: [Room]? }",
      "@Model final class H { @Relationship var rooms: [Room] = [] }"
    ),
    (
      "toManyStart", "@Model final class H { @Relationship var rooms: [Room] = [Room()] }",
      "@Model final class H { @Relationship var rooms: [Room] = [] }"
    ),
    (
      "toManyStart", "@Model final class H {\n  @Relationship var rooms: [Room]\n}",
      "@Model final class H {\n  @Relationship var rooms: [Room] = []\n}"
    ),
    (
      "toOneStart", "@Model final class R { @Relationship var hotel: Hotel? = Hotel() }",
      "@Model final class R { @Relationship var hotel: Hotel? }"
    ),
  ]

  @Test(
    "each fix-it mends its declaration, which then expands with no error",
    arguments: 0..<cases.count)
  func fixIt(index: Int) {
    let (id, source, expected) = Self.cases[index]
    let (_, diagnostics, fixed) = expandWithFixIts(source)
    #expect(diagnostics.contains { $0.contains(": \(id): ") }, "\(diagnostics)")
    #expect(fixed == expected)
    #expect(expand(fixed).diagnostics == [], "\(fixed): \(expand(fixed).diagnostics)")
  }

  @Test("a value that is not optional gets a placeholder to fill in")
  func placeholder() {
    let (_, _, fixed) = expandWithFixIts("@Model final class T { @Transient var a: Int }")
    #expect(fixed == "@Model final class T { @Transient var a: Int = <#initial value#> }")
  }
}
