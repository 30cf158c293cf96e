import Foundation
import Persistence

/// A planned trip: where, when, and the place it refers to, with its bucket list and stay;
/// declared with `@Model` as SwiftData's SampleTrips declares its trip.
///
/// Validation (``TripRecord/validate()``) runs on every save, whichever path the trip came in by: a name and
/// a destination that are not blank, at most ``TripRecord/maximumTextLength`` Unicode scalars
/// long and free of control characters (C0, DEL, C1: no line breaks, tabs or escape sequences;
/// the place identifier too), a finite latitude in [-90, 90] and longitude in [-180, 180], and
/// an end date not before the start date.
///
/// Observable as an `@Observable` class is, its registrar made when the trip is first read or
/// changed through its properties (`ModelObservationRegistrar`): a fetch makes trips that
/// nobody may read (a million of them for a full fetch, or a page of which one is shown), and
/// the store reads and writes them through their backing storage. The table `trips` keeps the
/// columns of the stores written before `@Model` (`start_date`, `end_date`, `place_id`).
@Model(table: "trips")
public final class Trip {
  // Longitude indexed with latitude and the default order's columns for bounding-box queries
  // (`TripQuery.bbox`): a range of longitudes (two, split at the antimeridian) is an index
  // search, the latitudes are checked and a page sorted by start date and name is chosen in
  // the index, and only the page's rows are read (a city's thousands of trips cost index
  // entries, not rows).
  #Index<Trip>([\.longitude, \.latitude, \.startDate, \.name])

  /// The trip's identity, unique in a store (inserting a trip with an existing id updates it).
  @Attribute(.unique, .preserveValueOnDeletion) public var id: UUID
  /// What the trip is called.
  @Attribute(.preserveValueOnDeletion) public var name: String
  /// Where it goes; trips are grouped by it. Stored NFC-normalised.
  @Attribute(.indexed, .preserveValueOnDeletion) public var destination: String
  /// When it starts.
  @Attribute(.indexed, originalName: "start_date") public var startDate: Date
  /// When it ends; not before ``startDate``.
  @Attribute(originalName: "end_date") public var endDate: Date
  /// Degrees north of the destination.
  public var latitude: Double
  /// Degrees east of the destination.
  public var longitude: Double
  /// The destination in an outside gazetteer, stored opaquely.
  ///
  /// A fetched trip keeps the stored bytes and decodes them when this is first read (trips that share a place share one
  /// identifier); stored bytes that cannot be decoded read as nil, and `trips check` reports
  /// them.
  // No initial value: each initializer sets it, so that a trip made from a row initializes it
  // rather than assigning over a default.
  @Attribute(.codable, .sharesEqualValues, originalName: "place_id")
  public var placeIdentifier: PlaceIdentifier?

  /// Things to do there, in ``BucketListItem/position`` order (ties by id); deleted with the
  /// trip. Read from the store on first access (one query), or with the trips that a fetch
  /// prefetches it for.
  @Relationship(
    deleteRule: .cascade, inverse: \BucketListItem.trip, orderBy: \BucketListItem.position,
    \BucketListItem.id)
  public var bucketList: [BucketListItem] = []

  /// Where one stays, if decided; deleted with the trip.
  @Relationship(deleteRule: .cascade, inverse: \LivingAccommodation.trip)
  public var livingAccommodation: LivingAccommodation?

  /// An empty trip with a new random id.
  public init() {
    id = UUID()
    name = ""
    destination = ""
    startDate = Date(timeIntervalSinceReferenceDate: 0)
    endDate = Date(timeIntervalSinceReferenceDate: 0)
    latitude = 0
    longitude = 0
    placeIdentifier = nil
  }

  /// Creates a trip from a record (a new random id when the record has none).
  public convenience init(_ record: TripRecord) {
    self.init()
    record.apply(to: self)
  }

  /// Copies every field of `record` except an absent id.
  public func apply(_ record: TripRecord) { record.apply(to: self) }

  /// The trip's values as a record.
  public var record: TripRecord { TripRecord(given: FieldValues(self)) }

  /// The models of a trip store: trips and the parts of their plans (``planParts``). A
  /// container for trips is made with all of them.
  public static let modelTypes: [any PersistentModel.Type] = [Trip.self] + planParts

  /// Checks the trip's rules (see the type's docs).
  public func validateForSave() throws {
    // The common case, checked without building a record or messages, through the backing
    // storage: the store's own reads are no one's observation (and make no registrar).
    if TripRecord.isValid(
      name: _name, destination: _destination, startDate: _startDate, endDate: _endDate,
      latitude: _latitude, longitude: _longitude),
      _placeIdentifier.value.map({ TripRecord.isPlainText($0.rawValue) }) ?? true,
      Self.otherTextFields.isEmpty
    {
      return
    }
    try record.validate()
  }

  /// Text fields that the fast path of ``validateForSave()`` does not read: declared beside
  /// the ones it knows, they are checked with the record's rules.
  private static let otherTextFields = schema.fields.filter {
    formatType(of: $0)?.isText == true
      && ![\Trip.name, \Trip.destination, \Trip.placeIdentifier].contains($0.keyPath)
  }

  /// Whether the trip has made its observation registrar yet.
  var hasRegistrar: Bool { _$observationRegistrar.isMade }
  /// The bucket list's link, if made yet.
  var bucketListStorage: ToMany<BucketListItem>? { _bucketList }
  /// The stay's link, if made yet.
  var livingAccommodationStorage: ToOne<LivingAccommodation>? { _livingAccommodation }
}

