import Foundation
import Geo
import Persistence

// Reading trips: lists, sections, pages (from SQL or the box index), tiles, counts, lookups by
// id.

extension TripStore {
  // MARK: Reading

  /// The trips matching `query`, in its order. Cost: one SQL query; for a page (`limit`) of a
  /// bounding box, the page's keys are chosen in the box's index alone (which holds the
  /// default order's columns) and only the page's rows are read: O(log n + trips in the box's
  /// band of longitude) index entries and O(page) rows.
  public func trips(_ query: TripQuery = TripQuery()) throws -> [Trip] {
    try run {
      guard query.bbox != nil, query.limit != nil, query.sort == .start else {
        return try resolved(context.fetch(query.fetchDescriptor))
      }
      return try resolved(
        context.fetchIdentifiers(query.fetchDescriptor).compactMap {
          try context.model(for: $0, as: Trip.self)
        })
    }
  }

  /// The trips matching `query` as records, in its order, read as values (no model made or
  /// registered: `ModelContext.fetch(_:as:)`), chosen as ``trips(_:)`` chooses them. Cost: as
  /// ``trips(_:)``.
  public func records(_ query: TripQuery = TripQuery()) throws -> [TripRecord] {
    try run {
      guard query.bbox != nil, query.limit != nil, query.sort == .start else {
        return try context.fetch(query.fetchDescriptor, as: TripRecord.self)
      }
      return try context.fetch(
        context.fetchIdentifiers(query.fetchDescriptor), as: TripRecord.self)
    }
  }

