#!/bin/bash
# `trips serve`'s vector tiles under wrk, in one run: SIZE generated trips (trips-generate's seed
# 2027) in a SQLite store, one server. The load is a zoom 0-to-14 mix: for 400 trips taken at
# random from the store (Python's random, seed 7), the tile holding each at every zoom from 0 to
# 14, 6,000 tile requests in a shuffled order that wrk's 32 connections take in turn (a Lua
# script). Each round, for 10 s each (wrk: 2 threads, 32 connections):
#   first  the mix after a trip is added in Paris by another process (the tiles holding it are
#          made again; in round 1 every tile is made, the server having made none before)
#   warm   the same mix again (tiles from the server's cache of made tiles)
#   304    the same mix with If-None-Match: each tile's current ETag
# Then: how long a change by another process takes to reach the next answer of its tile (a trip
# added with `trips add`, then its zoom-14 tile asked with the old ETag until it is a 200 with
# the trip: the time from the add's exit to that answer, 5 times), and the server's memory
# (VmRSS) before and after the loads.
#
# Prints each load's requests a second, p50 and p99 (ms), then the medians. With the debug
# tests built, also how long the map page takes to draw every tile on screen, before and after
# the loads (SCREENSHOT=FILE keeps its picture).
#
# Needs release builds of trips and trips-generate (BIN, default .build/release), wrk and python3.
#
# Usage: Tools/Benchmarks/serve-tiles.sh [SIZE [ROUNDS [BIN]]]   (default: 1000000 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${1:-1000000}
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
for _ in $(seq 600); do
  url=$(sed -n 's/^Listening on //p' "$folder/listening")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "trips serve did not start" >&2; exit 1; }
rss() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status"; }
rss_start=$(rss)
# The map page on this store in headless Chromium (a test of the debug build, when it is built:
# `swift build --build-tests`), before the loads (no tile made yet) and after them.
map_page() {
  if [ -e .build/debug/TripPlannerPackageTests.xctest ]; then
    TRIPS_MAP_SERVER=$url TRIPS_MAP_SCREENSHOT=${SCREENSHOT:-$folder/map.png} \
      swift test --skip-build --filter MapPageTests.largeStoreMap 2>&1 \
      | sed -n "s/^The map page on .*[0-9]: every/map page, $1: every/p"
  fi
}
map_page "no tile made yet"

# The mix: the tiles of 400 random trips at every zoom from 0 to 14.
"$trips" export --format csv --store "$folder/trips.sqlite" > "$folder/trips.csv"
python3 - "$folder/trips.csv" "$folder/paths.txt" <<'PYTHON'
import csv, math, random, sys
rows = list(csv.DictReader(open(sys.argv[1])))
random.seed(7)
paths = []
for row in random.sample(rows, 400):
    lat = max(-85.05112878, min(85.05112878, float(row["latitude"])))
    lon = float(row["longitude"])
    for z in range(15):
        n = 2 ** z
        x = min(int((lon + 180) / 360 * n), n - 1)
        y = min(int((1 - math.log(math.tan(math.radians(lat)) + 1 / math.cos(math.radians(lat))) / math.pi) / 2 * n), n - 1)
        paths.append(f"/collections/trips/tiles/WebMercatorQuad/{z}/{y}/{x}")
