import Foundation
import Persistence
import Testing

@testable import PersistenceCore

/// Attributes spelled with their module, as code that imports several persistence modules
/// writes them.
@Model final class QualifiedVenue {
  @PersistenceCore.Attribute(.unique) var code: String = ""
  @PersistenceCore.Attribute(originalName: "town") var city: String = ""
  @PersistenceCore.Transient var isSelected = false
}

/// Optionals of every native type: none may be taken for a to-one.
@Model final class EveryNativeOptional {
  var text: String?
  var int: Int?
  var int8: Int8?
  var int16: Int16?
  var int32: Int32?
  var int64: Int64?
  var uint8: UInt8?
  var uint16: UInt16?
  var uint32: UInt32?
  var double: Double?
  var float: Float?
  var bool: Bool?
  var date: Date?
  var uuid: UUID?
  var data: Data?
  var site: URL?
  var qualified: Swift.Int64?
  var foundation: Foundation.URL?
}

@Suite("@Model reads a declaration by what it means, not how it is spelled")
struct ModelDeclarationTests {
  @Test(
    "@PersistenceCore.Attribute(.unique) is honoured as @Attribute(.unique) is: the column is unique and an insert of a stored code updates its row; originalName: and @Transient qualified too"
  )
  func qualifiedAttributes() throws {
    let fields = QualifiedVenue.schema.fields
    #expect(fields.map(\.name) == ["code", "city"])
    #expect(fields.map(\.column) == ["code", "town"])
    #expect(fields[0].isUnique)
    let container = try ModelContainer(
      for: [QualifiedVenue.self], configuration: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    for city in ["Osaka", "Izumisano"] {
      let venue = QualifiedVenue()
      venue.code = "kix"
      venue.city = city
      context.insert(venue)
      try context.save()
    }
    let stored = try ModelContext(container).fetch(FetchDescriptor<QualifiedVenue>())
    #expect(stored.map(\.city) == ["Izumisano"])
  }

  @Test(
    "an optional of each native type (Int64?, URL?, Float?…, bare or module-qualified) is an attribute, and the model keeps its generated row loader"
  )
  func nativeOptionalsKeepTheLoader() throws {
    #expect(EveryNativeOptional.schema.loader != nil)
    #expect(EveryNativeOptional.schema.fields.count == 18)
    #expect(EveryNativeOptional.schema.relationships.isEmpty)
    let container = try ModelContainer(
      for: [EveryNativeOptional.self],
      configuration: ModelConfiguration(isStoredInMemoryOnly: true))
    let model = EveryNativeOptional()
    model.int64 = 1 << 40
    model.site = URL(string: "https://example.com/a")
    model.float = 1.5
    let context = ModelContext(container)
    context.insert(model)
    try context.save()
    let read = try #require(
      try ModelContext(container).fetch(FetchDescriptor<EveryNativeOptional>()).first)
    #expect(read.int64 == 1 << 40 && read.site == URL(string: "https://example.com/a"))
    #expect(read.float == 1.5 && read.text == nil)
  }

  @Test("the macro's list of native types is the store's: each name has its conformance")
  func oneListOfNativeTypes() {
    #expect(Set(nativePersistableTypes.keys) == Set(nativeTypeNames))
    #expect(nativeTypeNames.count == nativePersistableTypes.count)
  }
}
