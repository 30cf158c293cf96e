#!/usr/bin/env bash
# Runs valgrind's memcheck over the code that owns C objects the sanitizers cannot see into
# (libproj): `trips bounds` with CRSs that PROJ refuses at each step of creating a projection
# (unknown, an operation instead of a CRS, not a CRS at all) and with ones that work (each trip
# projected, the box densified and split at 180°, since the sample trips cross it), and `trips
# watch` (the BoundsController's projections). Any invalid read or write, or use after free,
# fails the run, and then `trips serve` (libmicrohttpd) through every kind of request and a
# stream client that stops reading and is dropped, and the PostgreSQL engine (libpq) through
# a store's life and every way a connection fails. (The test
# bundle itself cannot run under valgrind 3.19: it gives up on the bundle's DWARF debug
# information.)
#
#   Tools/valgrind.sh            # debug build, then memcheck; prints a summary per run
#
# Leaks are not checked (the Swift runtime keeps metadata caches alive at exit); what matters
# here is that every PROJ object is freed once, in order, on every path.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is missing: Tools/install-dependencies.sh --tests" >&2; exit 1; }
swift build >/dev/null
bin=.build/debug
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/trips" import Data/sample-trips.csv --store "$work/trips.sqlite" >/dev/null
failed=0
# Reports a run whose valgrind log is $2: FAIL with the errors, or ok with $3 after the label.
# Memory errors only: the Swift runtime's metadata initialisation makes valgrind report
# conditional jumps on values it cannot see initialised, which are not ours.
check_log() {
  if grep -q "Invalid \(read\|write\|free\)\|freed\|Mismatched free" "$2"; then
    echo "FAIL  $1" >&2
    grep -A12 "Invalid\|freed" "$2" | head -40 >&2
    failed=1
  else
    echo "ok    $1$3"
  fi
}
run() {
  local label=$1
  shift
  if valgrind --quiet --leak-check=no "$@" >"$work/out" 2>"$work/err"; then
    status=0
  else
    status=$?
  fi
  check_log "$label" "$work/err" " (exit $status)"
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
  --store "$work/trips.sqlite" --token-file "$work/tokens" --keep-alive 1 \
  >"$work/serve.out" 2>/dev/null &
server=$!
for _ in $(seq 1 120); do grep -q Listening "$work/serve.out" 2>/dev/null && break; sleep 0.5; done
url=$(sed 's/Listening on //' "$work/serve.out")
feature='{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"name":"V","destination":"W","startDate":"2027-01-01","endDate":"2027-01-02"}}'
codes=""
for path in / /api "/collections/trips" "/collections/trips/items?bbox=170,-30,-170,0&limit=5" \
  "/collections/trips/items?limit=x" /nothing "/collections/trips/bounds?crs=EPSG:3035" \
  "/collections/trips/sections" "/collections%00/trips" "/collections/trips/items?q=a%00b" \
  "/collections/trips/items?crs=http://www.opengis.net/def/crs/EPSG/0/3857&limit=5" \
  "/collections/trips/items?bbox=-1e6,4e6,4e6,8e6&bbox-crs=http://www.opengis.net/def/crs/EPSG/0/3857" \
  "/collections/trips/items?filter=S_INTERSECTS(geometry,POLYGON((0%2040,20%2040,20%2055,0%2040)))%20AND%20CASEI(name)%20LIKE%20%27%25a%25%27"; do
  codes+="$(curl -s -o /dev/null -w '%{http_code}' "$url$path") "
done
# Requests refused for their framing before the body (two Content-Lengths, a coding that does
# not end in chunked): 400 and the connection closed.
for framing in 'Content-Length: 3\r\nContent-Length: 5' 'Transfer-Encoding: gzip'; do
  exec 4<>"/dev/tcp/127.0.0.1/${url##*:}"
  printf "POST /changes HTTP/1.1\r\nHost: x\r\n$framing\r\n\r\nabcde" >&4
  codes+="$(timeout 5 head -c 12 <&4 | cut -c10-12) "
  exec 4<&-
done
codes+="$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/geo+json' --data "$feature" "$url/collections/trips/items") "
codes+="$(head -c 17000000 /dev/zero | curl -s -o /dev/null -w '%{http_code}' -X POST \
  --data-binary @- "$url/collections/trips/items")"
# A stream client that stops reading while 20,000 trips arrive in one transaction: the server
# drops it (its socket reset and shut down from the feed's thread, which libmicrohttpd then
# closes) once it has read nothing for 5 s with its queue past 256 KiB.
"$bin/trips-generate" --count 20000 --output "$work/burst.csv" 2>/dev/null
exec 3<>"/dev/tcp/127.0.0.1/${url##*:}"
printf 'GET /collections/trips/items/stream HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n' >&3
# The stream's feed is made before the import commits (valgrind is slow to answer).
sleep 10
"$bin/trips" import "$work/burst.csv" --store "$work/trips.sqlite" >/dev/null
# It is given time (valgrind is slow), then read: a reset connection fails at once.
sleep 60
if timeout 5 cat <&3 >/dev/null 2>"$work/drop.err"; then dropped="closed"; else dropped="exit $?"; fi
exec 3<&-
kill -TERM "$server"
wait "$server" || true
check_log "trips serve" "$work/serve.err" \
  ": statuses $codes, a stalled stream client ($dropped: 1 is a reset, 124 still open), SIGTERM"

# libmicrohttpd with TLS material it refuses: a certificate and a key that is not its own. The
# daemon that fails to start, and the plain one started to tell why, are both freed.
if command -v openssl >/dev/null; then
  for n in 1 2; do
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key$n.pem" -out "$work/cert$n.pem" \
      -days 1 -subj /CN=localhost 2>/dev/null
  done
  run "trips serve with a key that is not the certificate's" "$bin/trips" serve --port 0 \
    --tls-cert "$work/cert1.pem" --tls-key "$work/key2.pem" --store "$work/trips.sqlite"
fi

# libpq: the PostgreSQL engine under memcheck, against a throwaway cluster (initdb and pg_ctl
# from Debian's postgresql, as the postgres user when run as root, since the server refuses
# root): a store made and filled, read back in binary (list, sections, bounds, history), the
# ways a connection fails (nothing listening, an unknown database, an unknown service name, a
# URL libpq refuses), and a watch whose session the server terminates (pg_terminate_backend):
# it reconnects and reports the trip added meanwhile; imports whose batch of rows fails in the
# middle. Every PGconn and PGresult has one owner
# that frees it once; any invalid read, write or free fails the run.
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$pgbin" ]; then
  echo "skip  libpq: no PostgreSQL server here (Tools/install-dependencies.sh --tests installs it)"
  exit "$failed"
fi
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pgdir=$(mktemp -d)
if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$pgdir"; fi
trap 'as_postgres "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work" "$pgdir"' EXIT
as_postgres "$pgbin/initdb" -D "$pgdir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
  >/dev/null
started=""
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 30000))
  if as_postgres "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -o \
    "-p $port -k $pgdir -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null; then
    started=yes
    break
  fi
