// The libFuzzer entry point for every reader of outside input: CSV, JSON, GeoJSON, sync feeds.
// Built and run by Tools/fuzz.sh (not part of the package build: libFuzzer supplies `main`).
import Foundation
import TripPlanner

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzReaders(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
  let data = bytes.map { Data(bytes: $0, count: count) } ?? Data()
  for format in TripFileFormat.allCases { _ = try? format.decode(data, file: "fuzz") }
  _ = try? SyncFeed.parse(data, file: "fuzz")
  _ = try? CSVReader.records(data)
  return 0
}
