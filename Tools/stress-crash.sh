#!/usr/bin/env bash
# Crash-safety stress: imports a large file into a store and kills the import with SIGKILL at a
# random moment, many times; after each kill the store must pass `trips check`, hold either all
# of the import or none of it, and its history must match. Prints a summary line.
#   Tools/stress-crash.sh [runs] [trips]      (default 50 runs of 40000 trips)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-50}"
count="${2:-40000}"
swift build -c release --product trips >&2
swift build -c release --product trips-generate >&2
bin=.build/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/trips-generate" --count "$count" --output "$work/trips.csv" 2>/dev/null
absent=0; present=0; damaged=0
for run in $(seq 1 "$runs"); do
  store="$work/store-$run.sqlite"
  "$bin/trips" add --store "$store" --name base --destination X --start 2027-01-01 --end 2027-01-01 \
    --latitude 0 --longitude 0 >/dev/null
  "$bin/trips" import --store "$store" "$work/trips.csv" >/dev/null 2>&1 &
  pid=$!
  sleep "$(awk -v seed="$RANDOM" 'BEGIN { srand(seed); printf "%.3f", 0.02 + rand() * 1.5 }')"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if ! "$bin/trips" check --store "$store" >/dev/null 2>&1; then damaged=$((damaged + 1)); continue; fi
  trips=$("$bin/trips" list --store "$store" --json | grep -c '"id"' || true)
  inserts=$("$bin/trips" history --store "$store" --json | grep -c '"kind": "insert"' || true)
  if [ "$trips" = 1 ]; then absent=$((absent + 1))
  elif [ "$trips" = $((count + 1)) ]; then present=$((present + 1))
  else damaged=$((damaged + 1)); fi
  [ "$inserts" = "$trips" ] || damaged=$((damaged + 1))
  rm -f "$store" "$store-wal" "$store-shm"
done
echo "crash stress: $runs kills of a $count-trip import: $absent left the store as it was, $present after the commit, $damaged damaged or partial"
[ "$damaged" = 0 ]
