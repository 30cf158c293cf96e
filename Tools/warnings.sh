#!/bin/bash
# Builds the package and its tests (debug, as `swift test` does, so that the tests reuse the
# build) and fails when SwiftPM or the compiler warns: each warning is printed with where it
# is. CI runs it on a clean clone, where every file compiles; on a checkout already built, only
# the files that compile again can warn, so `rm -rf .build` first to check them all.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
swift build --build-tests 2>&1 | tee "$log" >/dev/null || status=$?
if [ "$status" -ne 0 ]; then
  cat "$log" >&2
  exit "$status"
fi
# A warning's line, once each (a file compiled for two targets warns twice); one inside a macro's
# expansion with the place its code comes from.
warnings=$(awk '
  /(^|: )warning: / && !/^ *\|/ { if (held != "") print held; held = $0; next }
  held != "" && /note: expanded code originates here/ { sub(/^[^\/]*/, ""); print held " (" $0 ")"; held = ""; next }
  held != "" && !/^ *[|`]/ { print held; held = "" }
  END { if (held != "") print held }
' "$log" | sort -u)
if [ -n "$warnings" ]; then
  echo "The build warns ($(echo "$warnings" | wc -l) distinct):" >&2
  echo "$warnings" >&2
  exit 1
fi
echo "Built with no warning."
