#!/usr/bin/env bash
# PostgreSQL restarted under load: clients create and delete claims and pods (and the scheduler
# binds them) while the server's embedded PostgreSQL is stopped in immediate mode (no shutdown
# checkpoint, every connection cut: what a crash of the database host looks like), kept down for
# a few seconds and started again as the server starts it. The server process is not touched.
# Per cycle it checks that:
#   - the server stays up, and while the database is away answers /readyz and writes with 503
#     (never 500, never slower than 10 s);
#   - it recovers within 5 s of the database accepting connections: a new claim and pod are
#     acknowledged and the pod is bound (`fault_load probe`), /readyz answers 200;
#   - `fault_load verify` passes over every cycle's journal: no acknowledged write lost, every
#     pod decided, no device held twice, the ledger equals the claims.
# A watch client (`fault_load watch`) opened before the first cycle must end with the state of a
# fresh list and every change in the change log delivered once, in order (or replaced by a list
# after 410 Gone). Negative controls: the checker is shown a lost write, and a second watch
# client that ignores one change must be caught.
#
# Usage: pg_restart.sh <quartermaster binary> <fault_load binary> [cycles (3)] [outage s (3)]
set -uo pipefail
QM_BIN=$1
LOAD=$2
CYCLES=${3:-3}
OUTAGE=${4:-3}
source "$(dirname "$0")/lib.sh" qm-pgrestart

start_server
# shellcheck disable=SC2046
"$LOAD" setup $(conn) --nodes 8 --devices 4 --probe-devices $((CYCLES + 8)) >/dev/null || exit 1
# Watches opened before the first restart, checked after the last.
start_watches

write_recoveries=()
bind_recoveries=()
ready_recoveries=()
total_acked=0
total_503=0
for cycle in $(seq 1 "$CYCLES"); do
  journal="$WORK/journal.$cycle"
  # shellcheck disable=SC2046
  "$LOAD" load $(conn) --journal "$journal" --prefix "r$cycle" --seconds $((OUTAGE + 6)) \
    --concurrency 8 --keep-going 1 > "$WORK/load.$cycle.out" 2>&1 &
  load_pid=$!
  # A random moment 0.5-2.5 s into the load: creates, binds and deletes are in flight.
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.5 + (r % 2000) / 1000 }')"
  pg_stop_immediate || fail "cycle $cycle: pg_ctl stop"
  # While the database is away: the server answers, with 503.
  down_until=$(( $(now_ms) + OUTAGE * 1000 ))
  codes=()
  while [ "$(now_ms)" -lt "$down_until" ]; do
    codes+=("$(readyz)")
    sleep 0.2
  done
  kill -0 "$SERVER_PID" 2>/dev/null || fail "cycle $cycle: the server exited with the database away"
  for c in "${codes[@]}"; do
    [ "$c" = 503 ] || fail "cycle $cycle: /readyz answered $c with the database away (${codes[*]})"
  done
  pg_start || fail "cycle $cycle: pg_ctl start"
  t_up=$(now_ms)
  # shellcheck disable=SC2046
  "$LOAD" probe $(conn) --journal "$WORK/journal.probe.$cycle" --prefix "probe$cycle" \
    --timeout 30 > "$WORK/probe.$cycle.out" 2>&1 &
  probe_pid=$!
  until [ "$(readyz)" = 200 ]; do
    [ $(( $(now_ms) - t_up )) -lt 30000 ] || fail "cycle $cycle: /readyz not 200 30 s after the database returned"
    sleep 0.02
  done
  ready_ms=$(( $(now_ms) - t_up ))
  [ "$ready_ms" -le 5000 ] || fail "cycle $cycle: /readyz 200 only after ${ready_ms} ms (over 5 s)"
  wait "$probe_pid" || fail "cycle $cycle: $(cat "$WORK/probe.$cycle.out")"
  probe=$(cat "$WORK/probe.$cycle.out")
  write_ms=$(sed -E 's/.*acknowledged after ([0-9]+) ms.*/\1/' <<<"$probe")
  bind_ms=$(sed -E 's/.*bound after ([0-9]+) ms.*/\1/' <<<"$probe")
  write_recoveries+=("$write_ms")
  bind_recoveries+=("$bind_ms")
  ready_recoveries+=("$ready_ms")
  [ "$bind_ms" -le 5000 ] || fail "cycle $cycle: recovery took ${bind_ms} ms (over 5 s): $probe"
  wait "$load_pid"
  load_out=$(cat "$WORK/load.$cycle.out")
  check_load_output "cycle $cycle" "$load_out"
  n503=$(grep -oE ' 503=[0-9]+' <<<"$load_out" | cut -d= -f2)
  total_503=$((total_503 + ${n503:-0}))
  verify_journals "cycle $cycle" "$([ "$cycle" = 1 ] && echo control)"
  acked=$(grep -c '^ack ' "$journal")
  total_acked=$((total_acked + acked))
  echo "cycle $cycle: database down ${OUTAGE} s (/readyz ${#codes[@]}x 503), ${n503:-0} writes" \
    "answered 503; after it returned: first write ${write_ms} ms, pod bound ${bind_ms} ms," \
    "/readyz 200 ${ready_ms} ms (probe: ${probe##*(}; acknowledged $acked writes; $VERIFY"
done

check_watches
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server exited"
echo "PostgreSQL restart: $CYCLES cycles of ${OUTAGE} s, $total_acked acknowledged writes, 0 lost," \
  "0 doubles, 0 ledger mismatches, $total_503 writes answered 503 and no other 5xx;" \
  "recovery after the database returned: first write $(percentiles "${write_recoveries[@]}")," \
  "pod bound $(percentiles "${bind_recoveries[@]}"), /readyz $(percentiles "${ready_recoveries[@]}")"
