import Foundation
import Testing

/// A feature body with a plan: `properties` extended with `plan` (JSON members, without braces).
func featureBody(name: String = "Served", plan: String, id: String? = nil) -> Data {
  let idMember = id.map { "\"id\":\"\($0)\"," } ?? ""
  return Data(
    "{\"type\":\"Feature\",\(idMember)\"geometry\":{\"type\":\"Point\",\"coordinates\":[178.4,-18.1]},\"properties\":{\"name\":\"\(name)\",\"destination\":\"Suva\",\"startDate\":\"2027-05-01\",\"endDate\":\"2027-05-09\",\(plan)}}"
      .utf8)
}

@Suite("trips serve: a trip's plan in its feature", .serialized)
struct ServePlanTests {
  let scratch = Scratch()
  let token = String(repeating: "pl4n-", count: 4)
  var auth: [String] { ["Authorization: Bearer \(token)", "Content-Type: application/geo+json"] }

  func server() throws -> ServerProcess {
    try ServerProcess(
      store: scratch.store, ["--token-file", try tokenFile(in: scratch, "planner:\(token)").path])
  }

  static func plan(_ reply: HTTPReply) throws -> (items: [[String: Any]], stay: [String: Any]?) {
    let properties = try #require(try reply.json()["properties"] as? [String: Any])
    return (
      try #require(properties["bucketList"] as? [[String: Any]]),
      properties["livingAccommodation"] as? [String: Any]
    )
  }

  @Test(
    "POST carries a bucket list and a stay; items and items/{id} show them; PATCH reorders by id, PUT without a plan keeps it; the ETag follows a change of the plan from another process; DELETE takes the plan"
  )
  func planOverHTTP() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let created = try server.request(
      "POST", "/collections/trips/items", headers: auth,
      body: featureBody(
        plan:
          #""bucketList":[{"title":"Kava ceremony","hasReservation":true},{"title":"Snorkel","details":"Reef"}],"livingAccommodation":{"name":"Tanoa","latitude":-18.14,"longitude":178.42}"#
      ))
    #expect(created.status == 201, "\(created.text)")
    let id = try #require(try created.json()["id"] as? String)
    var (items, stay) = try Self.plan(created)
    #expect(items.map { $0["title"] as? String } == ["Kava ceremony", "Snorkel"])
    #expect(items.map { $0["position"] as? Int } == [0, 1])
    #expect(items.map { $0["hasReservation"] as? Bool } == [true, false])
    #expect(stay?["name"] as? String == "Tanoa")
    let ids = items.compactMap { $0["id"] as? String }
    #expect(ids.count == 2)

    let page = try server.request("/collections/trips/items?limit=5").json()
    let feature = try #require((page["features"] as? [[String: Any]])?.first)
    let properties = try #require(feature["properties"] as? [String: Any])
    #expect((properties["bucketList"] as? [[String: Any]])?.count == 2)
    #expect((properties["livingAccommodation"] as? [String: Any])?["name"] as? String == "Tanoa")

    let reordered = try server.request(
      "PATCH", "/collections/trips/items/\(id)", headers: auth,
      body: Data(
        #"{"properties":{"bucketList":[{"id":"\#(ids[1])","title":"Snorkel","details":"Reef"},{"id":"\#(ids[0])","title":"Kava ceremony","hasReservation":true}]}}"#
          .utf8))
    #expect(reordered.status == 200, "\(reordered.text)")
    (items, stay) = try Self.plan(reordered)
    #expect(items.compactMap { $0["id"] as? String } == [ids[1], ids[0]])
    #expect(stay?["name"] as? String == "Tanoa")

    let replaced = try server.request(
      "PUT", "/collections/trips/items/\(id)", headers: auth, body: featureBody(name: "Renamed"))
    #expect(replaced.status == 200, "\(replaced.text)")
    #expect(try Self.plan(replaced).items.compactMap { $0["id"] as? String } == [ids[1], ids[0]])

