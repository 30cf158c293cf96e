import Foundation

extension Entity {
  /// Checks the schema's positional row code (``ModelSchema/loading(_:)`` and
  /// ``ModelSchema/saving(_:)``) against its attributes, so that a loader or binder that reads
  /// or binds out of the schema's order is an error when the container opens, not a trap at
  /// the first fetch or save, nor, between two attributes of one type, values silently put in
  /// each other's place.
  ///
  /// The loader reads probe rows, whose columns hold values that tell every column from every
  /// other in one of ⌈log₂(attributes + 1)⌉ rounds (column `i` holds bit `r` of `i + 1` in
  /// round `r`, as its storage type writes 0 and 1); each attribute of the model it makes must
  /// then read back as its own column's value. The binder binds a model holding the same values,
  /// each parameter of which must be its attribute's value. A read or bind of another type than
  /// the next attribute's, or too few or too many, is found in the first round. `.codable`
  /// attributes hold the model's default value in every round: a swap of two `.codable`
  /// attributes of the same type is not seen (their slots' types are checked, as always). A
  /// loader whose initializer refuses a probe value (it throws some other error) is not
  /// judged by that round.
  ///
  /// Cost: a few loads and binds of one row per model type, once per container.
  ///
  /// - Parameter defaultValues: Each attribute's value in a new model, as
  ///   ``EntityDescription`` found them.
  /// - Throws: ``PersistenceError/Code/invalidValue`` naming the model and the attribute.
  func checkRowCode(defaultValues: [SQLValue]) throws {
    guard schema.loader != nil || schema.binder != nil else { return }
    do {
      try probeRowCode(defaultValues: defaultValues)
    } catch let refusal as RowCodeRefusal {
      throw refusal.error
    }
  }

  private func probeRowCode(defaultValues: [SQLValue]) throws {
    let attributes = schema.attributes
    let probeLayout = EntityLayout(
      layout: snapshotLayout, keyPaths: attributes.map(\.keyPath),
      coders: attributes.map(\.coder), modelName: "\(Model.self)", isProbe: true)
    var rounds = 1
    while (1 << rounds) <= attributes.count { rounds += 1 }
    for round in 0..<rounds {
      let expected = attributes.indices.map { index in
        attributes[index].isCodable
          ? defaultValues[index]
          : Self.probe(attributes[index].storageType, bit: ((index + 1) >> round) & 1 == 1)
      }
      let row = ProbeStatement(expected)
      var model: Model
      if let loader = schema.loader {
        var count = 0
        do {
          model = try loader(row, LoadCache(), 0, nil, probeLayout, &count)
        } catch let refusal as RowCodeRefusal {
          throw refusal
        } catch {
          continue
        }
        guard count == attributes.count else {
          try probeLayout.refuse(
            "its row loader reads \(count) of its \(attributes.count) attributes; read each attribute once, in the schema's order"
          )
        }
        for index in attributes.indices where !attributes[index].isCodable {
          guard try attributes[index].value(model) == expected[index] else {
            try probeLayout.refuse(
              "its row loader does not fill the attribute '\(attributes[index].name)' from its own column; read the attributes in the schema's order, once each"
            )
          }
        }
      } else {
        model = Model.makeForLoading()
        for index in attributes.indices where !attributes[index].isCodable {
          try assign(model, attribute: index, value: expected[index])
        }
      }
      guard let binder = schema.binder else { continue }
      let statement = ProbeStatement([])
      var count = 0
      try binder(model, statement, nil, false, probeLayout, &count)
      guard count == attributes.count else {
        try probeLayout.refuse(
          "its row binder binds \(count) of its \(attributes.count) attributes; bind each attribute once, in the schema's order"
        )
      }
      for index in attributes.indices {
        guard statement.bound[Int32(index + 1)] == (try attributes[index].value(model)) else {
          try probeLayout.refuse(
            "its row binder does not bind the attribute '\(attributes[index].name)' as its own parameter; bind the attributes in the schema's order, once each"
          )
        }
      }
    }
  }

