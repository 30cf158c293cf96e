#!/bin/bash
# `trips serve` answering bbox pages of 100 trips with their plans, beside the same trips
# without plans, under wrk, in one run: SIZE generated trips (trips-generate's seed 2027) in
# two SQLite stores, one of them with five bucket-list items and a stay for every trip
# (`--items 5 --stays`); each round starts the server on one store, warms it with one request
# per path, loads it for 10 s per path, stops it, then does the same on the other store,
# alternating which goes first; three rounds. Two loads: full pages (wrk: 2 threads, 32
# connections, `GET /collections/trips/items?bbox=-10,35,30,60&limit=100`, a box over Europe
# that holds far more than 100 trips), and the serve benchmark's own bbox load (64
# connections, `limit=100` in a city-sized box of 0.5° around the first trip by start date,
# as `trips-bench --phases serve` asks). Prints each load's requests a second, p50 and p99
# (ms), then the medians.
#
# Needs release builds of trips and trips-generate (`swift build -c release --product trips`,
# the same for trips-generate) and wrk (Debian's package).
#
# Usage: Tools/Benchmarks/serve-plans.sh [SIZE [ROUNDS]]   (default: 100000 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${1:-100000}
rounds=${2:-3}
trips=.build/release/trips
generate=.build/release/trips-generate
for tool in "$trips" "$generate" /usr/bin/wrk; do
  [ -x "$tool" ] || { echo "Missing $tool (see the header of $0)" >&2; exit 66; }
done
folder=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$folder"
}
trap cleanup EXIT
"$generate" --count "$size" --store "$folder/without.sqlite" 2>/dev/null
"$generate" --count "$size" --items 5 --stays --store "$folder/with.sqlite" 2>/dev/null
full='/collections/trips/items?bbox=-10,35,30,60&limit=100'
first=$("$trips" list --store "$folder/without.sqlite" --limit 1 --json)
city=$(python3 -c 'import json, sys; t = json.loads(sys.argv[1])[0]; print("%.4f,%.4f,%.4f,%.4f" % (t["longitude"] - 0.25, t["latitude"] - 0.25, t["longitude"] + 0.25, t["latitude"] + 0.25))' "$first")
city="/collections/trips/items?limit=100&bbox=$city"

# Loads one store's server on `path` with `connections`; prints "rate p50 p99".
load() {
  local store=$1 path=$2 connections=$3
  "$trips" serve --store "$store" --port 0 > "$folder/listening" 2>/dev/null &
  server=$!
  local url=
  for _ in $(seq 100); do
    url=$(sed -n 's/^Listening on //p' "$folder/listening")
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "trips serve did not start on $store" >&2; exit 1; }
  curl -s -o /dev/null "$url$path"
  local text
  text=$(wrk -t 2 -c "$connections" -d 10s --latency "$url$path")
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
  if grep -q 'Non-2xx' <<< "$text"; then echo "errors under load: $text" >&2; exit 1; fi
  local rate p50 p99
  rate=$(awk '/^Requests\/sec:/ { print $2 }' <<< "$text")
  p50=$(awk '$1 == "50%" { print $2 }' <<< "$text")
  p99=$(awk '$1 == "99%" { print $2 }' <<< "$text")
  echo "$rate $(milliseconds "$p50") $(milliseconds "$p99")"
}

# wrk's latency (123.45us, 1.23ms, 1.02s) in milliseconds.
milliseconds() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else { sub(/s$/, "", v); printf "%.3f", v * 1000 } }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "trips serve, $size trips, $rounds rounds, wrk -t 2 -d 10s"
echo "full pages: $full, 32 connections"
echo "city pages: $city, 64 connections"
for load in full city; do
  for kind in with without; do : > "$folder/$kind-$load.txt"; done
done
for round in $(seq "$rounds"); do
  if (( round % 2 )); then order="with without"; else order="without with"; fi
  for kind in $order; do
    for load in full city; do
      if [ "$load" = full ]; then result=$(load "$folder/$kind.sqlite" "$full" 32)
      else result=$(load "$folder/$kind.sqlite" "$city" 64); fi
      echo "round $round, $load pages, $kind plans: $result (requests/s, p50 ms, p99 ms)"
      echo "$result" >> "$folder/$kind-$load.txt"
    done
  done
done
for load in full city; do
  for kind in with without; do
    rate=$(cut -d' ' -f1 "$folder/$kind-$load.txt" | median)
    p50=$(cut -d' ' -f2 "$folder/$kind-$load.txt" | median)
    p99=$(cut -d' ' -f3 "$folder/$kind-$load.txt" | median)
    echo "median, $load pages, $kind plans: $rate requests/s, p50 $p50 ms, p99 $p99 ms"
  done
done
