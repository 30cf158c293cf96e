/// One step of a key path, as the Swift runtime lays it out: what ``KeyPathComponents`` reads
/// to tell which properties a key path such as `\Room.hotel?.name` goes through.
///
/// Two components are equal when they name the same property, as `AnyKeyPath`'s `==` decides
/// for whole key paths: a stored property by its kind and offset, a computed one by its
/// identity (the property's descriptor or accessor, the same in every key path that names it,
/// whatever function the optimizer emits to read it).
enum KeyPathComponent: Hashable {
  /// A stored property of a struct (`isClass` false) or a class, at `offset`.
  case stored(isClass: Bool, offset: Int)
  /// A computed property (an `@Observable` model's attributes are), by its identity; `idKind`
  /// says whether the identity is a pointer, a stored property's index or a vtable offset.
  case computed(idKind: UInt32, id: UInt)
  /// `?` after an optional, going on with its value.
  case optionalChain
  /// The implicit wrap of the value in an optional at the end of a chain.
  case optionalWrap
  /// `!` after an optional.
  case optionalForce
}

/// The components of a key path, read from the key path object: no public API of Swift splits
/// a key path, and its `debugDescription` names a computed property by the address of a getter
/// that differs from one key path literal to another in optimized builds.
///
/// The layout read is the runtime's key path object (`KeyPath.swift` and
/// `SwiftShims/KeyPath.h` in the Swift repository; stable ABI on Apple platforms since
/// Swift 5, where key path patterns of one binary are instantiated by another's runtime):
/// after the object's header and its KVC string pointer, a 32-bit buffer header (its size in
/// the low 24 bits) padded to a word, then each component (a 32-bit header: kind in bits 24–30,
/// payload in bits 0–23; a body by kind) followed, but the last, by the pointer to the type
/// metadata of its value, word-aligned. Foundation's `Predicate` reads the same layout to check
/// its key paths.
///
/// A component this reader does not take (a subscript with arguments, an unresolved or
/// external one, a 32-bit platform) makes the whole key path unreadable: ``read(_:)`` answers
/// nil, and callers refuse the key path with an error naming it, never guess.
enum KeyPathComponents {
  private static let word = MemoryLayout<Int>.size
  private static let sizeMask: UInt32 = 0x00FF_FFFF
  private static let kindMask: UInt32 = 0x7F00_0000
  private static let kindShift: UInt32 = 24
  private static let payloadMask: UInt32 = 0x00FF_FFFF
  private static let structKind: UInt32 = 1
  private static let computedKind: UInt32 = 2
  private static let classKind: UInt32 = 3
  private static let optionalKind: UInt32 = 4
  private static let storedOffsetMask: UInt32 = 0x007F_FFFF
  private static let maximumInlineOffset: UInt32 = 0x007F_FFFC
  private static let outOfLineOffset: UInt32 = 0x007F_FFFF
  private static let settableFlag: UInt32 = 0x0040_0000
  private static let idByStoredPropertyFlag: UInt32 = 0x0020_0000
  private static let idByVTableOffsetFlag: UInt32 = 0x0010_0000
  private static let hasArgumentsFlag: UInt32 = 0x0008_0000
  private static let idResolutionMask: UInt32 = 0x0000_000F

  /// The components of `keyPath`, first to last; nil when one of them is not one this reader
  /// takes (see the type's docs). An identity key path (`\Room.self`) has none.
  ///
  /// Cost: O(components), no allocation but the array.
  static func read(_ keyPath: AnyKeyPath) -> [KeyPathComponent]? {
    guard word == 8 else { return nil }
    return withExtendedLifetime(keyPath) {
      let object = UnsafeRawPointer(Unmanaged.passUnretained(keyPath).toOpaque())
      // The object's metadata and reference counts, then the KVC string pointer.
      let buffer = object + 3 * word
      let size = Int(buffer.load(as: UInt32.self) & sizeMask)
      let start = buffer + word
      var cursor = 0
      var components: [KeyPathComponent] = []
      while cursor < size {
        guard cursor + 4 <= size else { return nil }
        let header = (start + cursor).load(as: UInt32.self)
        cursor += 4
        let payload = header & payloadMask
        switch (header & kindMask) >> kindShift {
        case structKind, classKind:
          let isClass = (header & kindMask) >> kindShift == classKind
          var offset = payload & storedOffsetMask
          if offset == outOfLineOffset {
            guard cursor + 4 <= size else { return nil }
            offset = (start + cursor).load(as: UInt32.self)
            cursor += 4
          } else if offset > maximumInlineOffset {
            return nil  // not resolved: never in an instantiated key path
          }
          components.append(.stored(isClass: isClass, offset: Int(offset)))
        case computedKind:
          // Subscripts' arguments, and identities still to be resolved, are not read.
          guard payload & hasArgumentsFlag == 0, payload & idResolutionMask == 0 else {
            return nil
          }
          cursor += word - 4  // the body is word-aligned after the 32-bit header
          guard cursor + 2 * word <= size else { return nil }
          let id = (start + cursor).loadUnaligned(as: UInt.self)
          cursor += 2 * word  // the identity, then the getter
          if payload & settableFlag != 0 { cursor += word }
          let idKind = payload & (idByStoredPropertyFlag | idByVTableOffsetFlag)
          components.append(.computed(idKind: idKind, id: id))
        case optionalKind:
          switch payload {
          case 0: components.append(.optionalChain)
          case 1: components.append(.optionalWrap)
          case 2: components.append(.optionalForce)
          default: return nil
          }
        default:
          return nil  // an external component: instantiated away in a key path object
        }
        guard cursor <= size else { return nil }
        if cursor < size {
          // The metadata of the component's value type, word-aligned.
          cursor = (cursor + word - 1) / word * word + word
        }
      }
      return cursor == size ? components : nil
    }
  }
}
