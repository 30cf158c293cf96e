#!/usr/bin/env bash
# Runs valgrind's memcheck over the code that owns C objects the sanitizers cannot see into
# (libproj): `trips bounds` with CRSs that PROJ refuses at each step of creating a projection
# (unknown, an operation instead of a CRS, not a CRS at all) and with ones that work (each trip
# projected, the box densified and split at 180°, since the sample trips cross it), and `trips
# watch` (the BoundsController's projections). Any invalid read or write, or use after free,
# fails the run. (The test bundle itself cannot run under valgrind 3.19: it gives up on the
# bundle's DWARF debug information.)
#
#   Tools/valgrind.sh            # debug build, then memcheck; prints a summary per run
#
# Leaks are not checked (the Swift runtime keeps metadata caches alive at exit); what matters
# here is that every PROJ object is freed once, in order, on every path.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is missing: Tools/install-dependencies.sh" >&2; exit 1; }
swift build >/dev/null
bin=.build/debug
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/trips" import Data/sample-trips.csv --store "$work/trips.sqlite" >/dev/null
failed=0
run() {
  local label=$1
  shift
  if valgrind --quiet --leak-check=no "$@" >"$work/out" 2>"$work/err"; then
    status=0
  else
    status=$?
  fi
  # Memory errors only: the Swift runtime's metadata initialisation makes valgrind report
  # conditional jumps on values it cannot see initialised, which are not ours.
  if grep -q "Invalid \(read\|write\|free\)\|freed\|Mismatched free" "$work/err"; then
    echo "FAIL  $label" >&2
    grep -A12 "Invalid\|freed" "$work/err" | head -40 >&2
    failed=1
  else
    echo "ok    $label (exit $status)"
  fi
}
for crs in "urn:ogc:def:coordinateOperation:EPSG::1671" "EPSG:99999" "+proj=nonsense" "" \
  "EPSG:4978" "EPSG:32633" "EPSG:3035" "+proj=merc +lon_0=150"; do
  run "trips bounds --crs '$crs'" "$bin/trips" bounds --crs "$crs" --store "$work/trips.sqlite"
done
run "trips watch --count 1 --crs EPSG:3035" "$bin/trips" watch --count 1 --crs EPSG:3035 \
  --viewport 800x600 --store "$work/trips.sqlite"
exit "$failed"
