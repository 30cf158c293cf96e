/// The results of a ``ResultsObserver``: a random-access collection stored in chunks, so that a
/// change patches one chunk instead of copying or shifting the whole array.
///
/// Cost: subscript O(log c) for c chunks (of at most 512 models); insert and remove O(512 + c).
public struct ObservedResults<Model>: RandomAccessCollection {
  /// The most models a chunk holds (512; tests use small limits to exercise the splits).
  let chunkLimit: Int
  var chunks: [[Model]] = []
  /// `starts[i]` is the index of the first element of `chunks[i]`.
  var starts: [Int] = []
  /// The number of models.
  public private(set) var count = 0

  /// Creates results from models in order.
  init(_ models: [Model] = [], chunkLimit: Int = 512) {
    precondition(chunkLimit >= 2, "a chunk must be able to split")
    self.chunkLimit = chunkLimit
    var index = 0
    while index < models.count {
      let end = Swift.min(index + chunkLimit / 2, models.count)
      chunks.append(Array(models[index..<end]))
      starts.append(index)
      index = end
    }
    count = models.count
  }

  /// The first index, 0.
  public var startIndex: Int { 0 }
  /// The number of models.
  public var endIndex: Int { count }

  /// The model at `position`.
  public subscript(position: Int) -> Model {
    let chunk = chunkIndex(containing: position)
    return chunks[chunk][position - starts[chunk]]
  }

  /// A plain array of the models (O(n)).
  public var array: [Model] { chunks.flatMap { $0 } }

  private func chunkIndex(containing position: Int) -> Int {
    var low = 0
    var high = starts.count - 1
    while low < high {
      let middle = (low + high + 1) / 2
      if starts[middle] <= position { low = middle } else { high = middle - 1 }
    }
    return low
  }

  mutating func insert(_ model: Model, at position: Int) {
    if chunks.isEmpty {
      chunks = [[model]]
      starts = [0]
      count = 1
      return
    }
    var chunk = position == count ? chunks.count - 1 : chunkIndex(containing: position)
    chunks[chunk].insert(model, at: position - starts[chunk])
    count += 1
    if chunks[chunk].count > chunkLimit {
      let tail = Array(chunks[chunk][(chunkLimit / 2)...])
      chunks[chunk].removeSubrange((chunkLimit / 2)...)
      chunks.insert(tail, at: chunk + 1)
      starts.insert(0, at: chunk + 1)
    }
    chunk = Swift.max(chunk, 0)
    renumber(from: chunk)
  }

  mutating func remove(at position: Int) {
    let chunk = chunkIndex(containing: position)
    chunks[chunk].remove(at: position - starts[chunk])
    count -= 1
    if chunks[chunk].isEmpty {
      chunks.remove(at: chunk)
      starts.remove(at: chunk)
    }
    renumber(from: chunk)
  }

  private mutating func renumber(from chunk: Int) {
    var start = chunk > 0 ? starts[chunk - 1] + chunks[chunk - 1].count : 0
    for index in chunk..<chunks.count {
      starts[index] = start
      start += chunks[index].count
    }
  }
}
