import Foundation
import Observation
import Persistence
import Synchronization

/// A planned trip: where, when, and the place it refers to.
///
/// Validation (``TripRecord/validate()``) runs on every save, whichever path the trip came in by: a name and
/// a destination that are not blank, at most ``TripRecord/maximumTextLength`` Unicode scalars
/// long and free of control characters (C0, DEL, C1: no line breaks, tabs or escape sequences;
/// the place identifier too), a finite latitude in [-90, 90] and longitude in [-180, 180], and
/// an end date not before the start date.
///
/// Observable as an `@Observable` class is, with one difference: its `ObservationRegistrar`
/// (two allocations, about 100 bytes, and a box of our own that publishes it atomically) is
/// made when the trip is first read or changed in place through its properties, not when it
/// is made. A fetch makes trips that nobody may read (a
/// million of them for a full fetch, or a page of which one is shown); the store reads and
/// writes them through their backing storage, which needs no registrar. An assignment to a
/// trip that has none tells no one, as no one can be observing it: observing begins with a
/// read (`withObservationTracking`), which makes it.
public final class Trip: PersistentModel, LinksOnFirstUse, Observable {
  /// The trip's identity, unique in a store (inserting a trip with an existing id updates it).
  @ObservationTracked public var id: UUID
  /// What the trip is called.
  @ObservationTracked public var name: String
  /// Where it goes; trips are grouped by it. Stored NFC-normalised.
  @ObservationTracked public var destination: String
  /// When it starts.
  @ObservationTracked public var startDate: Date
  /// When it ends; not before ``startDate``.
  @ObservationTracked public var endDate: Date
  /// Degrees north of the destination.
  @ObservationTracked public var latitude: Double
  /// Degrees east of the destination.
  @ObservationTracked public var longitude: Double
  /// The destination in an outside gazetteer, stored opaquely. A fetched trip keeps the stored
  /// bytes and decodes them when this is first read (trips that share a place share one
  /// identifier); stored bytes that cannot be decoded read as nil, and `trips check` reports
  /// them.
  public var placeIdentifier: PlaceIdentifier? {
    get {
      access(keyPath: \.placeIdentifier)
      return _placeFault.value
    }
    set {
      withMutation(keyPath: \.placeIdentifier) { _placeFault.value = newValue }
    }
  }
  // No initial value: each initializer sets it, so that a trip made from a row initializes it
  // rather than assigning over a default, which is checked for exclusivity at run time (about
  // 80 instructions a row).
  @ObservationIgnored private var _placeFault: CodableFault<PlaceIdentifier>

  // MARK: Relationships, their links made on first use

  /// Where the relationships load from: set by the store when it loads or attaches the trip,
  /// so that a fetched trip whose plan nobody reads makes no link (see `LinksOnFirstUse`).
  @exclusivity(unchecked) public var linkOrigin = LinkOrigin()

  @exclusivity(unchecked) var bucketListStorage: ToMany<BucketListItem>?
  var bucketListLink: ToMany<BucketListItem> { link(&bucketListStorage) }
  /// Things to do there, in ``BucketListItem/position`` order (ties by id); deleted with the
  /// trip. Read from the store on first access (one query), or with the trips that a fetch
  /// prefetches it for.
  public var bucketList: [BucketListItem] {
    get { bucketListLink.value(of: self) }
    set { bucketListLink.set(newValue, of: self) }
  }

  @exclusivity(unchecked) var livingAccommodationStorage: ToOne<LivingAccommodation>?
  var livingAccommodationLink: ToOne<LivingAccommodation> { link(&livingAccommodationStorage) }
  /// Where one stays, if decided; deleted with the trip.
  public var livingAccommodation: LivingAccommodation? {
    get { livingAccommodationLink.value(of: self) }
    set { livingAccommodationLink.set(newValue, of: self) }
  }

  // MARK: Observation, with a registrar made on first use

  /// The registrar, in an object of its own.
  private final class RegistrarBox: Sendable {
    let registrar = ObservationRegistrar()
  }

