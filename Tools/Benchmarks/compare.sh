#!/bin/bash
# Runs trips-bench at two commits side by side, alternately, in one run: what the read issue
# measures against the commit before relationships (39658ec), after each step.
#
#   Tools/Benchmarks/compare.sh [BASE [PHASES [SIZE [RUNS [OUTPUT]]]]]
#
#   BASE    the commit to compare with (default 39658ec, the commit before relationships)
#   PHASES  trips-bench's --phases (default fetch,sectioned,contains,insert,memory,serve)
#   SIZE    trips (default 100000)
#   RUNS    runs of each side (default 2): base, head, head, base, base, … so that neither
#           side always goes first on a machine that drifts
#   OUTPUT  where the raw output of every run goes, each run's after the one before (default
#           Tools/Benchmarks/results/results-compare-<SIZE>.txt); the summary goes to standard output
#           and to the end of that file
#
# Each side is built in release in a worktree of its own, /tmp/trips-compare/<commit> (HEAD's
# too, so that an edit to the checkout never reaches a build being measured), with its `trips`
# product for the serve phase; the worktrees stay, so that the next comparison of a commit
# builds nothing (`git worktree remove` one when done). A run is trips-bench with --rounds 3 --no-watch, under a 12 GiB address-space
# limit and a 30-minute timeout, in a store folder of its own. Every cell of the summary is a
# median over the runs of each side: ours, C's in the same run, ours / C, and head / base (of
# ours; of requests a second for the serve rows, where higher is better).
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:-39658ec}
phases=${2:-fetch,sectioned,contains,insert,memory,serve}
size=${3:-100000}
runs=${4:-2}
output=${5:-Tools/Benchmarks/results/results-compare-$((size / 1000))k.txt}
head=$(git rev-parse --short HEAD)
base=$(git rev-parse --short "$base")
work=$(mktemp -d /tmp/trips-compare-run.XXXXXX)
trap 'rm -rf "$work"' EXIT
trees=/tmp/trips-compare
mkdir -p "$trees"

for side in base head; do
  commit=$base
  if [ "$side" = head ]; then commit=$head; fi
  if [ ! -d "$trees/$commit" ]; then git worktree add --detach "$trees/$commit" "$commit" >/dev/null; fi
  ln -s "$trees/$commit" "$work/$side"
  echo "building trips-bench and trips at $commit ($side)" >&2
  (cd "$trees/$commit" && swift build -c release --product trips-bench >/dev/null &&
    swift build -c release --product trips >/dev/null)
done

run() {
  local side=$1 index=$2
  local store="$work/store-$side-$index"
  mkdir -p "$store"
  echo "== $side $(cd "$work/$side" && git rev-parse --short HEAD) run $index: trips-bench --size $size --rounds 3 --no-watch --phases $phases"
  (cd "$work/$side" && timeout 1800 prlimit --as=12884901888 \
    .build/release/trips-bench --size "$size" --rounds 3 --no-watch --phases "$phases" \
    --directory "$store" 2>&1) || echo "(exit $?)"
  rm -rf "$store"
}

{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ): $head against $base, $runs runs each, --size $size --phases $phases"
  for index in $(seq 1 "$runs"); do
    if [ $((index % 2)) = 1 ]; then order="base head"; else order="head base"; fi
    for side in $order; do run "$side" "$index"; done
  done
} >"$work/raw.txt"
cat "$work/raw.txt" >>"$output"

python3 - "$work/raw.txt" "$base" "$head" <<'PY' | tee -a "$output"
import re, statistics, sys
path, base, head = sys.argv[1:4]
cells = {}   # (phase, side) -> list of (ours, baseline, rate)
order = []
side = None
for line in open(path):
    if line.startswith("== "):
        side = line.split()[1]
        continue
    match = re.match(r"(.{34})n=\d+\s+ours ([\d.]+) (\S+)\s+baseline ([\d.]+) \S+\s+ratio [\d.]+(.*)", line)
    if not match or side is None:
        continue
    phase = match.group(1).strip()
    rate = re.search(r"HTTP (\d+) req/s", match.group(5))
    if phase not in order:
        order.append(phase)
    cells.setdefault((phase, side), []).append(
        (float(match.group(2)), float(match.group(4)), float(rate.group(1)) if rate else None, match.group(3)))
print(f"\nMedians; head {head} against base {base}:")
print("| phase | base: ours / C | head: ours / C | head / base |")
print("|---|---|---|---|")
def show(value, unit):
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 10 else f"{value:.2f} s"
    return f"{value:.0f} {unit}"
for phase in order:
    row = []
    medians = {}
    for s in ("base", "head"):
        values = cells.get((phase, s))
        if not values:
            row.append("—")
            continue
        ours = statistics.median(v[0] for v in values)
        c = statistics.median(v[1] for v in values)
        rates = [v[2] for v in values if v[2] is not None]
        medians[s] = (ours, statistics.median(rates) if rates else None)
        text = f"{show(ours, values[0][3])} / {show(c, values[0][3])} = {ours / c:.2f}"
        if rates:
            text += f" ({statistics.median(rates):.0f} req/s)"
        row.append(text)
    if "base" in medians and "head" in medians:
        (bo, br), (ho, hr) = medians["base"], medians["head"]
        ratio = f"{ho / bo:.2f}"
        if br and hr:
            ratio += f" (req/s {hr / br:.2f})"
        row.append(ratio)
    else:
        row.append("—")
    print(f"| {phase} | " + " | ".join(row) + " |")
PY
