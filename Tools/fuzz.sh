#!/usr/bin/env bash
# Fuzzes every reader of outside input (CSV, JSON, GeoJSON, sync feeds, the service's query
# parameters) with libFuzzer and
# AddressSanitizer for a bounded time, starting from the sample data and its exports.
#   Tools/fuzz.sh [seconds]      (default 60)
# Inputs that crash are written to Tools/Fuzz/crashes/; turn each into a test.
#
# The harness (Tools/Fuzz/FuzzReaders.swift) is linked here rather than by SwiftPM: SwiftPM
# gives every executable a `main`, and libFuzzer brings its own.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build=.build/fuzz/release
swift build -c release --target TripService --build-path .build/fuzz -Xswiftc -sanitize=fuzzer,address >&2
swiftc -O -sanitize=fuzzer,address -parse-as-library Tools/Fuzz/FuzzReaders.swift -I "$build/Modules" \
  -Xcc -fmodule-map-file=Sources/CSQLite/module.modulemap -Xcc -fmodule-map-file=Sources/CProj/module.modulemap \
  -Xcc -fmodule-map-file=Sources/CMicroHTTPD/module.modulemap \
  "$build"/TripService.build/*.o "$build"/TripPlanner.build/*.o "$build"/Persistence.build/*.o "$build"/Geo.build/*.o \
  -lsqlite3 -lproj -lmicrohttpd -o "$build/trips-fuzz" 2> >(grep -v "ld.gold: warning" >&2)
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp Data/sample-trips.csv "$corpus/"
printf 'bbox=170,-30,-170,0&datetime=2027-01-01/..&limit=100&offset=10&sortby=-name&q=a' >"$corpus/query"
printf 'datetime=../2027-04-01T22:00:00Z&destination=Z%%C3%%BCrich&bbox=-1e2,0,1,2' >"$corpus/query2"
swift build -c release --product trips >&2
store="$corpus/store.sqlite"
.build/release/trips import --store "$store" Data/sample-trips.csv >/dev/null
.build/release/trips export --store "$store" --format json --output "$corpus/trips.json"
.build/release/trips export --store "$store" --format geojson --output "$corpus/trips.geojson"
.build/release/trips sync export --store "$store" --output "$corpus/feed.jsonl" 2>/dev/null
rm -f "$store"*
mkdir -p Tools/Fuzz/crashes
"$build/trips-fuzz" "$corpus" -max_total_time="$seconds" -max_len=4096 \
  -artifact_prefix=Tools/Fuzz/crashes/ -print_final_stats=1