    let before = try server.request("/collections/trips/items/\(id)")
    let tag = try #require(before.headers["etag"])
    #expect(
      try trips(["bucket", "add", id, "--title", "Market"], store: scratch.store).status == 0)
    let after = try server.request("/collections/trips/items/\(id)")
    #expect(after.headers["etag"] != tag)
    #expect(try Self.plan(after).items.count == 3)
    #expect(
      try server.request(
        "/collections/trips/items/\(id)", headers: ["If-None-Match: \(after.headers["etag"]!)"]
      ).status == 304)
    let stale = try server.request(
      "PATCH", "/collections/trips/items/\(id)", headers: auth + ["If-Match: \(tag)"],
      body: Data(#"{"properties":{"livingAccommodation":null}}"#.utf8))
    #expect(stale.status == 412)
    let cleared = try server.request(
      "PATCH", "/collections/trips/items/\(id)",
      headers: auth + ["If-Match: \(after.headers["etag"]!)"],
      body: Data(#"{"properties":{"livingAccommodation":null}}"#.utf8))
    #expect(cleared.status == 200, "\(cleared.text)")
    #expect(try Self.plan(cleared).stay == nil)
    #expect(try Self.plan(cleared).items.count == 3)

    #expect(
      try server.request("DELETE", "/collections/trips/items/\(id)", headers: auth).status == 204)
    let check = try trips(["check"], store: scratch.store)
    #expect(check.status == 0, "\(check.stderr)")
    let export = try trips(["export", "--format", "json"], store: scratch.store)
    #expect(try jsonArray(export.stdout).isEmpty)
  }

  @Test(
    "a plan that breaks a rule, an item of another trip, a malformed member: 400 naming it, nothing written",
    arguments: [
      (
        #""bucketList":[{"title":" "}]"#,
        "bucket-list item 1: title must not be empty"
      ),
      (
        #""livingAccommodation":{"name":"Hut","latitude":91,"longitude":0}"#,
        "stay: latitude 91.0 is not a number between -90 and 90"
      ),
      (#""bucketList":{"title":"x"}"#, "bucketList must be an array of items"),
      (#""bucketList":[{"title":"x","rooms":2}]"#, "bucket-list item 1: unknown member 'rooms'"),
      (
        #""bucketList":[{"title":"\u0007"}]"#,
        "control character"
      ),
    ])
  func badPlans(plan: String, reason: String) throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let reply = try server.request(
      "POST", "/collections/trips/items", headers: auth, body: featureBody(plan: plan))
    #expect(reply.status == 400)
    #expect(reply.text.contains(reason), "\(reply.text)")
    #expect(
      try jsonArray(trips(["export", "--format", "json"], store: scratch.store).stdout).isEmpty)
  }

  @Test("an item id that belongs to another trip is 400 naming both; the other trip keeps it")
  func foreignItem() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let first = try server.request(
      "POST", "/collections/trips/items", headers: auth,
      body: featureBody(plan: #""bucketList":[{"title":"Mine"}]"#))
    let (items, _) = try Self.plan(first)
    let itemID = try #require(items.first?["id"] as? String)
    let firstID = try #require(try first.json()["id"] as? String)
    let second = try server.request(
      "POST", "/collections/trips/items", headers: auth,
      body: featureBody(name: "Thief", plan: #""bucketList":[{"id":"\#(itemID)","title":"Taken"}]"#)
    )
    #expect(second.status == 400)
    #expect(second.text.contains(itemID) && second.text.contains(firstID), "\(second.text)")
    let kept = try Self.plan(try server.request("/collections/trips/items/\(firstID)"))
    #expect(kept.items.map { $0["title"] as? String } == ["Mine"])
    #expect(
      try jsonArray(trips(["export", "--format", "json"], store: scratch.store).stdout).count == 1)
  }
}
