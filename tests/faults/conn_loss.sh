#!/usr/bin/env bash
# Connection loss under load: while clients create and delete claims and pods (and the scheduler
# binds them), the server's database connections are ended from the database side
# (pg_terminate_backend, as an administrator or a proxy would) several times per cycle. After
# each cycle it checks that:
#   - the server is still up and serving: a new claim and pod are acknowledged and the pod is
#     bound (`fault_load probe`), /readyz answers 200;
#   - no write was answered with a 5xx other than 503, none took over 10 s;
#   - `fault_load verify` passes over every cycle's journal: no acknowledged write lost, every
#     pod decided, no device held twice, the ledger equals the claims.
# A watch client opened before the first cycle must end with the state of a fresh list and every
# change in the change log delivered (or replaced by a list after 410 Gone). Negative controls:
# the checker is shown a lost write; a watch client that ignores one change must be caught.
#
# Usage: conn_loss.sh <quartermaster binary> <fault_load binary> [cycles (3)] [kills per cycle (5)]
set -uo pipefail
QM_BIN=$1
LOAD=$2
CYCLES=${3:-3}
KILLS=${4:-5}
source "$(dirname "$0")/lib.sh" qm-connloss

# Ends every connection of the server's role but this one; prints how many.
terminate_backends() {
  psql "$(db_url)" -XAtqc "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
    WHERE usename = 'quartermaster' AND pid <> pg_backend_pid()"
}

start_server
# shellcheck disable=SC2046
"$LOAD" setup $(conn) --nodes 8 --devices 4 --probe-devices $((CYCLES + 8)) >/dev/null || exit 1
start_watches

total_acked=0
total_terminated=0
total_503=0
bind_times=()
for cycle in $(seq 1 "$CYCLES"); do
  journal="$WORK/journal.$cycle"
  # shellcheck disable=SC2046
  "$LOAD" load $(conn) --journal "$journal" --prefix "t$cycle" --seconds $((KILLS / 2 + 4)) \
    --concurrency 8 --keep-going 1 > "$WORK/load.$cycle.out" 2>&1 &
  load_pid=$!
  terminated=0
  for _ in $(seq 1 "$KILLS"); do
    # Every 0.2-0.7 s: writes, binds, watches and the change-log follower are mid-statement.
    sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.2 + (r % 500) / 1000 }')"
    n=$(terminate_backends) || fail "cycle $cycle: psql"
    terminated=$((terminated + n))
  done
  kill -0 "$SERVER_PID" 2>/dev/null || fail "cycle $cycle: the server exited"
  t0=$(now_ms)
  # shellcheck disable=SC2046
  probe=$("$LOAD" probe $(conn) --journal "$WORK/journal.probe.$cycle" --prefix "probe$cycle" \
    --timeout 30) || fail "cycle $cycle: $probe"
  bind_ms=$(sed -E 's/.*bound after ([0-9]+) ms.*/\1/' <<<"$probe")
  bind_times+=("$bind_ms")
  [ "$(readyz)" = 200 ] || fail "cycle $cycle: /readyz is not 200"
  wait "$load_pid"
  load_out=$(cat "$WORK/load.$cycle.out")
  check_load_output "cycle $cycle" "$load_out"
  n503=$(grep -oE ' 503=[0-9]+' <<<"$load_out" | cut -d= -f2)
  total_503=$((total_503 + ${n503:-0}))
  verify_journals "cycle $cycle" "$([ "$cycle" = 1 ] && echo control)"
  acked=$(grep -c '^ack ' "$journal")
  total_acked=$((total_acked + acked))
  total_terminated=$((total_terminated + terminated))
  echo "cycle $cycle: $terminated connections ended in $KILLS rounds, ${n503:-0} writes answered" \
    "503, probe pod bound in ${bind_ms} ms; acknowledged $acked writes; $VERIFY"
done

check_watches
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server exited"
echo "connection loss: $CYCLES cycles, $total_terminated connections ended, $total_acked" \
  "acknowledged writes, 0 lost, 0 doubles, 0 ledger mismatches, $total_503 writes answered 503" \
  "and no other 5xx; probe pod bound after the last round $(percentiles "${bind_times[@]}")"
