import Foundation
import Observation
import Synchronization

/// Makes a class a ``PersistentModel`` whose stored variables are its attributes, as
/// SwiftData's `@Model` does.
///
/// ```swift
/// @Model final class Note {
///   var title: String
///   var body = ""
///   var created = Date()
///   @Transient var isSelected = false
///
///   init(title: String) { self.title = title }
/// }
/// ```
///
/// The model is stored in a table named as the class, a column per persisted property named
/// as the property, each of a type stores keep natively (``PersistableValue``). It writes what
/// a hand-written model says (see ``PersistentModel`` and ``ModelSchema``): the schema; a row
/// loader and binder that go through each property's backing storage (no key-path call, no
/// observation bookkeeping, checked against the schema when a container opens); `init()`,
/// unless the class declares one, with each property's initial value or its type's empty
/// value (``ModelDefaults``): what existing rows get when a non-optional column is added to a
/// table; `makeForLoading()`, so that a fetched model is made without running your
/// initializers; and
/// observation as `@Observable` gives it, with the registrar made when a property is first
/// read or changed (``ModelObservationRegistrar``). Your initializers are your own. The class
/// is `Hashable` by identity, as SwiftData's models are, so that a predicate can compare a
/// relationship with `nil`, and `Identifiable`: by its own `id` when it declares one (a
/// `UUID`, say), else by the instance (`ObjectIdentifier`). It has SwiftData's
/// `modelContext` and `persistentModelID` (``LinksOnFirstUse/modelContext`` and
/// ``LinksOnFirstUse/persistentModelID``), read from the ``LinkOrigin`` the store sets when it
/// loads, inserts, saves, deletes or resets the model.
///
/// A class that is not final gets a `required init()` (and one it declares must say
/// `required`). A subclass of it declared with `@Model` (`@Model class BusinessTrip: Trip`) is
/// a model of its own, kept in its root model's table (see
/// ``ModelSchema/init(subclassOf:entity:_:)``): it adds its own attributes and
/// relationships, inherits the rest, and a fetch of the root makes each row as its own class
/// (see <doc:AdoptingInheritance>).
///
/// Errors at compile time: a struct, an enum, a generic class, a `let`
/// that is not `@Transient`, a persisted property with `willSet` or `didSet`, a name starting
/// with `_` or needing backticks, `schema`, `linkOrigin`, `linkOriginSlot` or
/// `loadsPropertiesOnFirstUse`, a `@Transient`
/// property without an initial value, two properties in one `var`, an initializer callable
/// with no arguments beside the `init()` the macro writes.
///
/// `@Model(table: "trips")` names the table (letters, digits and underscores): what keeps an
/// existing store's table when its model is renamed or was declared by hand before.
@attached(
  member, conformances: PersistentModel,
  names: named(_$observationRegistrar), named(schema), named(_$linkOrigin), named(linkOrigin),
  named(linkOriginSlot), named(loadsPropertiesOnFirstUse), named(init), named(makeForLoading),
  named(id), named(_$subclassSchema), arbitrary
)
@attached(memberAttribute)
@attached(extension, conformances: PersistentModel, LinksOnFirstUse, Hashable, Identifiable)
public macro Model(table: String? = nil) =
  #externalMacro(module: "PersistenceMacros", type: "ModelMacro")

/// Marks a stored property of a `@Model` class that the store does not persist: no column, not
/// loaded or saved; it keeps its initial value in every model a fetch makes.
@attached(peer)
public macro Transient() = #externalMacro(module: "PersistenceMacros", type: "MarkerMacro")

/// What `@Model` puts on each persisted property: accessors over backing storage `_name`,
/// observed as `@Observable`'s are, or over a relationship's link. Not written by hand.
@attached(accessor, names: named(init), named(get), named(set))
@attached(peer, names: prefixed(_), prefixed(_$check_), prefixed(_$link_))
public macro _PersistedProperty() =
  #externalMacro(module: "PersistenceMacros", type: "PersistedPropertyMacro")

/// The observation registrar of a model `@Model` declares: an `ObservationRegistrar` made when
/// one of the model's properties is first read or changed in place through its accessors, not
/// when the model is made. A fetch makes models nobody may read (a million for a full fetch);
/// the store reads and writes them through their backing storage, which needs no registrar.
/// A change to a model that has none tells no one, as no one can be observing it: observing
/// begins with a read (`withObservationTracking`), which makes it.
///
/// Cost: one atomic load per read or write once made; the first read makes it (two
/// allocations), published with a compare-and-exchange so that threads reading a fresh model
/// at once agree on one registrar.
public struct ModelObservationRegistrar: ~Copyable, Sendable {
  /// The registrar, in an object of its own.
  private final class Box: Sendable {
    let registrar = ObservationRegistrar()
  }

  private let box = Atomic<Unmanaged<Box>?>(nil)

  /// No registrar yet.
  public init() {}

  deinit { box.load(ordering: .acquiring)?.release() }

