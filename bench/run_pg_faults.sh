#!/usr/bin/env bash
# The full database fault tests (tests/faults/): PostgreSQL stopped in immediate mode and
# started again under load for [cycles] cycles (default 20, 3 s down each), the server's
# database connections ended under load for [cycles] cycles (5 rounds each), and backup and
# restore. Prints one line per cycle and each test's summary: cycles, acknowledged writes, lost
# (0), doubles (0), 503s, recovery after the database returned (p50 / max). Needs a build
# (scripts/build.sh).
# Usage: bench/run_pg_faults.sh [cycles]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
qm=$root/build/server/quartermaster
load=$root/build/tests/faults/fault_load
cycles=${1:-20}
"$root/tests/faults/pg_restart.sh" "$qm" "$load" "$cycles" 3
"$root/tests/faults/conn_loss.sh" "$qm" "$load" "$cycles" 5
"$root/tests/faults/backup_restore.sh" "$qm" "$load" 10
