/// A sorted multiset of doubles: a treap (a binary search tree kept balanced by random
/// priorities), stored in arrays.
///
/// `insert`, `remove`, `min`, `max`, `predecessor` and `successor` take O(log n) expected time
/// for n distinct values.
struct SortedMultiset {
  private var keys: [Double] = []
  private var counts: [Int] = []
  private var priorities: [UInt64] = []
  private var left: [Int] = []
  private var right: [Int] = []
  private var freeNodes: [Int] = []
  private var root = -1
  private var seed: UInt64 = 0x2545_F491_4F6C_DD1D
  /// The number of distinct values.
  private(set) var distinctCount = 0
  /// The number of values, with multiplicity.
  private(set) var count = 0

  /// How many times `key` is in the set.
  func multiplicity(of key: Double) -> Int {
    var node = root
    while node >= 0 {
      if key == keys[node] { return counts[node] }
      node = key < keys[node] ? left[node] : right[node]
    }
    return 0
  }

  /// Adds one `key`; returns true when it was not there before.
  @discardableResult
  mutating func insert(_ key: Double) -> Bool {
    count += 1
    var added = false
    root = insert(key, at: root, added: &added)
    if added { distinctCount += 1 }
    return added
  }

  /// Removes one `key`; returns true when no `key` remains. Nothing happens for a missing key.
  @discardableResult
  mutating func remove(_ key: Double) -> Bool {
    guard multiplicity(of: key) > 0 else { return false }
    count -= 1
    var gone = false
    root = remove(key, at: root, gone: &gone)
    if gone { distinctCount -= 1 }
    return gone
  }

  /// The smallest value.
  var min: Double? {
    guard root >= 0 else { return nil }
    var node = root
    while left[node] >= 0 { node = left[node] }
    return keys[node]
  }

  /// The largest value.
  var max: Double? {
    guard root >= 0 else { return nil }
    var node = root
    while right[node] >= 0 { node = right[node] }
    return keys[node]
  }

  /// The largest value smaller than `key`.
  func predecessor(_ key: Double) -> Double? {
    var node = root
    var best: Double?
    while node >= 0 {
      if keys[node] < key {
        best = keys[node]
        node = right[node]
      } else {
        node = left[node]
      }
    }
    return best
  }

  /// The smallest value larger than `key`.
  func successor(_ key: Double) -> Double? {
    var node = root
    var best: Double?
    while node >= 0 {
      if keys[node] > key {
        best = keys[node]
        node = left[node]
      } else {
        node = right[node]
      }
    }
    return best
  }

  /// The distinct values in order (O(n); for tests and rebuilding).
  var sortedKeys: [Double] {
    var result: [Double] = []
    result.reserveCapacity(distinctCount)
    func walk(_ node: Int) {
      guard node >= 0 else { return }
      walk(left[node])
      result.append(keys[node])
      walk(right[node])
    }
    walk(root)
    return result
  }

  private mutating func nextPriority() -> UInt64 {
    seed ^= seed << 13
    seed ^= seed >> 7
    seed ^= seed << 17
    return seed
  }

  private mutating func makeNode(_ key: Double) -> Int {
    let priority = nextPriority()
    if let node = freeNodes.popLast() {
      keys[node] = key
      counts[node] = 1
      priorities[node] = priority
      left[node] = -1
      right[node] = -1
      return node
    }
    keys.append(key)
    counts.append(1)
    priorities.append(priority)
    left.append(-1)
    right.append(-1)
    return keys.count - 1
  }

  private mutating func rotateRight(_ node: Int) -> Int {
    let pivot = left[node]
    left[node] = right[pivot]
    right[pivot] = node
    return pivot
  }

  private mutating func rotateLeft(_ node: Int) -> Int {
    let pivot = right[node]
    right[node] = left[pivot]
    left[pivot] = node
    return pivot
  }

  private mutating func insert(_ key: Double, at node: Int, added: inout Bool) -> Int {
    guard node >= 0 else {
      added = true
      return makeNode(key)
    }
    if key == keys[node] {
      counts[node] += 1
      return node
    }
    if key < keys[node] {
      let child = insert(key, at: left[node], added: &added)
      left[node] = child
      if priorities[child] > priorities[node] { return rotateRight(node) }
    } else {
      let child = insert(key, at: right[node], added: &added)
      right[node] = child
      if priorities[child] > priorities[node] { return rotateLeft(node) }
    }
    return node
  }

  private mutating func remove(_ key: Double, at node: Int, gone: inout Bool) -> Int {
    guard node >= 0 else { return -1 }
    if key < keys[node] {
      left[node] = remove(key, at: left[node], gone: &gone)
      return node
    }
    if key > keys[node] {
      right[node] = remove(key, at: right[node], gone: &gone)
      return node
    }
    if counts[node] > 1 {
      counts[node] -= 1
      return node
    }
    gone = true
    return deleteNode(node)
  }

  /// Removes `node` by rotating it down to a leaf.
  private mutating func deleteNode(_ node: Int) -> Int {
    if left[node] < 0 && right[node] < 0 {
      freeNodes.append(node)
      return -1
    }
    if left[node] < 0 || (right[node] >= 0 && priorities[right[node]] > priorities[left[node]]) {
      let top = rotateLeft(node)
      left[top] = deleteNode(node)
      return top
    }
    let top = rotateRight(node)
    right[top] = deleteNode(node)
    return top
  }
}
