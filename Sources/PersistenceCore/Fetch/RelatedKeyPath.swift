import Synchronization

// SAFETY: key paths are immutable objects; the relationship infos are immutable values.
/// A sort or section key read through to-one relationships: `\Room.hotel?.name` is the `name`
/// of the row that the room's `hotel` points to (`nil` when it points to none), and
/// `\Room.hotel?.manager?.name` follows two.
///
/// A key path of that kind is one value to Swift, whose public API cannot split it into its
/// components, nor build `\Room.hotel?.name` from `\Room.hotel` and `\Hotel.name` (an
/// optional chain is only ever written in a literal). So the key path's components are read
/// (``KeyPathComponents``) and matched with those of the schemas' own key paths: a to-one
/// relationship's, then `?` (or `!`), repeated, then an attribute's, then the optional wrap
/// Swift adds when the attribute is not optional. Components compare as `==` compares key paths
/// (a computed property by its identity), so the match holds in every build, however the
/// optimizer emits the accessors; a key path that does not match exactly (a computed property
/// that is not stored, a to-many in the middle, a subscript) is not one.
struct RelatedKeyPath: @unchecked Sendable {
  /// The to-ones followed, from the model's table.
  let relationships: [RelationshipInfo]
  /// The attribute read on the last one's target.
  let attribute: AnyKeyPath

  /// `keyPath`, of `table`'s model, as a path through to-one relationships to an attribute;
  /// nil when it is not one (a plain attribute included).
  ///
  /// Cost: the first time for a key path, reading its components and those of the key paths
  /// of each table it goes through, O(components × (attributes + relationships)); then a
  /// lookup.
  static func resolve(_ keyPath: AnyKeyPath, in table: PredicateTable) -> RelatedKeyPath? {
    let key = ObjectKey(keyPath: keyPath)
    if let known = resolved.withLock({ $0[key] }) { return known.path }
    var found: RelatedKeyPath?
    if type(of: keyPath).rootType == table.modelType,
      let components = KeyPathComponents.read(keyPath)
    {
      found = match(components[...], in: table, followed: [])
    }
    resolved.withLock { $0[key] = Resolution(path: found) }
    return found
  }

  /// What `rest` (a key path's components after its root) reaches from `table`, having
  /// followed `followed`.
  private static func match(
    _ rest: ArraySlice<KeyPathComponent>, in table: PredicateTable,
    followed: [RelationshipInfo]
  ) -> RelatedKeyPath? {
    if !followed.isEmpty {
      for keyPath in table.attributeIndexes.keys {
        guard let own = KeyPathComponents.read(keyPath), !own.isEmpty,
          rest.starts(with: own)
        else { continue }
        let after = rest.dropFirst(own.count)
        if after.isEmpty || (after.count == 1 && after.first == .optionalWrap) {
          return RelatedKeyPath(relationships: followed, attribute: keyPath)
        }
      }
    }
    for relationship in table.relationships where relationship.kind == .toOne {
      guard let own = KeyPathComponents.read(relationship.keyPath), !own.isEmpty,
        rest.starts(with: own)
      else { continue }
      let after = rest.dropFirst(own.count)
      guard let mark = after.first, mark == .optionalChain || mark == .optionalForce else {
        continue
      }
      return match(
        after.dropFirst(), in: relationship.predicateTable(), followed: followed + [relationship])
    }
    return nil
  }

  /// `keyPath` as the schemas name its steps, for an error: `\Room.hotel?.name`, with
  /// `<computed String>` (its value type) for a step that is no stored attribute or
  /// relationship of the model it is on, and the key path's own description when its
  /// components cannot be read.
  static func describe(_ keyPath: AnyKeyPath, in table: PredicateTable) -> String {
    guard let components = KeyPathComponents.read(keyPath) else { return "\(keyPath)" }
    var text = "\\" + table.modelName
    var current: PredicateTable? = table
    var rest = components[...]
    while let first = rest.first {
      switch first {
      case .optionalChain:
        text += "?"
        rest = rest.dropFirst()
        continue
      case .optionalForce:
        text += "!"
        rest = rest.dropFirst()
        continue
      case .optionalWrap:
        rest = rest.dropFirst()
        continue
      case .stored, .computed:
        break
      }
      if let table = current,
        let (name, own, next) = table.step(startingWith: rest)
      {
        text += "." + name
        rest = rest.dropFirst(own)
        current = next
      } else {
        text += ".<a property that is not stored>"
        rest = rest.dropFirst()
        current = nil
      }
    }
    return text
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

  // SAFETY: it holds an immutable `RelatedKeyPath` and is only reached inside `resolved`'s mutex.
  private struct Resolution: @unchecked Sendable {
    let path: RelatedKeyPath?
  }

  // SAFETY: key paths are immutable objects.
  /// A key path as a dictionary key (key paths are immutable; equal ones are one key).
  private struct ObjectKey: Hashable, @unchecked Sendable {
    let keyPath: AnyKeyPath
  }

  /// Every key path resolved so far, and what it resolved to.
  private static let resolved = Mutex<[ObjectKey: Resolution]>([:])
}

extension PredicateTable {
  /// The stored attribute or relationship whose key path `components` starts with: its name,
  /// how many components it takes, and for a to-one the table it leads to.
  fileprivate func step(
    startingWith components: ArraySlice<KeyPathComponent>
  ) -> (String, Int, PredicateTable?)? {
    for (keyPath, index) in attributeIndexes {
      guard let own = KeyPathComponents.read(keyPath), !own.isEmpty, components.starts(with: own)
      else { continue }
      return (columns[index].name, own.count, nil)
    }
    for relationship in relationships {
      guard let own = KeyPathComponents.read(relationship.keyPath), !own.isEmpty,
        components.starts(with: own)
      else { continue }
      return (
        relationship.name, own.count,
        relationship.kind == .toOne ? relationship.predicateTable() : nil
      )
    }
    return nil
  }
}

extension ModelSchema {
  /// `keyPath` of this model as its steps' columns name it, for an error (see
  /// ``RelatedKeyPath/describe(_:in:)``).
  func describe(_ keyPath: AnyKeyPath) -> String {
    RelatedKeyPath.describe(keyPath, in: PredicateTable(self))
  }
}
