import Foundation

/// What to fetch: a predicate, sort descriptors, and a window. SwiftData's `FetchDescriptor`.
///
/// The predicate and sort descriptors are translated to SQL (see ``ModelContext/fetch(_:)``);
/// anything that cannot be translated throws rather than filtering in memory.
public struct FetchDescriptor<Model: PersistentModel>: Sendable {
  /// Which models to fetch; nil for all.
  public var predicate: Predicate<Model>? {
    didSet { predicateParts = predicate.map(PredicateParts.init) }
  }
  /// Further predicates every model must also match, joined to ``predicate`` with SQL `AND`:
  /// a query made of parts (a filter, a bounding box) without one `#Predicate` so large that
  /// the compiler cannot type-check it. Empty by default.
  public var conditions: [Predicate<Model>] = [] {
    didSet { hasConditions = !conditions.isEmpty }
  }
  /// ``predicate``'s tree and variable, kept beside it for the paths that reuse a kept
  /// translation (``PredicateTranslator/kept(_:narrowing:)``): read from here, they need no
  /// metadata of `Predicate<Model>` (a variadic generic type, whose copy in code generic over
  /// the model looks its metadata up: about 1,000 instructions a count).
  @usableFromInline var predicateParts: PredicateParts?
  /// Whether ``conditions`` has any (read without the generic array's metadata).
  @usableFromInline var hasConditions = false
  /// The order. Ties are broken by insertion order (the primary key), so results are stable.
  public var sortBy: [SortDescriptor<Model>]
  /// `String` attributes whose sorts order text as people read it, with Foundation's
  /// `localizedStandardCompare` (case and accents ignored, numbers by value: "Zoo 9" before
  /// "Zoo 10", "Zürich" beside "Zurich"), in SQL (a collation that calls that very method) and
  /// in Swift (observers patching their results) alike; ties then go to the next sort. Without
  /// it a `SortDescriptor` on a string orders by code point, as Swift's `<` does, and on Linux
  /// Foundation's `SortDescriptor` has no comparator that could say this (only `.lexical`).
  public var localizedStandardSorts: [KeyPath<Model, String> & Sendable] = []
  /// Whether models inserted in the context and not yet saved are included, as SwiftData's
  /// (true by default): those that match the predicate, evaluated in Swift (an evaluation that
  /// throws is no match, as SQL's `NULL` is), join the stored ones in the descriptor's order
  /// (after the stored ones they tie with, in insertion order), before the window applies.
  /// Models deleted and not saved are always left out. Unlike SwiftData's, a saved model's
  /// unsaved changes neither match nor move it: the store's values are matched and sorted
  /// (an inserted model is placed by comparing it with the stored models' current values).
  /// A predicate with integer arithmetic is refused while there are unsaved inserts of the
  /// model (Swift's evaluation could trap where SQL answers). Honoured by
  /// ``ModelContext/fetch(_:)``, ``ModelContext/fetchCount(_:)`` and
  /// ``ModelContext/fetchIdentifiers(_:)``; pages, sections, enumerations, values and
  /// observers read stored models only.
  ///
  /// Cost: nothing while the context has no unsaved insert; else O(unsaved inserts) per call
  /// to find the model's and evaluate the predicate on them (a loop that fetches before each
  /// insert is quadratic: set it false there), and when any matches, the stored models up to
  /// the window's end are fetched (for identifiers with a sort, loaded) and merged with them.
  public var includePendingChanges = true
  /// At most this many models.
  public var fetchLimit: Int?
  /// Skip this many models first.
  public var fetchOffset: Int?
  /// Relationships to load with the models, as SwiftData's: each in one query whatever the
  /// number of models (their keys bound as one parameter), instead of one query per model
  /// when each is first read. Key paths of relationships only (others throw
  /// ``PersistenceError/Code/unsupportedPredicate``). Empty by default.
  public var relationshipKeyPathsForPrefetching: [PartialKeyPath<Model>] {
    get { prefetching.keyPaths.map { unsafeDowncast($0, to: PartialKeyPath<Model>.self) } }
    set { prefetching.keyPaths = newValue }
  }
  /// The attributes to load with the models, as SwiftData's: the others are loaded when one of
  /// them is first read or set, for every model of the fetch still without them, in one query
  /// per 10,000 models. Empty (the default) loads every attribute. Key paths of attributes;
  /// relationships are loaded as always. A model already in the context is returned as it
  /// is. Honoured for `@Model` classes (``LinksOnFirstUse/loadsPropertiesOnFirstUse``);
  /// others, and a fetch whose predicate or sort Swift must finish, load every attribute.
  ///
  /// Cost: the query selects the attributes given (the others are constants, their empty
  /// values); the first read of another attribute runs one more query for the batch. Honoured
  /// by ``ModelContext/fetch(_:)``; pages, sections, enumerations and observers load every
  /// attribute.
  public var propertiesToFetch: [PartialKeyPath<Model>] {
    get { fetching.keyPaths.map { unsafeDowncast($0, to: PartialKeyPath<Model>.self) } }
    set { fetching.keyPaths = newValue }
  }
  /// The key paths of ``propertiesToFetch``, kept without the model's type.
  @usableFromInline var fetching: KeyPathList
  /// The key paths of ``relationshipKeyPathsForPrefetching``, kept without the model's type:
  /// a fetch asks whether there are any without the generic array's metadata.
  @usableFromInline var prefetching: KeyPathList

