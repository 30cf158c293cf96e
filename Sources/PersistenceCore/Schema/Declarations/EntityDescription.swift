/// The type-erased description of one model type, as the container, history and engines see
/// it: the table an engine keeps for it (see ``StoreEngine``).
public struct EntityDescription: Sendable {
  /// One attribute's column.
  public struct Column: Sendable {
    /// The column name.
    public var name: String
    /// What the column stores.
    public var storageType: StorageType
    /// Whether the column allows `NULL`.
    public var isOptional: Bool
    /// Whether the column has a unique index (alone, or first of ``uniqueCompanions``).
    public var isUnique: Bool
    /// The further columns of its unique index, if it spans several.
    public var uniqueCompanions: [String] = []
    /// Whether the column is indexed (alone, or first of ``indexCompanions``).
    public var isIndexed: Bool
    /// The further columns of its index, if it spans several.
    public var indexCompanions: [String]
    /// The model's default value: what rows get when the column is added to a table.
    public var defaultValue: SQLValue
    /// The table whose primary key the column holds (a to-one's key), if it is a foreign key.
    public var reference: Reference?
  }
  /// The row a foreign key column points to.
  public struct Reference: Sendable {
    /// The table of the related model, whose `"_pk"` the column holds.
    public var table: String
    /// What deleting the related row does to this one (the related side's ``DeleteRule``).
    public var onDelete: DeleteRule
  }
  /// The table name.
  public var name: String
  /// The columns, in the schema's order (after the primary key `"_pk"`).
  public var columns: [Column]
  /// The model type.
  public var modelType: ObjectIdentifier
  /// For a subclass of a model, kept in its root model's table, the value of the table's
  /// `"_entity"` column for its rows (``ModelSchema/init(subclassOf:entity:_:)``); nil for a
  /// root model.
  public var inheritancePath: String?
  /// For a table (what the container keeps a root model and its subclasses in), the paths of
  /// the subclasses of its model that the container lists; empty for a model's own entity.
  public var subclassPaths: Set<String> = []

  init<Model: PersistentModel>(_: Model.Type) throws {
    let schema = Model.modelSchema
    try schema.validate()
    let defaults = Model()
    name = schema.name
    modelType = ObjectIdentifier(Model.self)
    inheritancePath = schema.inheritance?.path
    columns = try schema.storedAttributes.map { attribute in
      guard let relationship = attribute.relationship else {
        return Column(
          name: attribute.name, storageType: attribute.storageType,
          isOptional: attribute.isOptional, isUnique: attribute.isUnique,
          uniqueCompanions: attribute.uniqueCompanions, isIndexed: attribute.isIndexed,
          indexCompanions: attribute.indexCompanions, defaultValue: try attribute.value(defaults))
      }
      // A to-one's key: indexed (a one-to-one's uniquely), for the inverse's loads and the
      // delete rules' lookups.
      let inverse = relationship.inverseInfo()
      return Column(
        name: attribute.name, storageType: .integer, isOptional: true,
        isUnique: inverse?.kind == .toOne, isIndexed: true, indexCompanions: [],
        defaultValue: .null,
        reference: Reference(
          table: relationship.targetTable(), onDelete: inverse?.deleteRule ?? .nullify))
    }
  }
}

extension EntityDescription {
  /// The table of a many-to-many's links (``JoinTable``): `owner` and `target`, each a key of
  /// a row of `ownerTable` and `targetTable` that cascades (deleting a row deletes its links),
  /// unique as a pair (`owner` first: one row's links by that index) and `target` indexed
  /// (the other side's links by it).
  init(join: JoinTable, ownerTable: String, targetTable: String) {
    func key(_ name: String, of table: String, unique: Bool) -> Column {
      Column(
        name: name, storageType: .integer, isOptional: false, isUnique: unique,
        uniqueCompanions: unique ? [JoinTable.targetColumn] : [], isIndexed: !unique,
        indexCompanions: [], defaultValue: .integer(0),
        reference: Reference(table: table, onDelete: .cascade))
    }
    name = join.name
    columns = [
      key(JoinTable.ownerColumn, of: ownerTable, unique: true),
      key(JoinTable.targetColumn, of: targetTable, unique: false),
    ]
    modelType = ObjectIdentifier(JoinTable.self)
    inheritancePath = nil
  }
}

extension EntityDescription {
  /// The column naming each row's class in a table that holds subclasses of its model.
  package static let entityColumn = "_entity"