done
if [ -z "$started" ]; then
  echo "FAIL  libpq: the throwaway cluster did not start" >&2
  exit 1
fi
pg="postgresql://postgres@127.0.0.1:$port/postgres"
run "trips import (PostgreSQL)" "$bin/trips" import Data/sample-trips.csv --store "$pg"
run "trips list --group-by destination (PostgreSQL)" "$bin/trips" list --group-by destination \
  --store "$pg"
run "trips bounds --crs EPSG:3035 (PostgreSQL)" "$bin/trips" bounds --crs EPSG:3035 --store "$pg"
run "trips history (PostgreSQL)" "$bin/trips" history --store "$pg"
run "nothing listening (PostgreSQL)" "$bin/trips" list --store "postgresql://postgres@127.0.0.1:1/x"
run "an unknown database (PostgreSQL)" "$bin/trips" list \
  --store "postgresql://postgres@127.0.0.1:$port/nosuch"
PGSERVICEFILE=/dev/null run "an unknown service name (PostgreSQL)" "$bin/trips" list \
  --store "postgresql:///?service=nosuch"
run "a URL libpq refuses (PostgreSQL)" "$bin/trips" list \
  --store "postgresql://postgres@127.0.0.1:$port/postgres?nosuchoption=1"
# A save sends its rows in batches (libpq's pipeline mode): a row the server refuses in the
# middle of one, and a session terminated in the middle of one, fail the import whole, with
# the pipeline's results read and freed, and the next import goes through.
"$bin/trips-generate" --count 201 --output "$work/batch.csv" 2>/dev/null
head -2 "$work/batch.csv" >"$work/first.csv"
{
  head -1 "$work/batch.csv"
  tail -n +3 "$work/batch.csv" | awk -F, 'NR == 150 {
    print $1 ",refused,Refusal,2027-01-01,2027-01-02,0,0,"; next } { print }'
} >"$work/refused.csv"
refusals=0
for action in "RAISE EXCEPTION 'refused row';" "PERFORM pg_terminate_backend(pg_backend_pid());"; do
  database="refusals$((++refusals))"
  case $action in
    RAISE*) what="a row the server refuses" ;;
    *) what="its session terminated" ;;
  esac
  as_postgres "$pgbin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
    -c "CREATE DATABASE $database" >/dev/null
  store="postgresql://postgres@127.0.0.1:$port/$database"
  "$bin/trips" import "$work/first.csv" --store "$store" >/dev/null
  as_postgres "$pgbin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d "$database" -c "
    CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$
    BEGIN IF NEW.name = 'refused' THEN $action END IF; RETURN NEW; END \$\$;
    CREATE TRIGGER refuse BEFORE INSERT ON trips FOR EACH ROW EXECUTE FUNCTION refuse();" >/dev/null
  run "trips import, a batch failing at its 22nd row ($what) (PostgreSQL)" \
    "$bin/trips" import "$work/refused.csv" --store "$store"
  if [ "$status" = 0 ]; then
    echo "FAIL  the import with a refused row succeeded" >&2
    failed=1
  fi
  run "trips import, the same file with nothing refused (PostgreSQL)" \
    "$bin/trips" import "$work/batch.csv" --store "$store"
