#!/bin/bash
# Runs trips-bench's PostgreSQL phases against a throwaway cluster, in the three placements
# README's PostgreSQL table reports, and writes their raw output here:
#
#   results-pg-10k.txt            10,000 trips, 11 rounds, placed by the kernel
#   results-pg-100k.txt           100,000 trips, 3 rounds, placed by the kernel
#   results-pg-10k-one-core.txt   10,000 trips, 11 rounds, the benchmark and every server
#                                 process on core 0 (no cross-core wake-up in a round trip)
#   results-pg-10k-two-cores.txt  10,000 trips, 11 rounds, the benchmark on core 0 and every
#                                 server process on core 1 (one in every round trip)
#
# The cluster is Debian's PostgreSQL with its default settings, made with initdb in a
# temporary folder, as the postgres user when run as root (the server refuses root), on a
# free loopback port, and removed at the end. Needs a release build of trips-bench
# (`swift build -c release --product trips-bench`) and taskset (util-linux).
#
# Usage: Tools/Benchmarks/postgresql.sh [output folder]   (default: Tools/Benchmarks)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-Tools/Benchmarks}
bench=.build/release/trips-bench
[ -x "$bench" ] || { echo "no $bench: swift build -c release --product trips-bench" >&2; exit 1; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$pgbin" ] || { echo "no PostgreSQL server (Tools/install-dependencies.sh)" >&2; exit 1; }

as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pgdir=$(mktemp -d)
work=$(mktemp -d)
if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$pgdir"; fi
trap 'as_postgres "$pgbin/pg_ctl" -D "$pgdir/data" -m fast stop >/dev/null 2>&1 || true; rm -rf "$pgdir" "$work"' EXIT
as_postgres "$pgbin/initdb" -D "$pgdir/data" -U postgres -A trust -E UTF8 --locale=C >/dev/null
started=""
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 30000))
  if as_postgres "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -o \
    "-p $port -k $pgdir -c listen_addresses=127.0.0.1" start >/dev/null; then
    started=yes
    break
  fi
done
[ -n "$started" ] || { echo "the throwaway cluster did not start" >&2; exit 1; }
url="postgresql://postgres@127.0.0.1:$port/postgres"

# Pins the postmaster and its processes to cores $1; backends forked later inherit it.
pin_server() {
  local postmaster
  postmaster=$(head -1 "$pgdir/data/postmaster.pid")
  for process in $postmaster $(pgrep -P "$postmaster"); do
    taskset -a -p -c "$1" "$process" >/dev/null
  done
}

run() {
  local name=$1
  shift
  echo "== $name" >&2
  "$@" --postgresql "$url" --directory "$work/bench" --cities Data/cities.csv >"$out/$name"
}

pin_server 0,1
run results-pg-10k.txt "$bench" --size 10000 --rounds 11
run results-pg-100k.txt "$bench" --size 100000 --rounds 3
pin_server 0
run results-pg-10k-one-core.txt taskset -c 0 "$bench" --size 10000 --rounds 11
pin_server 1
run results-pg-10k-two-cores.txt taskset -c 0 "$bench" --size 10000 --rounds 11
pin_server 0,1
