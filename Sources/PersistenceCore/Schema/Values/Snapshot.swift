/// How an entity's snapshots are laid out: one slot per attribute, each holding a value of the
/// attribute's own slot type (no `Any` box) at an aligned offset, in memory its holder owns (a
/// registration's tail). The one place that knows the layout; made once per entity.
///
/// Every slot handed out carries its type, which ``SnapshotSlot`` checks in debug builds (as
/// swift-collections' `_UnsafeHandle` checks its invariants): a value of another type stored
/// or read there is a programming error that traps, never memory read as the wrong type.
final class SnapshotLayout: Sendable {
  /// One slot's needs, from its attribute.
  struct Slot: Sendable {
    var size: Int
    var alignment: Int
    var type: ObjectIdentifier
    var destroy: (any SnapshotSlotKind.Type)?
  }
  /// Each slot's offset from the snapshot's start.
  let offsets: [Int]
  /// Each slot's type.
  let types: [ObjectIdentifier]
  /// The slots that need deinitializing (not plain data), in order: the slot's index, its
  /// offset, and how to deinitialize it.
  let nontrivial: [(index: Int, offset: Int, destroy: any SnapshotSlotKind.Type)]
  /// The snapshot's bytes and alignment.
  let size: Int
  let alignment: Int

  init(_ slots: [Slot]) {
    var offsets: [Int] = []
    var size = 0
    var alignment = 1
    for slot in slots {
      let slotAlignment = max(slot.alignment, 1)
      size = (size + slotAlignment - 1) / slotAlignment * slotAlignment
      offsets.append(size)
      size += slot.size
      alignment = max(alignment, slotAlignment)
    }
    self.offsets = offsets
    types = slots.map(\.type)
    nontrivial = slots.indices.compactMap { index in
      slots[index].destroy.map { (index, offsets[index], $0) }
    }
    self.size = max(size, 1)
    self.alignment = alignment
  }

  /// The number of slots.
  var count: Int { offsets.count }

  /// Bytes a holder must give so that a snapshot fits at any 8-byte-aligned address.
  var storageBytes: Int { size + max(alignment - 8, 0) }

  /// Where a snapshot starts in 8-byte-aligned storage of ``storageBytes``.
  func start(in storage: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
    Self.start(in: storage, alignment: alignment)
  }

  /// Where a snapshot of `alignment` starts in 8-byte-aligned storage.
  @inline(__always)
  static func start(in storage: UnsafeMutableRawPointer, alignment: Int) -> UnsafeMutableRawPointer
  {
    alignment <= 8 ? storage : storage.alignedUp(toMultipleOf: alignment)
  }

  /// Slot `index` of the snapshot at `snapshot`.
  @inline(__always)
  func slot(_ index: Int, of snapshot: UnsafeMutableRawPointer, isInitialized: Bool)
    -> SnapshotSlot
  {
    SnapshotSlot(snapshot + offsets[index], isInitialized: isInitialized, type: types[index])
  }

  /// Deinitializes the first `count` slots of a snapshot (the memory stays its holder's).
  func destroy(_ snapshot: UnsafeMutableRawPointer, initialized count: Int) {
    nontrivial.withUnsafeBufferPointer { slots in
      for slot in slots where slot.index < count { slot.destroy.destroy(snapshot + slot.offset) }
    }
  }
}

/// What a snapshot slot holds, for deinitializing it (see `ModelAttribute.destroySlot`).
@usableFromInline
protocol SnapshotSlotKind: SendableMetatype {
  /// Deinitializes the value in `slot`.
  static func destroy(_ slot: UnsafeMutableRawPointer)
}

/// A slot holding a `Slot`.
@usableFromInline
enum SlotKind<Slot>: SnapshotSlotKind {
  @inlinable
  static func destroy(_ slot: UnsafeMutableRawPointer) {
    _ = slot.assumingMemoryBound(to: Slot.self).deinitialize(count: 1)
  }
}

/// One attribute's place in a snapshot: memory for a value of the slot's type, initialized or
/// not yet. Made only by ``SnapshotLayout`` and ``ModelRow``; each access checks the type in debug builds.
@usableFromInline
struct SnapshotSlot {
  @usableFromInline let pointer: UnsafeMutableRawPointer
  @usableFromInline let isInitialized: Bool
  /// The slot's type.
  @usableFromInline let type: ObjectIdentifier

  @inlinable
  init(_ pointer: UnsafeMutableRawPointer, isInitialized: Bool, type: ObjectIdentifier) {
    self.pointer = pointer
    self.isInitialized = isInitialized
    self.type = type
  }

  /// Puts `value` in the slot, replacing the value there if any (taking it over: a caller's
  /// last use moves it in, with no copy).
  @inlinable @inline(__always)
  func store<Value>(_ value: consuming Value) {
    check(Value.self)
    if isInitialized {
      pointer.assumingMemoryBound(to: Value.self).pointee = value
    } else {
      pointer.initializeMemory(as: Value.self, to: value)
    }
  }

  /// The value in an initialized slot.
  @inlinable @inline(__always)
  func load<Value>(as _: Value.Type) -> Value {
    check(Value.self)
    assert(isInitialized, "A snapshot slot was read before it was initialized.")
    return pointer.assumingMemoryBound(to: Value.self).pointee
  }

  /// Traps in debug builds when `Value` is not the slot's type.
  @inlinable @inline(__always)
  func check<Value>(_: Value.Type) {
    assert(
      ObjectIdentifier(Value.self) == type,
      "A snapshot slot of another type was accessed as \(Value.self).")
  }
}

/// The snapshot of a `.codable` value: the value itself when it is `Equatable`, else its
/// stored encoding (a mutable instance would change under a kept reference).
@usableFromInline
enum CodableSnapshot<Value> {
  case value(Value?)
  case encoded(SQLValue)
}
