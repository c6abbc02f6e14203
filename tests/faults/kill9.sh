#!/usr/bin/env bash
# kill -9 under load: clients create and delete claims and pods (and the scheduler binds them)
# while the server is killed at a random moment, then restarted on the same data directory.
# After each restart fault_load checks every acknowledged write against what is stored, that
# every pod is decided, that no device is held twice and that the device ledger equals the
# claims' allocations. Prints one line per cycle and a summary (cycles, acknowledged writes,
# lost, doubles, recovery time p50 / max); exits 1 on the first cycle that fails a check.
#
# Usage: kill9.sh <quartermaster binary> <fault_load binary> [cycles (10)]
set -uo pipefail
QM_BIN=$1
LOAD=$2
CYCLES=${3:-10}
source "$(dirname "$0")/../e2e/lib.sh" qm-faults

conn() { echo --url "$URL" --token-file "$WORK/data/admin.token" --ca-file "$WORK/data/pki/ca.crt"; }
now_ms() { date +%s%3N; }

start_server
# shellcheck disable=SC2046
"$LOAD" setup $(conn) --nodes 8 --devices 4 || exit 1
db="host=$WORK/data/postgres port=5432 user=quartermaster dbname=postgres password=$(cat "$WORK/data/postgres.password")"

recoveries=()
total_acked=0
for cycle in $(seq 1 "$CYCLES"); do
  journal="$WORK/journal.$cycle"
  # shellcheck disable=SC2046
  "$LOAD" load $(conn) --journal "$journal" --prefix "k$cycle" --seconds 30 --concurrency 8 \
    > "$WORK/load.$cycle.out" 2>&1 &
  load_pid=$!
  # A random moment 0.2-2.2 s into the load: creates, binds and deletes are in flight.
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.2 + (r % 2000) / 1000 }')"
  kill -9 "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null
  wait "$load_pid"
  t0=$(now_ms)
  start_server
  # Recovered: the restarted server answers an authenticated request.
  until kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.05; done
  recovery=$(( $(now_ms) - t0 ))
  recoveries+=("$recovery")
  # shellcheck disable=SC2046
  if ! out=$("$LOAD" verify $(conn) --database-url "$db" --settle 60 "$WORK"/journal.*); then
    echo "cycle $cycle FAILED (recovery ${recovery} ms):"
    echo "$out"
    cat "$WORK/load.$cycle.out"
    QM_E2E_KEEP=1
    exit 1
  fi
  if [ "$cycle" = 1 ]; then
    # The checker must be able to fail: a write it is told was acknowledged but never happened.
    echo "ack create claim k1-never-written 00000000-0000-0000-0000-000000000000" > "$WORK/control"
    # shellcheck disable=SC2046
    if control=$("$LOAD" verify $(conn) --database-url "$db" --settle 5 "$WORK"/journal.* "$WORK/control") ||
      ! grep -q '^LOST: acknowledged claim k1-never-written' <<<"$control"; then
      echo "the checker did not report a lost write:"; echo "$control"; exit 1
    fi
    rm "$WORK/control"
  fi
  acked=$(grep -c '^ack ' "$journal")
  total_acked=$((total_acked + acked))
  echo "cycle $cycle: acknowledged $acked writes this cycle, recovery ${recovery} ms; ${out##*verify: }"
done

sorted=$(printf '%s\n' "${recoveries[@]}" | sort -n)
p50=$(sed -n "$(( (${#recoveries[@]} + 1) / 2 ))p" <<<"$sorted")
max=$(tail -1 <<<"$sorted")
echo "kill -9: $CYCLES cycles, $total_acked acknowledged writes, 0 lost, 0 doubles, 0 ledger mismatches; recovery p50 ${p50} ms, max ${max} ms"
