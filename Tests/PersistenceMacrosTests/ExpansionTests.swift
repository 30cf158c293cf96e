import Foundation
import SwiftDiagnostics
import SwiftParser
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import Testing

@testable import PersistenceMacros

/// Expands `source` in process with the persistence macros, as the compiler would: the
/// expanded text, and each diagnostic as "line: id: message".
func expand(_ source: String) -> (text: String, diagnostics: [String]) {
  let file = Parser.parse(source: source)
  let context = BasicMacroExpansionContext(
    sourceFiles: [file: .init(moduleName: "Expansion", fullFilePath: "Expansion.swift")])
  // `@Model`'s extension role conforms the class as its declaration asks.
  let conformances: [TypeSyntax] = [
    "PersistentModel", "LinksOnFirstUse", "Hashable", "Identifiable",
  ]
  let specs: [String: MacroSpec] = [
    "Model": MacroSpec(type: ModelMacro.self, conformances: conformances),
    "_PersistedProperty": MacroSpec(type: PersistedPropertyMacro.self),
    "Attribute": MacroSpec(type: MarkerMacro.self),
    "Relationship": MacroSpec(type: MarkerMacro.self),
    "Transient": MacroSpec(type: MarkerMacro.self),
    "Unique": MacroSpec(type: SchemaDeclarationMacro.self),
    "Index": MacroSpec(type: SchemaDeclarationMacro.self),
  ]
  let expanded = file.expand(
    macroSpecs: specs, contextGenerator: { _ in context }, indentationWidth: .spaces(2))
  let converter = SourceLocationConverter(fileName: "Expansion.swift", tree: file)
  let diagnostics = context.diagnostics.map { diagnostic in
    let id = (diagnostic.diagMessage as? ModelDiagnostic)?.id ?? "?"
    return "\(diagnostic.location(converter: converter).line): \(id): \(diagnostic.message)"
  }
  return (expanded.description, diagnostics)
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

/// Each diagnostic `@Model` can give, by its id, from a declaration that earns it.
@Suite("@Model's diagnostics, each by its id")
struct DiagnosticTests {
  static let cases: [(id: String, source: String)] = [
    ("notAClass", "@Model struct S { var a = 0 }"),
    ("generic", "@Model final class G<T> { var a = 0 }"),
    ("table", #"@Model(table: "1bad") final class T { var a = 0 }"#),
    ("lazy", "@Model final class L { lazy var a = 0 }"),
    ("severalBindings", "@Model final class B { var a = 0, b = 1 }"),
    ("constant", "@Model final class C { let a = 0 }"),
    ("observers", "@Model final class O { var a = 0 { didSet {} } }"),
    ("reservedName", "@Model final class R { var schema = 0 }"),
    ("underscore", "@Model final class U { var _a = 0 }"),
    ("transientWithoutValue", "@Model final class T { @Transient var a: Int; init() { a = 0 } }"),
    ("array", "@Model final class A { var a: [Int] = [] }"),
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

  @Test("every id the macros can give has a case here")
  func everyIDCovered() throws {
    let sources = try FileManager.default.contentsOfDirectory(
      at: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/PersistenceMacros").standardized,
      includingPropertiesForKeys: nil)
    var ids: Set<String> = []
    for file in sources where file.pathExtension == "swift" {
      let text = try String(contentsOf: file, encoding: .utf8)
      // An id is the first argument of `ModelDiagnostic.error(` or the first member of a
      // problem's `return (` (a relationship's), written as a string literal.
      let pattern = try NSRegularExpression(
        pattern: #"(?:ModelDiagnostic\.error\(|return \()\s*"([A-Za-z]+)""#)
      let range = NSRange(text.startIndex..., in: text)
      for match in pattern.matches(in: text, range: range) {
        ids.insert(String(text[Range(match.range(at: 1), in: text)!]))
      }
    }
    #expect(ids == Set(Self.cases.map(\.id)), "uncovered: \(ids.subtracting(Self.cases.map(\.id)))")
  }
}