  /// The trip with `id` as a record with its plan, both read in one snapshot as values (no
  /// model made or registered): what a service answers for one trip. Nil when no trip has
  /// that id. Cost: one lookup in the unique index on id; on a store with plan rows
  /// (``hasPlanRows()``, asked once per history token), two more through the plan tables' key
  /// columns' indexes.
  public func recordWithPlan(id: UUID) throws -> TripRecord? {
    try run {
      try context.withSnapshot {
        var found: (key: Int64, record: TripRecord)?
        try TripBoxIndex.forEachRecord(
          FetchDescriptor<Trip>(predicate: #Predicate { $0.id == id }), context: context
        ) { key, record in found = (key, record) }
        guard let found else { return nil }
        betweenPageReads?()
        return try withPlans([found.record], keys: [found.key]).first
      }
    }
  }

  /// The trips matching `query` as records grouped by destination, as ``sections(_:)`` groups
  /// trips, read as values. Cost: one SQL query, O(rows).
  public func sectionRecords(_ query: TripQuery = TripQuery()) throws -> [ResultsSection<
    String, TripRecord
  >] {
    try run {
      try context.fetch(query.fetchDescriptor, as: TripRecord.self, sectionBy: \.destination)
    }
  }

  /// `trips`, every place identifier decoded: what the store hands out is read back whole, or
  /// the read fails naming the damaged trip (``Trip/placeIdentifier`` alone would read as nil).
  private func resolved<Trips: Sequence<Trip>>(_ trips: Trips) throws -> Trips {
    try context.resolveFaults(trips)
    return trips
  }

  /// One page of the trips matching `query` (its `offset` and `limit`) and how many match in
  /// all, from one snapshot of the store: what a paged API answers with.
  ///
  /// Cost: with a bounding box, one pass over the box's index entries that counts the matches
  /// and keeps the page in a bounded heap (`ModelContext.fetchModelsPage(_:)`), O(m log k) for
  /// m matches and k = offset + limit, then the page's rows read by key in one query in the
  /// same snapshot, O(page × log n); otherwise the page's query and a
  /// count, each served by an index where one follows the order or the filter.
  public func page(_ query: TripQuery) throws -> (trips: [Trip], matched: Int) {
    try run {
      var unpaged = query
      unpaged.limit = nil
      unpaged.offset = nil
      guard query.bbox != nil, query.limit != nil else {
        return (
          try resolved(context.fetch(query.fetchDescriptor)),
          try context.fetchCount(unpaged.fetchDescriptor)
        )
      }
      let (trips, matched) = try context.fetchModelsPage(query.fetchDescriptor)
      return (try resolved(trips), matched)
    }
  }

  /// One page of the trips matching `query` and how many match in all, as ``page(_:)``
  /// answers, with `index` answering a bounding box's page by start date (the default order,
  /// or reversed) when the query has no other filter: the index, brought up to date with the
  /// store's history in the page's snapshot, chooses the page's keys and counts the box in
  /// memory, and only the page's rows are read. Other queries, and a snapshot the index has
  /// already moved past, are answered by ``page(_:)``.
  ///
  /// Cost with the index: O(c + m log k) in memory (``TripBoxIndex``), plus O(t + changes)
  /// to follow t transactions since its last answer, plus the page's rows by key,
  /// O(page × log n). Its first use builds it, O(n).
  public func page(_ query: TripQuery, index: TripBoxIndex) throws -> (
    trips: [Trip], matched: Int
  ) {
    let answer = try inIndexSnapshot(query) {
      box, limit, token -> (trips: [Trip], matched: Int)? in
      guard
        let (keys, matched) = index.page(
          box: box, reverse: query.reverse, offset: query.offset ?? 0, limit: limit,
          token: token, context: context)
      else { return nil }
      return (trips: try resolved(context.models(for: keys, as: Trip.self)), matched: matched)
    }
    if let answer { return answer }
    return try page(query)
  }

  /// One page of the trips matching `query` as records, and how many match in all: what
  /// ``page(_:index:)`` answers, with the index's page made from the index's own copy of the
  /// trips, without reading a row or making a model (no identity map, no fault to resolve,
  /// nothing to release): what a service writes out. Without an index, ``page(_:)``'s trips
  /// as records.
  ///
  /// Cost with the index: O(c + m log k) in memory (``TripBoxIndex``), plus O(t + changes)
  /// to follow t transactions since its last answer, plus O(page) to make the records; the
  /// store is asked only for its current history token (and the changes, if any).
  public func pageRecords(_ query: TripQuery, index: TripBoxIndex?) throws -> (
    records: [TripRecord], matched: Int
  ) {
    let (records, _, matched) = try keyedPageRecords(query, index: index)
    return (records, matched)
  }

  /// ``pageRecords(_:index:)`` with the trips' primary keys when the index answered (nil when
  /// the store did), so that their plans can be read by key.
  func keyedPageRecords(_ query: TripQuery, index: TripBoxIndex?) throws -> (
    records: [TripRecord], keys: [Int64]?, matched: Int
  ) {
    if let index,
      let answer = try inIndexSnapshot(
        query,
        { box, limit, token in
          index.pageRecords(
            box: box, reverse: query.reverse, offset: query.offset ?? 0, limit: limit,
            token: token, context: context)
        })
    {
      return (answer.records, answer.keys, answer.matched)
    }
    return try run {
      var unpaged = query
      unpaged.limit = nil
      unpaged.offset = nil
      guard query.bbox != nil, query.limit != nil else {
        return try context.withSnapshot {
          (
            try context.fetch(query.fetchDescriptor, as: TripRecord.self), nil,
            try context.fetchCount(unpaged.fetchDescriptor)
          )
        }
      }
      let (records, matched) = try context.fetchPage(query.fetchDescriptor, as: TripRecord.self)
      return (records, nil, matched)
    }
  }

  /// ``pageRecords(_:index:)`` with each trip's plan (``withPlans(_:)``), both read in one
  /// snapshot of the store: a commit in between cannot pair a trip with another version of its
  /// plan. What a service's page of features writes out.
  ///
  /// Cost: ``pageRecords(_:index:)``'s, plus the plans': none on a store without any item or
  /// stay; for a page the index answered, two queries (its trips' items and stays, by the
  /// trips' keys through the key columns' indexes, no query on the trips); else
  /// ``withPlans(_:)``'s three queries per 500 trips.
  public func pageRecordsWithPlans(_ query: TripQuery, index: TripBoxIndex?) throws -> (
    records: [TripRecord], matched: Int
  ) {
    try run {
      try context.withSnapshot {
        let (records, keys, matched) = try keyedPageRecords(query, index: index)
        betweenPageReads?()
        guard let keys else { return (try withPlans(records), matched) }
        return (try withPlans(records, keys: keys), matched)
      }
    }
  }

  /// The trips matching `query` in `tile` (and its buffer), as a vector tile draws them:
  /// points, or clusters where they exceed the tile's budget (``TripTile``). With `index`
  /// and a query without filters the tile is made from the index's copy of the trips; else
  /// from the store, one query per window of the tile (two across the antimeridian). The
  /// tile's ``TripTile/version`` is the history position of the last change the index saw in
  /// the tile's cells, or without an index the store's current one. `query`'s `bbox`, sort and
  /// page are ignored.
  ///
  /// Cost with the index: O(c + m) in memory for the c cells of a quarter degree the tile
  /// covers and the m trips in them, plus O(t + changes) to follow t transactions since its
  /// last answer. From the store: a query per window, O(matches) rows read.
  public func tile(_ tile: WebMercatorTile, query: TripQuery = TripQuery(), index: TripBoxIndex?)
    throws -> TripTile
  {
    var query = query
    query.bbox = nil
    query.limit = nil
    query.offset = nil
    let filtered = query.hasFilters
    return try run {
      try context.withSnapshot {
        let token = try context.currentHistoryToken()
        if let index, !filtered, let answer = index.tile(tile, token: token, context: context) {
          return answer
        }
        let version = index?.version(of: tile, token: token, context: context) ?? token
        var builder = TripTileBuilder<Int, String>(tile: tile)
        var records: [TripRecord] = []
        for window in tile.windows(buffer: TripTile.buffer) {
          var windowQuery = query
          windowQuery.bbox = GeographicBox(
            west: window.west, south: window.south, east: window.east, north: window.north)
          try TripBoxIndex.forEachRecord(windowQuery.fetchDescriptor, context: context) {
            key, record in
            builder.offer(
              longitude: record.longitude, latitude: record.latitude, key: key, window: window,
              reference: records.count)
            records.append(record)
          }
        }
        return builder.build(
          version: version, record: { records[$0] }, destination: { records[$0].destination },
          text: { $0 })
      }
    }
  }

  /// The ``TripTile/version`` the tile would have now: the history position of the last
  /// change `index` saw in the tile's cells (or the store's current one, when the index
  /// cannot answer for this snapshot). What an `ETag` is made of, without making the tile.
  /// Cost: O(t + changes) to follow t transactions since the index's last answer, plus O(1).
  public func tileVersion(_ tile: WebMercatorTile, index: TripBoxIndex) throws
    -> DefaultHistoryToken
  {
    try run {
      try context.withSnapshot {
        let token = try context.currentHistoryToken()
        return index.version(of: tile, token: token, context: context) ?? token
      }
    }
  }

  /// What `answer` makes of a paged bbox query (``TripQuery/isPagedBox``), given its box, its
  /// limit and the current history token, all in one snapshot; nil for other queries, or when
  /// `answer` gives nil (the index cannot answer for this snapshot).
  private func inIndexSnapshot<Answer>(
    _ query: TripQuery,
    _ answer: (_ box: GeographicBox, _ limit: Int, _ token: DefaultHistoryToken) throws -> Answer?
  ) throws -> Answer? {
    guard query.isPagedBox, let box = query.bbox, let limit = query.limit else { return nil }
    return try run {
      try context.withSnapshot { try answer(box, limit, try context.currentHistoryToken()) }
    }
  }

  /// The coordinates of the trips matching `query`, in its order, read from their two columns
  /// without making models: what a bounds report needs. Cost: one SQL query, O(rows).
  public func coordinates(_ query: TripQuery = TripQuery()) throws -> [Coordinate] {
    try run {
      try context.fetchValues(query.fetchDescriptor, \.latitude, \.longitude).map {
        Coordinate(latitude: $0, longitude: $1)
      }
    }
  }

  /// The positions of the stays of the trips matching `query`, in its order (trips without a
  /// stay give none): what a bounds report that covers stays adds to ``coordinates(_:)``, a
  /// stay being possibly far from its trip's destination. Cost: the matching trips read in
  /// batches of 10,000, each batch's stays in one query, O(matching) models.
  public func stayCoordinates(_ query: TripQuery = TripQuery()) throws -> [Coordinate] {
    var descriptor = query.fetchDescriptor
    descriptor.relationshipKeyPathsForPrefetching = [\.livingAccommodation]
    var coordinates: [Coordinate] = []
    try run {
      try context.enumerate(descriptor, batchSize: 10_000) { trip in
        if let stay = trip.livingAccommodation {
          coordinates.append(Coordinate(latitude: stay.latitude, longitude: stay.longitude))
        }
      }
    }
    return coordinates
  }

  /// The trips matching `query`, grouped by destination (sections in code-point order).
  public func sections(_ query: TripQuery = TripQuery()) throws -> [ResultsSection<String, Trip>] {
    try run {
      let sections = try context.fetch(query.fetchDescriptor, sectionBy: \.destination)
      for section in sections { try context.resolveFaults(section) }
      return sections
    }
  }

  /// The destinations of the trips matching `query`, each with its number of trips, in
  /// code-point order: one SQL aggregate, no trips made. Cost: one query, O(trips) scanned.
  public func destinations(_ query: TripQuery = TripQuery()) throws -> [(
    destination: String, count: Int
  )] {
    try run {
      try context.fetchCounts(query.fetchDescriptor, groupedBy: \.destination).map {
        (destination: $0.value, count: $0.count)
      }
    }
  }

  /// How many trips match `query`.
  public func count(_ query: TripQuery = TripQuery()) throws -> Int {
    try run { try context.fetchCount(query.fetchDescriptor) }
  }

  /// Every stored trip, bucket-list item and stay that cannot be read back or breaks a rule,
  /// one message each naming it by id (and row): what `trips check` reports beyond SQLite's
  /// own check. Empty when every one reads back and is valid.
  ///
  /// Cost: one pass over each of the domain's tables (``Trip/modelTypes``), O(rows), one model in memory at a time.
  public func damagedTrips() throws -> [String] {
    try run {
      try Trip.modelTypes.flatMap { try context.validateStoredRows(of: $0) }
        .map(Self.describeDamage)
    }
  }

  /// A damaged row in words for people: which trip, and what is wrong with it.
  public static func describeDamage(_ error: PersistenceError) -> String {
    let row = error.row ?? "a trip"
    if let attribute = error.attribute {
      return "\(row): the stored \(attribute) value cannot be decoded (the bytes are damaged)"
    }
    var message = error.message
    if let named = error.row, message.hasSuffix(" (\(named))") {
      message.removeLast(named.count + 3)
    }
    return "\(row): \(message)"
  }

  /// The trip whose id is `id`, or whose id starts with `id` (at least 4 hexadecimal digits,
  /// matching one trip only), its plan loaded: reading its bucket list and stay afterwards runs
  /// no query (a store that cannot be read fails here, with an error, not there).
  ///
  /// Cost: a range scan of the unique index on `id` (a prefix is a range of UUIDs), then one
  /// query over each plan table's index on its trip.
  public func trip(matching id: String) throws -> Trip {
    let trip = try lookUpTrip(matching: id)
    try run { try context.prefetch([\.bucketList, \.livingAccommodation], of: [trip]) }
    return trip
  }

  /// ``trip(matching:)`` without its plan.
  private func lookUpTrip(matching id: String) throws -> Trip {
    let text = id.lowercased()
    if let uuid = UUID(uuidString: text) {
      let trips = try run {
        try resolved(
          context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.id == uuid }).storedOnly))
      }
      if let trip = trips.first { return trip }
      throw TripPlannerError(code: .notFound, message: "No trip has the id \(id).")
    }
    guard text.count >= 4, text.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
      throw TripPlannerError(
        code: .notFound,
        message: "'\(id)' is not a trip id: give the whole id or its first 4 or more characters.")
    }
    let digits = text.filter(\.isHexDigit)
    let lower = UUID(
      uuidString: Self.uuidText(digits.padding(toLength: 32, withPad: "0", startingAt: 0)))!
    let upper = Self.incrementedHex(digits).map {
      UUID(uuidString: Self.uuidText($0.padding(toLength: 32, withPad: "0", startingAt: 0)))!
    }
    let hasUpper = upper != nil
    let bound = upper ?? lower
    let candidates = try run {
      try resolved(
        context.fetch(
          FetchDescriptor<Trip>(
            predicate: #Predicate { $0.id >= lower && (!hasUpper || $0.id < bound) }
          ).storedOnly))
    }
    let matches = candidates.filter {
      $0.id.lowercasedString.filter(\.isHexDigit).hasPrefix(digits)
    }
    switch matches.count {
    case 1: return matches[0]
    case 0: throw TripPlannerError(code: .notFound, message: "No trip id starts with \(id).")
    default:
      throw TripPlannerError(
        code: .notFound,
        message: "\(matches.count) trip ids start with \(id); give more characters.")
    }
  }

  /// 32 hex digits as UUID text.
  static func uuidText(_ hex: String) -> String {
    let digits = Array(hex)
    return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(digits[$0]) }.joined(
      separator: "-")
  }

  /// The hex number one greater, same length; nil when it overflows (all `f`).
  static func incrementedHex(_ hex: String) -> String? {
    var digits = Array(hex)
    var index = digits.count - 1
    while index >= 0 {
      let value = digits[index].hexDigitValue!
      if value < 15 {
        digits[index] = Character(String(value + 1, radix: 16))
        return String(digits)
      }
      digits[index] = "0"
      index -= 1
    }
    return nil
  }
}
