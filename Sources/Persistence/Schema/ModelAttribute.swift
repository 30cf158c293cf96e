import Foundation

/// One stored attribute of a ``PersistentModel``: a key path, a column name and options.
///
/// Make attributes with ``attribute(_:_:_:)`` for the value types SQLite stores natively and
/// ``codable(_:_:_:)`` for any other `Codable` value, which is stored opaquely.
public struct ModelAttribute<Model: PersistentModel>: Sendable {
  /// An option on an attribute.
  public typealias Option = AttributeOption

  /// The column name.
  public let name: String
  /// The options.
  public let options: Set<Option>
  /// The SQLite storage class.
  public let storageType: StorageType
  /// Whether the column allows `NULL`.
  public let isOptional: Bool
  /// Whether the value is an opaque `.codable` value (not usable in predicates or sorts).
  public let isCodable: Bool
  /// The Swift type of the value, for messages.
  public let valueTypeName: String

  let keyPath: AnyKeyPath & Sendable
  /// Reads column `index` of the current row into the model.
  let load: @Sendable (Model, Statement, Int32) throws -> Void
  /// Binds the model's value to parameter `index`.
  let bind: @Sendable (Model, Statement, Int32) throws -> Void
  /// The model's value as stored.
  let value: @Sendable (Model) throws -> SQLValue
  /// Sets the model's value from a stored value.
  let assign: @Sendable (Model, SQLValue) throws -> Void
  /// A copy of the model's value for change tracking.
  let snapshot: @Sendable (Model) throws -> Any
  /// Whether the model's value still equals a snapshot.
  let matches: @Sendable (Model, Any) -> Bool
  /// Puts a snapshot back into the model (rollback).
  let restore: @Sendable (Model, Any) -> Void

  var isUnique: Bool { options.contains(.unique) }
  var isIndexed: Bool { options.contains(.indexed) }
  var preservesValueOnDeletion: Bool { options.contains(.preserveValueOnDeletion) }

