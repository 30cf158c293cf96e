#!/usr/bin/env bash
# One declaration drives every format: copies the package into a scratch folder, adds one
# declaration (`public var notes: String?` with its documentation comment) to Trip and to
# LivingAccommodation and changes nothing else, builds `trips`, and checks that the new field
# travels everywhere a trip's fields do:
#   the command line  `add --notes`, `update --notes` ('' for none), `stay set --notes`, `show`
#                     and `show --json`, `add --help`;
#   files             JSON, GeoJSON and CSV export, each imported into a fresh store;
#   the service       GET, POST and PATCH, `properties=`, a CQL2 filter (LIKE, IS NULL, NOT,
#                     IN), the queryables, /api's feature and request-body schemas, the stays;
#   sync              a change feed exported and applied to another store.
# Usage: Tools/one-declaration.sh   (a debug build of `trips` in the scratch copy: a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
git ls-files -z | xargs -0 cp --parents -t "$scratch"
# The one declaration, after each model's place identifier.
python3 - "$scratch" <<'EOF'
import sys
root = sys.argv[1]
for path, anchor, noun in [
    ("Sources/TripPlanner/Model/Trip.swift", "  public var placeIdentifier: PlaceIdentifier?\n", "trip"),
    ("Sources/TripPlanner/Model/LivingAccommodation.swift",
     '  @Attribute(.codable, originalName: "place_id") public var placeIdentifier: PlaceIdentifier?\n',
     "stay"),
]:
    with open(f"{root}/{path}") as file:
        text = file.read()
    assert text.count(anchor) == 1, f"{path}: the anchor is not there once"
    text = text.replace(anchor, anchor + f"  /// Anything to remember about the {noun}.\n  public var notes: String?\n")
    with open(f"{root}/{path}", "w") as file:
        file.write(text)
EOF
echo "Building trips with notes on Trip and LivingAccommodation in $scratch" >&2
(cd "$scratch" && swift build --product trips 2>&1 | tail -1) >&2
trips="$scratch/.build/debug/trips"
export TRIPS_STORE="$scratch/a.sqlite"
failures=0
checks=0
# expect DESCRIPTION EXPECTED ACTUAL: ACTUAL contains EXPECTED.
expect() {
  checks=$((checks + 1))
  if [[ "$3" == *"$2"* ]]; then
    echo "ok: $1"
  else
    echo "FAILED: $1: expected '$2' in:" >&2
    printf '%s\n' "$3" | head -20 >&2
    failures=$((failures + 1))
  fi
}

# The command line.
expect "add --help lists --notes with its documentation" \
  "Anything to remember about the trip." "$("$trips" add --help | grep -e '--notes <text>')"
id=$("$trips" add --name "Kyoto spring" --destination Kyoto --start 2027-04-01 --end 2027-04-07 \
  --latitude 35.01 --longitude 135.77 --notes "Bring a rail pass")
expect "show prints the notes" "notes:        Bring a rail pass" "$("$trips" show "$id")"
expect "update --notes '' clears them" "notes:        none" "$("$trips" update "$id" --notes '')"
"$trips" update "$id" --notes 'Rail pass, "JR"' > /dev/null
expect "show --json carries them" '"notes": "Rail pass, \"JR\""' "$("$trips" show --json "$id")"
"$trips" stay set "$id" --name Inn --latitude 35 --longitude 135.7 --notes "late check-in" > /dev/null
expect "stay set --notes sets the stay's" '"notes": "late check-in"' "$("$trips" show --json "$id")"

# Files: each format exported and imported into a fresh store.
for format in json geojson csv; do
  "$trips" export --format "$format" > "$scratch/out.$format"
  TRIPS_STORE="$scratch/from-$format.sqlite" "$trips" import "$scratch/out.$format" > /dev/null
  expect "$format export and import" '"notes": "Rail pass, \"JR\""' \
    "$(TRIPS_STORE="$scratch/from-$format.sqlite" "$trips" show --json "$id")"
done
expect "CSV has a notes column" "place_id,notes" "$(head -1 "$scratch/out.csv")"
expect "a JSON file carries the stay's" '"notes": "late check-in"' \
  "$(TRIPS_STORE="$scratch/from-json.sqlite" "$trips" show --json "$id")"

