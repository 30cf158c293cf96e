/// What `@Model` writes for a stored property `var x: [X] = …` declared without
/// `@Relationship` or `@Attribute`, whose `X` is not a type the macro knows (`String`, `Date`,
/// …): a to-many when `X` is a model (SwiftData infers the relationship, as for the side of a
/// many-to-many or one-to-many whose inverse the other side names: `var tags: [Tag] = []`),
/// else an attribute of an array of `Codable` values kept as JSON. The macro cannot see types;
/// the compiler chooses among these overloads by `X`'s conformances. Not called by hand.
///
/// Cost: as the to-many or attribute each one stands for, but each read and write goes through
/// a key path to the storage (a few hundred instructions), and a model with such a property is
/// loaded and bound through its declarations (no row loader), as one with an undeclared
/// optional is (``_OptionalProperty``).
public enum _ArrayProperty {
  /// The backing storage of a to-many: its link, made on first use. A relationship starts
  /// empty: the initial value is not kept.
  public static func storage<Target: PersistentModel>(_: [Target].Type, _ initial: [Target])
    -> ToMany<Target>?
  { nil }

  /// The backing storage of an attribute: the value.
  public static func storage<Value: PersistableValue>(_: Value.Type, _ initial: Value) -> Value {
    initial
  }

  /// Reads a to-many through its link, made now if it is not yet.
  public static func get<Owner: LinksOnFirstUse, Target: PersistentModel>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, ToMany<Target>?>,
    _ keyPath: KeyPath<Owner, [Target]>, _ registrar: borrowing ModelObservationRegistrar
  ) -> [Target] {
    owner.link(&owner[keyPath: storage]).value(of: owner)
  }

  /// Reads an attribute, recording the read for observers.
  public static func get<Owner: PersistentModel, Value: PersistableValue>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, Value>,
    _ keyPath: KeyPath<Owner, Value>, _ registrar: borrowing ModelObservationRegistrar
  ) -> Value {
    registrar.access(owner, keyPath: keyPath)
    return owner[keyPath: storage]
  }

  /// Sets a to-many through its link (which updates the inverse of the models it gains or
  /// loses).
  public static func set<Owner: LinksOnFirstUse, Target: PersistentModel>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, ToMany<Target>?>,
    _ newValue: [Target], _ keyPath: KeyPath<Owner, [Target]>,
    _ registrar: borrowing ModelObservationRegistrar
  ) {
    owner.link(&owner[keyPath: storage]).set(newValue, of: owner)
  }

  /// Sets an attribute, telling observers of a change, not of an equal value.
  public static func set<Owner: PersistentModel, Value: PersistableValue>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, Value>, _ newValue: Value,
    _ keyPath: KeyPath<Owner, Value>, _ registrar: borrowing ModelObservationRegistrar
  ) {
    guard owner[keyPath: storage] != newValue else {
      owner[keyPath: storage] = newValue
      return
    }
    registrar.withMutation(of: owner, keyPath: keyPath) { owner[keyPath: storage] = newValue }
  }
}

extension ModelAttribute {
  /// The schema's entry for a `@Model` property of ``_ArrayProperty``: a to-many whose inverse
  /// (the related model's relationship that names it) is found in the related model's schema,
  /// its link made on first use in `storage`.
  public static func _array<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, [Target]>, _ name: String,
    storage: ReferenceWritableKeyPath<Model, ToMany<Target>?>
  ) -> ModelAttribute where Model: LinksOnFirstUse {
    nonisolated(unsafe) let storage = storage
    return toMany(
      keyPath, name, link: { $0.link(&$0[keyPath: storage]) }, existing: { $0[keyPath: storage] })
  }

  /// The schema's entry for a `@Model` property of ``_ArrayProperty``: an attribute.
  public static func _array<Value: PersistableValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    storage: ReferenceWritableKeyPath<Model, Value>
  ) -> ModelAttribute {
    attribute(keyPath, name, storage: storage)
  }

  /// The schema's entry for a `@Model` property of ``_ArrayProperty`` that a `#Unique` or
  /// `#Index` names: an attribute with those options.
  public static func _array<Value: PersistableValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ option: AttributeOption, _ more: AttributeOption...,
    storage: ReferenceWritableKeyPath<Model, Value>
  ) -> ModelAttribute {
    ModelAttribute(attribute(keyPath, name, storage: storage), options: Set([option] + more))
  }
}
