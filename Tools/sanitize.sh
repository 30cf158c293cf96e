#!/usr/bin/env bash
# Runs the test suite under a sanitizer: Tools/sanitize.sh thread|address
# (a build of its own in .build/sanitize-<name>; several minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizer="${1:-thread}"
swift test --sanitize="$sanitizer" --build-path ".build/sanitize-$sanitizer"
