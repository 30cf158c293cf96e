#!/usr/bin/env bash
# Concurrent-writer stress: several `trips` processes add, update and delete trips in one store
# at once while `trips sync watch` in another process mirrors every change into a second store.
# Afterwards: no writer saw an error (no "database is locked" reached a user), nothing was lost,
# the history tokens are unique and ordered, `trips check` passes, and the mirror holds exactly
# what the store holds. The long version of the suite's concurrent-writers test.
#   Tools/stress-writers.sh [writers] [iterations]      (default 4 writers, 100 iterations each)
set -euo pipefail
cd "$(dirname "$0")/.."
writers="${1:-4}"
iterations="${2:-100}"
swift build -c release --product trips >&2
TRIPS="$PWD/.build/release/trips"
work=$(mktemp -d)
trap 'kill "$mirror_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
store="$work/store.sqlite"
mirror="$work/mirror.sqlite"
"$TRIPS" add --store "$store" --name seed --destination Oslo --start 2027-01-01 --end 2027-01-01 \
  --latitude 59.9 --longitude 10.7 >/dev/null
"$TRIPS" sync watch --store "$store" --to "$mirror" >"$work/mirror.out" 2>"$work/mirror.err" &
mirror_pid=$!

writer() {
  local who="$1"
  for i in $(seq 1 "$iterations"); do
    id=$("$TRIPS" add --store "$store" --author "$who" --name "$who $i" --destination Oslo \
      --start 2027-01-01 --end 2027-01-02 --latitude 59.9 --longitude "$((i % 180))")
    if [ $((i % 3)) = 0 ]; then
      "$TRIPS" update "$id" --store "$store" --author "$who" --name "$who $i changed" >/dev/null
    fi
    if [ $((i % 4)) = 0 ]; then
      "$TRIPS" delete "$id" --store "$store" --author "$who" >/dev/null
    fi
  done
}

start=$(date +%s)
pids=()
for w in $(seq 1 "$writers"); do
  writer "writer$w" 2>"$work/writer$w.err" &
  pids+=("$!")
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
elapsed=$(($(date +%s) - start))
# Status lines ("Deleted 1 trip.") go to stderr too; errors start with "Error:".
errors=$(cat "$work"/writer*.err | grep -c -e '^Error' -e 'locked' || true)

expected=$((1 + writers * (iterations - iterations / 4)))
# The mirror catches up within a few seconds (it is told of each change, and checks every second).
for _ in $(seq 1 100); do
  if [ "$("$TRIPS" list --store "$mirror" --json 2>/dev/null)" = "$("$TRIPS" list --store "$store" --json)" ]; then
    break
  fi
  sleep 0.1
done

python3 - "$TRIPS" "$store" "$mirror" "$expected" "$writers" "$iterations" <<'EOF'
import json, subprocess, sys
trips, store, mirror, expected, writers, iterations = sys.argv[1:]
expected, writers, iterations = int(expected), int(writers), int(iterations)
def run(*args):
    return subprocess.run([trips, *args], check=True, capture_output=True, text=True).stdout
listed = json.loads(run("list", "--store", store, "--json"))
mirrored = json.loads(run("list", "--store", mirror, "--json"))
history = json.loads(run("history", "--store", store, "--json"))
tokens = [int(t["token"].split(":")[1]) for t in history]
problems = []
if len(listed) != expected: problems.append(f"store holds {len(listed)} trips, expected {expected}")
changed = sum(1 for t in listed if t["name"].endswith("changed"))
if changed != writers * (iterations // 3 - iterations // 12):
    problems.append(f"{changed} updated trips survive, expected {writers * (iterations // 3 - iterations // 12)}")
if tokens != sorted(tokens) or len(set(tokens)) != len(tokens): problems.append("history tokens not unique and ordered")
if len(tokens) != 1 + writers * (iterations + iterations // 3 + iterations // 4):
    problems.append(f"{len(tokens)} history transactions")
key = lambda t: (t["id"], t["name"], t["destination"], t["latitude"], t["longitude"])
if sorted(map(key, listed)) != sorted(map(key, mirrored)):
    only = set(map(key, listed)) ^ set(map(key, mirrored))
    problems.append(f"mirror differs ({len(mirrored)} trips): {sorted(only)[:4]}")
subprocess.run([trips, "check", "--store", store], check=True, capture_output=True)
print(f"{len(listed)} trips, {len(tokens)} history transactions, mirror equal: {not any('mirror' in p for p in problems)}")
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
EOF
status=$?
if [ "$errors" != 0 ]; then grep -h -e '^Error' -e 'locked' "$work"/writer*.err | sort | uniq -c | head -5; fi
echo "writer stress: $writers writers x $iterations iterations in ${elapsed}s; writers failed: $failed; error lines: $errors"
[ "$failed" = 0 ] && [ "$errors" = 0 ] && [ "$status" = 0 ]
