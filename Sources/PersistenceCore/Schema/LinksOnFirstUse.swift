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

  /// No context, no row: a model made in memory.
  public init() {}
}

/// A model whose relationships keep their link (``ToMany``, or a ``ToOne`` whose inverse
/// stores the key) in optional storage, made on the first read or write of the relationship:
/// a fetch that touches no relationship makes no link, context reference or observation state
/// per relationship, only the model's one ``LinkOrigin``.
///
/// ```swift
/// final class Trip: PersistentModel, LinksOnFirstUse {
///   var linkOrigin = LinkOrigin()
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
  /// What the store sets when it loads or attaches the model; declare it `= LinkOrigin()`.
  var linkOrigin: LinkOrigin { get set }
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
  /// and changes when the model is saved. O(1).
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

  /// The access for `Model`, nil when its links are made eagerly.
  static func of<Model: PersistentModel>(_: Model.Type) -> LinkOriginAccess? {
    guard let lazy = Model.self as? any LinksOnFirstUse.Type else { return nil }
    return make(lazy)
  }

  private static func make<Model: LinksOnFirstUse>(_: Model.Type) -> LinkOriginAccess {
    LinkOriginAccess(
      set: { model, reference, key in
        let model = unsafeDowncast(model, to: Model.self)
        model.linkOrigin.reference = reference
        if let key { model.linkOrigin.ownerKey = key }
      },
      reference: { unsafeDowncast($0, to: Model.self).linkOrigin.reference },
      key: { unsafeDowncast($0, to: Model.self).linkOrigin.ownerKey })
  }
}