  /// Creates a descriptor.
  ///
  /// Inlinable, so that the caller's code, which knows the model type, makes it: in code
  /// generic over the model, copying the predicate looks its variadic generic type's metadata
  /// up (about 4,000 instructions a descriptor, measured with callgrind).
  @inlinable
  public init(predicate: Predicate<Model>? = nil, sortBy: [SortDescriptor<Model>] = []) {
    self.predicate = predicate
    self.sortBy = sortBy
    prefetching = KeyPathList()
    fetching = KeyPathList()
    if let predicate { predicateParts = PredicateParts(predicate) }
  }

  /// The key path of `sort` when it is one of ``localizedStandardSorts``.
  func localizedStandardKeyPath(_ sort: SortDescriptor<Model>) -> KeyPath<Model, String>? {
    guard let keyPath = sort.keyPath else { return nil }
    return localizedStandardSorts.first { $0 == keyPath }
  }

  /// Whether ``predicate`` or one of ``conditions`` has a node Swift must evaluate
  /// (``PredicateExpressions/SwiftFunction``), so that its queries are finished in Swift on
  /// every engine. Cost: a walk of each predicate's tree, O(1) once its type is known to
  /// have one.
  func callsSwiftFunctions() -> Bool {
    for predicate in [predicate].compactMap({ $0 }) + conditions {
      var walker = PredicateShapeWalker(variable: predicate.variable.key)
      _ = walker.shape(of: predicate.expression, narrowing: false)
      if walker.callsSwift { return true }
    }
    return false
  }

  /// Whether `model` matches ``predicate`` and every one of ``conditions`` (in Swift).
  public func matches(_ model: Model) throws -> Bool {
    if let predicate, try !predicate.evaluate(model) { return false }
    for condition in conditions where try !condition.evaluate(model) { return false }
    return true
  }

  /// The `WHERE` condition of ``predicate`` and ``conditions``, or nil when there is none;
  /// with `narrowing`, Swift-only functions are left for Swift (see
  /// `PredicateTranslator.whereClause(_:schema:narrowing:)`).
  func whereClause(schema: ModelSchema<Model>, narrowing: Bool = false) throws -> SQLFragment? {
    // The common case, one predicate and no conditions, makes no array.
    var only: SQLFragment?
    if let predicate {
      only = try PredicateTranslator.whereClause(predicate, schema: schema, narrowing: narrowing)
    }
    if conditions.isEmpty { return only }
    var parts: [SQLFragment] = only.map { [$0] } ?? []
    for condition in conditions {
      if let part = try PredicateTranslator.whereClause(
        condition, schema: schema, narrowing: narrowing)
      {
        parts.append(part)
      }
    }
    guard parts.count > 1 else { return parts.first }
    var combined = SQLFragment(
      parts.map { "(\($0.sql))" }.joined(separator: " AND "),
      parts.reduce(into: FragmentBindings()) { $0 += $1.bindings },
      isCondition: true)
    combined.isNarrowed = parts.contains { $0.isNarrowed }
    return combined
  }

  /// The order of `a` and `b` by the raw values at `keyPath` (-1, 0, 1), as the store orders
  /// them, when its values are an enum's (or an optional one's) kept as their raw value; nil
  /// for any other key path. Cost: one lookup of the value type's facts.
  static func rawValueOrder(_ keyPath: PartialKeyPath<Model>, _ a: Model, _ b: Model) -> Int? {
    let facts = TypeConformances.facts(for: type(of: keyPath).valueType)
    guard facts.persistable == nil, facts.rawRepresentable != nil || facts.optional != nil,
      let left = try? PredicateTranslator.sqlValue(of: a[keyPath: keyPath]),
      let right = try? PredicateTranslator.sqlValue(of: b[keyPath: keyPath])
    else { return nil }
    return PageHeap.compare(left, right)
  }

  /// Whether `a` comes before `b` in the descriptor's order (its sorts, localized ones with
  /// `localizedStandardCompare`, then the primary keys), as the store orders them.
  func precedes(_ a: Model, _ aKey: Int64, _ b: Model, _ bKey: Int64) -> Bool {
    for sort in sortBy {
      if let keyPath = localizedStandardKeyPath(sort) {
        var order = a[keyPath: keyPath].localizedStandardCompare(b[keyPath: keyPath])
        if sort.order == .reverse, order != .orderedSame {
          order = order == .orderedAscending ? .orderedDescending : .orderedAscending
        }
        if order == .orderedSame { continue }
        return order == .orderedAscending
      }
      // An enum attribute is ordered by its raw value, as the store orders its column (its
      // own `<` may order otherwise).
      if let keyPath = sort.keyPath, let order = Self.rawValueOrder(keyPath, a, b) {
        if order == 0 { continue }
        return (order < 0) == (sort.order == .forward)
      }
      switch sort.compare(a, b) {
      case .orderedAscending: return true
      case .orderedDescending: return false
      case .orderedSame: continue
      }
    }
    return aKey < bKey
  }
}

