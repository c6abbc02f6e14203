#!/usr/bin/env bash
# The full fault tests (tests/faults/): kill -9 of the server under load for [cycles] cycles
# (default 100), printing one line per cycle and the summary (acknowledged writes, lost,
# doubles, ledger mismatches, recovery p50 / max); then three replicas on one database killed
# at random while [pods] pods (default 100,000) over whole, consumable-capacity and
# partitionable devices are created and deleted (doubles, overcommits, ledger == claims).
# Needs a build (scripts/build.sh).
# Usage: bench/run_faults.sh [cycles] [pods]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tests/faults/kill9.sh" "$root/build/server/quartermaster" \
  "$root/build/tests/faults/fault_load" "${1:-100}"
"$root/tests/faults/replicas_kill.sh" "$root/build/server/quartermaster" \
  "$root/build/tests/faults/fault_load" "${2:-100000}"
