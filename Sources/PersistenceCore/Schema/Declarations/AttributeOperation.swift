import Foundation

/// An attribute's access closure: the model, and what to do.
@usableFromInline
typealias AttributeAccess = @Sendable (AnyObject, AttributeOperation) throws -> AttributeAnswer

/// What an attribute's access closure answers: each operation has exactly one kind of answer
/// (see ``AttributeOperation``), and a caller that gets another has met a programming error,
/// which traps (never a silent "changed" or a stand-in key path).
@usableFromInline
enum AttributeAnswer {
  /// The operation was done (`load`, `bind`, `assign`, `record`, `restore`).
  case done
  /// The stored form of the property (`value`).
  case value(SQLValue)
  /// Whether the property equals the snapshot's value (`matches`).
  case matches(Bool)

  /// The answer to `value`.
  func storedValue(_ attribute: String) -> SQLValue {
    guard case .value(let value) = self else { mismatch(attribute, "value") }
    return value
  }
  /// The answer to `matches`.
  func isMatch(_ attribute: String) -> Bool {
    guard case .matches(let same) = self else { mismatch(attribute, "matches") }
    return same
  }
  private func mismatch(_ attribute: String, _ operation: String) -> Never {
    preconditionFailure("The attribute \(attribute) answered \(self) to \(operation).")
  }
}

/// What ``ModelAttribute``'s access closure is asked to do with a model's property.
@usableFromInline
enum AttributeOperation {
  /// Read column `index` of the current row into the property, and into the slot if given;
  /// the flag tells that the model is new (no one can observe it yet).
  case load(BorrowedRow, Int32, BorrowedCache, SnapshotSlot?, Bool)
  /// Bind the property to parameter `index`.
  case bind(BorrowedStatement, Int32)
  /// Answer the property's stored form, an ``SQLValue``.
  case value
  /// Set the property from a stored value.
  case assign(SQLValue)
  /// Copy the property into a snapshot slot.
  case record(SnapshotSlot)
  /// Answer whether the property equals the value in an initialized slot (a `Bool`).
  case matches(SnapshotSlot)
  /// Set the property back to the value in an initialized slot.
  case restore(SnapshotSlot)
  /// Decode a value loaded lazily (``CodableFault``) now, throwing when it cannot; other
  /// attributes have nothing to do.
  case resolve
}

/// The row of a running fetch, which the operation does not own: the caller keeps it alive for
/// the call. (Each read of the `unowned(unsafe)` property for a call still costs a retain and
/// a release, as callgrind shows; ``ModelRow``, the path rows take into new models, holds the
/// row strongly instead and pays one pair per row.)
@usableFromInline
struct BorrowedRow {
  @usableFromInline unowned(unsafe) let object: any StoreRow
  @inlinable @inline(__always) init(_ object: any StoreRow) { self.object = object }
}

/// The statement of a running save, borrowed as ``BorrowedRow`` is.
@usableFromInline
struct BorrowedStatement {
  @usableFromInline unowned(unsafe) let object: any StoreStatement
  @inlinable @inline(__always) init(_ object: any StoreStatement) { self.object = object }
}

/// The cache of a running fetch, borrowed as ``BorrowedRow`` is.
@usableFromInline
struct BorrowedCache {
  @usableFromInline unowned(unsafe) let object: LoadCache
  @inlinable @inline(__always) init(_ object: LoadCache) { self.object = object }
}
