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
    /// Whether the column has a unique index.
    public var isUnique: Bool
    /// Whether the column is indexed (alone, or first of ``indexCompanions``).
    public var isIndexed: Bool
    /// The further columns of its index, if it spans several.
    public var indexCompanions: [String]
    /// The model's default value: what rows get when the column is added to a table.
    public var defaultValue: SQLValue
  }
  /// The table name.
  public var name: String
  /// The columns, in the schema's order (after the primary key `"_pk"`).
  public var columns: [Column]
  /// The model type.
  public var modelType: ObjectIdentifier

  init<Model: PersistentModel>(_: Model.Type) throws {
    let schema = Model.schema
    try schema.validate()
    let defaults = Model()
    name = schema.name
    modelType = ObjectIdentifier(Model.self)
    columns = try schema.attributes.map { attribute in
      Column(
        name: attribute.name, storageType: attribute.storageType, isOptional: attribute.isOptional,
        isUnique: attribute.isUnique, isIndexed: attribute.isIndexed,
        indexCompanions: attribute.indexCompanions,
        defaultValue: try attribute.value(defaults))
    }
  }
}
