#!/bin/bash
# `trips serve`'s vector tiles beside tipg's (developmentseed/tipg, from PyPI, pinned in
# Tools/Benchmarks/peers/tipg-requirements.txt) on the same trips, in one run: SIZE generated
# trips (trips-generate's seed 2027) in a SQLite store for trips serve, and the same rows
# (`trips export --format csv`) in a PostGIS table (a Point in EPSG:4326 with a GiST index)
# for tipg, on a throwaway PostgreSQL 15 cluster run as the postgres user. Both get the same
# zoom 0-to-14 mix as Tools/Benchmarks/serve-tiles.sh (the tiles of 400 random trips at every
# zoom, 6,000 requests in a shuffled order; tipg's paths name x before y), under wrk (2
# threads, 32 connections, 10 s), alternating which goes first by round, each load run twice
# in a row and the second one kept (both servers then answer from what they keep warm). tipg
# runs under uvicorn with 2 workers (the machine's cores); trips serve as it is.
#
# Prints each load's requests a second, p50 and p99 (ms), then the medians and the ratio of
# the rates.
#
# Needs release builds of trips and trips-generate (BIN, default .build/release), wrk,
# python3 with venv, and PostGIS for PostgreSQL 15 (`apt-get install postgresql-15-postgis-3`).
#
# Usage: Tools/Benchmarks/serve-tiles-tipg.sh [SIZE [ROUNDS [BIN]]]   (default: 1000000 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${1:-1000000}
rounds=${2:-3}
bin=${3:-.build/release}
trips=$bin/trips
generate=$bin/trips-generate
postgres=/usr/lib/postgresql/15/bin
for tool in "$trips" "$generate" /usr/bin/wrk "$postgres/initdb" \
  /usr/share/postgresql/15/extension/postgis.control; do
  [ -e "$tool" ] || { echo "Missing $tool (see the header of $0)" >&2; exit 66; }
done
venv=.build/tipg
requirements=Tools/Benchmarks/peers/tipg-requirements.txt
if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/requirements.txt"
fi
folder=$(mktemp -d)
chmod 755 "$folder"
server=
tipg=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  if [ -n "$tipg" ]; then kill "$tipg" 2>/dev/null || true; fi
  runuser -u postgres -- "$postgres/pg_ctl" -D "$folder/pg" -m immediate stop > /dev/null 2>&1 || true
  rm -rf "$folder"
}
trap cleanup EXIT
"$generate" --count "$size" --store "$folder/trips.sqlite" 2>/dev/null
"$trips" export --format csv --store "$folder/trips.sqlite" > "$folder/trips.csv"
chmod 644 "$folder/trips.csv"

# PostGIS on a throwaway cluster (PostgreSQL refuses to run as root).
port=$((20000 + RANDOM % 20000))
mkdir "$folder/pg" "$folder/run"
chown postgres "$folder/pg" "$folder/run"
runuser -u postgres -- "$postgres/initdb" -D "$folder/pg" -A trust -U postgres > /dev/null
runuser -u postgres -- "$postgres/pg_ctl" -D "$folder/pg" -l "$folder/run/pg.log" \
  -o "-p $port -k $folder/run -c listen_addresses=127.0.0.1 -c shared_buffers=1GB -c max_connections=200" \
  -w start > /dev/null
psql() { /usr/bin/psql -q -h "$folder/run" -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"; }
psql -d postgres -c "CREATE DATABASE trips"
psql -d trips <<SQL
CREATE EXTENSION postgis;
CREATE TABLE trips (id uuid PRIMARY KEY, name text NOT NULL, destination text NOT NULL,
  start_date date NOT NULL, end_date date NOT NULL, latitude double precision NOT NULL,
  longitude double precision NOT NULL, place_id text);
\copy trips FROM '$folder/trips.csv' WITH (FORMAT csv, HEADER true)
ALTER TABLE trips ADD COLUMN geom geometry(Point, 4326);
UPDATE trips SET geom = ST_SetSRID(ST_MakePoint(longitude, latitude), 4326);
CREATE INDEX trips_geom ON trips USING gist (geom);
VACUUM ANALYZE trips;
SQL

"$trips" serve --store "$folder/trips.sqlite" --port 0 > "$folder/listening" 2>/dev/null &
server=$!
tipg_port=$((port + 1))
DATABASE_URL="postgresql://postgres@127.0.0.1:$port/trips" TIPG_DB_SCHEMAS='["public"]' \
  "$venv/bin/uvicorn" tipg.main:app --host 127.0.0.1 --port "$tipg_port" --workers 2 \
  --log-level warning > "$folder/tipg.log" 2>&1 &
tipg=$!
url=
for _ in $(seq 600); do
  url=$(sed -n 's/^Listening on //p' "$folder/listening")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "trips serve did not start" >&2; exit 1; }
