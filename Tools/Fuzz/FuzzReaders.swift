// The libFuzzer entry point for every reader of outside input: CSV, JSON, GeoJSON, sync feeds,
// and the service's query parameters (the input split on & and =, percent-decoded).
// Built and run by Tools/fuzz.sh (not part of the package build: libFuzzer supplies `main`).
import Foundation
import TripPlanner
import TripService

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzReaders(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
  let data = bytes.map { Data(bytes: $0, count: count) } ?? Data()
  for format in TripFileFormat.allCases { _ = try? format.decode(data, file: "fuzz") }
  _ = try? SyncFeed.parse(data, file: "fuzz")
  _ = try? CSVReader.records(data)
  let text = String(decoding: data, as: UTF8.self)
  let pairs = text.split(separator: "&", omittingEmptySubsequences: false).map { item in
    let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
    let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
    let value =
      parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
    return (name: name, value: value)
  }
  _ = try? TripService.itemsQuery(pairs)
  return 0
}