  /// An attribute of a type SQLite stores natively: `String`, `Int`, `Double`, `Bool`, `Date`,
  /// `UUID`, `Data`, or an optional of one of them.
  ///
  /// - Parameters:
  ///   - keyPath: The model's stored property.
  ///   - name: The column name: letters, digits and underscores, not starting with `_`.
  ///   - options: ``Option/unique``, ``Option/indexed``, ``Option/preserveValueOnDeletion``.
  public static func attribute<Value: PersistableValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value> & Sendable, _ name: String,
    _ options: Option...
  ) -> ModelAttribute {
    let load: @Sendable (Model, Statement, Int32) throws -> Void
    let bind: @Sendable (Model, Statement, Int32) throws -> Void
    if let column = Value.self as? any ColumnValue.Type {
      (load, bind) = fastAccessors(keyPath, column)
    } else {
      load = { model, statement, index in
        model[keyPath: keyPath] = try Value(sqlValue: statement.value(at: index))
      }
      bind = { model, statement, index in
        statement.bindValue(model[keyPath: keyPath].sqlValue, at: index)
      }
    }
    return ModelAttribute(
      name: name, options: Set(options), storageType: Value.storageType,
      isOptional: Value.isOptional, isCodable: false, valueTypeName: "\(Value.self)",
      keyPath: keyPath, load: load, bind: bind,
      value: { model in model[keyPath: keyPath].sqlValue },
      assign: { model, value in model[keyPath: keyPath] = try Value(sqlValue: value) },
      snapshot: { model in model[keyPath: keyPath] },
      matches: { model, old in (old as? Value) == model[keyPath: keyPath] },
      restore: { model, old in if let old = old as? Value { model[keyPath: keyPath] = old } })
  }

  private static func fastAccessors<Value, Column: ColumnValue>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value> & Sendable, _: Column.Type
  ) -> (
    @Sendable (Model, Statement, Int32) throws -> Void,
    @Sendable (Model, Statement, Int32) throws -> Void
  ) {
    // Value == Column, checked by the caller; the cast happens once, not per row.
    guard let typed = keyPath as? ReferenceWritableKeyPath<Model, Column> else {
      preconditionFailure("key path value type \(Value.self) is not \(Column.self)")
    }
    // Key paths are immutable; this one is the caller's Sendable key path, retyped.
    let path = UncheckedSendable(typed)
    return (
      { model, statement, index in
        model[keyPath: path.value] = try Column.read(from: statement, at: index)
      },
      { model, statement, index in try model[keyPath: path.value].bind(to: statement, at: index) }
    )
  }

  /// An attribute of any `Codable` type, stored opaquely as JSON in a `BLOB`, like SwiftData's
  /// `.codable`: use it for types you do not own (a class included).
  ///
  /// The value cannot be used in predicates or sort descriptors (they throw), and a change of
  /// the type's shape triggers no migration: its `Codable` implementation must read older and
  /// newer encodings. Values are encoded with sorted keys, so equal values store equal bytes.
  /// Decoding happens when a row is loaded.
  public static func codable<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value> & Sendable, _ name: String,
    _ options: Option...
  ) -> ModelAttribute {
    codableAttribute(
      keyPath, name, options, isOptional: false,
      get: { Optional($0) },
      set: { value in
        guard let value else {
          throw PersistenceError(
            code: .invalidValue, message: "NULL in the non-optional .codable column \(name).")
        }
        return value
      })
  }

  /// An optional `Codable` attribute; `nil` is stored as SQL `NULL`.
  public static func codable<Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Value?> & Sendable, _ name: String,
    _ options: Option...
  ) -> ModelAttribute {
    codableAttribute(keyPath, name, options, isOptional: true, get: { $0 }, set: { $0 })
  }

  private static func codableAttribute<Stored, Value: Codable & SendableMetatype>(
    _ keyPath: ReferenceWritableKeyPath<Model, Stored> & Sendable, _ name: String,
    _ options: [Option], isOptional: Bool,
    get: @escaping @Sendable (Stored) -> Value?, set: @escaping @Sendable (Value?) throws -> Stored
  ) -> ModelAttribute {
    @Sendable func encode(_ model: Model) throws -> SQLValue {
      guard let value = get(model[keyPath: keyPath]) else { return .null }
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys]
      do {
        return .blob(try encoder.encode(value))
      } catch {
        throw PersistenceError(
          code: .invalidValue,
          message: "Cannot encode the .codable attribute \(name) of \(Model.self).",
          cause: error)
      }
    }
    @Sendable func decode(_ data: Data?) throws -> Stored {
      guard let data else { return try set(nil) }
      do {
        return try set(try JSONDecoder().decode(Value.self, from: data))
      } catch let error as PersistenceError {
        throw error
      } catch {
        throw PersistenceError(
          code: .invalidValue,
          message:
            "Cannot decode the .codable attribute \(name) of \(Model.self) as \(Value.self): its Codable implementation must read every encoding it has written.",
          cause: error)
      }
    }
    let isEquatable = Value.self is any Equatable.Type
    return ModelAttribute(
      name: name, options: Set(options), storageType: .blob, isOptional: isOptional,
      isCodable: true, valueTypeName: "\(Value.self)", keyPath: keyPath,
      load: { model, statement, index in
        model[keyPath: keyPath] = try decode(
          statement.isNull(at: index) ? nil : statement.data(at: index))
      },
      bind: { model, statement, index in statement.bindValue(try encode(model), at: index) },
      value: encode,
      assign: { model, value in
        switch value {
        case .null: model[keyPath: keyPath] = try decode(nil)
        case .blob(let data): model[keyPath: keyPath] = try decode(data)
        default: throw invalid(value, Value.self)
        }
      },
      snapshot: { model in
        let current = get(model[keyPath: keyPath])
        if isEquatable { return current as Any }
        return try encode(model)
      },
      matches: { model, old in
        let current = get(model[keyPath: keyPath])
        if isEquatable {
          let previous: Value? = (old as? Value?) ?? nil
          switch (current, previous) {
          case (nil, nil): return true
          case (let current?, let previous?):
            return (current as? any Equatable)?.isEqual(toAny: previous) ?? false
          default: return false
          }
        }
        return (try? encode(model)) == (old as? SQLValue)
      },
      restore: { model, old in
        if isEquatable, let old = old as? Value? {
          if let stored = try? set(old) { model[keyPath: keyPath] = stored }
        } else if let old = old as? SQLValue, case .blob(let data) = old {
          if let stored = try? decode(data) { model[keyPath: keyPath] = stored }
        } else if let stored = try? decode(nil) {
          model[keyPath: keyPath] = stored
        }
      })
  }
}

/// An option on a ``ModelAttribute``.
public struct AttributeOption: Hashable, Sendable {
  private let name: String
  private init(_ name: String) { self.name = name }

  /// At most one row has a given value. Inserting a model whose value exists updates that
  /// row instead (SwiftData's upsert). Implies an index.
  public static let unique = AttributeOption("unique")
  /// The column has an index, for fast predicates and sorts on it.
  public static let indexed = AttributeOption("indexed")
  /// The value is kept in history (the tombstone) when the model is deleted.
  public static let preserveValueOnDeletion = AttributeOption("preserveValueOnDeletion")
}

/// Wraps a value that is safe to share but not declared `Sendable` (an immutable key path).
struct UncheckedSendable<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}
