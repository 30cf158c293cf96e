#!/bin/bash
# The box index's build at two commits side by side, in one run: how much longer `trips serve`
# takes to answer its first request with the index (built before it listens) than without it
# (`--no-box-index`), on the same SIZE trips.
#
#   Tools/Benchmarks/box-index.sh BASE [SIZE [ROUNDS]]     (default: 100000 5)
#
# Each side is built in release in a worktree of its own, /tmp/trips-compare/<commit> (as
# compare.sh does; HEAD's too), `trips` and `trips-generate`; each generates its own store of
# SIZE trips (trips-generate's seed), so that neither side opens a store the other's schema
# wrote. A round starts each side's server with and without the index, alternating which side
# goes first, and times from the launch to the first answer of `GET /collections/trips` (polled
# every 2 ms over loopback). The index's build is the difference of the two; the summary is
# the median over the rounds of each side, and head / base. Needs python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=$(git rev-parse --short "${1:?give the commit to compare with}")
size=${2:-100000}
rounds=${3:-5}
head=$(git rev-parse --short HEAD)
trees=/tmp/trips-compare
work=$(mktemp -d /tmp/trips-box-index.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$trees"
for commit in "$base" "$head"; do
  if [ ! -d "$trees/$commit" ]; then git worktree add --detach "$trees/$commit" "$commit" >/dev/null; fi
  echo "building trips and trips-generate at $commit" >&2
  (cd "$trees/$commit" && swift build -c release --product trips >/dev/null &&
    swift build -c release --product trips-generate >/dev/null)
  "$trees/$commit/.build/release/trips-generate" --count "$size" --store "$work/$commit.sqlite" 2>/dev/null
done

python3 - "$trees" "$work" "$base" "$head" "$rounds" <<'EOF'
import http.client, statistics, subprocess, sys, time
trees, work, base, head, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

def startup(commit, index):
    """Seconds from launching `trips serve` to its first answer of GET /collections/trips."""
    arguments = [f"{trees}/{commit}/.build/release/trips", "serve", "--store",
                 f"{work}/{commit}.sqlite", "--port", "18741", "--read-only"]
    if not index:
        arguments.append("--no-box-index")
    started = time.monotonic()
    server = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.monotonic() - started < 120:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", 18741, timeout=5)
                connection.request("GET", "/collections/trips")
                status = connection.getresponse().status
                connection.close()
                if status == 200:
                    return time.monotonic() - started
            except OSError:
                pass
            if server.poll() is not None:
                sys.exit(f"trips serve at {commit} stopped with {server.returncode}")
            time.sleep(0.002)
        sys.exit(f"trips serve at {commit} did not answer in 120 s")
    finally:
        server.terminate()
        server.wait()

builds = {base: [], head: []}
for round in range(rounds):
    order = [base, head] if round % 2 == 0 else [head, base]
    for commit in order:
        with_index, without = startup(commit, True), startup(commit, False)
        builds[commit].append(with_index - without)
        print(f"round {round + 1} {commit}: {with_index * 1000:.0f} ms with the index, "
              f"{without * 1000:.0f} ms without: {(with_index - without) * 1000:.0f} ms")
medians = {commit: statistics.median(times) for commit, times in builds.items()}
print(f"box index build, median of {rounds}: {base} {medians[base] * 1000:.0f} ms, "
      f"{head} {medians[head] * 1000:.0f} ms, head / base {medians[head] / medians[base]:.3f}")
EOF
