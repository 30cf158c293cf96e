import Synchronization

/// A sort or section key read through to-one relationships: `\Room.hotel?.name` is the `name`
/// of the row that the room's `hotel` points to (`nil` when it points to none), and
/// `\Room.hotel?.manager?.name` follows two.
///
/// A key path of that kind is one value to Swift, whose public API cannot split it into its
/// components. Its `debugDescription` lists them, each computed property by its getter's
/// address: the key path of the relationship, an optional-chaining `?` (or a force `!`), then
/// the attribute's key path on the target, and an optional-wrapping `?` when the attribute is
/// not already optional. Matching that text against the descriptions of the schemas' own key
/// paths (made by the same function in the same process) finds the relationships and the
/// attribute; a match that is not unique is not taken.
struct RelatedKeyPath: @unchecked Sendable {
  /// The to-ones followed, from the model's table.
  let relationships: [RelationshipInfo]
  /// The attribute read on the last one's target.
  let attribute: AnyKeyPath

  /// `keyPath`, of `table`'s model, as a path through to-one relationships to an attribute;
  /// nil when it is not one (a plain attribute included).
  ///
  /// Cost: the first time for a key path, its description and those of the key paths of each
  /// table it may go through; then a lookup.
  static func resolve(_ keyPath: AnyKeyPath, in table: PredicateTable) -> RelatedKeyPath? {
    let key = ObjectKey(keyPath: keyPath)
    if let known = resolved.withLock({ $0[key] }) { return known.path }
    let description = keyPath.debugDescription
    var found: RelatedKeyPath?
    if description.hasPrefix(table.keyPathPrefix) {
      found = match(description.dropFirst(table.keyPathPrefix.count), in: table, followed: [])
    }
    resolved.withLock { $0[key] = Resolution(path: found) }
    return found
  }

  /// What `rest` (a key path's description after its root) reaches from `table`, having
  /// followed `followed`.
  private static func match(
    _ rest: Substring, in table: PredicateTable, followed: [RelationshipInfo]
  ) -> RelatedKeyPath? {
    var matches: [RelatedKeyPath] = []
    let skipped = table.keyPathPrefix.count
    func tail(of keyPath: AnyKeyPath) -> Substring { keyPath.debugDescription.dropFirst(skipped) }
    if !followed.isEmpty {
      for keyPath in table.attributeIndexes.keys {
        let tail = tail(of: keyPath)
        if rest == tail
          || (rest.count == tail.count + 1 && rest.hasPrefix(tail) && rest.last == "?")
        {
          matches.append(RelatedKeyPath(relationships: followed, attribute: keyPath))
        }
      }
    }
    for relationship in table.relationships where relationship.kind == .toOne {
      let tail = tail(of: relationship.keyPath)
      guard rest.hasPrefix(tail) else { continue }
      let after = rest.dropFirst(tail.count)
      guard let mark = after.first, mark == "?" || mark == "!" else { continue }
      if let path = match(
        after.dropFirst(), in: relationship.predicateTable(), followed: followed + [relationship])
      {
        matches.append(path)
      }
    }
    return matches.count == 1 ? matches[0] : nil
  }

  /// The SQL of the value for a row of `schema`'s table (named by the table's name): nested
  /// subqueries, each by a primary key or a unique key column, `NULL` where a relationship
  /// points to no row. Throws for a `.codable` attribute, as predicates do.
  func sql<Model: PersistentModel>(schema: ModelSchema<Model>) throws -> SQLFragment {
    var translator = PredicateTranslator(schema: schema)
    var row: RelatedRow?
    for relationship in relationships {
      guard case .related(let next) = try translator.follow(relationship, from: row) else {
        throw translator.unsupported("the relationship '\(relationship.name)'")
      }
      row = next
    }
    guard let row, case .sql(let fragment) = try translator.attribute(attribute, of: row) else {
      throw translator.unsupported("the key path \(attribute)")
    }
    return fragment
  }

  /// The tables the path reads, other than the model's.
  var tables: [String] { relationships.map { $0.targetTable() } }

  private struct Resolution: @unchecked Sendable {
    let path: RelatedKeyPath?
  }

  /// A key path as a dictionary key (key paths are immutable; equal ones are one key).
  private struct ObjectKey: Hashable, @unchecked Sendable {
    let keyPath: AnyKeyPath
  }

  /// Every key path resolved so far, and what it resolved to.
  private static let resolved = Mutex<[ObjectKey: Resolution]>([:])
}

extension PredicateTable {
  /// What this model's key paths' descriptions begin with: `\Room` (the description of
  /// `\Room.self` without `.self`).
  var keyPathPrefix: String { String(identityKeyPath.debugDescription.dropLast(".self".count)) }
}