  /// The tables of `entities`, one per table name: a root model's entity, with, when subclasses
  /// of it share its table, each subclass's own columns (nullable: the rows of other classes
  /// hold `NULL`) and the indexed column `"_entity"` naming each row's class (empty for the
  /// root's rows). O(columns²) per table, a few models.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` when two subclasses declare one column
  ///   differently, or a subclass's root model is not among `entities`.
  static func tables(_ entities: [EntityDescription]) throws -> [EntityDescription] {
    var tables: [String: EntityDescription] = [:]
    for entity in entities where entity.inheritancePath == nil {
      tables[entity.name] = entity
    }
    for entity in entities.sorted(by: { ($0.inheritancePath ?? "") < ($1.inheritancePath ?? "") }) {
      guard let path = entity.inheritancePath else { continue }
      guard var table = tables[entity.name] else {
        throw PersistenceError(
          code: .invalidValue,
          message:
            "The subclass \(path.dropLast()) is kept in the table \(entity.name), whose root model is not in this container: list it too."
        )
      }
      table.subclassPaths.insert(path)
      if !table.columns.contains(where: { $0.name == entityColumn }) {
        table.columns.append(
          Column(
            name: entityColumn, storageType: .text, isOptional: false, isUnique: false,
            isIndexed: true, indexCompanions: [], defaultValue: .text("")))
      }
      for column in entity.columns {
        if let known = table.columns.first(where: { $0.name == column.name }) {
          guard
            known.isUnique == column.isUnique && known.uniqueCompanions == column.uniqueCompanions
              && known.isIndexed == column.isIndexed
              && known.indexCompanions == column.indexCompanions
          else {
            throw PersistenceError(
              code: .invalidValue,
              message:
                "The column \(entity.name).\(column.name) is declared unique or indexed by one model of the table and not alike by the subclass \(path.dropLast()): one column holds both, so give one of them another name."
            )
          }
          guard known.storageType == column.storageType else {
            throw PersistenceError(
              code: .invalidValue,
              message:
                "The column \(entity.name).\(column.name) is declared as \(known.storageType) by one model of the table and as \(column.storageType) by the subclass \(path.dropLast()): give one of them another name."
            )
          }
          continue
        }
        var own = column
        own.isOptional = true
        own.defaultValue = .null
        table.columns.append(own)
      }
      tables[entity.name] = table
    }
    return tables.values.sorted { $0.name < $1.name }
  }

  /// Compares this entity's declared columns with the columns its table has (`stored`: name →
  /// the engine's type name, `_pk` left out), as every engine does when it opens a store, and
  /// returns the declared columns the table lacks, in declaration order; without `migrate`,
  /// a missing one is an error instead.
  ///
  /// - Throws: ``PersistenceError`` with ``PersistenceError/Code/newerStore`` when the table
  ///   has columns the entity does not declare (a newer schema wrote it),
  ///   ``PersistenceError/Code/schemaMismatch`` when a column's type differs from the declared
  ///   one (`typeName` gives the engine's name for a storage type), or when a column is
  ///   missing and `migrate` is false. Messages name the store by `location`.
  package func missingColumns(
    stored: [String: String], typeName: (StorageType) -> String, location: String,
    migrate: Bool
  ) throws -> [Column] {
    let declared = Set(columns.map(\.name))
    let unknown = stored.keys.filter { !declared.contains($0) }.sorted()
    if !unknown.isEmpty,
      unknown.contains(Self.entityColumn) || declared.contains(Self.entityColumn)
    {
      let theirs = unknown.filter { $0 != Self.entityColumn }
      throw PersistenceError(
        code: .newerStore,
        message:
          "The table \(name) in \(location) holds subclasses of its model that this container does not list, or a newer version of them\(theirs.isEmpty ? "" : " (its columns \(theirs.joined(separator: ", ")) are theirs)"): pass every subclass of the table's model to ModelContainer(for:) (the values of its column _entity name them); the store was left untouched."
      )
    }
    guard unknown.isEmpty else {
      throw PersistenceError(
        code: .newerStore,
        message:
          "The table \(name) in \(location) has columns this model does not declare (\(unknown.joined(separator: ", "))): it was written by a newer version of this model, or by another model whose table has this name. Update the program, or give the other model a table of its own; the store was left untouched."
      )
    }
    var missing: [Column] = []
    for column in columns {
      if let type = stored[column.name] {
        guard type == typeName(column.storageType) else {
          throw PersistenceError(
            code: .schemaMismatch,
            message:
              "The column \(name).\(column.name) is \(type) in the store but the model declares \(typeName(column.storageType)). Changing an attribute's type needs a migration of its own."
          )
        }
      } else {
        guard migrate else {
          throw PersistenceError(
            code: .schemaMismatch,
            message:
              "The store at \(location) lacks the column \(name).\(column.name); open it writable once to add it."
          )
        }
        missing.append(column)
      }
    }
    return missing
  }
}

extension EntityDescription {
  /// One index of an entity's table.
  package struct Index: Sendable {
    /// Its name, the same on every engine.
    package var name: String
    /// The columns it covers, in order.
    package var columns: [String]
    /// Whether it is a unique index.
    package var isUnique: Bool
  }

  /// The indexes of `.unique` and `.indexed` columns (with their companions), in column
  /// order, named alike on every engine: `trips_id_unique`, `trips_destination_index`,
  /// `trips_longitude_latitude_start_date_name_index`, `trips_name_start_date_unique`. A
  /// column unique alone needs no index of its own besides; one unique with others keeps its
  /// `.indexed` index too.
  package var indexes: [Index] {
    columns.flatMap { column -> [Index] in
      guard column.isUnique else { return plainIndex(column).map { [$0] } ?? [] }
      let unique = [column.name] + column.uniqueCompanions
      let index = Index(
        name: "\(name)_" + unique.joined(separator: "_") + "_unique", columns: unique,
        isUnique: true)
      guard !column.uniqueCompanions.isEmpty, let plain = plainIndex(column) else {
        return [index]
      }
      return [index, plain]
    }
  }

  /// The `.indexed` index of `column`, if it has one.
  private func plainIndex(_ column: Column) -> Index? {
    if !column.indexCompanions.isEmpty {
      let columns = [column.name] + column.indexCompanions
      return Index(
        name: "\(name)_" + columns.joined(separator: "_") + "_index", columns: columns,
        isUnique: false)
    }
    if column.isIndexed {
      return Index(name: "\(name)_\(column.name)_index", columns: [column.name], isUnique: false)
    }
    return nil
  }

  /// The names of ``indexes``.
  package var indexNames: [String] { indexes.map(\.name) }
}