  /// The registrar's box, once made (see the type's docs), published with an atomic
  /// compare-and-exchange: threads that read a fresh trip at once (a results observer's models
  /// are read by other threads) agree on one registrar, and observers registered through it
  /// are never lost to another. Released in `deinit`.
  private let registrarBox = Atomic<Unmanaged<RegistrarBox>?>(nil)

  deinit { registrarBox.load(ordering: .acquiring)?.release() }

  /// Whether the trip has made its registrar yet.
  var hasRegistrar: Bool { registrarBox.load(ordering: .acquiring) != nil }

  /// The registrar's box, made now if it was not yet: O(1), one atomic load once made.
  private var box: RegistrarBox {
    if let made = registrarBox.load(ordering: .acquiring) { return made.takeUnretainedValue() }
    let new = Unmanaged.passRetained(RegistrarBox())
    let (stored, current) = registrarBox.compareExchange(
      expected: nil, desired: new, ordering: .acquiringAndReleasing)
    if stored { return new.takeUnretainedValue() }
    new.release()
    return current.unsafelyUnwrapped.takeUnretainedValue()
  }

  /// The registrar, made now if it was not yet (the name `@ObservationTracked`'s in-place
  /// mutations use).
  private var _$observationRegistrar: ObservationRegistrar { box.registrar }

  /// Records a read of `keyPath` for an observation being tracked (as `@Observable`'s).
  nonisolated func access<Member>(keyPath: KeyPath<Trip, Member>) {
    box.registrar.access(self, keyPath: keyPath)
  }

  /// Runs `mutation`, telling observers of `keyPath`; without a registrar there are none.
  nonisolated func withMutation<Member, Result>(
    keyPath: KeyPath<Trip, Member>, _ mutation: () throws -> Result
  ) rethrows -> Result {
    guard let made = registrarBox.load(ordering: .acquiring) else { return try mutation() }
    return try made.takeUnretainedValue().registrar.withMutation(
      of: self, keyPath: keyPath, mutation)
  }

  /// Whether an assignment of `rhs` over `lhs` is a change observers hear of (as
  /// `@Observable`'s: always, unless the values are equal).
  private nonisolated func shouldNotifyObservers<Member>(_ lhs: Member, _ rhs: Member) -> Bool {
    true
  }

  private nonisolated func shouldNotifyObservers<Member: Equatable>(
    _ lhs: Member, _ rhs: Member
  ) -> Bool {
    lhs != rhs
  }

  /// An empty trip with a new random id.
  public convenience init() {
    self.init(placeholder: UUID())
  }

  /// A trip the store fills from a row: no random id is generated (see
  /// `PersistentModel.makeForLoading()`).
  private init(placeholder id: UUID) {
    self.id = id
    name = ""
    destination = ""
    startDate = Date(timeIntervalSinceReferenceDate: 0)
    endDate = Date(timeIntervalSinceReferenceDate: 0)
    latitude = 0
    longitude = 0
    _placeFault = CodableFault()
  }

  /// An instance to load a row into, without generating a random id.
  public static func makeForLoading() -> Trip { Trip(placeholder: Trip.placeholderID) }

  /// A trip made from a row (see `schema`).
  private init(
    id: UUID, name: String, destination: String, startDate: Date, endDate: Date,
    latitude: Double, longitude: Double, placeFault: CodableFault<PlaceIdentifier>
  ) {
    _placeFault = placeFault
    self.id = id
    self.name = name
    self.destination = destination
    self.startDate = startDate
    self.endDate = endDate
    self.latitude = latitude
    self.longitude = longitude
  }

  private static let placeholderID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

  /// Creates a trip from a record (a new random id when the record has none).
  public init(_ record: TripRecord) {
    // Assigned here, not through `apply`, so that no observation bookkeeping runs for a trip
    // nobody can be observing yet.
    id = record.id ?? UUID()
    name = record.name
    destination = record.destination
    startDate = record.startDate
    endDate = record.endDate
    latitude = record.latitude
    longitude = record.longitude
    _placeFault = CodableFault(record.placeIdentifier.flatMap(PlaceIdentifier.init(rawValue:)))
  }

