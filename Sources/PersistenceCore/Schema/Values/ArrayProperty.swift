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
  /// empty, and is set once the model's stored properties are: a non-empty value here (an
  /// initial value, or an initializer that sets the array before the other stored properties)
  /// would be lost, so it traps, saying what to do.
  public static func storage<Target: PersistentModel>(_: [Target].Type, _ initial: [Target])
    -> ToMany<Target>?
  {
    precondition(
      initial.isEmpty,
      "A to-many relationship of \(Target.self) models starts empty: declare it '= []', and set it in the initializer after the model's other stored properties (set before them, its models would be lost)."
    )
    return nil
  }

  /// The backing storage of an attribute (an array of `Codable` values, kept as JSON): the
  /// value.
  @_disfavoredOverload
  public static func storage<Value: Codable & SendableMetatype>(_: Value.Type, _ initial: Value)
    -> Value
  { initial }

  /// Traps for a to-many set before the model's other stored properties (its init accessor is
  /// given the models, which it cannot keep: relating them needs the model whole), naming it.
  public static func checkStartsEmpty<Target: PersistentModel>(_ initial: [Target], _ name: String)
  {
    precondition(
      initial.isEmpty,
      "The to-many '\(name)' is set before the model's other stored properties: set it after them in the initializer (its \(Target.self) models would be lost)."
    )
  }

  /// Reads a to-many through its link, made now if it is not yet.
  public static func get<Owner: LinksOnFirstUse, Target: PersistentModel>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, ToMany<Target>?>,
    _ keyPath: KeyPath<Owner, [Target]>, _ registrar: borrowing ModelObservationRegistrar
  ) -> [Target] {
    owner.link(&owner[keyPath: storage]).value(of: owner)
  }

  /// Reads an attribute, recording the read for observers.
  @_disfavoredOverload
  public static func get<Owner: PersistentModel, Value: Codable & SendableMetatype>(
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

  /// Sets an attribute, telling observers.
  @_disfavoredOverload
  public static func set<Owner: PersistentModel, Value: Codable & SendableMetatype>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, Value>, _ newValue: Value,
    _ keyPath: KeyPath<Owner, Value>, _ registrar: borrowing ModelObservationRegistrar
  ) {
    registrar.withMutation(of: owner, keyPath: keyPath) { owner[keyPath: storage] = newValue }
  }

  /// Sets an attribute of equatable values, telling observers of a change, not of an equal
  /// value.
  @_disfavoredOverload
  public static func set<Owner: PersistentModel, Value: Codable & SendableMetatype & Equatable>(
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

  /// The schema's entry for a `@Model` property of ``_ArrayProperty``: an attribute of an
  /// array of `Codable` values, kept as JSON.
  @_disfavoredOverload
  public static func _array<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    storage: ReferenceWritableKeyPath<Model, Value>
  ) -> ModelAttribute {
    attribute(keyPath, name, storage: storage)
  }

  /// The schema's entry for a `@Model` property of ``_ArrayProperty`` that a `#Unique` or
  /// `#Index` names: an attribute with those options.
  @_disfavoredOverload
  public static func _array<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value>, _ name: String,
    _ option: AttributeOption, _ more: AttributeOption...,
    storage: ReferenceWritableKeyPath<Model, Value>
  ) -> ModelAttribute {
    ModelAttribute(attribute(keyPath, name, storage: storage), options: Set([option] + more))
  }
}
