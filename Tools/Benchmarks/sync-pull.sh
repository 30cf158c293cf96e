#!/bin/bash
# A full pull from `trips serve` beside the server's own answer to the same request, in one
# run: SIZE generated trips (trips-generate's seed 2027) with five bucket-list items and a stay
# each (`--items 5 --stays`: 7 × SIZE changes, the first import's 100,000 trips one
# transaction) in a SQLite store; the server started on it, `curl -o /dev/null /changes`, the
# server's peak memory (`VmHWM`) read and the server stopped (the baseline: what serving the
# whole feed costs); the server started again, and `trips sync watch --from URL --once` into a
# new store, its peak memory (`/usr/bin/time`'s maximum resident set) and time. Then checks
# that the new store holds every trip, item and stay, and prints the client's peak over the
# server's.
#
# Needs release builds of trips and trips-generate (`swift build -c release --product trips`,
# the same for trips-generate), curl and /usr/bin/time (Debian's `time`).
#
# The client runs under an address-space limit (`prlimit --as`, 12 GiB) and a timeout, so
# that a client that holds the feed whole cannot take the machine down. TRIPS names another
# build of trips (an older commit's, for a before and after).
#
# Usage: [TRIPS=path] Tools/Benchmarks/sync-pull.sh [SIZE]   (default: 100000)
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${1:-100000}
trips=${TRIPS:-$PWD/.build/release/trips}
generate=$PWD/.build/release/trips-generate
for tool in "$trips" "$generate" /usr/bin/curl /usr/bin/time /usr/bin/sqlite3 /usr/bin/prlimit; do
  [ -x "$tool" ] || { echo "Missing $tool (see the header of $0)" >&2; exit 66; }
done
folder=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$folder"
}
trap cleanup EXIT
"$generate" --count "$size" --items 5 --stays --store "$folder/server.sqlite" 2>/dev/null

# Starts the server on the store; sets `server` (its pid) and `url`.
start() {
  "$trips" serve --port 0 --store "$folder/server.sqlite" >"$folder/serve.out" 2>/dev/null &
  server=$!
  for _ in $(seq 100); do
    grep -q '^Listening on ' "$folder/serve.out" 2>/dev/null && break
    sleep 0.1
  done
  url=$(sed -n 's/^Listening on //p' "$folder/serve.out")
  [ -n "$url" ] || { echo "the server did not start" >&2; exit 1; }
}
stop() {
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
}
peak() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }

start
begin=$(date +%s.%N)
timeout 900 curl -s -o "$folder/changes.ndjson" "$url/changes"
served=$(awk -v a="$begin" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
server_peak=$(peak "$server")
bytes=$(stat -c %s "$folder/changes.ndjson")
stop
rm -f "$folder/changes.ndjson"

start
begin=$(date +%s.%N)
timeout 1800 /usr/bin/time -f '%M' -o "$folder/time.out" \
  prlimit --as=$((12 << 30)) "$trips" sync watch --from "$url" --once --store "$folder/local.sqlite" >/dev/null
pulled=$(awk -v a="$begin" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
client_peak=$(cat "$folder/time.out")
server_peak_pull=$(peak "$server")
stop

counts() {
  sqlite3 "$1" 'SELECT (SELECT count(*) FROM trips), (SELECT count(*) FROM bucket_list_items), (SELECT count(*) FROM living_accommodations)'
}
[ "$(counts "$folder/local.sqlite")" = "$(counts "$folder/server.sqlite")" ] || {
  echo "the pulled store differs: $(counts "$folder/local.sqlite") against $(counts "$folder/server.sqlite")" >&2
  exit 1
}
echo "size $size trips with plans: feed $bytes bytes; trips, items, stays: $(counts "$folder/local.sqlite")"
echo "GET /changes (curl): ${served} s, server peak ${server_peak} KB"
echo "trips sync watch --once: ${pulled} s, client peak ${client_peak} KB (server ${server_peak_pull} KB)"
echo "client peak / server's for the same feed: $(awk -v a="$client_peak" -v b="$server_peak" 'BEGIN { printf "%.2f", a / b }')"
