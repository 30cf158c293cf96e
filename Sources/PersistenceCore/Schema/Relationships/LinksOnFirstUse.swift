/// Where the relationships of a model whose links are made on first use load from: the
/// context the model was loaded into or inserted in, and its row. One per model, set when its
/// row is loaded (a retain and two stores), in place of a link object per relationship made
/// and attached for every row a fetch loads, read or not (see ``LinksOnFirstUse``).
public struct LinkOrigin {
  /// The context (or an observer's snapshots) the model's links reach; nil for a model in no
  /// context.
  var reference: ContextReference?
  /// The primary key of the row the model was loaded from; nil for a model not loaded from
  /// the store.
  public internal(set) var ownerKey: Int64?
  /// The attributes a fetch with `propertiesToFetch` left to load on first use, and the
  /// other models of that fetch (``PartialLoad``); nil when every attribute is loaded.
  var partial: PartialLoad?

  /// No context, no row: a model made in memory.
  public init() {}

  /// Whether a fetch with `propertiesToFetch` left some of the model's attributes to load on
  /// first use: what `@Model`'s accessors check (one load and one branch) before they call
  /// ``loadProperties(of:_:)``.
  @inlinable public var hasPropertiesToLoad: Bool { _hasPartial }
  @usableFromInline var _hasPartial: Bool { partial != nil }
}

/// A model whose relationships keep their link (``ToMany``, or a ``ToOne`` whose inverse
/// stores the key) in optional storage, made on the first read or write of the relationship:
/// a fetch that touches no relationship makes no link, context reference or observation state
/// per relationship, only the model's one ``LinkOrigin``.
///
/// ```swift
/// final class Trip: PersistentModel, LinksOnFirstUse {
///   private var origin = LinkOrigin()
///   var linkOrigin: LinkOrigin { origin }
///   static let linkOriginSlot = LinkOriginSlot(\Trip.origin)
///   var bucketListStorage: ToMany<BucketListItem>?
///   var bucketListLink: ToMany<BucketListItem> { link(&bucketListStorage) }
///   var bucketList: [BucketListItem] {
///     get { bucketListLink.value(of: self) }
///     set { bucketListLink.set(newValue, of: self) }
///   }
///   // in the schema:
///   // .toMany(\.bucketList, "bucket_list", link: \.bucketListLink,
///   //         existing: \.bucketListStorage, inverse: \.trip, deleteRule: .cascade)
/// }
/// ```
///
/// A to-one that stores the key keeps an eager link (`let tripLink = ToOne<Trip>()`): the key
/// is a column, loaded with every row.
///
/// The origin also gives SwiftData's ``modelContext`` and ``persistentModelID``. `@Model` makes
/// every model one, relationships or not; a hand-written model without relationships may
/// conform for those two. Cost: the origin set for each row loaded (a retain and two stores)
/// and each model inserted, saved or deleted.
public protocol LinksOnFirstUse: PersistentModel {
  /// What the store set when it loaded or attached the model: read-only, kept in private
  /// storage that only the store writes, through ``linkOriginSlot``.
  var linkOrigin: LinkOrigin { get }
  /// How the store writes the model's origin, made where the private storage is visible
  /// (`LinkOriginSlot(\Gallery.origin)`, or `@Model`'s closure); nothing outside the
  /// persistence layer can use it.
  static var linkOriginSlot: LinkOriginSlot { get }
  /// Whether the model's accessors load the attributes a fetch with `propertiesToFetch` left
  /// (they call ``LinkOrigin/loadProperties(of:_:)`` when ``LinkOrigin/hasPropertiesToLoad``):
  /// true for `@Model`'s. False by default: a fetch then loads every attribute, whatever
  /// `propertiesToFetch` says.
  static var loadsPropertiesOnFirstUse: Bool { get }
}

extension LinksOnFirstUse {
  /// False: the model's accessors do not load what a partial fetch left.
  public static var loadsPropertiesOnFirstUse: Bool { false }
}

/// How the store writes a model's ``LinkOrigin``, kept in private storage: made inside the
/// model's declaration, where that storage is visible, and used only by the persistence layer
/// (its members are internal), so that no other code can set a model's context or row.
public struct LinkOriginSlot: Sendable {
  /// Calls its argument with the origin of a model (always of the model that made the slot).
  let modify: @Sendable (AnyObject, (inout LinkOrigin) -> Void) -> Void

  /// A slot over the origin in `keyPath` (a private stored property of `Model`, named inside
  /// its declaration). Each write goes through the key path (a few hundred instructions;
  /// `@Model` writes the closure form, a direct access).
  public init<Model: AnyObject>(_ keyPath: ReferenceWritableKeyPath<Model, LinkOrigin>) {
    nonisolated(unsafe) let keyPath = keyPath
    modify = { model, body in body(&unsafeDowncast(model, to: Model.self)[keyPath: keyPath]) }
  }

