#!/usr/bin/env bash
# Builds Tests/ClientPackage — a package that depends on this one by path, as a service's does,
# with related models of its own — in debug and in release (`-c release`, as services ship), and
# runs its checks in each build on a fresh SQLite store and on a throwaway PostgreSQL cluster
# (initdb and pg_ctl from Debian's postgresql, as the postgres user when run as root, since the
# server refuses root). The checks are sorts, sections, predicates, prefetch, faults and an
# observer through relationships, key paths that must be refused naming them, and README's and
# the DocC articles' persistence examples, each run in a folder of its own.
#
# Usage: Tools/client-package.sh [debug|release ...]   (default: debug release)
set -euo pipefail
cd "$(dirname "$0")/.."
configurations=("$@")
if [ ${#configurations[@]} = 0 ]; then configurations=(debug release); fi
package=Tests/ClientPackage

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$pgbin" ]; then
  echo "error: no PostgreSQL server under /usr/lib/postgresql (Tools/install-dependencies.sh --tests installs it)" >&2
  exit 1
fi
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
work=$(mktemp -d)
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
  echo "error: the throwaway PostgreSQL cluster did not start:" >&2
  cat "$pgdir/server.log" >&2
  exit 1
fi

failed=0
for configuration in "${configurations[@]}"; do
  echo "== $package, swift build -c $configuration"
  swift build --package-path "$package" -c "$configuration"
  binary=$(swift build --package-path "$package" -c "$configuration" --show-bin-path)/client-checks
  mkdir -p "$work/$configuration"
  "$binary" sqlite "$work/$configuration" || failed=1
  database="client_$configuration"
  "$pgbin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$database"
  "$binary" postgresql "postgresql://postgres@127.0.0.1:$port/$database" || failed=1
done
if [ "$failed" != 0 ]; then
  echo "error: a check of $package failed (above)" >&2
  exit 1
fi