  /// The registrar's box, made now if it was not yet.
  private var made: Box {
    if let made = box.load(ordering: .acquiring) { return made.takeUnretainedValue() }
    let new = Unmanaged.passRetained(Box())
    let (stored, current) = box.compareExchange(
      expected: nil, desired: new, ordering: .acquiringAndReleasing)
    if stored { return new.takeUnretainedValue() }
    new.release()
    return current.unsafelyUnwrapped.takeUnretainedValue()
  }

  /// Whether the registrar has been made.
  public var isMade: Bool { box.load(ordering: .acquiring) != nil }

  /// Records a read of `keyPath` for an observation being tracked.
  public func access<Subject: Observable, Member>(
    _ subject: Subject, keyPath: KeyPath<Subject, Member>
  ) {
    made.registrar.access(subject, keyPath: keyPath)
  }

  /// Whether assigning `newValue` over `oldValue` is a change observers hear of: always, for a
  /// type that is not `Equatable` (as `@Observable`'s).
  public func shouldNotify<Member>(_ oldValue: Member, _ newValue: Member) -> Bool { true }

  /// Whether assigning `newValue` over `oldValue` is a change observers hear of: unless the
  /// two are equal (as `@Observable`'s).
  public func shouldNotify<Member: Equatable>(_ oldValue: Member, _ newValue: Member) -> Bool {
    oldValue != newValue
  }

  /// Runs `mutation`, telling observers of `keyPath`; without a registrar there are none.
  public func withMutation<Subject: Observable, Member, Result>(
    of subject: Subject, keyPath: KeyPath<Subject, Member>, _ mutation: () throws -> Result
  ) rethrows -> Result {
    guard let existing = box.load(ordering: .acquiring) else { return try mutation() }
    return try existing.takeUnretainedValue().registrar.withMutation(
      of: subject, keyPath: keyPath, mutation)
  }
}

/// The empty value of each type stores keep natively: what `@Model`'s `init()` gives a
/// persisted property declared without an initial value.
public enum ModelDefaults {
  /// `nil` for an optional, else the value read from an empty column of the type's storage:
  /// `0`, `false`, `""`, empty `Data`, the reference date, the all-zero `UUID`.
  ///
  /// A ``PersistableValue`` of your own that reads none of those traps here, naming the type,
  /// when a container for the model opens: give the property an initial value.
  public static func value<Value: PersistableValue>() -> Value {
    let candidates: [SQLValue]
    if Value.isOptional {
      candidates = [.null]
    } else {
      switch Value.storageType {
      case .integer: candidates = [.integer(0)]
      case .real: candidates = [.real(0), .integer(0)]
      case .text: candidates = [.text("")]
      case .blob: candidates = [.blob(Data()), .blob(Data(count: 16))]
      }
    }
    for candidate in candidates {
      if let value = try? Value(sqlValue: candidate) { return value }
    }
    fatalError(
      "\(Value.self) has no empty value to give a @Model property declared without an initial value: give the property one"
    )
  }
}

/// The options of a `@Model` class's stored property, as SwiftData spells them:
/// `@Attribute(.unique)`, `@Attribute(.preserveValueOnDeletion)`, `@Attribute(.codable)`,
/// `@Attribute(originalName: "start_date")`, and ours, `.indexed`, `.indexed(with:)` and
/// `.sharesEqualValues`. `originalName` names the column the property is stored in (the
/// property's name by default). An enum with raw values is a column of its raw value, and any
/// other `Codable` type JSON, without an option. `.codable` stores any `Codable` value as JSON,
/// opaque to predicates and sorts (an enum's too); an optional one is kept as its stored bytes and decoded on first read
/// (a ``CodableFault``), a non-optional one is decoded with its row and needs an initial value.
///
/// SwiftData's `.ephemeral` makes the property one the store does not keep (as `@Transient`);
/// `.spotlight`, `.allowsCloudEncryption` and `hashModifier:` are accepted and have no effect
/// (there is no Spotlight, CloudKit or schema hash here: versions are ``VersionedSchema``'s).
@attached(peer)
public macro Attribute(
  _ options: AttributeOption..., originalName: String? = nil, hashModifier: String? = nil
) = #externalMacro(module: "PersistenceMacros", type: "MarkerMacro")

/// Makes each list of a `@Model` class's properties unique (`#Unique<Note>([\.slug])`,
/// `#Unique<Trip>([\.name, \.startDate, \.endDate])`): inserting a model whose value, or
/// combination of values, is stored already updates that row, SwiftData's upsert; a `NULL` in
/// a combination never matches. Each list is one unique index, over its columns in order
/// (``AttributeOption/unique`` or ``AttributeOption/unique(with:)`` on its first property); a
/// property may begin one list.
@freestanding(declaration)
public macro Unique<Model>(_ constraints: [PartialKeyPath<Model>]...) =
  #externalMacro(module: "PersistenceMacros", type: "SchemaDeclarationMacro")

/// Indexes each list of a `@Model` class's properties (`#Index<Trip>([\.start], [\.longitude,
/// \.latitude])`): a list of one makes an index on its column, a list of several one index on
/// their columns in that order (``AttributeOption/indexed(with:)``). Lists that begin with one
/// property are one index, the longest (`[\.name]` and `[\.name, \.startDate]`: the second
/// answers what the first would); two that differ after it are a compile-time error.
@freestanding(declaration)
public macro Index<Model>(_ indexes: [PartialKeyPath<Model>]...) =
  #externalMacro(module: "PersistenceMacros", type: "SchemaDeclarationMacro")