done

# The watch's session is terminated by the server; it reconnects, catches up from its token,
# and reports the trip added meanwhile (its second report), then exits.
"$bin/trips-generate" --count 1 --output "$work/one.csv" 2>/dev/null
valgrind --quiet --leak-check=no --log-file="$work/watch.err" "$bin/trips" watch --count 2 \
  --store "$pg" >"$work/watch.out" 2>"$work/watch.stderr" &
watcher=$!
for _ in $(seq 1 120); do [ -s "$work/watch.out" ] && break; sleep 0.5; done
as_postgres "$pgbin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c \
  "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" \
  >/dev/null
"$bin/trips" import "$work/one.csv" --store "$pg" >/dev/null
for _ in $(seq 1 240); do kill -0 "$watcher" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$watcher" 2>/dev/null; then
  kill -TERM "$watcher"
  echo "FAIL  trips watch across pg_terminate_backend: no second report" >&2
  failed=1
fi
wait "$watcher" || true
reports=$(wc -l <"$work/watch.out")
if [ "$reports" != 2 ]; then
  echo "FAIL  trips watch across pg_terminate_backend: $reports reports, not 2" >&2
  cat "$work/watch.stderr" >&2
  failed=1
fi
check_log "trips watch across pg_terminate_backend (PostgreSQL)" "$work/watch.err" \
  ": $reports reports"
exit "$failed"
