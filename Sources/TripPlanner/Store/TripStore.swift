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
  var planRows: (token: DefaultHistoryToken, exist: Bool)?

  /// Opens (creating if needed, folders included) the store at `url`.
  ///
  /// - Parameters:
  ///   - url: The store file.
  ///   - author: Recorded in history for every write.
  ///   - readOnly: Open without writing: no migration, no creation; writes fail.
  public init(url: URL, author: String = "cli", readOnly: Bool = false) throws {
    container = try ModelContainer(
      for: Trip.modelTypes, configuration: ModelConfiguration(url: url, allowsSave: !readOnly))
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
    // Errors thrown by `body` (such as a closed output) reach the caller as thrown.
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
      throw error
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
      throw error
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
      throw error
    }
  }

  /// `body` in `ModelContext.performExclusively(_:)`.
  func exclusively<T>(_ body: () throws -> T) throws -> T {
    try context.performExclusively(body)
  }

  /// `body`: the store's errors reach the caller as the layer throws them
  /// (`PersistenceError`), the library's own as ``TripPlannerError``.
  func run<T>(_ body: () throws -> T) throws -> T {
    try body()
  }
}