/// Identifies a model's row in a store, across contexts of the same store.
public struct PersistentIdentifier: Hashable, Codable, Sendable, CustomStringConvertible {
  /// The store's identifier.
  public var storeIdentifier: UUID
  /// The entity (table) name.
  public var entityName: String
  /// The row's primary key.
  public var primaryKey: Int64

  /// The identifier of the row `primaryKey` of the table `entityName` in the store
  /// `storeIdentifier` (``ModelContainer/storeIdentifier``): for an index kept beside a store
  /// by primary key (it names a row, which may no longer exist).
  public init(storeIdentifier: UUID, entityName: String, primaryKey: Int64) {
    self.storeIdentifier = storeIdentifier
    self.entityName = entityName
    self.primaryKey = primaryKey
  }

  /// The temporary identifier of `model`, not yet saved: no store's, and a key no row has,
  /// unique while the model lives (the instance's address mixed with a number drawn once per
  /// process, so that an identifier written out does not show where the model lives).
  init(temporaryFor model: AnyObject, entityName: String) {
    let mixed = (UInt64(UInt(bitPattern: ObjectIdentifier(model))) ^ Self.temporarySalt)
    self.init(
      storeIdentifier: Self.temporaryStore, entityName: entityName,
      primaryKey: -Int64(bitPattern: mixed & UInt64(Int64.max)))
  }

  /// For a temporary identifier, the identity of the model it was made for (which may be gone:
  /// compare it only with live models' identities, never dereference it); nil for a row's.
  var temporaryModel: ObjectIdentifier? {
    guard isTemporary, primaryKey <= 0 else { return nil }
    let address = UInt64(-primaryKey) ^ Self.temporarySalt
    return unsafeBitCast(UInt(truncatingIfNeeded: address), to: ObjectIdentifier.self)
  }

  /// What a temporary identifier's key is mixed with: drawn once per process.
  private static let temporarySalt = UInt64.random(in: 0...UInt64(Int64.max))

  /// The store identifier of a temporary identifier: all zeros, which no store has.
  static let temporaryStore = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

  /// Whether this identifies a model not yet saved (see ``LinksOnFirstUse/persistentModelID``):
  /// it names no row, and the model's identifier changes when it is saved.
  public var isTemporary: Bool { storeIdentifier == Self.temporaryStore }

  /// `entity/primaryKey`, or `entity/temporary` for a model not yet saved.
  public var description: String {
    "\(entityName)/\(isTemporary ? "temporary" : String(primaryKey))"
  }
}

/// One section of a sectioned fetch: the models that share a key, in the descriptor's order.
///
/// A fetch's sections share one array of its models, each a slice of it: a section costs no
/// allocation of its own (a fetch by destination of 10k generated trips has about 8,600
/// sections). A section kept alone keeps that array alive; one changed copies its own models
/// first.
public struct ResultsSection<Key: Hashable & Sendable, Model>: RandomAccessCollection, Identifiable
{
  /// The key shared by the section's models (the value at the `sectionBy` key path).
  public let id: Key
  /// The models, a slice of the fetch's array (indices from its `startIndex`).
  @usableFromInline var models: ArraySlice<Model>

  /// The models, in the descriptor's order, as an array of their own: O(count).
  public var elements: [Model] { Array(models) }

  /// Creates a section.
  public init(id: Key, elements: [Model]) {
    self.id = id
    self.models = elements[...]
  }

  /// A section of `models`, sharing their storage.
  @usableFromInline
  init(id: Key, models: ArraySlice<Model>) {
    self.id = id
    self.models = models
  }

  /// The first index.
  public var startIndex: Int { 0 }
  /// The index past the last model.
  public var endIndex: Int { models.count }
  /// The model at `position`: O(1).
  @inlinable
  public subscript(position: Int) -> Model { models[models.startIndex + position] }

  /// Inserts `model` at `position` (0 to `count`).
  mutating func insert(_ model: Model, at position: Int) {
    models.insert(model, at: models.startIndex + position)
  }

  /// Removes the model at `position`.
  mutating func remove(at position: Int) {
    models.remove(at: models.startIndex + position)
  }

  /// Appends `model`.
  mutating func append(_ model: Model) { models.append(model) }
}

/// Sections of values (`ModelContext.fetch(_:as:sectionBy:)`)
/// go to other threads as their values do.
extension ResultsSection: Sendable where Model: Sendable {}

/// Key paths, immutable values, shared between threads as they are.
@usableFromInline
struct KeyPathList: Sendable {
  nonisolated(unsafe) var keyPaths: [AnyKeyPath] = []
  @usableFromInline init() {}
}