  /// Copies every field of `record` except an absent id.
  public func apply(_ record: TripRecord) {
    if let id = record.id { self.id = id }
    name = record.name
    destination = record.destination
    startDate = record.startDate
    endDate = record.endDate
    latitude = record.latitude
    longitude = record.longitude
    placeIdentifier = record.placeIdentifier.flatMap(PlaceIdentifier.init(rawValue:))
  }

  /// The trip's values as a record.
  public var record: TripRecord {
    TripRecord(
      id: id, name: name, destination: destination, startDate: startDate, endDate: endDate,
      latitude: latitude, longitude: longitude, placeIdentifier: placeIdentifier?.rawValue)
  }

  /// The table `trips`. Rows become new trips through an initializer (`loading`), and refresh
  /// registered ones through the `@Observable` backing storage (`storage:`) without
  /// observation bookkeeping; the place identifier is loaded as its stored bytes and decoded
  /// on first access (`fault:`).
  public static let schema = ModelSchema<Trip>(
    "trips",
    .attribute(\.id, "id", .unique, .preserveValueOnDeletion, storage: \._id),
    .attribute(\.name, "name", .preserveValueOnDeletion, storage: \._name),
    .attribute(
      \.destination, "destination", .indexed, .preserveValueOnDeletion, storage: \._destination),
    .attribute(\.startDate, "start_date", .indexed, storage: \._startDate),
    .attribute(\.endDate, "end_date", storage: \._endDate),
    .attribute(\.latitude, "latitude", storage: \._latitude),
    // Indexed with latitude and the default order's columns for bounding-box queries
    // (`TripQuery.bbox`): a range of longitudes (two, split at the antimeridian) is an index
    // search, the latitudes are checked and a page sorted by start date and name is chosen in
    // the index, and only the page's rows are read (a city's thousands of trips cost index
    // entries, not rows).
    .attribute(
      \.longitude, "longitude", .indexed(with: "latitude", "start_date", "name"),
      storage: \._longitude),
    .codable(\.placeIdentifier, "place_id", .sharesEqualValues, fault: \._placeFault),
    .toMany(
      \.bucketList, "bucket_list", link: \.bucketListLink, existing: \.bucketListStorage,
      inverse: \.trip, deleteRule: .cascade, orderBy: \.position, \.id),
    .toOne(
      \.livingAccommodation, "living_accommodation", link: \.livingAccommodationLink,
      existing: \.livingAccommodationStorage, inverse: \.trip, deleteRule: .cascade)
  )
  .loading { row in
    try Trip(
      id: row.next(\.id), name: row.next(\.name), destination: row.next(\.destination),
      startDate: row.next(\.startDate), endDate: row.next(\.endDate),
      latitude: row.next(\.latitude), longitude: row.next(\.longitude),
      placeFault: row.fault(\.placeIdentifier))
  }
  // Inserts bind the backing storage directly (no closure call or key-path read per
  // attribute); the key paths are checked in debug builds only.
  .saving { trip, row in
    try row.bind(\.id, trip._id)
    try row.bind(\.name, trip._name)
    try row.bind(\.destination, trip._destination)
    try row.bind(\.startDate, trip._startDate)
    try row.bind(\.endDate, trip._endDate)
    try row.bind(\.latitude, trip._latitude)
    try row.bind(\.longitude, trip._longitude)
    try row.bind(\.placeIdentifier, fault: trip._placeFault)
  }

  /// The models of a trip store: trips, their bucket-list items and their stays. A container
  /// for trips is made with all three.
  public static let modelTypes: [any PersistentModel.Type] = [
    Trip.self, BucketListItem.self, LivingAccommodation.self,
  ]

