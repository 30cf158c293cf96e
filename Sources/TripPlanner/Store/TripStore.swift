import Foundation
import Geo
import Persistence

/// The trip store as other services use it: every `trips` command is one call here.
///
/// A `TripStore` owns a container and one context; it is not `Sendable` (use one per task, all
/// on the same file if you like: SQLite's WAL lets them read and write side by side).
public final class TripStore {
  /// The container, for observers and further contexts.
  public let container: ModelContainer
  /// The context every call uses.
  public let context: ModelContext
  /// Called between the trips' and the plans' reads of ``pageRecordsWithPlans(_:index:)`` and
  /// ``recordWithPlan(id:)``: where the tests put a writer, to check that it cannot come
  /// between them.
  var betweenPageReads: (() -> Void)?
  /// Whether the store held plan rows at a history token (see ``hasPlanRows()``).
  var planRows: (token: HistoryToken, exist: Bool)?

  /// Opens (creating if needed, folders included) the store at `url`.
  ///
  /// - Parameters:
  ///   - url: The store file.
  ///   - author: Recorded in history for every write.
  ///   - readOnly: Open without writing: no migration, no creation; writes fail.
  public init(url: URL, author: String = "cli", readOnly: Bool = false) throws {
    do {
      container = try ModelContainer(
        for: Trip.modelTypes, configuration: ModelConfiguration(url: url, allowsSave: !readOnly))
    } catch {
      throw Self.wrap(error)
    }
    context = ModelContext(container)
    context.author = author
  }

  /// A store on an open container, with a context of its own (for instance one per thread of
  /// a server, all on one container).
  public init(container: ModelContainer, author: String = "cli") {
    self.container = container
    context = ModelContext(container)
    context.author = author
  }

  /// Opens an in-memory store (for tests and tools).
  public init(inMemoryWithAuthor author: String = "cli") throws {
    container = try ModelContainer(
      for: Trip.modelTypes, configuration: ModelConfiguration(isStoredInMemoryOnly: true))
    context = ModelContext(container)
    context.author = author
  }