  /// Checks a ``ModelValue`` type's initializer (`make`, which makes one value from a row)
  /// against the schema, once per type and container: it reads a probe row through a layout
  /// that compares each read's key path and type with the schema's attribute at that place,
  /// and must read every attribute. An initializer that throws an error of its own on the
  /// probe's values (native attributes hold 0, `.codable` ones `NULL`) is checked up to that
  /// read.
  ///
  /// Cost: one set lookup under a lock; the first time, one value made from one row.
  ///
  /// - Throws: ``PersistenceError/Code/invalidValue`` naming the value type and the attribute.
  func checkValueCode(_ valueType: Any.Type, _ make: (inout ModelRow<Model>) throws -> Void)
    throws
  {
    let type = ObjectIdentifier(valueType)
    if checkedValueTypes.withLock({ $0.contains(type) }) { return }
    let attributes = schema.attributes
    let layout = EntityLayout(
      layout: snapshotLayout, keyPaths: attributes.map(\.keyPath),
      coders: attributes.map(\.coder), modelName: "\(valueType), a value of \(Model.self),",
      checksKeyPaths: true)
    let probe = ProbeStatement(
      attributes.map { $0.isCodable ? .null : Self.probe($0.storageType, bit: false) })
    var row = ModelRow<Model>(
      probe, cache: LoadCache(), firstColumn: 0, snapshot: nil, entity: layout)
    do {
      try make(&row)
      if row.count != attributes.count {
        try layout.refuse(
          "its initializer reads \(row.count) of the \(attributes.count) attributes; read each attribute once, in the schema's order (skip(_:) passes over one)"
        )
      }
    } catch let refusal as RowCodeRefusal {
      throw refusal.error
    } catch {
      // The initializer's own refusal of a probe value: checked up to that read.
    }
    checkedValueTypes.withLock { _ = $0.insert(type) }
  }

  /// The probe value 0 or 1 as a column of `type` holds it.
  private static func probe(_ type: StorageType, bit: Bool) -> SQLValue {
    switch type {
    case .integer: .integer(bit ? 1 : 0)
    case .real: .real(bit ? 1 : 0)
    case .text: .text(bit ? "1" : "0")
    case .blob: .blob(Data(repeating: bit ? 1 : 0, count: 16))
    }
  }
}

/// What a probe layout's ``EntityLayout/refuse(_:)`` throws: told from the errors a loader's
/// own initializer throws, which do not refuse the schema.
struct RowCodeRefusal: Error {
  let error: PersistenceError
}

/// One row of values for ``Entity/checkRowCode()`` to load, and the parameters a binder binds
/// to it.
final class ProbeStatement: StoreStatement {
  let values: [SQLValue]
  /// Each blob's and text's bytes, valid as long as the statement.
  private let blobs: [Int32: UnsafeMutableRawBufferPointer]
  private(set) var bound: [Int32: SQLValue] = [:]

  init(_ values: [SQLValue]) {
    self.values = values
    var blobs: [Int32: UnsafeMutableRawBufferPointer] = [:]
    for (index, value) in values.enumerated() {
      let data: Data
      switch value {
      case .blob(let bytes): data = bytes
      case .text(let text): data = Data(text.utf8)
      default: continue
      }
      let bytes = UnsafeMutableRawBufferPointer.allocate(
        byteCount: max(data.count, 1), alignment: 1)
      bytes.copyBytes(from: data)
      blobs[Int32(index)] = UnsafeMutableRawBufferPointer(rebasing: bytes[0..<data.count])
    }
    self.blobs = blobs
  }

  deinit {
    for bytes in blobs.values { bytes.baseAddress.map { $0.deallocate() } }
  }

  func storage(at index: Int32) -> ColumnStorage {
    switch values[Int(index)] {
    case .null: .null
    case .integer: .integer
    case .real: .real
    case .text: .text
    case .blob: .blob
    }
  }
  func int64(at index: Int32) -> Int64 {
    if case .integer(let value) = values[Int(index)] { return value }
    return 0
  }
  func double(at index: Int32) -> Double {
    if case .real(let value) = values[Int(index)] { return value }
    return 0
  }
  func text(at index: Int32) -> String {
    if case .text(let value) = values[Int(index)] { return value }
    return ""
  }
  func bytes(at index: Int32) -> UnsafeRawBufferPointer {
    blobs[index].map { UnsafeRawBufferPointer($0) } ?? UnsafeRawBufferPointer(start: nil, count: 0)
  }
  func bindNull(_ index: Int32) { bound[index] = .null }
  func bindInt64(_ value: Int64, at index: Int32) { bound[index] = .integer(value) }
  func bindDouble(_ value: Double, at index: Int32) { bound[index] = .real(value) }
  func bindText(_ value: String, at index: Int32) { bound[index] = .text(value) }
  func bindBytes(_ bytes: UnsafeRawBufferPointer, at index: Int32) {
    bound[index] = .blob(Data(bytes))
  }
  func step() throws -> Bool { false }
  func reset() { bound = [:] }
  func rewind() {}
}
