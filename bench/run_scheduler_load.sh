#!/usr/bin/env bash
# Starts a fresh quartermaster (embedded PostgreSQL, durable commits) in a temporary directory
# and runs the scheduler load driver against it. Arguments go to scheduler_load. Prints the CPU
# time the server and PostgreSQL used during the run, the WAL PostgreSQL wrote, and the server's
# resident memory (now and at its peak). QM_BIN runs another server binary (A/B comparisons);
# QM_LOG_LEVEL=debug logs each scheduler pass. The server's output is kept in
# /tmp/qm-bench-last.out and .err.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/qm-bench-XXXXXX)
chmod 755 "$work"
${QM_BIN:-build/server/quartermaster} --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir "$work/data" \
  --log-level "${QM_LOG_LEVEL:-warn}" > "$work/out" 2> "$work/err" &
pid=$!
trap 'kill -TERM $pid; wait $pid; cp "$work/err" /tmp/qm-bench-last.err 2>/dev/null; cp "$work/out" /tmp/qm-bench-last.out 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do grep -q '^LISTENING ' "$work/out" && break; sleep 0.1; done
url=$(sed -n 's/^LISTENING //p' "$work/out")
source bench/cpu.sh
read -r s0 p0 < <(cpu_ticks "$pid")
w0=$(wal_lsn "$work/data")
build/bench/scheduler_load --url "$url" --token-file "$work/data/admin.token" \
  --ca-file "$work/data/pki/ca.crt" "$@"
read -r s1 p1 < <(cpu_ticks "$pid")
cpu_report "$s0" "$p0" "$s1" "$p1" "cpu"
wal_report "$work/data" "$w0"
memory_report "$pid"
