#!/usr/bin/env bash
# Runs valgrind's memcheck over the code that owns C objects the sanitizers cannot see into
# (libproj): `trips bounds` with CRSs that PROJ refuses at each step of creating a projection
# (unknown, an operation instead of a CRS, not a CRS at all) and with ones that work (each trip
# projected, the box densified and split at 180°, since the sample trips cross it), and `trips
# watch` (the BoundsController's projections). Any invalid read or write, or use after free,
# fails the run, and then `trips serve` (libmicrohttpd) through every kind of request. (The test
# bundle itself cannot run under valgrind 3.19: it gives up on the bundle's DWARF debug
# information.)
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

# libmicrohttpd: `trips serve` under memcheck, through requests that succeed, fail, write, are
# refused before their body is read (413), and a SIGTERM drain.
token=$(printf 'v%.0s' {1..20})
printf 'vera:%s\n' "$token" >"$work/tokens"
chmod 600 "$work/tokens"
valgrind --quiet --leak-check=no --log-file="$work/serve.err" "$bin/trips" serve --port 0 \
  --store "$work/trips.sqlite" --token-file "$work/tokens" >"$work/serve.out" 2>/dev/null &
server=$!
for _ in $(seq 1 120); do grep -q Listening "$work/serve.out" 2>/dev/null && break; sleep 0.5; done
url=$(sed 's/Listening on //' "$work/serve.out")
feature='{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"name":"V","destination":"W","startDate":"2027-01-01","endDate":"2027-01-02"}}'
codes=""
for path in / /api "/collections/trips" "/collections/trips/items?bbox=170,-30,-170,0&limit=5" \
  "/collections/trips/items?limit=x" /nothing "/collections/trips/bounds?crs=EPSG:3035" \
  "/collections/trips/sections"; do
  codes+="$(curl -s -o /dev/null -w '%{http_code}' "$url$path") "
done
codes+="$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/geo+json' --data "$feature" "$url/collections/trips/items") "
codes+="$(head -c 17000000 /dev/zero | curl -s -o /dev/null -w '%{http_code}' -X POST \
  --data-binary @- "$url/collections/trips/items")"
kill -TERM "$server"
wait "$server" || true
if grep -q "Invalid \(read\|write\|free\)\|freed\|Mismatched free" "$work/serve.err"; then
  echo "FAIL  trips serve (statuses $codes)" >&2
  grep -A12 "Invalid\|freed" "$work/serve.err" | head -40 >&2
  failed=1
else
  echo "ok    trips serve: statuses $codes, SIGTERM"
fi
exit "$failed"
