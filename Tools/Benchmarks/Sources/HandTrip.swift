import Foundation
import Observation
import Persistence
import Synchronization
import TripPlanner

/// The trip as it was written by hand before `Trip` became a `@Model` class (dated
/// 2026-12-05, e1cc3eb): `@ObservationTracked` backing storage, a registrar made on first use,
/// a positional row loader and binder, links made on first use for the bucket list and the
/// stay. The `macro` phase fetches `Trip` beside it, so that what the macro generates is
/// measured against what it replaced, in the same run.
final class HandTrip: PersistentModel, LinksOnFirstUse, Observable {
  /// The trip's identity, unique in a store (inserting a trip with an existing id updates it).
  @ObservationTracked var id: UUID
  /// What the trip is called.
  @ObservationTracked var name: String
  /// Where it goes; trips are grouped by it. Stored NFC-normalised.
  @ObservationTracked var destination: String
  /// When it starts.
  @ObservationTracked var startDate: Date
  /// When it ends; not before ``startDate``.
  @ObservationTracked var endDate: Date
  /// Degrees north of the destination.
  @ObservationTracked var latitude: Double
  /// Degrees east of the destination.
  @ObservationTracked var longitude: Double
  /// The destination in an outside gazetteer, stored opaquely. A fetched trip keeps the stored
  /// bytes and decodes them when this is first read (trips that share a place share one
  /// identifier); stored bytes that cannot be decoded read as nil, and `trips check` reports
  /// them.
  var placeIdentifier: PlaceIdentifier? {
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
  @exclusivity(unchecked) private var origin = LinkOrigin()
  var linkOrigin: LinkOrigin { origin }
  /// The store's way to set `origin`, as `@Model` writes it: a closure over the private
  /// property, a direct access.
  static let linkOriginSlot = LinkOriginSlot { model, body in
    body(&unsafeDowncast(model, to: HandTrip.self).origin)
  }

  @exclusivity(unchecked) var bucketListStorage: ToMany<HandBucketItem>?
  var bucketListLink: ToMany<HandBucketItem> { link(&bucketListStorage) }
  /// Things to do there, in ``HandBucketItem/position`` order (ties by id); deleted with the
  /// trip. Read from the store on first access (one query), or with the trips that a fetch
  /// prefetches it for.
  var bucketList: [HandBucketItem] {
    get { bucketListLink.value(of: self) }
    set { bucketListLink.set(newValue, of: self) }
  }

  @exclusivity(unchecked) var livingAccommodationStorage: ToOne<HandStay>?
  var livingAccommodationLink: ToOne<HandStay> { link(&livingAccommodationStorage) }
  /// Where one stays, if decided; deleted with the trip.
  var livingAccommodation: HandStay? {
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
  nonisolated func access<Member>(keyPath: KeyPath<HandTrip, Member>) {
    box.registrar.access(self, keyPath: keyPath)
  }

  /// Runs `mutation`, telling observers of `keyPath`; without a registrar there are none.
  nonisolated func withMutation<Member, Result>(
    keyPath: KeyPath<HandTrip, Member>, _ mutation: () throws -> Result
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
  convenience init() {
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
  static func makeForLoading() -> HandTrip { HandTrip(placeholder: HandTrip.placeholderID) }

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
  init(_ record: TripRecord) {
    // Assigned here, not through `apply`, so that no observation bookkeeping runs for a trip
    // nobody can be observing yet.
    id = record.id ?? UUID()
    name = record.name
    destination = record.destination
    startDate = record.startDate
    endDate = record.endDate
    latitude = record.latitude
    longitude = record.longitude
    _placeFault = CodableFault(record.placeIdentifier)
  }

  /// The table `trips`. Rows become new trips through an initializer (`loading`), and refresh
  /// registered ones through the `@Observable` backing storage (`storage:`) without
  /// observation bookkeeping; the place identifier is loaded as its stored bytes and decoded
  /// on first access (`fault:`).
  static let schema = ModelSchema<HandTrip>(
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
      inverse: \.trip, deleteRule: .cascade, orderBy: \.position),
    .toOne(
      \.livingAccommodation, "living_accommodation", link: \.livingAccommodationLink,
      existing: \.livingAccommodationStorage, inverse: \.trip, deleteRule: .cascade)
  )
  .loading { row in
    try HandTrip(
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
}

/// A bucket-list item of a `HandTrip`: its key in `trip`.
@Observable final class HandBucketItem: PersistentModel {
  var title = ""
  var position = 0
  @ObservationIgnored let tripLink = ToOne<HandTrip>()
  var trip: HandTrip? {
    get { tripLink.value(of: self) }
    set { tripLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<HandBucketItem>(
    "bucket_list_items",
    .attribute(\.title, "title"),
    .attribute(\.position, "position"),
    .toOne(\.trip, "trip", link: \.tripLink, inverse: \.bucketList))
}

/// The stay of a `HandTrip`: its key in `trip`, unique.
@Observable final class HandStay: PersistentModel {
  var name = ""
  @ObservationIgnored let tripLink = ToOne<HandTrip>()
  var trip: HandTrip? {
    get { tripLink.value(of: self) }
    set { tripLink.set(newValue, of: self) }
  }
  init() {}
  static let schema = ModelSchema<HandStay>(
    "living_accommodations",
    .attribute(\.name, "name"),
    .toOne(\.trip, "trip", link: \.tripLink, inverse: \.livingAccommodation))
}

/// The checksum of `checksum(_:)` for trips, over hand-written trips.
func checksum(_ trips: some Sequence<HandTrip>) -> UInt64 {
  var sum: UInt64 = 0
  for (index, trip) in trips.enumerated() {
    var hash: UInt64 = 1_469_598_103_934_665_603
    withUnsafeBytes(of: trip.id.uuid) { bytes in
      for byte in bytes { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
    }
    sum = sum &+ hash &* UInt64(index + 1)
  }
  return sum
}
