import Foundation

extension Schema {
  /// The schema's entities, one per model type given, in the order given. Made on each call.
  ///
  /// Cost: O(properties) per model, and one empty model each (`makeForLoading()`) for the
  /// attributes' default values.
  public var entities: [Entity] {
    func entity<Model: PersistentModel>(_: Model.Type) -> Entity {
      Entity(Model.self, among: types)
    }
    return types.map { entity($0) }
  }

  /// The schema's entities by name (their tables' names; a subclass's, its class's).
  public var entitiesByName: [String: Entity] {
    Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
  }

  /// The entity of `type`, if the schema lists it.
  public func entity<Model: PersistentModel>(for type: Model.Type) -> Entity? {
    guard types.contains(where: { $0 == type }) else { return nil }
    return Entity(Model.self, among: types)
  }

  /// One model type as the store keeps it: SwiftData's `Schema.Entity`.
  public final class Entity: Hashable, Sendable, CustomStringConvertible {
    /// The entity's name: its table's.
    public let name: String
    /// The model type's name, with its module and the types it is declared in.
    public let mangledTypeName: String
    /// The stored attributes.
    public let attributes: Set<Attribute>
    /// The relationships.
    public let relationships: Set<Relationship>
    /// The attributes in column order, then the relationships, as the schema declares them
    /// (`@Model` declares its relationships after its attributes).
    public let storedProperties: [any SchemaProperty]
    /// Each unique constraint's properties, by name (a `#Unique` list, or `.unique`).
    public let uniquenessConstraints: [[String]]
    /// Each index's properties, by name (an `#Index` list, or `.indexed`).
    public let indices: [[String]]
    /// The entity of the model's superclass, for a subclass of a model (kept in its root
    /// model's table); nil for a root model.
    public var superentity: Entity? {
      func entity<Model: PersistentModel>(_: Model.Type) -> Entity {
        Entity(Model.self, among: schemaTypes)
      }
      return superclass.map { entity($0) }
    }
    /// The name of ``superentity``.
    public var superentityName: String? { superentity?.name }
    /// The entities of the schema's direct subclasses of this model.
    public var subentities: Set<Entity> {
      func entity<Model: PersistentModel>(_: Model.Type) -> Entity {
        Entity(Model.self, among: schemaTypes)
      }
      return Set(subclasses.map { entity($0) })
    }
    /// The model type the entity describes.
    let modelType: any PersistentModel.Type
    /// The superclass, when the model is a subclass of a model.
    private let superclass: (any PersistentModel.Type)?
    /// The schema's types that are direct subclasses of the model.
    private let subclasses: [any PersistentModel.Type]
    /// The schema's types, for the entities of the superclass and subclasses.
    private let schemaTypes: [any PersistentModel.Type]

    /// The attributes, by property name.
    public var attributesByName: [String: Attribute] {
      Dictionary(uniqueKeysWithValues: attributes.map { ($0.name, $0) })
    }
    /// The relationships, by property name.
    public var relationshipsByName: [String: Relationship] {
      Dictionary(uniqueKeysWithValues: relationships.map { ($0.name, $0) })
    }
    /// Every stored property, by name.
    public var storedPropertiesByName: [String: any SchemaProperty] {
      Dictionary(uniqueKeysWithValues: storedProperties.map { ($0.name, $0) })
    }
    /// The stored properties (SwiftData's `properties`).
    public var properties: [any SchemaProperty] { storedProperties }

    /// The entity of `Model`, among the schema's `types` (which its subentities are found in).
    init<Model: PersistentModel>(_: Model.Type, among types: [any PersistentModel.Type] = []) {
      let schema = Model.modelSchema
      // A subclass's entity is named as its class; a root's as its table.
      name = schema.inheritance?.entity ?? schema.name
      modelType = Model.self
      self.superclass = schema.inheritance?.superclass
      schemaTypes = types
      func parent<Other: PersistentModel>(of _: Other.Type) -> ObjectIdentifier? {
        Other.modelSchema.inheritance.map { ObjectIdentifier($0.superclass) }
      }
      subclasses = types.filter { parent(of: $0) == ObjectIdentifier(Model.self) }
      mangledTypeName = String(reflecting: Model.self)
      // Each column's property name, where the declaration says it (`@Model` does).
      let names = Dictionary(
        schema.fields.map { ($0.column, $0.name) }, uniquingKeysWith: { first, _ in first })
      let empty = Model.makeForLoading()
      var attributes: [Attribute] = []
      var relationships: [Relationship] = []
      var properties: [any SchemaProperty] = []
      for declaration in schema.declarations {
        if let info = declaration.relationship {
          let relationship = Relationship(info)
          relationships.append(relationship)
          properties.append(relationship)
        } else {
          let attribute = Attribute(
            declaration, name: names[declaration.name] ?? declaration.name,
            defaultValue: empty[keyPath: declaration.keyPath as! PartialKeyPath<Model>])
          attributes.append(attribute)
          properties.append(attribute)
        }
      }
      self.attributes = Set(attributes)
      self.relationships = Set(relationships)
      storedProperties = properties
      func named(_ column: String) -> String { names[column] ?? column }
      uniquenessConstraints = schema.attributes.filter(\.isUnique).map {
        [named($0.name)] + $0.uniqueCompanions.map(named)
      }
      indices = schema.attributes.filter(\.isIndexed).map {
        [named($0.name)] + $0.indexCompanions.map(named)
      }
    }