  /// Checks the trip's rules (see the type's docs).
  public func validateForSave() throws {
    // The common case, checked without building a record or messages, through the backing
    // storage: the store's own reads are no one's observation (and make no registrar).
    if TripRecord.isValid(
      name: _name, destination: _destination, startDate: _startDate, endDate: _endDate,
      latitude: _latitude, longitude: _longitude),
      _placeFault.value.map({ TripRecord.isPlainText($0.rawValue) }) ?? true
    {
      return
    }
    try record.validate()
  }
}

/// A trip's values, without identity in a store: what files and requests carry.
public struct TripRecord: Hashable, Sendable {
  /// The id, or nil to make a new one.
  public var id: UUID?
  /// What the trip is called.
  public var name: String
  /// Where it goes.
  public var destination: String
  /// When it starts.
  public var startDate: Date
  /// When it ends.
  public var endDate: Date
  /// Degrees north.
  public var latitude: Double
  /// Degrees east.
  public var longitude: Double
  /// The place identifier's raw value.
  public var placeIdentifier: String?
  /// The trip's bucket list and stay, when the record carries them (a JSON or GeoJSON file, a
  /// request); nil when it does not (CSV, a record of the trip alone): importing it then
  /// leaves the trip's plan as it is.
  public var plan: TripPlan? {
    get { planStorage?.plan }
    set { planStorage = newValue.map(PlanStorage.init) }
  }
  /// The plan, in a box of its own: a record without one (what a fetch of a million makes)
  /// is then 8 bytes of it, not the plan's hundred.
  private var planStorage: PlanStorage?

  /// A plan, compared and hashed by value.
  private final class PlanStorage: Hashable, Sendable {
    let plan: TripPlan
    init(_ plan: TripPlan) { self.plan = plan }
    static func == (lhs: PlanStorage, rhs: PlanStorage) -> Bool { lhs.plan == rhs.plan }
    func hash(into hasher: inout Hasher) { hasher.combine(plan) }
  }

  /// Creates a record.
  public init(
    id: UUID? = nil, name: String, destination: String, startDate: Date, endDate: Date,
    latitude: Double, longitude: Double, placeIdentifier: String? = nil
  ) {
    self.id = id
    self.name = name
    self.destination = destination
    self.startDate = startDate
    self.endDate = endDate
    self.latitude = latitude
    self.longitude = longitude
    self.placeIdentifier = placeIdentifier
  }

  /// Parses a decimal number as people write coordinates: `-33.9`, `+151`, `1.5e2`. Nil for
  /// anything else: hexadecimal (`0x10`, which `Double(_:)` would read as 16), `inf`, `nan`,
  /// inner spaces, an empty text, or a value beyond the range of a `Double`. Spaces around it
  /// are ignored.
  public static func parseNumber(_ text: String) -> Double? {
    var text = text
    return text.withUTF8 { all -> Double? in
      // Trimmed in place: every bbox of `trips serve` passes four numbers through here.
      var (start, end) = (0, all.count)
      while start < end, all[start] == 0x20 { start += 1 }
      while end > start, all[end - 1] == 0x20 { end -= 1 }
      let bytes = UnsafeBufferPointer(rebasing: all[start..<end])
      var index = 0
      func digits() -> Int {
        let start = index
        while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
        return index - start
      }
      if index < bytes.count, bytes[index] == 0x2B || bytes[index] == 0x2D { index += 1 }
      var mantissa = digits()
      if index < bytes.count, bytes[index] == 0x2E {
        index += 1
        mantissa += digits()
      }
      guard mantissa > 0 else { return nil }
      if index < bytes.count, bytes[index] == 0x65 || bytes[index] == 0x45 {
        index += 1
        if index < bytes.count, bytes[index] == 0x2B || bytes[index] == 0x2D { index += 1 }
        guard digits() > 0 else { return nil }
      }
      guard index == bytes.count, let value = Double(String(decoding: bytes, as: UTF8.self)),
        value.isFinite
      else { return nil }
      return value
    }
  }

