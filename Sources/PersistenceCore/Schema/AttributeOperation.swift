import Foundation
import Synchronization

/// An attribute's access closure: the model (nil to ask for the key path), and what to do.
@usableFromInline
typealias AttributeAccess = @Sendable (AnyObject?, AttributeOperation) throws -> Any

/// What ``ModelAttribute``'s access closure is asked to do with a model's property.
@usableFromInline
enum AttributeOperation {
  /// Read column `index` of the current row into the property, and into the slot if given;
  /// the flag tells that the model is new (no one can observe it yet).
  case load(any StoreRow, Int32, LoadCache, SnapshotSlot?, Bool)
  /// Bind the property to parameter `index`.
  case bind(any StoreStatement, Int32)
  /// Answer the property's stored form, an ``SQLValue``.
  case value
  /// Set the property from a stored value.
  case assign(SQLValue)
  /// Copy the property into a snapshot slot.
  case record(SnapshotSlot)
  /// Answer whether the property equals the value in an initialized slot (a `Bool`).
  case matches(UnsafeMutableRawPointer)
  /// Set the property back to the value in an initialized slot.
  case restore(UnsafeMutableRawPointer)
  /// Answer the key path (asked with no model).
  case keyPath
}

/// One attribute's place in a model's snapshot: raw memory laid out by the entity, holding a
/// value of the attribute's own type (no `Any` box), initialized or not yet.
@usableFromInline
struct SnapshotSlot {
  @usableFromInline let pointer: UnsafeMutableRawPointer
  @usableFromInline let isInitialized: Bool

  init(_ pointer: UnsafeMutableRawPointer, isInitialized: Bool) {
    self.pointer = pointer
    self.isInitialized = isInitialized
  }

  /// Puts `value` in the slot, replacing the value there if any (taking it over: a caller's
  /// last use moves it in, with no copy).
  @inlinable @inline(__always)
  func store<Value>(_ value: consuming Value) {
    if isInitialized {
      pointer.assumingMemoryBound(to: Value.self).pointee = value
    } else {
      pointer.initializeMemory(as: Value.self, to: value)
    }
  }
}

/// The snapshot of a `.codable` value: the value itself when it is `Equatable`, else its
/// stored encoding (a mutable instance would change under a kept reference).
@usableFromInline
enum CodableSnapshot<Value> {
  case value(Value?)
  case encoded(SQLValue)
}
