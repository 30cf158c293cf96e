#!/bin/bash
# Runs trips-bench's PostgreSQL phases against a throwaway cluster, in the placements README's
# PostgreSQL table reports, RUNS times over (default 1), and writes their raw output here, each
# run's output after the one before:
#
#   results-pg-10k.txt            10,000 trips, 11 rounds, placed by the kernel
#   results-pg-100k.txt           100,000 trips, 3 rounds, placed by the kernel
#   results-pg-10k-one-core.txt   10,000 trips, 11 rounds, the benchmark and every server
#                                 process on core 0 (no cross-core wake-up in a round trip)
#   results-pg-10k-two-cores.txt  10,000 trips, 11 rounds, the benchmark on core 0 and every
#                                 server process on core 1 (one in every round trip)
#   results-pg-summary.txt        per placement and phase: each run's ratio ours / C (for the
#                                 change -> bounds phase, its p99), and their median
#
# Why several runs: within a run each side keeps one server process (one connection) for its
# rounds, and the kernel places that process, and the benchmark's thread, once for the most
# part, so a run's rounds share one placement and its median does not average placements
# out; on a virtual machine whose host takes a share of its time, neither does one run. A run
# goes through every placement before the next run starts, so that a slow stretch of the host
# falls on one run's cells, not on one placement's.
#
# The cluster is Debian's PostgreSQL with its default settings, made with initdb in a
# temporary folder, as the postgres user when run as root (the server refuses root), on a
# free loopback port, and removed at the end. Needs a release build of trips-bench
# (`swift build -c release --product trips-bench`) and taskset (util-linux).
#
# Usage: Tools/Benchmarks/postgresql.sh [output folder [RUNS]]   (default: Tools/Benchmarks 1)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-Tools/Benchmarks}
runs=${2:-1}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "RUNS must be a positive whole number; got $runs" >&2; exit 64; }
command -v jq >/dev/null || { echo "no jq (Tools/install-dependencies.sh --tests)" >&2; exit 1; }
bench=.build/release/trips-bench
[ -x "$bench" ] || { echo "no $bench: swift build -c release --product trips-bench" >&2; exit 1; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$pgbin" ] || { echo "no PostgreSQL server (Tools/install-dependencies.sh --tests)" >&2; exit 1; }

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

placements=(results-pg-10k results-pg-100k results-pg-10k-one-core results-pg-10k-two-cores)
mkdir -p "$out"
for name in "${placements[@]}"; do : >"$out/$name.txt"; done

# Runs one placement: $1 its name, then the command; appends its output to $out/$1.txt and
# keeps its phases as JSON for the summary.
run() {
  local name=$1
  shift
  echo "== $name, run $round of $runs" >&2
  "$@" --postgresql "$url" --directory "$work/bench" --cities Data/cities.csv \
    --json "$work/$name.$round.json" >>"$out/$name.txt"
}

for round in $(seq 1 "$runs"); do
  pin_server 0,1
  run results-pg-10k "$bench" --size 10000 --rounds 11
  run results-pg-100k "$bench" --size 100000 --rounds 3
  pin_server 0
  run results-pg-10k-one-core taskset -c 0 "$bench" --size 10000 --rounds 11
  pin_server 1
  run results-pg-10k-two-cores taskset -c 0 "$bench" --size 10000 --rounds 11
  pin_server 0,1
done

# The summary: the runs' phases side by side (every run has the same phases in the same order).
{
  echo "PostgreSQL phases, $runs run(s) of each placement: ratio ours / C in each run, then their median"
  echo "(for the change -> bounds phase: the p99 of each run in ms, then their median)"
  for name in "${placements[@]}"; do
    echo
    echo "$name"
    files=()
    for round in $(seq 1 "$runs"); do files+=("$work/$name.$round.json"); done
    jq -r -s '
      def median: sort | if length % 2 == 1 then .[length / 2 | floor]
        else (.[length / 2 - 1] + .[length / 2]) / 2 end;
      def fixed: (. * 100 | round) / 100 | tostring;
      [.[].phases] | transpose | .[]
      | if .[0].ratio != null then
          "  \(.[0].phase): \(map(.ratio | fixed) | join(", ")); median \(map(.ratio) | median | fixed)"
        else
          "  \(.[0].phase), p99 ms: \(map(.p99Seconds * 1000 | fixed) | join(", ")); median \(map(.p99Seconds * 1000) | median | fixed)"
        end' "${files[@]}"
  done
} >"$out/results-pg-summary.txt"
cat "$out/results-pg-summary.txt"