  /// The longest a name, a destination or a place identifier may be, in Unicode scalars.
  /// Longer text is refused on every write path (CLI, files, sync, library saves), so that one
  /// value cannot blow up a listing.
  public static let maximumTextLength = 256

  /// Whether values keep every rule; the same rules as ``violations``, without messages.
  static func isValid(
    name: String, destination: String, startDate: Date, endDate: Date, latitude: Double,
    longitude: Double
  ) -> Bool {
    !isBlank(name) && !isBlank(destination) && isPlainText(name) && isPlainText(destination)
      && latitude.isFinite && (-90...90).contains(latitude)
      && longitude.isFinite && (-180...180).contains(longitude) && endDate >= startDate
  }

  /// Whether the text is at most ``maximumTextLength`` scalars long and has no control
  /// character (C0 U+0000–U+001F, DEL U+007F, C1 U+0080–U+009F). O(length), bytes first.
  static func isPlainText(_ text: String) -> Bool {
    let utf8 = text.utf8
    if utf8.count <= maximumTextLength {
      // Short enough in bytes, so in scalars too; only ASCII controls can hide here, and
      // C1 controls start with 0xC2 0x80…0x9F. Over the string's own bytes where it has them
      // (native strings): iterating the view costs about 25 instructions a byte, a buffer 4.
      return utf8.withContiguousStorageIfAvailable(hasNoControlBytes)
        ?? hasNoControlBytes(utf8)
    }
    return tooLong(text) == nil && !text.unicodeScalars.contains(where: isControl)
  }

  /// Whether UTF-8 `bytes` have no control character (C0, DEL, or C1 as 0xC2 0x80…0x9F).
  static func hasNoControlBytes(_ bytes: some Sequence<UInt8>) -> Bool {
    var previous: UInt8 = 0
    for byte in bytes {
      if byte < 0x20 || byte == 0x7F || (previous == 0xC2 && (0x80...0x9F).contains(byte)) {
        return false
      }
      previous = byte
    }
    return true
  }

  /// The text's length in scalars when it is over `maximum`, else nil.
  static func tooLong(_ text: String, maximum: Int = maximumTextLength) -> Int? {
    guard text.utf8.count > maximum else { return nil }
    let count = text.unicodeScalars.count
    return count > maximum ? count : nil
  }