tipg_url=http://127.0.0.1:$tipg_port
for _ in $(seq 300); do
  curl -sf "$tipg_url/collections" > /dev/null && break
  sleep 0.2
done
curl -sf "$tipg_url/collections" > /dev/null || { echo "tipg did not start:" >&2; cat "$folder/tipg.log" >&2; exit 1; }
collection=public.trips

python3 - "$folder/trips.csv" "$folder/paths.txt" "$folder/tipg-paths.txt" "$collection" <<'PYTHON'
import csv, math, random, sys
rows = list(csv.DictReader(open(sys.argv[1])))
random.seed(7)
ours, theirs = [], []
for row in random.sample(rows, 400):
    lat = max(-85.05112878, min(85.05112878, float(row["latitude"])))
    lon = float(row["longitude"])
    for z in range(15):
        n = 2 ** z
        x = min(int((lon + 180) / 360 * n), n - 1)
        y = min(int((1 - math.log(math.tan(math.radians(lat)) + 1 / math.cos(math.radians(lat))) / math.pi) / 2 * n), n - 1)
        ours.append(f"/collections/trips/tiles/WebMercatorQuad/{z}/{y}/{x}")
        theirs.append(f"/collections/{sys.argv[4]}/tiles/WebMercatorQuad/{z}/{x}/{y}")
order = list(range(len(ours)))
random.shuffle(order)
open(sys.argv[2], "w").write("\n".join(ours[i] for i in order) + "\n")
open(sys.argv[3], "w").write("\n".join(theirs[i] for i in order) + "\n")
PYTHON
for name in paths tipg-paths; do
  {
    echo "paths = {"
    sed 's/.*/  "&",/' "$folder/$name.txt"
    echo "}"
    cat <<'LUA'
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter % #paths) + 1])
end
LUA
  } > "$folder/$name.lua"
done
# Both answer the same tile: a check before measuring.
first=$(head -1 "$folder/tipg-paths.txt")
status=$(curl -s -o /dev/null -w '%{http_code}' "$tipg_url$first")
[ "$status" = 200 ] || [ "$status" = 204 ] || { echo "tipg answered $status for $first" >&2; exit 1; }

milliseconds() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else { sub(/s$/, "", v); printf "%.3f", v * 1000 } }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
load() {
  local base=$1 script=$2 text
  wrk -t 2 -c 32 -d 10s -s "$folder/$script.lua" "$base" > /dev/null
  text=$(wrk -t 2 -c 32 -d 10s --latency -s "$folder/$script.lua" "$base")
  local rate p50 p99 errors
  rate=$(awk '/^Requests\/sec:/ { print $2 }' <<< "$text")
  p50=$(awk '$1 == "50%" { print $2 }' <<< "$text")
  p99=$(awk '$1 == "99%" { print $2 }' <<< "$text")
  errors=$(awk '/Non-2xx/ { print $5 }' <<< "$text")
  echo "$rate $(milliseconds "$p50") $(milliseconds "$p99") ${errors:-0}"
}

echo "trips serve and tipg $(grep -i '^tipg==' "$requirements" | cut -d= -f3), $size trips, $rounds rounds, wrk -t 2 -c 32 -d 10s -s (6,000 tiles of zooms 0-14), second of two loads"
declare -A results
for round in $(seq "$rounds"); do
  order=(trips tipg)
  if [ $((round % 2)) -eq 0 ]; then order=(tipg trips); fi
  for name in "${order[@]}"; do
    if [ "$name" = trips ]; then line=$(load "$url" paths); else line=$(load "$tipg_url" tipg-paths); fi
    echo "round $round $name: $line req/s p50 p99 ms non-2xx"
    results[$name]+="$line"$'\n'
  done
done
for name in trips tipg; do
  rate=$(printf '%s' "${results[$name]}" | awk '{ print $1 }' | median)
  p99=$(printf '%s' "${results[$name]}" | awk '{ print $3 }' | median)
  echo "median $name: $rate req/s, p99 $p99 ms"
  declare "rate_$name=$rate"
done
awk -v a="$rate_trips" -v b="$rate_tipg" 'BEGIN { printf "trips serve / tipg, requests a second: %.1fx\n", a / b }'
