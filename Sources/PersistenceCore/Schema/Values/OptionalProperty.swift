/// What `@Model` writes for a stored property `var x: X?` declared without `@Relationship` or
/// `@Attribute(.codable)`, whose `X` is not a type the macro knows (`String`, `Date`, …): a
/// to-one when `X` is a model (SwiftData's side of a relationship whose inverse the other side
/// names, `var trip: Trip?`), else an attribute of a ``PersistableValue`` of your own. The
/// macro cannot see types; the compiler chooses among these overloads by `X`'s conformances.
/// Not called by hand.
///
/// Cost: as the to-one or attribute each one stands for. A model with such a property is
/// loaded and bound through its declarations (no row loader), as a model with a key-storing
/// to-one is.
public enum _OptionalProperty {
  /// The backing storage of a to-one: its link, made with the model (it holds the key column).
  public static func storage<Target: PersistentModel>(_: Target.Type) -> ToOne<Target> {
    ToOne()
  }

  /// The backing storage of an attribute: the value, nil until set.
  public static func storage<Value: PersistableValue>(_: Value.Type) -> Value? { nil }

  /// What a type that is neither a model nor kept by the store finds: an error at the
  /// property, saying what to do.
  @available(
    *, unavailable,
    message:
      "The store keeps optionals of models (a to-one), of String, Int, Int8…Int64, UInt8…UInt32, Double, Float, Bool, Date, UUID, Data, URL and PersistableValue types, of enums with their raw values, and of other Codable types as JSON: make the type Codable, or a PersistableValue"
  )
  public static func storage<Other>(_: Other.Type) -> Other? { nil }

  /// Reads a property of a type the store does not keep: refused at compile time (see
  /// `storage(_:)`).
  @available(
    *, unavailable,
    message:
      "The store keeps optionals of models (a to-one), of String, Int, Int8…Int64, UInt8…UInt32, Double, Float, Bool, Date, UUID, Data, URL and PersistableValue types, of enums with their raw values, and of other Codable types as JSON: make the type Codable, or a PersistableValue"
  )
  public static func get<Owner: PersistentModel, Other>(
    _ owner: Owner, _ storage: Other?, _ keyPath: KeyPath<Owner, Other?>,
    _ registrar: borrowing ModelObservationRegistrar
  ) -> Other? { storage }

  /// Sets a property of a type the store does not keep: refused at compile time.
  @available(
    *, unavailable,
    message:
      "The store keeps optionals of models (a to-one), of String, Int, Int8…Int64, UInt8…UInt32, Double, Float, Bool, Date, UUID, Data, URL and PersistableValue types, of enums with their raw values, and of other Codable types as JSON: make the type Codable, or a PersistableValue"
  )
  public static func set<Owner: PersistentModel, Other>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, Other?>, _ newValue: Other?,
    _ keyPath: KeyPath<Owner, Other?>, _ registrar: borrowing ModelObservationRegistrar
  ) {}

  /// Reads a to-one through its link.
  public static func get<Owner: PersistentModel, Target: PersistentModel>(
    _ owner: Owner, _ storage: ToOne<Target>, _ keyPath: KeyPath<Owner, Target?>,
    _ registrar: borrowing ModelObservationRegistrar
  ) -> Target? {
    storage.value(of: owner)
  }

  /// Reads an attribute, recording the read for observers.
  public static func get<Owner: PersistentModel, Value: PersistableValue>(
    _ owner: Owner, _ storage: Value?, _ keyPath: KeyPath<Owner, Value?>,
    _ registrar: borrowing ModelObservationRegistrar
  ) -> Value? {
    registrar.access(owner, keyPath: keyPath)
    return storage
  }

  // The setters take the storage by key path, not `inout`: setting a to-one updates its
  // inverse, which may read this model's link while an `inout` access to it would be open.

  /// Sets a to-one through its link (which updates the inverse).
  public static func set<Owner: PersistentModel, Target: PersistentModel>(
    _ owner: Owner, _ storage: KeyPath<Owner, ToOne<Target>>, _ newValue: Target?,
    _ keyPath: KeyPath<Owner, Target?>, _ registrar: borrowing ModelObservationRegistrar
  ) {
    owner[keyPath: storage].set(newValue, of: owner)
  }

  /// Sets an attribute, telling observers of a change, not of an equal value.
  public static func set<Owner: PersistentModel, Value: PersistableValue>(
    _ owner: Owner, _ storage: ReferenceWritableKeyPath<Owner, Value?>, _ newValue: Value?,
    _ keyPath: KeyPath<Owner, Value?>, _ registrar: borrowing ModelObservationRegistrar
  ) {
    guard owner[keyPath: storage] != newValue else {
      owner[keyPath: storage] = newValue
      return
    }
    registrar.withMutation(of: owner, keyPath: keyPath) { owner[keyPath: storage] = newValue }
  }
}

extension ModelAttribute {
  /// The schema's entry for a `@Model` property of `_OptionalProperty`: a to-one that stores
  /// the key, its inverse found in the related model's schema.
  public static func _optional<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, Target?>, _ name: String,
    storage: @escaping @Sendable (Model) -> ToOne<Target>
  ) -> ModelAttribute {
    toOne(keyPath, name, link: storage)
  }

  /// The schema's entry for a `@Model` property of `_OptionalProperty`: an attribute (a
  /// property with `@Attribute` is one, which `@Model` declares as such).
  public static func _optional<Value: PersistableValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    storage: ReferenceWritableKeyPath<Model, Value?>
  ) -> ModelAttribute {
    attribute(keyPath, name, storage: storage)
  }

  /// The schema's entry for a `@Model` property of `_OptionalProperty` that a `#Unique` or
  /// `#Index` names: an attribute with those options.
  public static func _optional<Value: PersistableValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?>, _ name: String,
    _ option: AttributeOption, _ more: AttributeOption...,
    storage: ReferenceWritableKeyPath<Model, Value?>
  ) -> ModelAttribute {
    ModelAttribute(attribute(keyPath, name, storage: storage), options: Set([option] + more))
  }

  /// The schema's entry for a property of a type the store does not keep: refused at compile
  /// time (see `_OptionalProperty.storage(_:)`).
  @available(
    *, unavailable,
    message:
      "The store keeps optionals of models (a to-one), of String, Int, Int8…Int64, UInt8…UInt32, Double, Float, Bool, Date, UUID, Data, URL and PersistableValue types, of enums with their raw values, and of other Codable types as JSON: make the type Codable, or a PersistableValue"
  )
  public static func _optional<Other>(
    _ keyPath: ReferenceWritableKeyPath<Model, Other?>, _ name: String,
    storage: ReferenceWritableKeyPath<Model, Other?>
  ) -> ModelAttribute {
    fatalError("unavailable")
  }

  /// What a `#Unique` or `#Index` naming a to-one finds: an error where the class is declared.
  @available(
    *, unavailable,
    message:
      "#Unique and #Index name attributes: a to-one (a property of a model type) is not one; its key column is indexed already"
  )
  public static func _optional<Target: PersistentModel>(
    _ keyPath: KeyPath<Model, Target?>, _ name: String,
    _ option: AttributeOption, _ more: AttributeOption...,
    storage: @escaping @Sendable (Model) -> ToOne<Target>
  ) -> ModelAttribute {
    fatalError("unavailable")
  }
}