# Sync: a change feed applied to another store.
"$trips" sync export > "$scratch/feed.jsonl"
TRIPS_STORE="$scratch/synced.sqlite" "$trips" sync apply "$scratch/feed.jsonl" > /dev/null
synced=$(TRIPS_STORE="$scratch/synced.sqlite" "$trips" show --json "$id")
expect "a sync feed carries the trip's" '"notes": "Rail pass, \"JR\""' "$synced"
expect "a sync feed carries the stay's" '"notes": "late check-in"' "$synced"

# The service.
token=one-declaration-token-0123456789
printf 'checks:%s\n' "$token" > "$scratch/tokens"
chmod 600 "$scratch/tokens"
"$trips" serve --port 0 --token-file "$scratch/tokens" > "$scratch/listening" 2> "$scratch/server.log" &
server=$!
url=
for _ in $(seq 100); do
  url=$(sed -n 's/^Listening on //p' "$scratch/listening")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "trips serve did not start" >&2; cat "$scratch/server.log" >&2; exit 1; }
auth="Authorization: Bearer $token"
expect "GET carries them" '"notes":"Rail pass, \"JR\""' "$(curl -s "$url/collections/trips/items/$id")"
posted=$(curl -s -X POST -H "$auth" -H "Content-Type: application/geo+json" \
  -d '{"type":"Feature","geometry":{"type":"Point","coordinates":[2.35,48.85]},"properties":{"name":"Paris","destination":"Paris","startDate":"2027-05-01","endDate":"2027-05-03","notes":"posted"}}' \
  "$url/collections/trips/items")
expect "POST takes them" '"notes":"posted"' "$posted"
etag=$(curl -sI "$url/collections/trips/items/$id" | sed -n 's/^[Ee][Tt]ag: //p' | tr -d '\r')
expect "PATCH changes them" '"notes":"patched"' "$(curl -s -X PATCH -H "$auth" \
  -H "Content-Type: application/merge-patch+json" -H "If-Match: $etag" \
  -d '{"properties":{"notes":"patched"}}' "$url/collections/trips/items/$id")"
expect "properties=notes selects them" '"properties":{"notes":"patched"}' \
  "$(curl -s "$url/collections/trips/items?properties=notes&limit=1")"
matched() { curl -s "$url/collections/trips/items?filter=$1" | sed -n 's/.*"numberMatched":\([0-9]*\).*/\1/p'; }
expect "a filter with LIKE on them" "1" "$(matched "notes%20LIKE%20%27post%25%27")"
expect "a filter with IN on them" "2" "$(matched "notes%20IN%20(%27posted%27,%27patched%27)")"
curl -s -X PATCH -H "$auth" -H "Content-Type: application/merge-patch+json" \
  -H "If-Match: $(curl -sI "$url/collections/trips/items/$id" | sed -n 's/^[Ee][Tt]ag: //p' | tr -d '\r')" \
  -d '{"properties":{"notes":null}}' "$url/collections/trips/items/$id" > /dev/null
expect "IS NULL finds a trip without" "1" "$(matched "notes%20IS%20NULL")"
expect "NOT of a comparison holds where they are none" "1" "$(matched "NOT%20(notes%20%3D%20%27posted%27)")"
expect "the queryables list them" '"notes":{' "$(curl -s "$url/collections/trips/queryables")"
expect "the stays carry theirs" '"notes":"late check-in"' "$(curl -s "$url/collections/stays/items")"
schemas=$(curl -s "$url/api" | python3 -c '
import json, sys
schemas = json.load(sys.stdin)["components"]["schemas"]
for name in ["TripProperties", "TripPropertiesInput", "StayProperties", "StayPropertiesInput"]:
    print(name, json.dumps(schemas[name]["properties"].get("notes"), sort_keys=True))')
expect "/api describes the trip's" 'TripProperties {"description": "Anything to remember about the trip.", "nullable": true, "type": "string"}' "$schemas"
expect "/api's request body takes the trip's" 'TripPropertiesInput {"description": "Anything to remember about the trip.", "maxLength": 256' "$schemas"
expect "/api describes the stay's" 'StayProperties {"description": "Anything to remember about the stay."' "$schemas"
expect "/api's stay body takes the stay's" 'StayPropertiesInput {"description": "Anything to remember about the stay."' "$schemas"
kill "$server"
server=
"$trips" check > /dev/null
if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed: a field declared once did not reach every format." >&2
  exit 1
fi
echo "One declaration reached every format: $checks checks passed."
