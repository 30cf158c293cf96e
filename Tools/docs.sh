#!/usr/bin/env bash
# Builds the API documentation of the library modules with the toolchain's own DocC into
# .build/docs/<Module> (static HTML), and fails on any DocC warning (a broken symbol link, a
# missing article) and on any public symbol of ours without a documentation comment.
#   Tools/docs.sh            build and check every module
#   Tools/docs.sh Geo        one module
set -euo pipefail
cd "$(dirname "$0")/.."
modules=("${@:-PersistenceCore PersistenceSQLite PersistencePostgreSQL Persistence Geo CQL2 TripPlanner TripService}")
read -r -a modules <<<"${modules[*]}"
graphs=.build/symbol-graphs
out=.build/docs
swift build --target TripService >/dev/null
mkdir -p "$out"
target=$(swift -print-target-info | sed -n 's/.*"unversionedTriple": "\(.*\)".*/\1/p' | head -1)
failed=0
for module in "${modules[@]}"; do
  rm -rf "${graphs:?}/$module" "${out:?}/$module"
  mkdir -p "$graphs/$module"
  swift-symbolgraph-extract -module-name "$module" -target "$target" \
    -I .build/debug/Modules -I Sources/CSQLite -I Sources/CProj -I Sources/CMicroHTTPD \
    -I Sources/CLibPQ -Xcc -I/usr/include/postgresql \
    -minimum-access-level public -output-dir "$graphs/$module" >/dev/null
  # Our own public symbols (those with a place in our sources) must say what they are.
  undocumented=$(jq -r '.symbols[]
      | select((.accessLevel == "public" or .accessLevel == "open")
               and (.location.uri // "" | test("/Sources/"))
               and (.docComment == null))
      | "\(.location.uri | sub("^file://"; "")):\(.location.position.line + 1): \(.pathComponents | join("."))"' \
    "$graphs/$module/$module.symbols.json")
  if [ -n "$undocumented" ]; then
    echo "Undocumented public symbols in $module:" >&2
    echo "$undocumented" >&2
    failed=1
  fi
  # The core is engine-neutral: no public symbol of it names SQLite or a statement of SQLite.
  if [ "$module" = PersistenceCore ]; then
    engineSpecific=$(jq -r '.symbols[]
        | select(.accessLevel == "public" or .accessLevel == "open")
        | select(([.names.title] + [.declarationFragments[]?.spelling]) | join(" ") | test("SQLite|OpaquePointer|sqlite3"))
        | .pathComponents | join(".")' "$graphs/$module/$module.symbols.json")
    if [ -n "$engineSpecific" ]; then
      echo "Public symbols of PersistenceCore that name SQLite:" >&2
      echo "$engineSpecific" >&2
      failed=1
    fi
  fi
  if ! docc convert "Sources/$module/$module.docc" \
    --additional-symbol-graph-dir "$graphs/$module" \
    --fallback-display-name "$module" --fallback-bundle-identifier "trips.$module" \
    --transform-for-static-hosting --hosting-base-path "$module" \
    --warnings-as-errors --output-path "$out/$module" >"$graphs/$module.log" 2>&1; then
    echo "DocC found problems in $module:" >&2
    cat "$graphs/$module.log" >&2
    failed=1
  fi
done
if [ "$failed" -ne 0 ]; then exit 1; fi
echo "Documentation built in $out/: ${modules[*]} (open $out/<Module>/index.html through a web server)."