  /// A slot that calls `modify` with a model (always of the declaring model's class) and a
  /// closure to run on its origin in place: `{ body(&unsafeDowncast($0, to: Hotel.self).origin) }`.
  public init(_ modify: @escaping @Sendable (AnyObject, (inout LinkOrigin) -> Void) -> Void) {
    self.modify = modify
  }
}

extension LinksOnFirstUse {
  /// The context the model was inserted into or fetched by, while it lives and the model is
  /// in it; nil for a model made in memory and not inserted, an observer's model, or one
  /// deleted and saved or detached by ``ModelContext/reset()``, as SwiftData's. O(1).
  public var modelContext: ModelContext? { linkOrigin.reference?.context }

  /// The identifier of the model's row, as SwiftData's `persistentModelID`: its store's, its
  /// table's and its key, from the model's ``LinkOrigin`` (no lookup), also after its context
  /// is gone or it was deleted. For a model not yet saved, a temporary identifier
  /// (``PersistentIdentifier/isTemporary``) unique among the models alive, which names no row
  /// and changes when the model is saved (the context that holds the model goes on finding it
  /// by the temporary one, ``ModelContext/model(for:as:)``, as SwiftData's). O(1).
  public var persistentModelID: PersistentIdentifier {
    if let key = linkOrigin.ownerKey, let store = linkOrigin.reference?.storeIdentifier {
      return PersistentIdentifier(
        storeIdentifier: store, entityName: Self.schema.name, primaryKey: key)
    }
    return PersistentIdentifier(temporaryFor: self, entityName: Self.schema.name)
  }

  /// The to-many link in `storage`, made now from ``linkOrigin`` if it is not yet. O(1).
  public func link<Element: PersistentModel>(_ storage: inout ToMany<Element>?) -> ToMany<Element> {
    if let made = storage { return made }
    // An observer's snapshot is read from any thread: one link, made under its lock.
    let lock = linkOrigin.reference?.snapshots?.lock
    lock?.lock()
    defer { lock?.unlock() }
    if let made = storage { return made }
    let made = ToMany<Element>()
    made.attach(linkOrigin, inverseFault: false)
    storage = made
    return made
  }

  /// The to-one link in `storage` (of a one-to-one whose inverse stores the key), made now
  /// from ``linkOrigin`` if it is not yet: a model loaded from the store looks its target up
  /// by the inverse's key column on first read. O(1).
  public func link<Target: PersistentModel>(_ storage: inout ToOne<Target>?) -> ToOne<Target> {
    if let made = storage { return made }
    let lock = linkOrigin.reference?.snapshots?.lock
    lock?.lock()
    defer { lock?.unlock() }
    if let made = storage { return made }
    let made = ToOne<Target>()
    made.attach(linkOrigin, inverseFault: linkOrigin.ownerKey != nil)
    storage = made
    return made
  }
}

extension RelationshipObservation {
  /// Takes the context and row of `origin`, as ``attachLoaded(_:ownerKey:inverseFault:)``
  /// does for an eager link. O(1).
  final func attach(_ origin: LinkOrigin, inverseFault: Bool) {
    contextReference = origin.reference
    ownerKey = origin.ownerKey
    if inverseFault { isInverseFault = true }
  }
}

/// How an entity sets the ``LinkOrigin`` of its models, when they are ``LinksOnFirstUse``.
struct LinkOriginAccess: Sendable {
  let set: @Sendable (AnyObject, ContextReference?, Int64?) -> Void
  let reference: @Sendable (AnyObject) -> ContextReference?
  let key: @Sendable (AnyObject) -> Int64?
  /// Sets the model's ``LinkOrigin/partial``.
  let setPartial: @Sendable (AnyObject, PartialLoad?) -> Void
  /// The model's ``LinkOrigin/partial``.
  let partial: @Sendable (AnyObject) -> PartialLoad?
  /// Whether the model's accessors load what a partial fetch left
  /// (``LinksOnFirstUse/loadsPropertiesOnFirstUse``).
  let loadsOnFirstUse: Bool

  /// The access for `Model`, nil when its links are made eagerly.
  static func of<Model: PersistentModel>(_: Model.Type) -> LinkOriginAccess? {
    guard let lazy = Model.self as? any LinksOnFirstUse.Type else { return nil }
    return make(lazy)
  }

  private static func make<Model: LinksOnFirstUse>(_: Model.Type) -> LinkOriginAccess {
    let slot = Model.linkOriginSlot
    return LinkOriginAccess(
      set: { model, reference, key in
        slot.modify(model) { origin in
          origin.reference = reference
          if let key { origin.ownerKey = key }
        }
      },
      reference: { unsafeDowncast($0, to: Model.self).linkOrigin.reference },
      key: { unsafeDowncast($0, to: Model.self).linkOrigin.ownerKey },
      setPartial: { model, partial in slot.modify(model) { $0.partial = partial } },
      partial: { unsafeDowncast($0, to: Model.self).linkOrigin.partial },
      loadsOnFirstUse: Model.loadsPropertiesOnFirstUse)
  }
}
