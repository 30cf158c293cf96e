import Foundation
import Persistence
import Testing

@testable import PersistenceCore

protocol HxTagged {}

/// A root model whose inheritance clause names a user protocol first.
@Model class HxTaggedRoot: HxTagged {
  var name = ""
}

/// A final subclass, and one whose superclass is named with its module.
@Model final class HxFinalSub: HxTrip {
  var extra = 0
}

@Model class HxQualified: PersistenceTests.HxTrip {
  var tag = ""
}

/// A public/open pair.
@Model open class HxOpenRoot {
  public var name = ""
}

@Model public class HxPublicSub: HxOpenRoot {
  public var level = 0
}

@Suite("Model subclasses: odd declarations")
struct SubclassReviewDeclarationTests {
  @Test func oddDeclarations() throws {
    let container = try ModelContainer(
      for: HxTaggedRoot.self, HxTrip.self, HxFinalSub.self, HxQualified.self, HxOpenRoot.self,
      HxPublicSub.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
    let context = ModelContext(container)
    let sub = HxFinalSub()
    sub.name = "F"
    sub.extra = 3
    context.insert(sub)
    let q = HxQualified()
    q.name = "Q"
    q.tag = "t"
    context.insert(q)
    let p = HxPublicSub()
    p.level = 2
    context.insert(p)
    context.insert(HxTaggedRoot())
    try context.save()
    let reader = ModelContext(container)
    let trips = try reader.fetch(FetchDescriptor<HxTrip>(sortBy: [SortDescriptor(\.name)]))
    #expect(trips.map { "\(type(of: $0))" } == ["HxFinalSub", "HxQualified"])
    #expect((trips.first as? HxFinalSub)?.extra == 3)
    #expect((try reader.fetch(FetchDescriptor<HxOpenRoot>()).first as? HxPublicSub)?.level == 2)
  }
}
