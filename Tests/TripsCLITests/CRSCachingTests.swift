import Foundation
import TestSupport
import Testing

@Suite("trips serve: CRS by reference (Part 2) and HTTP caching", .serialized)
struct CRSCachingTests {
  let scratch = Scratch()
  static let crs84 = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
  static let epsg4326 = "http://www.opengis.net/def/crs/EPSG/0/4326"
  static let epsg3857 = "http://www.opengis.net/def/crs/EPSG/0/3857"

  func server() throws -> ServerProcess {
    #expect(try trips(["import", sampleTrips.path], store: scratch.store).status == 0)
    return try ServerProcess(store: scratch.store)
  }

  static func features(_ reply: HTTPReply) throws -> [(id: String, x: Double, y: Double)] {
    let features = try #require(try reply.json()["features"] as? [[String: Any]])
    return try features.map { feature in
      let geometry = try #require(feature["geometry"] as? [String: Any])
      let position = try #require(geometry["coordinates"] as? [Double])
      return (try #require(feature["id"] as? String), position[0], position[1])
    }
  }

  @Test(
    "crs on items and items/{id}: EPSG:3857 as PROJ's cs2cs projects each point, EPSG:4326 latitude first, Content-Crs on each answer; the collection lists its CRSs and storageCrs"
  )
  func outputCRS() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let path = "/collections/trips/items?bbox=170,-30,-170,0&limit=50"
    let plain = try server.request(path)
    #expect(plain.headers["content-crs"] == "<\(Self.crs84)>")
    let geographic = try Self.features(plain)
    #expect(geographic.count == 15)
    let mercator = try server.request(path + "&crs=\(Self.epsg3857)")
    #expect(mercator.status == 200)
    #expect(mercator.headers["content-crs"] == "<\(Self.epsg3857)>")
    let projected = try Self.features(mercator)
    let expected = try cs2cs("EPSG:3857", geographic.map { ($0.y, $0.x) })
    #expect(projected.map(\.id) == geographic.map(\.id))
    for (got, want) in zip(projected, expected) {
      #expect(abs(got.x - want.0) < 0.01 && abs(got.y - want.1) < 0.01, "\(got) \(want)")
    }
    let latitudeFirst = try Self.features(server.request(path + "&crs=\(Self.epsg4326)"))
    #expect(latitudeFirst.map(\.x) == geographic.map(\.y))
    #expect(latitudeFirst.map(\.y) == geographic.map(\.x))
    // One trip, and its next link keeps the crs.
    let one = try server.request(
      "/collections/trips/items/\(geographic[0].id)?crs=\(Self.epsg3857)")
    #expect(one.status == 200)
    #expect(one.headers["content-crs"] == "<\(Self.epsg3857)>")
    let position = try #require(
      (try one.json()["geometry"] as? [String: Any])?["coordinates"] as? [Double])
    #expect(abs(position[0] - expected[0].0) < 0.01)
    let links = try #require(try mercator.json()["links"] as? [[String: Any]])
    #expect(links.contains { ($0["href"] as? String)?.contains("crs=http") == true })
    let collection = try server.request("/collections/trips").json()
    #expect(collection["crs"] as? [String] == [Self.crs84, Self.epsg4326, Self.epsg3857])
    #expect(collection["storageCrs"] as? String == Self.crs84)
    #expect(try server.request("/conformance").text.contains("ogcapi-features-2/1.0/conf/crs"))
  }

  @Test(
    "bbox-crs: a box in EPSG:4326 (latitude first) or in EPSG:3857 metres selects what the same box in CRS84 does, across the antimeridian too"
  )
  func boxCRS() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    func ids(_ query: String) throws -> [String] {
      try Self.features(server.request("/collections/trips/items?limit=1000&" + query)).map(\.id)
        .sorted()
    }
    for (west, south, east, north) in [(-10.0, 35.0, 30.0, 60.0), (170.0, -30.0, -170.0, 0.0)] {
      let reference = try ids("bbox=\(west),\(south),\(east),\(north)")
      #expect(!reference.isEmpty)
      #expect(
        try ids("bbox=\(south),\(west),\(north),\(east)&bbox-crs=\(Self.epsg4326)") == reference)
      let corners = try cs2cs("EPSG:3857", [(south, west), (north, east)])
      #expect(
        try ids(
          "bbox=\(corners[0].0),\(corners[0].1),\(corners[1].0),\(corners[1].1)&bbox-crs=\(Self.epsg3857)"
        ) == reference)
    }
  }

  @Test(
    "a CRS not offered is a 400 naming the CRSs offered",
    arguments: [
      "crs=EPSG:3857", "crs=", "crs=http://www.opengis.net/def/crs/EPSG/0/32633",
      "bbox=0,0,1,1&bbox-crs=EPSG:4326", "bbox-crs=", "crs=\(epsg3857)&crs=\(epsg4326)",
      "bbox=0,0,1,1&bbox-crs=http://www.opengis.net/def/crs/EPSG/0/3857&limit=1&crs=x",
    ])
  func badCRS(query: String) throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let reply = try server.request("/collections/trips/items?" + query)
    #expect(reply.status == 400, "\(query): \(reply.text)")
    #expect(reply.text.contains("crs"), "\(query): \(reply.text)")
  }

  @Test(
    "ETag and Cache-Control on pages, bounds, sections and the collection; If-None-Match is a 304 until a change by another process alters that answer, and only that one; HEAD and OPTIONS answer"
  )
  func caching() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let pacific = "/collections/trips/items?bbox=170,-30,-170,0&limit=5"
    let europe = "/collections/trips/items?bbox=-10,35,30,60&limit=5"
    var tags: [String: String] = [:]
    for path in [
      pacific, europe, "/collections/trips/bounds", "/collections/trips/sections",
      "/collections/trips",
    ] {
      let reply = try server.request(path)
      #expect(reply.status == 200)
      let tag = try #require(reply.headers["etag"], "\(path)")
      #expect(reply.headers["cache-control"] == "no-cache")
      let again = try server.request(path, headers: ["If-None-Match: \(tag)"])
      #expect(again.status == 304, "\(path)")
      #expect(again.body.isEmpty)
      #expect(
        try server.request(path, headers: ["If-None-Match: W/\"0000000000000000\""]).status == 200)
      tags[path] = tag
    }
    // A trip added in the Pacific box by another process.
    let added = try trips(
      [
        "add", "--name", "Niue by boat", "--destination", "Alofi", "--start", "2020-06-01",
        "--end", "2020-06-09", "--latitude", "-19.0554", "--longitude", "-170.5",
      ], store: scratch.store)
    #expect(added.status == 0)
    let changed = try server.request(pacific, headers: ["If-None-Match: \(tags[pacific]!)"])
    #expect(changed.status == 200)
    #expect(changed.headers["etag"] != tags[pacific])
    #expect(try server.request(europe, headers: ["If-None-Match: \(tags[europe]!)"]).status == 304)
    let bounds = "/collections/trips/bounds"
    #expect(try server.request(bounds, headers: ["If-None-Match: \(tags[bounds]!)"]).status == 200)
    // HEAD has the GET's headers and no body; OPTIONS says what is allowed.
    let head = try curl("HEAD", server.url + europe)
    #expect(head.status == 200 && head.headers["etag"] == tags[europe])
    #expect(head.headers["content-length"].flatMap { Int($0) } ?? 0 > 0)
    let options = try curl("OPTIONS", server.url + "/collections/trips/items")
    #expect(options.headers["allow"]?.contains("GET") == true)
  }

  @Test(
    "properties= chooses a feature's properties (empty: none), skipGeometry=true a null geometry; the sortables list what sortby takes; bad values are 400s"
  )
  func selection() throws {
    let server = try server()
    defer { #expect(server.stop() == 0) }
    let page = "/collections/trips/items?limit=3"
    let chosen = try #require(
      try server.request(page + "&properties=name,bucketList&skipGeometry=true").json()["features"]
        as? [[String: Any]])
    #expect(chosen.count == 3)
    for feature in chosen {
      #expect(feature["geometry"] is NSNull)
      #expect(Set((feature["properties"] as? [String: Any] ?? [:]).keys) == ["name", "bucketList"])
    }
    let none = try #require(
      try server.request(page + "&properties=").json()["features"] as? [[String: Any]])
    #expect((none[0]["properties"] as? [String: Any])?.isEmpty == true)
    #expect(none[0]["geometry"] is [String: Any])
    for bad in ["properties=nope", "skipGeometry=yes", "properties=name&properties=name"] {
      #expect(try server.request(page + "&" + bad).status == 400, "\(bad)")
    }
    let sortables = try server.request("/collections/trips/sortables")
    #expect(sortables.headers["content-type"]?.hasPrefix("application/schema+json") == true)
    let keys = try #require(try sortables.json()["properties"] as? [String: Any]).keys
    #expect(Set(keys) == ["startDate", "endDate", "name", "destination"])
    for key in keys {
      #expect(try server.request("/collections/trips/items?sortby=-\(key)").status == 200)
    }
  }
}
