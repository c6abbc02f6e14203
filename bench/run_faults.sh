#!/usr/bin/env bash
# The full fault tests (tests/faults/): kill -9 of the server under load for [cycles] cycles
# (default 100), printing one line per cycle and the summary (acknowledged writes, lost,
# doubles, ledger mismatches, recovery p50 / max). Needs a build (scripts/build.sh).
# Usage: bench/run_faults.sh [cycles]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/tests/faults/kill9.sh" "$root/build/server/quartermaster" \
  "$root/build/tests/faults/fault_load" "${1:-100}"
