#!/bin/bash
# `trips serve`'s CQL2 filter against the query parameters that mean the same, and a 304 against
# the page it validates, under wrk, in one run: SIZE generated trips (trips-generate's seed
# 2027) in a SQLite store, one server; each round loads, for 10 s each (wrk: 2 threads, 32
# connections), in an order that alternates between rounds:
#   params   /collections/trips/items?bbox=-10,35,30,60&datetime=2027-03-01/2027-06-30&destination=D&limit=100
#   filter   the same as one CQL2 filter: S_INTERSECTS(geometry, BBOX(-10,35,30,60)) AND
#            T_INTERSECTS(INTERVAL(startDate, endDate), INTERVAL('2027-03-01', '2027-06-30T23:59:59.999Z'))
#            AND ACCENTI(CASEI(destination)) = ACCENTI(CASEI('D'))
#   page     /collections/trips/items?bbox=-10,35,30,60&limit=100 (a 200 with its ETag)
#   304      the same page with If-None-Match: its ETag
# where D is the most common destination in the box. Prints each load's requests a second, p50
# and p99 (ms), then the medians and the ratios filter/params and 304/page.
#
# Needs release builds of trips and trips-generate (BIN, default .build/release) and wrk.
#
# Usage: Tools/Benchmarks/serve-filter.sh [SIZE [ROUNDS [BIN]]]   (default: 100000 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${1:-100000}
rounds=${2:-3}
bin=${3:-.build/release}
trips=$bin/trips
generate=$bin/trips-generate
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
"$generate" --count "$size" --store "$folder/trips.sqlite" 2>/dev/null
"$trips" serve --store "$folder/trips.sqlite" --port 0 > "$folder/listening" 2>/dev/null &
server=$!
url=
for _ in $(seq 200); do
  url=$(sed -n 's/^Listening on //p' "$folder/listening")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "trips serve did not start" >&2; exit 1; }
curl -s -o "$folder/sections" "$url/collections/trips/sections?bbox=-10,35,30,60"
destination=$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["sections"]; print(max(s, key=lambda x: x["count"])["id"])' "$folder/sections")
encoded() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
params="/collections/trips/items?bbox=-10,35,30,60&datetime=2027-03-01/2027-06-30&destination=$(encoded "$destination")&limit=100"
cql2="S_INTERSECTS(geometry, BBOX(-10,35,30,60)) AND T_INTERSECTS(INTERVAL(startDate, endDate), INTERVAL('2027-03-01', '2027-06-30T23:59:59.999Z')) AND ACCENTI(CASEI(destination)) = ACCENTI(CASEI('$(sed "s/'/''/g" <<< "$destination")'))"
filter="/collections/trips/items?filter=$(encoded "$cql2")&limit=100"
page='/collections/trips/items?bbox=-10,35,30,60&limit=100'
# Both ask for the same trips: compare their ids before measuring.
ids() { curl -s "$url$1" | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["numberMatched"], [f["id"] for f in d["features"]])'; }
[ "$(ids "$params")" = "$(ids "$filter")" ] || { echo "params and filter differ" >&2; ids "$params" >&2; ids "$filter" >&2; exit 1; }
tag=$(curl -s -D - -o /dev/null "$url$page" | sed -n 's/^ETag: //Ip' | tr -d '\r')

milliseconds() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else { sub(/s$/, "", v); printf "%.3f", v * 1000 } }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

load() {
  local name=$1 path=$2 text
  if [ "$name" = 304 ]; then
    text=$(wrk -t 2 -c 32 -d 10s --latency -H "If-None-Match: $tag" "$url$path")
  else
    text=$(wrk -t 2 -c 32 -d 10s --latency "$url$path")
  fi
  if [ "$name" != 304 ] && grep -q 'Non-2xx' <<< "$text"; then echo "errors: $text" >&2; exit 1; fi
  local rate p50 p99
  rate=$(awk '/^Requests\/sec:/ { print $2 }' <<< "$text")
  p50=$(awk '$1 == "50%" { print $2 }' <<< "$text")
  p99=$(awk '$1 == "99%" { print $2 }' <<< "$text")
  echo "$rate $(milliseconds "$p50") $(milliseconds "$p99")"
}

echo "trips serve, $size trips, $rounds rounds, wrk -t 2 -c 32 -d 10s; destination $destination"
declare -A results
for round in $(seq "$rounds"); do
  order=(params filter page 304)
  if [ $((round % 2)) -eq 0 ]; then order=(304 page filter params); fi
  for name in "${order[@]}"; do
    case $name in params) path=$params ;; filter) path=$filter ;; *) path=$page ;; esac
    line=$(load "$name" "$path")
    echo "round $round $name: $line req/s p50 p99 ms"
    results[$name]+="$line"$'\n'
  done
done
for name in params filter page 304; do
  rate=$(printf '%s' "${results[$name]}" | awk '{ print $1 }' | median)
  p99=$(printf '%s' "${results[$name]}" | awk '{ print $3 }' | median)
  echo "median $name: $rate req/s, p99 $p99 ms"
  declare "rate_${name/304/notmodified}=$rate"
done
awk -v p="$rate_params" -v f="$rate_filter" -v g="$rate_page" -v n="$rate_notmodified" 'BEGIN {
  printf "filter / params time per request: %.2fx; 304 / page time per request: %.3fx\n", p / f, g / n }'
