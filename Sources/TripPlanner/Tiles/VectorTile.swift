/// Writes Mapbox Vector Tiles (version 2.1): Protocol Buffers messages of layers of point
/// features, each with its properties in the layer's tables of keys and values, written
/// once each.
///
/// Cost: O(features × properties) with a hash of each key and value.
struct VectorTileWriter {
  /// A property's value, as MVT's `Value` message holds it.
  enum Value: Hashable {
    case string(String)
    case double(Double)
    case unsigned(UInt64)
    case bool(Bool)
  }

  /// One layer being written.
  struct Layer {
    let name: String
    let extent: Int
    private var keys: [String] = []
    private var keyIndex: [String: UInt32] = [:]
    private var values: [Value] = []
    private var valueIndex: [Value: UInt32] = [:]
    private var features: [UInt8] = []
    private(set) var count = 0

    init(name: String, extent: Int) {
      self.name = name
      self.extent = extent
    }

    /// Adds a point at `x`, `y` (tile units) with `id` and `properties` in their order; a nil
    /// value leaves the property out.
    mutating func addPoint(id: UInt64?, x: Int, y: Int, properties: [(String, Value?)]) {
      var feature: [UInt8] = []
      if let id {
        feature.appendKey(1, wire: 0)
        feature.appendVarint(id)
      }
      var tags: [UInt8] = []
      for (key, value) in properties {
        guard let value else { continue }
        tags.appendVarint(UInt64(index(ofKey: key)))
        tags.appendVarint(UInt64(index(of: value)))
      }
      if !tags.isEmpty {
        feature.appendKey(2, wire: 2)
        feature.appendVarint(UInt64(tags.count))
        feature.append(contentsOf: tags)
      }
      feature.appendKey(3, wire: 0)
      feature.appendVarint(1)  // POINT
      var geometry: [UInt8] = []
      geometry.appendVarint(1 | (1 << 3))  // MoveTo, once
      geometry.appendVarint(Self.zigzag(x))
      geometry.appendVarint(Self.zigzag(y))
      feature.appendKey(4, wire: 2)
      feature.appendVarint(UInt64(geometry.count))
      feature.append(contentsOf: geometry)
      features.appendKey(2, wire: 2)
      features.appendVarint(UInt64(feature.count))
      features.append(contentsOf: feature)
      count += 1
    }

    private mutating func index(ofKey key: String) -> UInt32 {
      if let index = keyIndex[key] { return index }
      let index = UInt32(keys.count)
      keys.append(key)
      keyIndex[key] = index
      return index
    }

    private mutating func index(of value: Value) -> UInt32 {
      if let index = valueIndex[value] { return index }
      let index = UInt32(values.count)
      values.append(value)
      valueIndex[value] = index
      return index
    }

    static func zigzag(_ value: Int) -> UInt64 {
      UInt64(bitPattern: Int64((value << 1) ^ (value >> (Int.bitWidth - 1))))
    }

    /// The layer's message.
    func encoded() -> [UInt8] {
      var layer: [UInt8] = []
      layer.appendKey(15, wire: 0)
      layer.appendVarint(2)
      layer.appendString(1, name)
      layer.append(contentsOf: features)
      for key in keys { layer.appendString(3, key) }
      for value in values {
        var message: [UInt8] = []
        switch value {
        case .string(let string): message.appendString(1, string)
        case .double(let double):
          message.appendKey(3, wire: 1)
          withUnsafeBytes(of: double.bitPattern.littleEndian) { message.append(contentsOf: $0) }
        case .unsigned(let number):
          message.appendKey(5, wire: 0)
          message.appendVarint(number)
        case .bool(let bool):
          message.appendKey(7, wire: 0)
          message.appendVarint(bool ? 1 : 0)
        }
        layer.appendKey(4, wire: 2)
        layer.appendVarint(UInt64(message.count))
        layer.append(contentsOf: message)
      }
      layer.appendKey(5, wire: 0)
      layer.appendVarint(UInt64(extent))
      return layer
    }
  }

  /// The tile of `layers` (those with features; an empty tile is zero bytes, as MVT allows).
  static func tile(_ layers: [Layer]) -> [UInt8] {
    var tile: [UInt8] = []
    for layer in layers where layer.count > 0 {
      let bytes = layer.encoded()
      tile.appendKey(3, wire: 2)
      tile.appendVarint(UInt64(bytes.count))
      tile.append(contentsOf: bytes)
    }
    return tile
  }
}

extension [UInt8] {
  fileprivate mutating func appendVarint(_ value: UInt64) {
    var value = value
    while value >= 0x80 {
      append(UInt8(truncatingIfNeeded: value) | 0x80)
      value >>= 7
    }
    append(UInt8(value))
  }

  fileprivate mutating func appendKey(_ field: UInt64, wire: UInt64) {
    appendVarint(field << 3 | wire)
  }

  fileprivate mutating func appendString(_ field: UInt64, _ string: String) {
    var string = string
    string.withUTF8 { bytes in
      appendKey(field, wire: 2)
      appendVarint(UInt64(bytes.count))
      append(contentsOf: bytes)
    }
  }
}
