#!/usr/bin/env bash
# Three replicas on one PostgreSQL, killed at random under load: each replica runs the
# scheduler and the claim controllers, and its own clients create and delete claims and pods
# that ask for whole devices, shares of consumable-capacity devices (allowMultipleAllocations)
# and partitions of a partitionable GPU (shared counters), so the replicas race for the same
# devices, capacities and counters. Every 1-3 s one replica, chosen at random, is killed with
# -9 and started again on the same port. At the end fault_load verify checks every
# acknowledged write, that every pod is decided, that no device or share is held twice, that
# no capacity or counter set is overcommitted, and that the device ledger equals the claims'
# allocations; a control run of the checker with every limit divided by 4 must report
# overcommits (the check can fail).
#
# Usage: replicas_kill.sh <quartermaster binary> <fault_load binary> [pods (10000)]
# Prints one summary line: pods, kills, acknowledged writes, lost, doubles, overcommits,
# recovery p50 / max.
set -uo pipefail
QM_BIN=$1
LOAD=$2
PODS=${3:-10000}
source "$(dirname "$0")/lib.sh" qm-replicas

# Replica 1 owns the embedded cluster; replicas 2 and 3 use it through --database-url, with
# the same CA, serving certificate, admin token and ServiceAccount key (docs/reliability.md).
start_server
REPLICA_URL[1]=$URL
REPLICA_PID[1]=$SERVER_PID
DB=$(db_url)
for r in 2 3; do
  mkdir -p "$WORK/data$r"
  cp -a "$WORK/data/pki" "$WORK/data/admin.token" "$WORK/data/service-account.key" "$WORK/data$r/"
done

# Starts replica $1 (on port $2 when given, else a free one) and sets REPLICA_PID/REPLICA_URL.
start_replica() {
  local r=$1 port=${2:-0} out="$WORK/replica$1.out" line=""
  if [ "$r" = 1 ]; then
    "$QM_BIN" --http-addr "127.0.0.1:$port" --grpc-addr 127.0.0.1:0 --data-dir "$WORK/data" \
      --log-level warn > "$out" 2>> "$WORK/replica1.err" &
  else
    "$QM_BIN" --http-addr "127.0.0.1:$port" --grpc-addr 127.0.0.1:0 --data-dir "$WORK/data$r" \
      --database-url "$DB" --log-level warn > "$out" 2>> "$WORK/replica$r.err" &
  fi
  REPLICA_PID[$r]=$!
  for _ in $(seq 1 600); do
    line=$(grep -m1 '^LISTENING ' "$out" 2>/dev/null) && break
    kill -0 "${REPLICA_PID[$r]}" 2>/dev/null || break
    sleep 0.05
  done
  [ -n "$line" ] || { cat "$WORK/replica$r.err"; fail "replica $r did not start"; }
  REPLICA_URL[$r]=${line#LISTENING }
}
# Replica 1 again, under the control of this script (start_server's copy is stopped first).
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
SERVER_PID=""
start_replica 1
start_replica 2
start_replica 3
stop_all() {
  for r in 1 2 3; do
    kill -TERM "${REPLICA_PID[$r]}" 2>/dev/null && wait "${REPLICA_PID[$r]}" 2>/dev/null
  done
}
trap 'stop_all; cleanup' EXIT

replica_conn() {
  echo --url "${REPLICA_URL[$1]}" --token-file "$WORK/data/admin.token" --ca-file "$WORK/data/pki/ca.crt"
}
# shellcheck disable=SC2046
"$LOAD" setup $(replica_conn 1) --nodes 8 --devices 4 --mixed 1 || fail "setup"

# One load per replica, each with its share of the pods; they keep going through the kills.
per=$(( (PODS + 2) / 3 ))
for r in 1 2 3; do
  # shellcheck disable=SC2046
  "$LOAD" load $(replica_conn "$r") --journal "$WORK/journal.$r" --prefix "r$r" --mixed 1 \
    --pods "$per" --seconds 3600 --concurrency 4 --keep-going 1 > "$WORK/load.$r.out" 2>&1 &
  LOAD_PID[$r]=$!
done

running() { for r in 1 2 3; do kill -0 "${LOAD_PID[$r]}" 2>/dev/null && return 0; done; return 1; }
kills=0
recoveries=()
while running; do
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 1 + (r % 2000) / 1000 }')"
  running || break
  r=$(( RANDOM % 3 + 1 ))
  port=${REPLICA_URL[$r]##*:}
  kill -9 "${REPLICA_PID[$r]}"
  wait "${REPLICA_PID[$r]}" 2>/dev/null
  kills=$((kills + 1))
  t0=$(now_ms)
  start_replica "$r" "$port"
  [ "${REPLICA_URL[$r]##*:}" = "$port" ] || fail "replica $r came back on another port"
  recoveries+=("$(( $(now_ms) - t0 ))")
done
acked=0
for r in 1 2 3; do
  wait "${LOAD_PID[$r]}" || fail "load $r: $(cat "$WORK/load.$r.out")"
  check_load_output "load $r" "$(cat "$WORK/load.$r.out")"
  acked=$((acked + $(grep -c '^ack ' "$WORK/journal.$r")))
done
pods=$(grep -h '^ack create pod ' "$WORK"/journal.* | wc -l)
[ "$pods" -ge "$PODS" ] || fail "only $pods pods acknowledged, want $PODS"

# The checker runs against replica 1 (any replica would do).
URL=${REPLICA_URL[1]}
verify_journals "after $kills kills"
# shellcheck disable=SC2046
if control=$("$LOAD" verify $(conn) --database-url "$DB" --settle 5 --control-divide-limits 4 \
  "$WORK"/journal.*) || ! grep -q '^OVERCOMMIT: ' <<<"$control"; then
  fail "the checker did not report an overcommit with the limits divided by 4: ${control##*verify: }"
fi
echo "three replicas: $pods pods, $kills kills, $acked acknowledged writes; $VERIFY"
echo "replicas: $pods pods, $kills kills, $acked acknowledged writes, 0 lost, 0 doubles, 0 overcommits, 0 ledger mismatches; recovery $(percentiles "${recoveries[@]}")"