/// Declares a relationship of a `@Model` class, as SwiftData does: a to-many (`[Room]`, which
/// starts empty: `= []`) or a to-one (`Hotel?`, which starts as nil). One side names the other
/// as its `inverse` (naming it on both makes a cycle the compiler refuses); the other side is
/// marked `@Relationship` without arguments, or, for a to-one, written as a plain optional
/// (`var trip: Trip?`, as SwiftData's SampleTrips writes it: the compiler finds `Trip` to be a
/// model, see `_OptionalProperty`). `deleteRule` is what deleting the model does
/// to its related models (``DeleteRule``, `.nullify` by default), declared on the side that
/// does not store the key.
///
/// Which side stores the key: a to-one that names no inverse (the "many" side of a
/// one-to-many, or the dependent side of a one-to-one). A to-one that names its inverse is the
/// other side of a one-to-one, its link made on first use (``LinksOnFirstUse``), as a
/// to-many's is; in a one-to-many, name the inverse on the to-many, which a to-one naming a
/// to-many is refused for, saying so.
///
/// ```swift
/// @Relationship(deleteRule: .cascade, inverse: \LivingAccommodation.trip)
/// var livingAccommodation: LivingAccommodation?   // in Trip
/// @Relationship var trip: Trip?                   // in LivingAccommodation: stores the key
/// ```
///
/// `orderBy` (ours; SwiftData's to-manys are unordered) orders a to-many when it is read, by
/// attributes of the related model (`orderBy: \BucketListItem.position, \BucketListItem.id`),
/// each breaking the ties of those before it. Set a relationship once the model's stored
/// properties are set, as any computed property of a class.
///
/// `minimumModelCount` and `maximumModelCount` bound how many models it relates (nil or 0: no
/// bound, SwiftData's defaults); a save refuses a model outside them, as far as the context
/// knows its count (``ModelAttribute/modelCount(minimum:maximum:)``). `originalName:` is
/// accepted on a to-many, which has no column for it to name; on a to-one it is a
/// compile-time error (its key column is named as the property). SwiftData's `hashModifier:`
/// is accepted and has no effect (there is no schema hash here).
@attached(peer)
public macro Relationship(
  deleteRule: DeleteRule = .nullify, minimumModelCount: Int? = 0, maximumModelCount: Int? = 0,
  originalName: String? = nil, inverse: AnyKeyPath? = nil, hashModifier: String? = nil,
  orderBy: AnyKeyPath...
) = #externalMacro(module: "PersistenceMacros", type: "MarkerMacro")

/// Accepts a value of a type the store keeps: what `@Model` checks each attribute's type with.
/// Not called by hand.
@inlinable
public func _persistableAttribute<Value: PersistableValue>(_: Value) {}

/// What `@Model`'s check finds for a type the store does not keep: an error at the property.
@available(
  *, unavailable,
  message:
    "The store keeps String, Int, Int8…Int64, UInt8…UInt32, Double, Float, Bool, Date, UUID, Data, URL and PersistableValue types, enums with their raw values, other Codable types as JSON, and optionals of each: make the type Codable, or a PersistableValue; an array of models is a to-many, marked @Relationship"
)
public func _persistableAttribute<Value>(_: Value) {}

/// Makes an actor a ``ModelActor``: it gets `modelContainer`, `modelExecutor` (a
/// ``DefaultSerialModelExecutor`` holding a context made for the actor) and
/// `init(modelContainer:)`, as SwiftData's `@ModelActor` gives them.
@attached(member, names: named(modelExecutor), named(modelContainer), named(init))
@attached(extension, conformances: ModelActor)
public macro ModelActor() = #externalMacro(module: "PersistenceMacros", type: "ModelActorMacro")

/// Indexes `#Index<Trip>(.binary([\.name]), .binary([\.start, \.end]))`, as SwiftData's
/// index types spell it: each `.binary` list is an index as ``Index(_:)-1ehco``'s lists are.
/// An `.rtree` list (SwiftData's spatial index) is an ordinary index over its columns in that
/// order here: range predicates on its first column use it; there is no R-tree.
@freestanding(declaration)
public macro Index<Model: PersistentModel>(_ indices: Schema.Index<Model>.Types<Model>...) =
  #externalMacro(module: "PersistenceMacros", type: "SchemaDeclarationMacro")

extension Schema {
  /// SwiftData's `Schema.Index`: the spelling of `#Index`'s index types.
  public struct Index<T: PersistentModel>: Sendable {
    /// One index of ``Index(_:)-3y0me``'s typed spelling.
    public enum Types<P: PersistentModel>: @unchecked Sendable {
      /// An index over the key paths' columns, in order.
      case binary([PartialKeyPath<P>])
      /// SwiftData's R-tree; here an ordinary index over the columns, in order.
      case rtree([PartialKeyPath<P>])
    }
  }
}
