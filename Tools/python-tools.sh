#!/usr/bin/env bash
# Makes the virtual environment of the Python tools the tests run (.build/python-tools), from
# PyPI, pinned in Tests/Tools/requirements.txt: pygeofilter and shapely, the independent CQL2
# evaluator of the filter tests (Tests/Tools/cql2_oracle.py). Does nothing when it is current.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/python-tools
requirements=Tests/Tools/requirements.txt
if [ -f "$venv/requirements.txt" ] && cmp -s "$requirements" "$venv/requirements.txt"; then
  exit 0
fi
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$venv/requirements.txt"
