# shellcheck shell=bash
# Shared by the database fault tests (pg_restart.sh, conn_loss.sh, backup_restore.sh), on top of
# tests/e2e/lib.sh: connection flags for fault_load, the embedded cluster driven as the server
# drives it, and the checks every cycle makes.
# Usage: source lib.sh <work dir prefix>   (QM_BIN and LOAD set)
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh" "$1"

conn() { echo --url "$URL" --token-file "$WORK/data/admin.token" --ca-file "$WORK/data/pki/ca.crt"; }
now_ms() { date +%s%3N; }
fail() {
  echo "FAILED: $*"
  QM_E2E_KEEP=1
  exit 1
}

# The embedded cluster of $WORK/data, run as the server runs it (src/store/pg/embedded_postgres.cc:
# as `postgres` when root, a Unix socket in the cluster directory, no TCP).
CLUSTER=$WORK/data/postgres
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_cluster_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_stop_immediate() { as_cluster_owner "$PG_BIN/pg_ctl" -D "$CLUSTER" -m immediate -w stop >/dev/null; }
pg_start() {
  as_cluster_owner "$PG_BIN/pg_ctl" -D "$CLUSTER" -l "$CLUSTER/postgres.log" -w -t 60 \
    -o "-c listen_addresses='' -p 5432 -c unix_socket_directories='$CLUSTER' -c unix_socket_permissions=0700 -c fsync=on -c synchronous_commit=on -c max_connections=200" \
    start >/dev/null
}
# libpq connection string of the embedded cluster (after start_server wrote the password).
db_url() {
  echo "host=$CLUSTER port=5432 user=quartermaster dbname=postgres password=$(cat "$WORK/data/postgres.password")"
}

# The status code of an authenticated GET /readyz ("000" when it got no answer within 10 s).
readyz() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$WORK/data/pki/ca.crt" \
    -H "Authorization: Bearer $(cat "$WORK/data/admin.token")" "$URL/readyz"
}

percentiles() {  # "p50 N ms, max M ms" of the arguments
  local sorted
  sorted=$(printf '%s\n' "$@" | sort -n)
  echo "p50 $(sed -n "$(( ($# + 1) / 2 ))p" <<<"$sorted") ms, max $(tail -1 <<<"$sorted") ms"
}

# Checks a `fault_load load` summary: no 5xx other than 503, no answer slower than 10 s.
check_load_output() {  # <what> <load output>
  grep -qE ' 5(0[0-24-9]|[1-9][0-9])=' <<<"$2" && fail "$1: a write was answered with a 5xx other than 503: $2"
  local slowest
  slowest=$(sed -E 's/.*slowest answer ([0-9]+) ms.*/\1/' <<<"$2")
  [ "$slowest" -le 10000 ] || fail "$1: a write took ${slowest} ms: $2"
}

# fault_load verify over every journal so far; sets VERIFY to its summary. With `control`, the
# checker is also shown a write it is told was acknowledged but never happened, and must report
# it: the check itself is known to work.
verify_journals() {  # <what> [control]
  local out control
  # shellcheck disable=SC2046
  if ! out=$("$LOAD" verify $(conn) --database-url "$(db_url)" --settle 60 "$WORK"/journal.*); then
    echo "$out"
    fail "$1: verify"
  fi
  VERIFY=${out##*verify: }
  [ "${2:-}" = control ] || return 0
  echo "ack create claim never-written 00000000-0000-0000-0000-000000000000" > "$WORK/control"
  # shellcheck disable=SC2046
  if control=$("$LOAD" verify $(conn) --database-url "$(db_url)" --settle 5 "$WORK"/journal.* "$WORK/control") ||
    ! grep -q '^LOST: acknowledged claim never-written' <<<"$control"; then
    fail "the checker did not report a lost write: $control"
  fi
  rm "$WORK/control"
}

# Watch clients opened now and checked by check_watches: one that must see every change, and
# a negative control that ignores one change and must be caught.
start_watches() {
  # shellcheck disable=SC2046
  "$LOAD" watch $(conn) --database-url "$(db_url)" --stop-file "$WORK/stop" > "$WORK/watch.out" 2>&1 &
  WATCH_PID=$!
  # shellcheck disable=SC2046
  "$LOAD" watch $(conn) --database-url "$(db_url)" --stop-file "$WORK/stop" --drop-one 1 \
    > "$WORK/watch-control.out" 2>&1 &
  WATCH_CONTROL_PID=$!
  until grep -qs started "$WORK/watch.out" && grep -qs started "$WORK/watch-control.out"; do
    sleep 0.1
  done
}
check_watches() {
  touch "$WORK/stop"
  wait "$WATCH_PID" || { cat "$WORK/watch.out"; fail "the watches lost changes"; }
  grep '^watch ' "$WORK/watch.out"
  if wait "$WATCH_CONTROL_PID" || ! grep -q 'was never delivered' "$WORK/watch-control.out"; then
    cat "$WORK/watch-control.out"
    fail "the watch check did not catch an ignored change"
  fi
}