random.shuffle(paths)
open(sys.argv[2], "w").write("\n".join(paths) + "\n")
PYTHON
# A Lua script for wrk that takes the paths in turn (with their ETags for the 304 load).
lua() {
  local tags=$1
  {
    echo "paths = {"
    if [ "$tags" = yes ]; then
      # One curl for every path, on one connection: each answer's ETag, in order.
      sed "s|.*|url = \"$url&\"\noutput = \"/dev/null\"|" "$folder/paths.txt" > "$folder/curl.conf"
      curl -s -K "$folder/curl.conf" -D - | sed -n 's/^ETag: //Ip' | tr -d '\r' | sed 's/"/\\"/g' \
        > "$folder/tags.txt"
      [ "$(wc -l < "$folder/tags.txt")" = "$(wc -l < "$folder/paths.txt")" ] \
        || { echo "not every tile has an ETag" >&2; exit 1; }
      paste -d '\t' "$folder/paths.txt" "$folder/tags.txt" | awk -F '\t' '{ printf "  {\"%s\", \"%s\"},\n", $1, $2 }'
    else
      sed 's/.*/  {"&", nil},/' "$folder/paths.txt"
    fi
    echo "}"
    cat <<'LUA'
counter = 0
request = function()
  counter = counter + 1
  local entry = paths[(counter % #paths) + 1]
  if entry[2] then
    return wrk.format("GET", entry[1], { ["If-None-Match"] = entry[2] })
  end
  return wrk.format("GET", entry[1])
end
LUA
  } > "$folder/$2.lua"
}

milliseconds() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else { sub(/s$/, "", v); printf "%.3f", v * 1000 } }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

load() {
  local script=$1 text
  text=$(wrk -t 2 -c 32 -d 10s --latency -s "$folder/$script.lua" "$url")
  if grep -q 'Non-2xx' <<< "$text" && [ "$script" != notmodified ]; then
    echo "errors: $text" >&2
    exit 1
  fi
  local rate p50 p99
  rate=$(awk '/^Requests\/sec:/ { print $2 }' <<< "$text")
  p50=$(awk '$1 == "50%" { print $2 }' <<< "$text")
  p99=$(awk '$1 == "99%" { print $2 }' <<< "$text")
  echo "$rate $(milliseconds "$p50") $(milliseconds "$p99")"
}

add() {
  "$trips" add --name "Bench $1" --destination Bench --start 2027-01-01 --end 2027-01-02 \
    --latitude "$2" --longitude "$3" --store "$folder/trips.sqlite" > /dev/null
}

lua no plain
echo "trips serve, $size trips, $rounds rounds, wrk -t 2 -c 32 -d 10s -s (6,000 tiles of zooms 0-14)"
declare -A results
for round in $(seq "$rounds"); do
  add "round $round" 48.85 2.35
  for name in first warm; do
    line=$(load plain)
    echo "round $round $name: $line req/s p50 p99 ms"
    results[$name]+="$line"$'\n'
  done
  lua yes notmodified
  line=$(load notmodified)
  echo "round $round 304: $line req/s p50 p99 ms"
  results[304]+="$line"$'\n'
done
for name in first warm 304; do
  rate=$(printf '%s' "${results[$name]}" | awk '{ print $1 }' | median)
  p99=$(printf '%s' "${results[$name]}" | awk '{ print $3 }' | median)
  echo "median $name: $rate req/s, p99 $p99 ms"
done

# A change by another process, to the next answer of its tile.
for attempt in 1 2 3 4 5; do
  latitude=$(awk -v a="$attempt" 'BEGIN { printf "%.5f", 35 + a * 1.37 }')
  longitude=$(awk -v a="$attempt" 'BEGIN { printf "%.5f", 139 + a * 0.71 }')
  path=$(python3 -c 'import math, sys
lat, lon, z = float(sys.argv[1]), float(sys.argv[2]), 14
n = 2 ** z
x = int((lon + 180) / 360 * n)
y = int((1 - math.log(math.tan(math.radians(lat)) + 1 / math.cos(math.radians(lat))) / math.pi) / 2 * n)
print(f"/collections/trips/tiles/WebMercatorQuad/{z}/{y}/{x}")' "$latitude" "$longitude")
  tag=$(curl -s -D - -o /dev/null "$url$path" | sed -n 's/^ETag: //Ip' | tr -d '\r')
  add "change $attempt" "$latitude" "$longitude"
  start=$(date +%s.%N)
  while true; do
    status=$(curl -s -o "$folder/tile" -w '%{http_code}' -H "If-None-Match: $tag" "$url$path")
    if [ "$status" = 200 ] && grep -q "change $attempt" "$folder/tile"; then break; fi
  done
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" -v a="$attempt" 'BEGIN { printf "change %d reached its tile after %.1f ms\n", a, (e - s) * 1000 }'
done
map_page "after the loads"
echo "server memory: ${rss_start} MB at rest (the box index built), $(rss) MB after the loads"
