#!/usr/bin/env bash
# Runs the test suite under a sanitizer: Tools/sanitize.sh thread|address
# (a build of its own in .build/sanitize-<name>; several minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizer="${1:-thread}"
# Leak reports are off: process-lifetime caches (encodings of shared values, key paths) and the
# toolchain's XCTest are reported as leaks at exit, and they would change every child's exit code.
# Memory errors (use after free, overflows) still stop the run.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
# As README's test command: the exit tests (names ending in Traps) in a process of their own.
swift test --sanitize="$sanitizer" --build-path ".build/sanitize-$sanitizer" --skip Traps
swift test --sanitize="$sanitizer" --build-path ".build/sanitize-$sanitizer" --filter Traps
