import Foundation
import TestSupport
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

  /// The sample's stays, from its plans file: (stay id, trip id, longitude, latitude).
  static func sampleStays() throws -> [(id: String, trip: String, lon: Double, lat: Double)] {
    let trips = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: samplePlans)) as? [[String: Any]])
    return trips.compactMap { trip in
      guard let stay = trip["livingAccommodation"] as? [String: Any] else { return nil }
      return (
        stay["id"] as! String, trip["id"] as! String, stay["longitude"] as! Double,
        stay["latitude"] as! Double
      )
    }
  }

  /// Every feature of `path` (a collection's items), page by page through the next links.
  static func allPages(_ server: ServerProcess, _ path: String) throws -> (
    ids: [String], matched: [Int]
  ) {
    var ids: [String] = []
    var matched: [Int] = []
    var next: String? = server.url + path
    while let url = next {
      let page = try curl("GET", url).json()
      ids += (page["features"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
      matched.append(page["numberMatched"] as? Int ?? -1)
      next =
        (page["links"] as? [[String: Any]])?.first { $0["rel"] as? String == "next" }?[
          "href"] as? String
    }
    return (ids, matched)
  }

  @Test(
    "the stays collection: bbox across the antimeridian and not, paged by next links, numberMatched, by trip, against the sample file; GDAL's OAPIF driver counts them; bucket-list items by trip in their order and by q"
  )
  func planCollections() throws {
    for file in [sampleTrips, samplePlans] {
      #expect(try trips(["import", file.path], store: scratch.store).status == 0)
    }
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let stays = try Self.sampleStays()
    let boxes: [(String, ((lon: Double, lat: Double)) -> Bool)] = [
      ("170,-30,-170,0", { ($0.lon >= 170 || $0.lon <= -170) && $0.lat >= -30 && $0.lat <= 0 }),
      ("-10,35,30,60", { $0.lon >= -10 && $0.lon <= 30 && $0.lat >= 35 && $0.lat <= 60 }),
      ("-180,-90,180,90", { _ in true }),
    ]
    for (bbox, inside) in boxes {
      let (ids, matched) = try Self.allPages(
        server, "/collections/stays/items?bbox=\(bbox)&limit=7")
      let expected = Set(stays.filter { inside(($0.lon, $0.lat)) }.map(\.id))
      #expect(Set(ids) == expected, "\(bbox)")
      #expect(ids.count == expected.count, "\(bbox): each once")
      #expect(Set(matched) == [expected.count], "\(bbox)")
      #expect(!expected.isEmpty, "\(bbox) selects some")
    }
    let one = try #require(stays.first)
    let byTrip = try server.request("/collections/stays/items?trip=\(one.trip)").json()
    let feature = try #require((byTrip["features"] as? [[String: Any]])?.first)
    #expect(feature["id"] as? String == one.id && byTrip["numberMatched"] as? Int == 1)
    #expect(
      (feature["geometry"] as? [String: Any])?["coordinates"] as? [Double] == [one.lon, one.lat])
    #expect((feature["properties"] as? [String: Any])?["tripId"] as? String == one.trip)

    let single = try server.request("/collections/stays/items/\(one.id)")
    #expect(single.status == 200)
    let tag = try #require(single.headers["etag"])
    #expect(
      try server.request("/collections/stays/items/\(one.id)", headers: ["If-None-Match: \(tag)"])
        .status == 304)
    #expect(try server.request("/collections/stays/items/\(UUID())").status == 404)
    #expect(try server.request("/collections/stays/items/not-an-id").status == 404)
    #expect(try server.request("/collections/stays/items?bbox=1,2,3").status == 400)
    #expect(try server.request("/collections/stays/items?trip=nope").status == 400)
    #expect(try server.request("/collections/stays/items?q=x").status == 400)

    // The collection's extent is their box, the same as their bounds say.
    let described = try server.request("/collections/stays").json()
    let extent = (described["extent"] as? [String: Any])?["spatial"] as? [String: Any]
    #expect((extent?["bbox"] as? [[Double]])?.first?.count == 4)
    #expect(
      (extent?["bbox"] as? [[Double]])?.first
        == (try server.request("/collections/stays/bounds").json()["bbox"] as? [Double]))
    // Their bounds: every stay, a trip's, and across the antimeridian.
    let allBounds = try server.request("/collections/stays/bounds").json()
    #expect(allBounds["count"] as? Int == stays.count)
    let pacific = try server.request("/collections/stays/bounds?bbox=170,-30,-170,0").json()
    let inPacific = stays.filter {
      ($0.lon >= 170 || $0.lon <= -170) && $0.lat >= -30 && $0.lat <= 0
    }
    #expect(pacific["count"] as? Int == inPacific.count)
    #expect((pacific["geographic"] as? [String: Any])?["crossesAntimeridian"] as? Bool == true)
    let oneBounds = try server.request("/collections/stays/bounds?trip=\(one.trip)").json()
    #expect(oneBounds["bbox"] as? [Double] == [one.lon, one.lat, one.lon, one.lat])
    #expect(try server.request("/collections/stays/bounds?destination=x").status == 400)
    let info = try shell("ogrinfo -ro -so \"OAPIF:$1\" stays", arguments: [server.url])
    #expect(info.stdout.contains("Feature Count: \(stays.count)"), "\(info.stdout) \(info.stderr)")

    // Bucket-list items: a trip's in its order; a search over titles and details.
    let plans = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: samplePlans)) as? [[String: Any]])
    let planned = try #require(plans.first { ($0["bucketList"] as? [Any])?.count ?? 0 >= 3 })
    let listed = try #require(planned["bucketList"] as? [[String: Any]])
    let items = try server.request(
      "/collections/bucket-list-items/items?trip=\(planned["id"] as! String)"
    ).json()
    let features = try #require(items["features"] as? [[String: Any]])
    #expect(features.map { $0["id"] as? String } == listed.map { $0["id"] as? String })
    #expect(features.allSatisfy { $0["geometry"] is NSNull })
    let all = try Self.allPages(server, "/collections/bucket-list-items/items?limit=100")
    #expect(all.ids.count == plans.reduce(0) { $0 + (($1["bucketList"] as? [Any])?.count ?? 0) })
    let cash = try server.request("/collections/bucket-list-items/items?q=CASH&limit=1000").json()
    let expectedCash = plans.flatMap { $0["bucketList"] as? [[String: Any]] ?? [] }.filter {
      ($0["details"] as? String)?.lowercased().contains("cash") == true
        || ($0["title"] as? String)?.lowercased().contains("cash") == true
    }
    #expect(cash["numberMatched"] as? Int == expectedCash.count && !expectedCash.isEmpty)
  }

  @Test(
    "writes of items and stays: POST at a position and to a trip with a stay (409), to a deleted trip (400, nothing written); PATCH moves, changes a stay's geometry, refuses another tripId; If-Match; DELETE"
  )
  func planWrites() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let trip = try #require(
      try server.request(
        "POST", "/collections/trips/items", headers: auth,
        body: featureBody(plan: #""bucketList":[{"title":"First"},{"title":"Second"}]"#)
      ).json()["id"] as? String)
    func item(_ body: String) throws -> HTTPReply {
      try server.request(
        "POST", "/collections/bucket-list-items/items", headers: auth, body: Data(body.utf8))
    }
    let added = try item(
      #"{"type":"Feature","geometry":null,"properties":{"tripId":"\#(trip)","title":"Between","position":1,"hasReservation":true}}"#
    )
    #expect(added.status == 201, "\(added.text)")
    let itemID = try #require(try added.json()["id"] as? String)
    #expect(
      added.headers["location"]?.hasSuffix("/collections/bucket-list-items/items/\(itemID)") == true
    )
    func titles() throws -> [String] {
      try
        (server.request("/collections/bucket-list-items/items?trip=\(trip)").json()["features"]
        as? [[String: Any]] ?? []).compactMap {
          ($0["properties"] as? [String: Any])?["title"] as? String
        }
    }
    #expect(try titles() == ["First", "Between", "Second"])
    let moved = try server.request(
      "PATCH", "/collections/bucket-list-items/items/\(itemID)", headers: auth,
      body: Data(#"{"properties":{"position":2,"details":"Late"}}"#.utf8))
    #expect(moved.status == 200, "\(moved.text)")
    #expect(try titles() == ["First", "Second", "Between"])
    let tag = try #require(moved.headers["etag"])
    #expect(
      try server.request(
        "PATCH", "/collections/bucket-list-items/items/\(itemID)", headers: auth,
        body: Data(#"{"properties":{"tripId":"\#(UUID().uuidString)"}}"#.utf8)
      ).status == 400)
    #expect(
      try server.request(
        "DELETE", "/collections/bucket-list-items/items/\(itemID)",
        headers: auth + ["If-Match: \"0000000000000000\""]
      ).status == 412)
    #expect(
      try server.request(
        "DELETE", "/collections/bucket-list-items/items/\(itemID)",
        headers: auth + ["If-Match: \(tag)"]
      ).status == 204)
    #expect(try titles() == ["First", "Second"])

    func stay(_ body: String) throws -> HTTPReply {
      try server.request("POST", "/collections/stays/items", headers: auth, body: Data(body.utf8))
    }
    let stayBody =
      #"{"type":"Feature","geometry":{"type":"Point","coordinates":[178.42,-18.14]},"properties":{"tripId":"\#(trip)","name":"Tanoa"}}"#
    let set = try stay(stayBody)
    #expect(set.status == 201, "\(set.text)")
    let stayID = try #require(try set.json()["id"] as? String)
    #expect(try stay(stayBody).status == 409)
    let patched = try server.request(
      "PATCH", "/collections/stays/items/\(stayID)", headers: auth,
      body: Data(#"{"geometry":{"type":"Point","coordinates":[178.5,-18.2]}}"#.utf8))
    #expect(patched.status == 200, "\(patched.text)")
    #expect(
      (try patched.json()["geometry"] as? [String: Any])?["coordinates"] as? [Double] == [
        178.5, -18.2,
      ])
    #expect(try patched.json()["id"] as? String == stayID)

    // A deleted trip takes no item and no stay; nothing is written.
    #expect(
      try server.request("DELETE", "/collections/trips/items/\(trip)", headers: auth).status == 204)
    #expect(try server.request("/collections/stays/items/\(stayID)").status == 404)
    let orphan = try item(
      #"{"type":"Feature","geometry":null,"properties":{"tripId":"\#(trip)","title":"Lost"}}"#)
    #expect(orphan.status == 400)
    #expect(orphan.text.contains("there is no trip \(trip)"), "\(orphan.text)")
    #expect(try stay(stayBody).status == 400)
    #expect(
      try server.request("/collections/bucket-list-items/items").json()["numberMatched"] as? Int
        == 0)
  }

  @Test(
    "a write never takes another trip's row and a refused request writes nothing: a stay or item POSTed with another trip's id is 400 naming the owner, which keeps it; a PATCH answered 400 leaves the item and its ETag as they were; a bad stay body is 400 even for a trip with a stay"
  )
  func refusedWritesWriteNothing() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    func post(_ path: String, _ body: String) throws -> HTTPReply {
      try server.request("POST", path, headers: auth, body: Data(body.utf8))
    }
    let owner = try #require(
      try post(
        "/collections/trips/items",
        String(
          decoding: featureBody(
            plan:
              #""bucketList":[{"title":"First"},{"title":"Second"}],"livingAccommodation":{"name":"Tanoa","latitude":-18.14,"longitude":178.42}"#
          ), as: UTF8.self)
      ).json()["id"] as? String)
    let taker = try #require(
      try post(
        "/collections/trips/items",
        String(decoding: featureBody(name: "Taker", plan: #""bucketList":[]"#), as: UTF8.self)
      ).json()["id"] as? String)
    let plan = try Self.plan(server.request("/collections/trips/items/\(owner)"))
    let stayID = try #require(plan.stay?["id"] as? String)
    let itemID = try #require(plan.items.first?["id"] as? String)

    let stolenStay = try post(
      "/collections/stays/items",
      #"{"type":"Feature","id":"\#(stayID)","geometry":{"type":"Point","coordinates":[10,20]},"properties":{"tripId":"\#(taker)","name":"taken"}}"#
    )
    #expect(stolenStay.status == 400, "\(stolenStay.text)")
    #expect(stolenStay.text.contains(owner.lowercased()), "\(stolenStay.text)")
    let stolenItem = try post(
      "/collections/bucket-list-items/items",
      #"{"type":"Feature","id":"\#(itemID)","geometry":null,"properties":{"tripId":"\#(taker)","title":"taken"}}"#
    )
    #expect(stolenItem.status == 400, "\(stolenItem.text)")
    #expect(stolenItem.text.contains(owner.lowercased()), "\(stolenItem.text)")
    let after = try Self.plan(server.request("/collections/trips/items/\(owner)"))
    #expect(after.stay?["id"] as? String == stayID && after.stay?["name"] as? String == "Tanoa")
    #expect(after.items.map { $0["title"] as? String } == ["First", "Second"])
    #expect(try Self.plan(server.request("/collections/trips/items/\(taker)")).stay == nil)

    let path = "/collections/bucket-list-items/items/\(itemID)"
    let before = try server.request(path)
    let tag = try #require(before.headers["etag"])
    let refused = try server.request(
      "PATCH", path, headers: auth + ["If-Match: \(tag)"],
      body: Data(#"{"properties":{"title":"CHANGED","position":999}}"#.utf8))
    #expect(refused.status == 400, "\(refused.text)")
    #expect(
      refused.text.contains("a bucket list of 2 items; positions go from 0 to 1"),
      "\(refused.text)")
    let unchanged = try server.request(path)
    #expect(unchanged.headers["etag"] == tag)
    #expect((try unchanged.json()["properties"] as? [String: Any])?["title"] as? String == "First")
    let applied = try server.request(
      "PATCH", path, headers: auth + ["If-Match: \(tag)"],
      body: Data(#"{"properties":{"title":"Moved","position":1}}"#.utf8))
    #expect(applied.status == 200, "\(applied.text)")
    #expect(
      try Self.plan(server.request("/collections/trips/items/\(owner)")).items.map {
        $0["title"] as? String
      } == ["Second", "Moved"])

    let badStay = try post(
      "/collections/stays/items",
      #"{"type":"Feature","geometry":{"type":"Point","coordinates":[10,20]},"properties":{"tripId":"\#(owner)","name":"tab\there"}}"#
    )
    #expect(badStay.status == 400, "\(badStay.text)")
  }

  @Test(
    "PATCH is a JSON Merge Patch (RFC 7396): null removes a member, objects merge member by member; null for a plan member is none (no stay, an empty list), not left out"
  )
  func mergePatch() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let created = try server.request(
      "POST", "/collections/trips/items", headers: auth,
      body: featureBody(
        plan:
          #""placeIdentifier":"geonames:2198148","bucketList":[{"title":"First"}],"livingAccommodation":{"name":"Tanoa","address":"Suva","latitude":-18.14,"longitude":178.42}"#
      ))
    #expect(created.status == 201, "\(created.text)")
    let id = try #require(try created.json()["id"] as? String)
    let path = "/collections/trips/items/\(id)"
    let stayID = try #require(try Self.plan(server.request(path)).stay?["id"] as? String)
    func patch(_ body: String) throws -> HTTPReply {
      try server.request(
        "PATCH", path,
        headers: ["Authorization: Bearer \(token)", "Content-Type: application/merge-patch+json"],
        body: Data(body.utf8))
    }
    let merged = try patch(
      #"{"properties":{"placeIdentifier":null,"livingAccommodation":{"name":"Grand Pacific"}},"geometry":{"coordinates":[178.5,-18.2]}}"#
    )
    #expect(merged.status == 200, "\(merged.text)")
    let feature = try server.request(path).json()
    let properties = try #require(feature["properties"] as? [String: Any])
    #expect(properties["placeIdentifier"] is NSNull)
    let stay = try #require(properties["livingAccommodation"] as? [String: Any])
    #expect(stay["id"] as? String == stayID)
    #expect(stay["name"] as? String == "Grand Pacific" && stay["address"] as? String == "Suva")
    #expect((properties["bucketList"] as? [[String: Any]])?.count == 1)
    let geometry = try #require(feature["geometry"] as? [String: Any])
    #expect(geometry["coordinates"] as? [Double] == [178.5, -18.2])
    let emptied = try patch(#"{"properties":{"bucketList":null,"livingAccommodation":null}}"#)
    #expect(emptied.status == 200, "\(emptied.text)")
    let none = try Self.plan(server.request(path))
    #expect(none.items.isEmpty && none.stay == nil)
    #expect(
      try patch(
        #"{"properties":{"bucketList":[{"title":"Again"}],"livingAccommodation":{"name":"Hut","latitude":-18,"longitude":178}}}"#
      ).status == 200)
    let untouched = try patch(#"{"properties":{"destination":"Nadi"}}"#)
    #expect(untouched.status == 200, "\(untouched.text)")
    #expect(try Self.plan(server.request(path)).items.map { $0["title"] as? String } == ["Again"])
    let nameless = try patch(#"{"properties":{"name":null}}"#)
    #expect(nameless.status == 400, "\(nameless.text)")
    let twice = try patch(#"{"properties":{"name":"x","name":"y"}}"#)
    #expect(twice.status == 400 && twice.text.contains("appears twice"), "\(twice.text)")
    let newStay = try #require(try Self.plan(server.request(path)).stay?["id"] as? String)
    let tripless = try server.request(
      "PATCH", "/collections/stays/items/\(newStay)",
      headers: ["Authorization: Bearer \(token)", "Content-Type: application/merge-patch+json"],
      body: Data(#"{"properties":{"tripId":null}}"#.utf8))
    #expect(tripless.status == 400, "\(tripless.text)")
    #expect(tripless.text.contains("tripId cannot be removed"), "\(tripless.text)")
  }

  @Test(
    "/api lists what each write answers: the media types it takes (another is 415), 401, 405 read-only, 413; If-None-Match where 304 is; Last-Event-ID on the streams"
  )
  func apiListsWhatWritesAnswer() throws {
    let created = try {
      let server = try server()
      defer { #expect(server.stop() == 0) }
      return try server.request(
        "POST", "/collections/trips/items", headers: auth,
        body: featureBody(
          plan:
            #""bucketList":[{"title":"First"}],"livingAccommodation":{"name":"Tanoa","latitude":-18.14,"longitude":178.42}"#
        ))
    }()
    let trip = try #require(try created.json()["id"] as? String)
    let plan = try Self.plan(created)
    let ids = [
      "/collections/trips/": trip,
      "/collections/stays/": try #require(plan.stay?["id"] as? String),
      "/collections/bucket-list-items/": try #require(plan.items.first?["id"] as? String),
    ]
    for readOnly in [false, true] {
      let server = try ServerProcess(
        store: scratch.store,
        readOnly
          ? ["--read-only"]
          : ["--token-file", try tokenFile(in: scratch, "planner:\(token)").path])
      defer { #expect(server.stop() == 0) }
      let paths = try #require(try server.request("/api").json()["paths"] as? [String: Any])
      var checked = 0
      for (path, item) in paths {
        let operations = try #require(item as? [String: [String: Any]])
        let concrete = path.replacingOccurrences(
          of: "{featureId}", with: ids.first { path.hasPrefix($0.key) }?.value ?? trip)
        if let get = operations["get"], (get["responses"] as? [String: Any])?["304"] != nil {
          let names = (get["parameters"] as? [[String: Any]] ?? []).compactMap { $0["name"] }
          #expect(names.contains { $0 as? String == "If-None-Match" }, "\(path)")
        }
        if path.hasSuffix("/items/stream"), let get = operations["get"] {
          let names = (get["parameters"] as? [[String: Any]] ?? []).compactMap { $0["name"] }
          #expect(names.contains { $0 as? String == "Last-Event-ID" }, "\(path)")
          let bad = try server.request(
            "HEAD", concrete, headers: ["Last-Event-ID: not-a-token"])
          #expect(bad.status == 400, "\(path): \(bad.status)")
        }
        for method in ["post", "put", "patch", "delete"] {
          guard let operation = operations[method] else { continue }
          let listed = Set((operation["responses"] as? [String: Any] ?? [:]).keys)
          #expect(listed.isSuperset(of: ["401", "405", "503"]), "\(method) \(path): \(listed)")
          let types = Array(
            ((operation["requestBody"] as? [String: Any])?["content"] as? [String: Any] ?? [:])
              .keys)
          for type in types.isEmpty ? [nil] : types.map(Optional.some) + ["text/plain"] {
            let headers =
              (readOnly ? [] : ["Authorization: Bearer \(token)"])
              + (type.map { ["Content-Type: \($0)"] } ?? [])
            // A body no write takes: refused, by its type or its content, never written.
            let reply = try server.request(
              method.uppercased(), concrete, headers: headers + ["If-Match: \"stale\""],
              body: type == nil ? nil : Data(#"{"not":"a feature"}"#.utf8))
            #expect(
              listed.contains(String(reply.status)),
              "\(method) \(path) as \(type ?? "-"): \(reply.status) is not listed in \(listed)")
            if readOnly {
              #expect(reply.status == 405, "\(method) \(path): \(reply.status)")
            } else if type == "text/plain" && listed.contains("415") {
              #expect(reply.status == 415, "\(method) \(path): \(reply.status)")
            } else {
              #expect(reply.status != 415, "\(method) \(path) as \(type ?? "-"): 415")
            }
            checked += 1
          }
        }
      }
      #expect(checked >= 20, "\(checked) writes checked")
      let after = try server.request("/collections/trips/items/\(trip)")
      #expect(after.headers["etag"] == created.headers["etag"])
      #expect(try Self.plan(after).items.count == 1 && Self.plan(after).stay != nil)
    }
  }

  @Test(
    "bad item and stay bodies: 400 naming the problem, nothing written",
    arguments: [
      (
        "bucket-list-items",
        #"{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"tripId":"TRIP","title":"x"}}"#,
        "a bucket-list item has no geometry"
      ),
      (
        "bucket-list-items", #"{"type":"Feature","properties":{"title":"x"}}"#,
        "needs properties.tripId"
      ),
      (
        "bucket-list-items", #"{"type":"Feature","properties":{"tripId":"TRIP","title":""}}"#,
        "title must not be empty"
      ),
      (
        "bucket-list-items",
        #"{"type":"Feature","properties":{"tripId":"TRIP","title":"x","position":9}}"#,
        "position 9 is past the end"
      ),
      (
        "bucket-list-items",
        #"{"type":"Feature","properties":{"tripId":"not-a-trip","title":"x"}}"#,
        "tripId must be a trip's id"
      ),
      (
        "stays",
        #"{"type":"Feature","geometry":{"type":"Point","coordinates":[0,91]},"properties":{"tripId":"TRIP","name":"Hut"}}"#,
        "latitude 91.0 is not a number between -90 and 90"
      ),
      (
        "stays", #"{"type":"Feature","geometry":null,"properties":{"tripId":"TRIP","name":"Hut"}}"#,
        "the geometry must be a Point"
      ),
      (
        "stays",
        #"{"type":"Feature","geometry":{"type":"Point","coordinates":[0,1]},"properties":{"tripId":"TRIP","name":"Hut","latitude":1}}"#,
        "a stay's position is its geometry"
      ),
      ("stays", "[]", "expected a Feature"),
      (
        "bucket-list-items",
        #"{"type":"Feature","geometry":null,"properties":{"tripId":"TRIP","title":"a","title":"b\n"}}"#,
        "the member 'title' appears twice in one object at properties"
      ),
    ])
  func badPlanBodies(collection: String, body: String, reason: String) throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let trip = try #require(
      try server.request("POST", "/collections/trips/items", headers: auth, body: featureBody())
        .json()["id"] as? String)
    let reply = try server.request(
      "POST", "/collections/\(collection)/items", headers: auth,
      body: Data(body.replacingOccurrences(of: "TRIP", with: trip).utf8))
    #expect(reply.status == 400)
    #expect(reply.text.contains(reason), "\(reply.text)")
    let export = try jsonArray(trips(["export", "--format", "json"], store: scratch.store).stdout)
    #expect(export.count == 1)
    #expect((export.first?["bucketList"] as? [Any])?.isEmpty == true)
    #expect(export.first?["livingAccommodation"] is NSNull)
  }

  @Test(
    "the trips' items stream tells a change to a trip's plan as an update of the trip with its plan: an item added, a stay set, the stay cleared (its tombstone names the trip); Last-Event-ID replays them alike; the trip's own delete is one delete"
  )
  func planChangesStream() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let trip = try #require(
      try server.request("POST", "/collections/trips/items", headers: auth, body: featureBody())
        .json()["id"] as? String)
    let events = serverSentEvents
    func listen(lastEventID: String? = nil) throws -> (Process, URL) {
      let file = scratch.file("stream-\(UUID().uuidString).txt")
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      process.arguments =
        ["-s", "-N", "--max-time", "30", "-o", file.path]
        + (lastEventID.map { ["-H", "Last-Event-ID: \($0)"] } ?? [])
        + [server.url + "/collections/trips/items/stream"]
      try process.run()
      return (process, file)
    }
    func text(_ file: URL) -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }
    func plan(_ event: (id: String, kind: String, data: [String: Any])) -> (Int, String?) {
      let properties = event.data["properties"] as? [String: Any] ?? [:]
      return (
        (properties["bucketList"] as? [Any])?.count ?? -1,
        (properties["livingAccommodation"] as? [String: Any])?["name"] as? String
      )
    }
    let (live, liveFile) = try listen()
    defer { kill(live.processIdentifier, SIGKILL) }
    #expect(eventually { text(liveFile).hasPrefix("retry: 2000") })
    let start = try #require(
      try trips(["history", "--json"], store: scratch.store).stdout.data(using: .utf8).flatMap {
        try JSONSerialization.jsonObject(with: $0) as? [[String: Any]]
      }?.last?["token"] as? String)
    #expect(
      try trips(["bucket", "add", trip, "--title", "Kava"], store: scratch.store).status == 0)
    #expect(
      try trips(
        ["stay", "set", trip, "--name", "Tanoa", "--latitude", "-18.1", "--longitude", "178.4"],
        store: scratch.store
      ).status == 0)
    #expect(try trips(["stay", "clear", trip], store: scratch.store).status == 0)
    #expect(try trips(["delete", trip], store: scratch.store).status == 0)
    #expect(eventually(20) { events(text(liveFile)).count >= 4 })
    Thread.sleep(forTimeInterval: 0.3)
    let seen = events(text(liveFile))
    #expect(seen.map(\.kind) == ["update", "update", "update", "delete"], "\(seen.map(\.kind))")
    #expect(seen.prefix(3).map { $0.data["id"] as? String } == [trip, trip, trip])
    #expect(seen.prefix(3).map { plan($0).0 } == [1, 1, 1])
    #expect(seen.prefix(3).map { plan($0).1 } == [nil, "Tanoa", nil])
    #expect(seen.last?.data["id"] as? String == trip)

    let (again, againFile) = try listen(lastEventID: start)
    defer { kill(again.processIdentifier, SIGKILL) }
    #expect(eventually(20) { events(text(againFile)).count >= 4 })
    Thread.sleep(forTimeInterval: 0.3)
    let replayed = events(text(againFile))
    #expect(replayed.map(\.kind) == seen.map(\.kind))
    #expect(replayed.map(\.id) == seen.map(\.id))
    // Replayed from history now: the trip is gone, so its updates carry what is read now.
    #expect(replayed.last?.data["id"] as? String == trip)
  }

  @Test(
    "a live stream that cannot read a changed trip's plan sends an error event and ends: never a delete, nor an update without the plan"
  )
  func streamReadFailure() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let trip = try #require(
      try server.request("POST", "/collections/trips/items", headers: auth, body: featureBody())
        .json()["id"] as? String)
    #expect(
      try trips(["bucket", "add", trip, "--title", "Kava"], store: scratch.store).status == 0)
    let file = scratch.file("failing-stream.txt")
    let curl = Process()
    curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    curl.arguments = [
      "-s", "-N", "--max-time", "30", "-o", file.path,
      server.url + "/collections/trips/items/stream",
    ]
    try curl.run()
    defer { if curl.isRunning { kill(curl.processIdentifier, SIGKILL) } }
    func text() -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }
    #expect(eventually { text().hasPrefix("retry: 2000") })
    // An outside writer's trigger leaves the item's id unreadable in the transaction that
    // renames the trip (the rename reads the plan before it saves).
    let damage = Process()
    damage.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    damage.arguments = [
      "-c",
      "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"CREATE TRIGGER damage AFTER UPDATE ON trips BEGIN UPDATE bucket_list_items SET id = 'not a uuid' WHERE trip = NEW._pk; END\"); c.commit()",
      scratch.store.path,
    ]
    try damage.run()
    damage.waitUntilExit()
    #expect(damage.terminationStatus == 0)
    #expect(
      try trips(["update", trip, "--name", "Renamed"], store: scratch.store).status == 0)
    #expect(eventually(20) { !curl.isRunning })
    let seen = serverSentEvents(text())
    #expect(seen.map(\.kind) == ["error"], "\(text())")
    let message = seen.first?.data["message"] as? String ?? ""
    #expect(message.contains("could not read a changed trip"), "\(message)")
    #expect(
      seen.first?.id == "", "an error event carries no id: Last-Event-ID stays the last event")
  }

  @Test(
    "the stays stream: a stay set inside the box is an insert, moved within it an update, moved out or cleared a delete, one outside nothing; Last-Event-ID in the feed's log gets exactly the missed events, another token a reset"
  )
  func staysStream() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    func trip(_ name: String, longitude: Double) throws -> String {
      try #require(
        try server.request(
          "POST", "/collections/trips/items", headers: auth,
          body: featureBody(name: name, longitude: longitude)
        ).json()["id"] as? String)
    }
    let suva = try trip("Suva", longitude: 178.4)
    let lisbon = try trip("Lisbon", longitude: -9.1)
    let events = serverSentEvents
    func listen(lastEventID: String? = nil) throws -> (Process, URL) {
      let file = scratch.file("stays-\(UUID().uuidString).txt")
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      process.arguments =
        ["-s", "-N", "--max-time", "30", "-o", file.path]
        + (lastEventID.map { ["-H", "Last-Event-ID: \($0)"] } ?? [])
        + [server.url + "/collections/stays/items/stream?bbox=170,-30,-170,0"]
      try process.run()
      return (process, file)
    }
    func text(_ file: URL) -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }
    func stay(_ trip: String, _ latitude: Double, _ longitude: Double) throws {
      let run = try trips(
        [
          "stay", "set", trip, "--name", "Stay", "--latitude", String(latitude), "--longitude",
          String(longitude),
        ], store: scratch.store)
      #expect(run.status == 0, "\(run.stderr)")
    }
    let (live, liveFile) = try listen()
    defer { kill(live.processIdentifier, SIGKILL) }
    #expect(eventually { text(liveFile).hasPrefix("retry: 2000") })
    try stay(suva, -18.1, 178.45)  // in: insert
    try stay(lisbon, 38.7, -9.14)  // out: nothing
    try stay(suva, -18.2, 178.5)  // moved within: update
    try stay(suva, 10, 178.5)  // moved out: delete
    try stay(suva, -18.1, -179.9)  // back in, across 180°: insert
    #expect(try trips(["stay", "clear", suva], store: scratch.store).status == 0)  // delete
    #expect(eventually(20) { events(text(liveFile)).count >= 5 })
    Thread.sleep(forTimeInterval: 0.3)
    let seen = events(text(liveFile))
    #expect(
      seen.map(\.kind) == ["insert", "update", "delete", "insert", "delete"], "\(seen.map(\.kind))")
    let stayID = try #require(seen.first?.data["id"] as? String)
    #expect(seen.allSatisfy { $0.data["id"] as? String == stayID })
    #expect(
      (seen[1].data["geometry"] as? [String: Any])?["coordinates"] as? [Double] == [178.5, -18.2])
    #expect((seen[0].data["properties"] as? [String: Any])?["tripId"] as? String == suva)

    let (again, againFile) = try listen(lastEventID: seen[1].id)
    defer { kill(again.processIdentifier, SIGKILL) }
    #expect(eventually(20) { events(text(againFile)).count >= 3 })
    Thread.sleep(forTimeInterval: 0.3)
    #expect(events(text(againFile)).map(\.id) == seen.dropFirst(2).map(\.id))

    try stay(suva, -18.1, 178.45)
    let (reset, resetFile) = try listen(
      lastEventID: String(seen[0].id.split(separator: ":")[0]) + ":1")
    defer { kill(reset.processIdentifier, SIGKILL) }
    #expect(eventually(20) { events(text(resetFile)).contains { $0.kind == "reset" } })
    let features =
      events(text(resetFile)).first { $0.kind == "reset" }?.data["features"] as? [[String: Any]]
    // The stay set after the clear is a new row: another id, the same trip.
    #expect(features?.count == 1 && features?.first?["id"] as? String != stayID)
    #expect((features?.first?["properties"] as? [String: Any])?["tripId"] as? String == suva)
  }

  @Test(
    "on a PostgreSQL store too: a POST with a plan, the page with it, an item added at a position, a stay's collection and stream, and an item for a deleted trip refused with nothing written"
  )
  func onPostgreSQL() throws {
    let database = try PostgreSQLCluster.shared.get().makeDatabase("serveplans")
    let store = try #require(URL(string: database))
    let server = try ServerProcess(
      store: store, ["--token-file", try tokenFile(in: scratch, "planner:\(token)").path])
    defer { #expect(server.stop() == 0) }
    let created = try server.request(
      "POST", "/collections/trips/items", headers: auth,
      body: featureBody(
        plan:
          #""bucketList":[{"title":"Kava"},{"title":"Reef"}],"livingAccommodation":{"name":"Tanoa","latitude":-18.14,"longitude":178.42}"#
      ))
    #expect(created.status == 201, "\(created.text)")
    let trip = try #require(try created.json()["id"] as? String)
    let between = try server.request(
      "POST", "/collections/bucket-list-items/items", headers: auth,
      body: Data(
        #"{"type":"Feature","geometry":null,"properties":{"tripId":"\#(trip)","title":"Market","position":1}}"#
          .utf8))
    #expect(between.status == 201, "\(between.text)")
    let page = try server.request("/collections/trips/items?bbox=170,-30,-170,0").json()
    let properties = try #require(
      (page["features"] as? [[String: Any]])?.first?["properties"] as? [String: Any])
    #expect(
      (properties["bucketList"] as? [[String: Any]])?.map { $0["title"] as? String } == [
        "Kava", "Market", "Reef",
      ])
    let stays = try server.request("/collections/stays/items?bbox=170,-30,-170,0").json()
    #expect(stays["numberMatched"] as? Int == 1)
    #expect(
      try server.request("HEAD", "/collections/stays/items/stream?bbox=170,-30,-170,0").status
        == 200)
    #expect(
      try server.request("DELETE", "/collections/trips/items/\(trip)", headers: auth).status == 204)
    let orphan = try server.request(
      "POST", "/collections/bucket-list-items/items", headers: auth,
      body: Data(
        #"{"type":"Feature","geometry":null,"properties":{"tripId":"\#(trip)","title":"Lost"}}"#
          .utf8))
    #expect(orphan.status == 400 && orphan.text.contains("there is no trip"), "\(orphan.text)")
    #expect(
      try server.request("/collections/bucket-list-items/items").json()["numberMatched"] as? Int
        == 0)
    #expect(try server.request("/collections/stays/items").json()["numberMatched"] as? Int == 0)
  }
}