    /// `Entity(Trip: name, destination, …)`.
    public var description: String {
      "Entity(\(name): \(storedProperties.map(\.name).joined(separator: ", ")))"
    }

    /// Whether both describe one model type.
    public static func == (lhs: Entity, rhs: Entity) -> Bool {
      lhs.mangledTypeName == rhs.mangledTypeName && lhs.name == rhs.name
    }

    /// Hashes the model type's name.
    public func hash(into hasher: inout Hasher) { hasher.combine(mangledTypeName) }
  }

  /// A stored attribute of an entity: SwiftData's `Schema.Attribute`.
  public final class Attribute: SchemaProperty, Hashable, @unchecked Sendable {
    /// An attribute's option: `.unique`, `.preserveValueOnDeletion`, `.codable`, …
    public typealias Option = AttributeOption

    /// The property's name.
    public let name: String
    /// The column the property is stored in (`@Attribute(originalName:)`, else its name).
    public let originalName: String
    /// The options.
    public let options: [Option]
    /// The property's type (the encoded type's for a `.codable` one, optional unwrapped).
    public let valueType: Any.Type
    /// The property's value in a model made with `init()`.
    // SAFETY (@unchecked Sendable): the value is read once from a new model and never
    // changed; it is a value of the property's type, handed out as it is.
    public let defaultValue: Any?
    /// Whether the property may be nil.
    public let isOptional: Bool
    /// Whether the property is unique, alone or with others.
    public let isUnique: Bool
    /// Whether the property is transient: never, for a stored attribute.
    public var isTransient: Bool { false }
    /// Whether the relationship is one (never, for an attribute).
    public var isRelationship: Bool { false }
    /// A hash modifier: none here.
    public var hashModifier: String? { nil }

    init<Model>(_ attribute: ModelAttribute<Model>, name: String, defaultValue: Any?) {
      self.name = name
      originalName = attribute.name
      options = attribute.options.sorted { "\($0)" < "\($1)" }
      valueType = attribute.valueType
      self.defaultValue = defaultValue
      isOptional = attribute.isOptional
      isUnique = attribute.isUnique
    }

    /// Whether both are the same property of one entity.
    public static func == (lhs: Attribute, rhs: Attribute) -> Bool {
      lhs.name == rhs.name && lhs.originalName == rhs.originalName
        && lhs.valueType == rhs.valueType
    }

    /// Hashes the name and the column.
    public func hash(into hasher: inout Hasher) {
      hasher.combine(name)
      hasher.combine(originalName)
    }
  }

  /// A relationship of an entity: SwiftData's `Schema.Relationship`.
  public final class Relationship: SchemaProperty, Hashable, @unchecked Sendable {
    /// What deleting the owner does to the related models.
    public typealias DeleteRule = PersistenceCore.DeleteRule

    /// The property's name.
    public let name: String
    /// The related entity's name.
    public let destination: String
    /// The property.
    // SAFETY (@unchecked Sendable): key paths are immutable values.
    public let keypath: AnyKeyPath
    /// The inverse's property on the related model, if one is declared.
    public let inverseKeyPath: AnyKeyPath?
    /// The delete rule.
    public let deleteRule: DeleteRule
    /// Whether it relates one model (`T?`), not many (`[T]`).
    public let isToOneRelationship: Bool
    /// Whether it may be nil or empty: always.
    public var isOptional: Bool { true }
    /// Whether the relationship is one: always.
    public var isRelationship: Bool { true }
    /// The fewest related models: no bound here.
    public var minimumModelCount: Int? { 0 }
    /// The most related models: one for a to-one, no bound for a to-many.
    public var maximumModelCount: Int? { isToOneRelationship ? 1 : 0 }

    init(_ info: RelationshipInfo) {
      name = info.name
      func target<Target: PersistentModel>(_: Target.Type) -> String { Target.modelSchema.name }
      destination = target(info.target)
      keypath = info.keyPath
      inverseKeyPath = info.inverse
      deleteRule = info.deleteRule
      isToOneRelationship = info.kind == .toOne
    }

    /// Whether both are the same relationship.
    public static func == (lhs: Relationship, rhs: Relationship) -> Bool {
      lhs.keypath == rhs.keypath
    }

    /// Hashes the property.
    public func hash(into hasher: inout Hasher) { hasher.combine(keypath) }
  }
}

/// A stored property of a ``Schema/Entity``: a ``Schema/Attribute`` or a
/// ``Schema/Relationship``, as SwiftData's `SchemaProperty`.
public protocol SchemaProperty: AnyObject, Sendable {
  /// The property's name.
  var name: String { get }
  /// Whether it may be nil.
  var isOptional: Bool { get }
  /// Whether it is a relationship.
  var isRelationship: Bool { get }
}