/// A trip's values, without identity in a store: what files and requests carry. Its fields
/// are ``Trip``'s declared fields (``FieldValues``), every one given but the id; read and set
/// each through the trip's key path (`record.name`, `record.startDate = …`), so that a field
/// declared on ``Trip`` is carried with no other change.
///
/// Cost: ``FieldValues``'s; a field read is a lookup of its key path and a match of its case.
@dynamicMemberLookup
public struct TripRecord: Hashable, Sendable {
  /// The trip's fields, each given but the id.
  public private(set) var values: FieldValues<Trip>
  /// The id, or nil to make a new one.
  public var id: UUID? {
    get { values.identity }
    set { values.id = newValue }
  }
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

  /// The record of `values` (a new trip's values, `FieldValues(trip)`, or values read whole).
  ///
  /// - Throws: ``TripPlannerError/Code/invalidInput`` naming the fields not given, when any
  ///   but the id is not (a record holds every field of a trip).
  public init(_ values: FieldValues<Trip>) throws {
    let missing = values.fieldsNotGiven(but: FieldValues<Trip>.table.identity)
    guard missing.isEmpty else {
      throw TripPlannerError(
        code: .invalidInput,
        message:
          "A trip record needs every field of a trip but its id; not given: \(missing.joined(separator: ", ")).",
        field: missing[0])
    }
    self.values = values
  }

  /// The record of `values`, which the caller made with every field but the id given (a
  /// trip's, a row's, or an input read whole).
  init(given values: FieldValues<Trip>) {
    // Checked in debug builds: a page of the box index makes a record per trip it serves.
    assert(
      values.fieldsNotGiven(but: FieldValues<Trip>.table.identity).isEmpty,
      "a trip record needs every field")
    self.values = values
  }

  /// A record of a new trip's values with these (the fields not named keep a new trip's).
  public init(
    id: UUID? = nil, name: String, destination: String, startDate: Date, endDate: Date,
    latitude: Double, longitude: Double, placeIdentifier: String? = nil
  ) {
    values = FieldValues()
    values.id = id
    values.name = name
    values.destination = destination
    values.startDate = startDate
    values.endDate = endDate
    values.latitude = latitude
    values.longitude = longitude
    values.placeIdentifier = .some(placeIdentifier.flatMap(PlaceIdentifier.init(rawValue:)))
  }

  /// The field `keyPath` names.
  public subscript<Value: FormatValue>(dynamicMember keyPath: KeyPath<Trip, Value>) -> Value {
    get {
      guard let value = values[dynamicMember: keyPath] else {
        preconditionFailure("\(keyPath) is not a field of a trip")
      }
      return value
    }
    set { values[dynamicMember: keyPath] = newValue }
  }

  /// Sets the field named `name` to the value `json` holds (as the field's type reads JSON;
  /// `null` for none of an optional field).
  ///
  /// - Throws: ``TripPlannerError/Code/invalidInput`` naming the field when there is no such
  ///   field or `json` holds no value of its type; the record is unchanged.
  public mutating func set(_ name: String, _ json: JSONValue) throws {
    try values.set(name, json)
  }

  /// Sets every field of `trip` but an absent id.
  func apply(to trip: Trip) { values.apply(to: trip) }

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

  /// Every rule the record breaks, as (field, reason), its plan's too; empty when valid.
  public var violations: [(field: String, reason: String)] {
    var found = values.violations
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

extension Trip: FieldRules {
  /// A name and a destination that are not blank.
  public static var nonBlankFields: [PartialKeyPath<Trip> & Sendable] {
    [\Trip.name, \Trip.destination]
  }

  /// A latitude in [-90, 90] and a longitude in [-180, 180], and an end date not before the
  /// start date.
  public static func violations(of values: FieldValues<Trip>) -> [(field: String, reason: String)] {
    var found: [(String, String)] = []
    if let latitude = values.latitude, let longitude = values.longitude {
      found += TripRecord.coordinateViolations(latitude: latitude, longitude: longitude)
    }
    if let startDate = values.startDate, let endDate = values.endDate, endDate < startDate {
      found.append(
        (
          "endDate",
          "end date \(TripDates.format(endDate)) is before start date \(TripDates.format(startDate))"
        ))
    }
    return found
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
  public var bucketList: [FieldValues<BucketListItem>]
  /// The stay, or nil for none.
  public var livingAccommodation: FieldValues<LivingAccommodation>?

  /// Creates a plan.
  public init(
    bucketList: [FieldValues<BucketListItem>] = [],
    livingAccommodation: FieldValues<LivingAccommodation>? = nil
  ) {
    self.bucketList = bucketList
    self.livingAccommodation = livingAccommodation
  }
}

extension Trip {
  /// The trip's bucket list and stay as a plan (reading them: a query each unless loaded).
  public var plan: TripPlan {
    TripPlan(
      bucketList: bucketList.map(FieldValues.init),
      livingAccommodation: livingAccommodation.map(FieldValues.init))
  }
}

extension TripRecord: ModelValue {
  /// A trip's record read straight from its row by a value fetch
  /// (`ModelContext.fetch(_:as:)`): no ``Trip`` is made. The place identifier is decoded
  /// (once per distinct stored value in a fetch); stored bytes that cannot be decoded are an
  /// error naming the trip, as `ModelContext.record(of:)` makes them. ``plan`` is nil.
  public init(row: inout ModelRow<Trip>) throws {
    self.init(given: try FieldValues(row: &row))
  }
}