  /// The default store location: `$TRIPS_STORE` (a path, or a `postgresql://` URL), else
  /// `$XDG_DATA_HOME/trips/trips.sqlite`, else `~/.local/share/trips/trips.sqlite`.
  public static func defaultURL(environment: [String: String] = ProcessInfo.processInfo.environment)
    -> URL
  {
    if let path = environment["TRIPS_STORE"], !path.isEmpty {
      if let url = URL(string: path), PostgreSQLEngine.handles(url) { return url }
      return URL(fileURLWithPath: path)
    }
    return ModelConfiguration.dataFolder(environment: environment).appendingPathComponent(
      "trips/trips.sqlite")
  }

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
  public func tileVersion(_ tile: WebMercatorTile, index: TripBoxIndex) throws -> HistoryToken {
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
    _ answer: (_ box: GeographicBox, _ limit: Int, _ token: HistoryToken) throws -> Answer?
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
  /// Cost: one pass over each of the three tables, O(rows), one model in memory at a time.
  public func damagedTrips() throws -> [String] {
    try run {
      try
        (context.validateStoredRows(of: Trip.self)
        + context.validateStoredRows(of: BucketListItem.self)
        + context.validateStoredRows(of: LivingAccommodation.self)).map(Self.describeDamage)
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
          context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.id == uuid })))
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
            predicate: #Predicate { $0.id >= lower && (!hasUpper || $0.id < bound) })))
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

  // MARK: Writing

  /// Adds a trip (an existing id updates that trip) and returns it.
  @discardableResult
  public func add(_ record: TripRecord) throws -> Trip {
    try record.validate()
    let trip = Trip(record)
    context.insert(trip)
    try save()
    return trip
  }

  /// Changes a trip: `change` edits it, then the result is validated and saved (or nothing is).
  ///
  /// The trip is read and written in one transaction that holds the store's write lock
  /// (`ModelContext.performExclusively(_:)`): `change` sees the latest committed values, and
  /// no other writer (thread, process or server) commits in between, so two updates of
  /// different fields never revert each other. `change` may throw to refuse (a version that
  /// does not match, say): nothing is written.
  @discardableResult
  public func update(_ id: String, _ change: (inout TripRecord) throws -> Void) throws -> Trip {
    try exclusively {
      let trip = try trip(matching: id)
      var record = trip.record
      try change(&record)
      record.id = trip.id
      try record.validate()
      trip.apply(record)
      try save()
      return trip
    }
  }

  /// Changes the trip with this id, as the `String` form does.
  @discardableResult
  public func update(_ id: UUID, _ change: (inout TripRecord) throws -> Void) throws -> Trip {
    try update(id.uuidString, change)
  }

  /// Deletes the trips with these ids, all or none. Returns the trips, each once.
  @discardableResult
  public func delete(_ ids: [UUID]) throws -> [Trip] {
    try delete(ids.map(\.uuidString))
  }

  /// Imports records in one transaction, all or none, as the form with lines does; problems
  /// name the record's position (from 1) as its line.
  @discardableResult
  public func importRecords(
    _ records: [TripRecord], file: String = "-", progress: ((Int) -> Void)? = nil
  ) throws -> Int {
    try importRecords(
      records.enumerated().map { (line: $0.offset + 1, record: $0.element) }, file: file,
      progress: progress)
  }

  /// Deletes the trips with these ids (or unique prefixes), all or none. Returns the trips,
  /// each once (an id given twice, or a prefix and the whole id, names one trip).
  ///
  /// The trips are looked up and deleted in one transaction that holds the store's write lock,
  /// so of two deletes of one trip at once, one deletes it and the other finds no trip
  /// (``TripPlannerError/Code/notFound``). `check` sees each trip before anything is deleted
  /// and may throw to refuse (nothing is deleted).
  @discardableResult
  public func delete(_ ids: [String], checking check: (Trip) throws -> Void = { _ in }) throws
    -> [Trip]
  {
    try exclusively {
      var seen = Set<UUID>()
      let trips = try ids.map { try trip(matching: $0) }.filter { seen.insert($0.id).inserted }
      for trip in trips { try check(trip) }
      for trip in trips { context.delete(trip) }
      try save()
      return trips
    }
  }

  /// Imports records in one transaction: all of them or, if any is invalid, none; every bad
  /// record is reported. Records with an existing id update that trip.
  ///
  /// - Parameters:
  ///   - records: The records, each with where it came from (a line number, or nil).
  ///   - file: The file's name, for messages (`FILE:LINE`).
  ///   - progress: Called with the number of records processed so far.
  @discardableResult
  public func importRecords(
    _ records: [(line: Int?, record: TripRecord)], file: String = "-",
    progress: ((Int) -> Void)? = nil
  ) throws -> Int {
    var problems: [TripPlannerError.Problem] = []
    for (line, record) in records {
      for violation in record.violations {
        problems.append(.init(file: file, line: line, reason: violation.reason))
      }
    }
    problems += Self.duplicateProblems(records, file: file)
    guard problems.isEmpty else {
      throw TripPlannerError(
        code: .invalidInput, message: "\(file): nothing was imported.", problems: problems)
    }
    guard records.contains(where: { $0.record.plan != nil }) else {
      for (index, item) in records.enumerated() {
        context.insert(Trip(item.record))
        if let progress, index % 10_000 == 0 { progress(index) }
      }
      try save()
      progress?(records.count)
      return records.count
    }
    // Records with a plan replace the plan of the trip they name: one exclusive transaction.
    try exclusively {
      try importWithPlans(records, file: file, progress: progress)
      try save()
    }
    progress?(records.count)
    return records.count
  }

  /// Calls `body` with each trip matching `query`, in its order, as they are read: the first
  /// trips arrive before the whole result is read, and at most a batch of 1,000 unchanged
  /// trips is held. Cost: one SQL query, O(rows), memory O(batch).
  public func forEachTrip(_ query: TripQuery = TripQuery(), _ body: (Trip) throws -> Void) throws {
    // Errors thrown by `body` (such as a closed output) pass through unwrapped.
    var bodyError: (any Error)?
    do {
      try context.enumerate(query.fetchDescriptor, batchSize: 1_000) { trip in
        do { try body(trip) } catch {
          bodyError = error
          throw error
        }
      }
    } catch {
      if let bodyError { throw bodyError }
      throw Self.wrap(error)
    }
  }

  /// Calls `body` with each trip matching `query` as a record, in its order, as the rows are
  /// read (values: no model made, nothing held). Cost: one SQL query, O(rows), memory O(1).
  public func forEachRecord(
    _ query: TripQuery = TripQuery(), _ body: (TripRecord) throws -> Void
  ) throws {
    var bodyError: (any Error)?
    do {
      try context.enumerate(query.fetchDescriptor, as: TripRecord.self) { record in
        do { try body(record) } catch {
          bodyError = error
          throw error
        }
      }
    } catch {
      if let bodyError { throw bodyError }
      throw Self.wrap(error)
    }
  }

  /// A problem for each record whose id an earlier record of the same file has (whatever its
  /// case): in one transaction the second would silently overwrite the first. O(records).
  static func duplicateProblems(_ records: [(line: Int?, record: TripRecord)], file: String)
    -> [TripPlannerError.Problem]
  {
    var problems: [TripPlannerError.Problem] = []
    var firstLine: [UUID: Int?] = [:]
    for (line, record) in records {
      guard let id = record.id else { continue }
      if let earlier = firstLine[id] {
        let place = earlier.map { "on line \($0)" } ?? "earlier in the file"
        problems.append(
          .init(
            file: file, line: line,
            reason:
              "the id \(id.lowercasedString) is also \(place); each trip may appear once"))
      } else {
        firstLine[id] = line
      }
    }
    return problems
  }

  /// Every trip as records, in `query`'s order, read as values (no model made); with `plans`,
  /// each carries its bucket list and stay (``TripRecord/plan``), read as values too
  /// (``withPlans(_:)``), all in one snapshot of the store. Cost: O(trips + items).
  public func exportRecords(_ query: TripQuery = TripQuery(), plans: Bool = false) throws
    -> [TripRecord]
  {
    try run {
      try context.withSnapshot {
        let records = try context.fetch(query.fetchDescriptor, as: TripRecord.self)
        return plans ? try withPlans(records) : records
      }
    }
  }

  /// Writes the trips matching `query`, in its order, as `format` to `sink`, a batch of
  /// `batchSize` trips at a time, JSON and GeoJSON with each trip's plan: the bytes
  /// ``TripFileFormat/encode(_:)`` makes of ``exportRecords(_:plans:)``, all read in one
  /// snapshot, without holding the document. `sink` gets the header, each batch and the
  /// footer as they are made; an error (the store's or `sink`'s) ends the export there.
  ///
  /// Cost: the trips read once as values (`ModelContext.enumerate(_:as:_:)`) and, for
  /// plans, three queries a batch by the trips' keys; GeoJSON reads the trips' coordinates
  /// once more first, for its `bbox` (16 bytes a trip). Memory: O(`batchSize`) trips, their
  /// plans and their text, whatever the store holds.
  public func export(
    _ query: TripQuery = TripQuery(), as format: TripFileFormat, batchSize: Int = 500,
    to sink: ([UInt8]) throws -> Void
  ) throws {
    let plans = format != .csv
    let size = max(1, batchSize)
    try run {
      try context.withSnapshot {
        var box: GeographicBox?
        if format == .geojson {
          var coordinates: [Coordinate] = []
          try context.enumerateValues(query.fetchDescriptor, [\Trip.latitude, \Trip.longitude]) {
            row in
            coordinates.append(
              Coordinate(
                latitude: try row.value(Double.self, at: 0),
                longitude: try row.value(Double.self, at: 1)))
          }
          box = GeographicBox.enclosing(coordinates)
        }
        var writer = TripFileWriter(format, box: box)
        try sink(writer.header())
        var batch: [TripRecord] = []
        batch.reserveCapacity(size)
        func flush() throws {
          guard !batch.isEmpty else { return }
          try sink(writer.write(plans ? try withPlans(batch) : batch))
          batch.removeAll(keepingCapacity: true)
        }
        try context.enumerate(query.fetchDescriptor, as: TripRecord.self) { record in
          batch.append(record)
          if batch.count == size { try flush() }
        }
        try flush()
        try sink(writer.footer())
      }
    }
  }

  private func save() throws {
    do {
      try context.save()
    } catch {
      context.rollback()
      throw Self.wrap(error)
    }
  }

  /// `body` in `ModelContext.performExclusively(_:)`, store errors wrapped.
  func exclusively<T>(_ body: () throws -> T) throws -> T {
    do { return try context.performExclusively(body) } catch { throw Self.wrap(error) }
  }

  func run<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw Self.wrap(error) }
  }

  static func wrap(_ error: any Error) -> any Error {
    if let error = error as? PersistenceError {
      return TripPlannerError(code: .store, message: error.message, cause: error)
    }
    return error
  }
}
