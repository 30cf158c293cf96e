#!/usr/bin/env bash
# The main job on the bundled sample data: install what is missing, build `trips`, load
# Data/sample-trips.csv and the plans of some of its trips (Data/sample-plans.json) into a
# fresh store, and list the trips grouped by destination.
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/install-dependencies.sh
swift build -c release --product trips >&2
store="${TMPDIR:-/tmp}/trips-sample.sqlite"
rm -f "$store" "$store-wal" "$store-shm"
.build/release/trips import --store "$store" Data/sample-trips.csv >&2
.build/release/trips import --store "$store" Data/sample-plans.json >&2
.build/release/trips list --store "$store" --group-by destination
echo "(store: $store)" >&2
