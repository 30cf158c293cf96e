#!/usr/bin/env bash
# Installs the Debian packages the build needs, if any is missing; with --tests, also those the
# tests need; with --benchmarks, those and the benchmarks' (wrk, the HTTP load generator of
# Tools/Benchmarks/serve-plans.sh and trips-bench's serve phase). README's first command (Tools/run-sample.sh) installs the build's; its test
# command passes --tests.
#
# The build (and `trips` at run time):
#   libsqlite3-dev  SQLite headers and library (the store)
#   libproj-dev     PROJ headers and library (projections)
#   pkg-config      lets SwiftPM find both libraries
#   libmicrohttpd-dev  the HTTP server library of `trips serve`
#   libpq-dev       PostgreSQL's client library (libpq), for PostgreSQL stores
#   libjs-leaflet   Leaflet, which `trips serve` serves to the map page (/map) from its
#                   installed path (/usr/share/javascript/leaflet)
# The tests (--tests):
#   proj-bin        PROJ's command-line tools (cs2cs, the tests' independent oracle)
#   postgresql      the server the tests start a throwaway cluster of (initdb and pg_ctl under
#                   /usr/lib/postgresql/*/bin, run as the `postgres` user when the tests run as
#                   root: PostgreSQL refuses to run as root); its own service is not used
#   valgrind        the tests' memcheck of the paths that create and fail PROJ objects
#   curl, gdal-bin  the tests' HTTP clients (gdal-bin: ogrinfo and ogr2ogr's OAPIF driver)
#   openssl         the tests make a throwaway TLS certificate for `trips serve --tls-cert`
#   zsh             the tests' syntax check of `trips completion zsh`
#   chromium        the tests' real browser: headless, it loads /map and takes a screenshot
#   fonts-dejavu-core  text for that screenshot and for the SVG pictures
#   jq              Tools/docs.sh reads the symbol graphs with it (undocumented public
#                   symbols); README's service examples, run by the tests, pick answers with it
#   python3-venv    the virtual environment of the tests' Python tools from PyPI
#                   (Tools/python-tools.sh: pygeofilter and shapely, the filter tests' oracle)
set -euo pipefail
packages=(libsqlite3-dev libproj-dev pkg-config libmicrohttpd-dev libpq-dev libjs-leaflet)
case "${1:-}" in
  "") ;;
  --tests)
    packages+=(proj-bin postgresql valgrind zsh curl gdal-bin openssl chromium fonts-dejavu-core jq
      python3-venv)
    ;;
  --benchmarks)
    packages+=(proj-bin postgresql valgrind zsh curl gdal-bin openssl chromium fonts-dejavu-core jq
      python3-venv wrk)
    ;;
  *)
    echo "usage: $0 [--tests | --benchmarks]" >&2
    exit 64
    ;;
esac
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]} > 0)); then
  echo "Installing missing Debian packages: ${missing[*]}" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
if [ -n "${1:-}" ]; then
  "$(dirname "$0")/python-tools.sh"
fi
