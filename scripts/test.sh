#!/usr/bin/env bash
# One command from a bare machine to every test: installs the Debian packages, builds, and runs
# the unit, integration (real PostgreSQL, started by the tests themselves) and end-to-end (real
# kubectl) suites.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
if ! command -v kubectl >/dev/null 2>&1; then
  echo "test.sh: kubectl is not on PATH; the end-to-end suite needs it" >&2
  exit 1
fi
ctest --test-dir build --output-on-failure --timeout 900 -j 2