  static func isControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
  }

  /// The problems of one text field: too long (over `maximum` scalars), control characters.
  static func textViolations(
    _ text: String, field: String, label: String, maximum: Int = maximumTextLength
  ) -> [(String, String)] {
    var found: [(String, String)] = []
    if let count = tooLong(text, maximum: maximum) {
      found.append((field, "\(label) is \(count) characters long; at most \(maximum) are allowed"))
    }
    if let control = text.unicodeScalars.first(where: isControl) {
      let code = String(control.value, radix: 16, uppercase: true)
      found.append(
        (
          field,
          "\(label) contains the control character U+\(String(repeating: "0", count: max(0, 4 - code.count)))\(code); line breaks, tabs and escape sequences are not allowed"
        ))
    }
    return found
  }

  /// Whether the text is empty or only white space; scans bytes first, characters only when
  /// the text starts with something that is not plainly ASCII.
  static func isBlank(_ text: String) -> Bool {
    for byte in text.utf8 {
      if byte >= 0x80 { break }
      if byte > 0x20 && byte != 0x7F { return false }
    }
    return text.allSatisfy(\.isWhitespace)
  }

  /// Every rule the record breaks, as (field, reason); empty when valid.
  public var violations: [(field: String, reason: String)] {
    var found: [(String, String)] = []
    if Self.isBlank(name) { found.append(("name", "name must not be empty")) }
    if Self.isBlank(destination) {
      found.append(("destination", "destination must not be empty"))
    }
    found += Self.textViolations(name, field: "name", label: "name")
    found += Self.textViolations(destination, field: "destination", label: "destination")
    if let placeIdentifier {
      found += Self.textViolations(placeIdentifier, field: "placeIdentifier", label: "place id")
    }
    found += Self.coordinateViolations(latitude: latitude, longitude: longitude)
    if endDate < startDate {
      found.append(
        (
          "endDate",
          "end date \(TripDates.format(endDate)) is before start date \(TripDates.format(startDate))"
        ))
    }
    if let plan {
      for (index, item) in plan.bucketList.enumerated() {
        found += item.violations.map {
          ("bucketList", "bucket-list item \(index + 1): \($0.reason)")
        }
      }
      if let stay = plan.livingAccommodation {
        found += stay.violations.map { ("livingAccommodation", "stay: \($0.reason)") }
      }
    }
    return found
  }

  /// Throws ``TripPlannerError/Code/invalidTrip`` naming the first field at fault.
  public func validate() throws { try Self.throwIfAny(violations) }

  /// The problems of a position: a latitude and a longitude that are not finite numbers in
  /// [-90, 90] and [-180, 180] (a trip's and a stay's rule).
  static func coordinateViolations(latitude: Double, longitude: Double) -> [(String, String)] {
    var found: [(String, String)] = []
    if !latitude.isFinite || !(-90...90).contains(latitude) {
      found.append(("latitude", "latitude \(latitude) is not a number between -90 and 90"))
    }
    if !longitude.isFinite || !(-180...180).contains(longitude) {
      found.append(("longitude", "longitude \(longitude) is not a number between -180 and 180"))
    }
    return found
  }

  /// Throws ``TripPlannerError/Code/invalidTrip`` for `violations`, every reason in the
  /// message and the first's field named; nothing for none.
  static func throwIfAny(_ violations: [(field: String, reason: String)]) throws {
    guard let first = violations.first else { return }
    throw TripPlannerError(
      code: .invalidTrip, message: violations.map(\.reason).joined(separator: "; "),
      field: first.field)
  }
}

extension ModelContext {
  /// `trip`'s values as a record, its place identifier decoded: unlike ``Trip/record``, which
  /// reads a place identifier whose stored bytes cannot be decoded as nil, this throws,
  /// naming the trip, so that nothing is exported or sent without it.
  public func record(of trip: Trip) throws -> TripRecord {
    try resolveFaults(CollectionOfOne(trip))
    return trip.record
  }
}

/// A trip's bucket list and stay, as files and requests carry them with the trip.
public struct TripPlan: Hashable, Sendable {
  /// The bucket list, in order (each item's `position` is its place here when imported).
  public var bucketList: [BucketListItemRecord]
  /// The stay, or nil for none.
  public var livingAccommodation: LivingAccommodationRecord?

  /// Creates a plan.
  public init(
    bucketList: [BucketListItemRecord] = [], livingAccommodation: LivingAccommodationRecord? = nil
  ) {
    self.bucketList = bucketList
    self.livingAccommodation = livingAccommodation
  }
}

extension Trip {
  /// The trip's bucket list and stay as a plan (reading them: a query each unless loaded).
  public var plan: TripPlan {
    TripPlan(
      bucketList: bucketList.map(\.record), livingAccommodation: livingAccommodation?.record)
  }
}

extension TripRecord: ModelValue {
  /// A trip's record read straight from its row by a value fetch
  /// (`ModelContext.fetch(_:as:)`): no ``Trip`` is made. The place identifier is decoded
  /// (once per distinct stored value in a fetch); stored bytes that cannot be decoded are an
  /// error naming the trip, as `ModelContext.record(of:)` makes them. ``plan`` is nil.
  public init(row: inout ModelRow<Trip>) throws {
    try self.init(
      id: row.next(\.id), name: row.next(\.name), destination: row.next(\.destination),
      startDate: row.next(\.startDate), endDate: row.next(\.endDate),
      latitude: row.next(\.latitude), longitude: row.next(\.longitude),
      placeIdentifier: row.decoded(\.placeIdentifier)?.rawValue)
  }
}
