# Shared by the end-to-end scripts: a private work directory and kubectl cache, a quartermaster
# on a free port with its embedded PostgreSQL in that directory, and cleanup on exit.
# Usage: QM_BIN=... source lib.sh <work dir prefix>; then start_server [extra server flags...]
# Checks: `expect NAME GOT WANT`, `expect_match NAME GOT REGEX`, `pass`/`fail NAME [DETAIL...]`
# count into $checks and $failures; `eventually SECONDS CMD...` retries CMD every 0.2 s until it
# succeeds and prints its last output.
WORK=$(mktemp -d "/tmp/$1-XXXXXX")
chmod 755 "$WORK"
export HOME="$WORK/home"   # fresh kubectl discovery and /version caches
mkdir -p "$HOME"
SERVER_PID=""
URL=""

cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
  fi
  # A server killed with -9 leaves its PostgreSQL running: stop it.
  if [ -f "$WORK/data/postgres/postmaster.pid" ]; then
    local bin
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$bin/pg_ctl" -D "$WORK/data/postgres" -m fast -w stop >/dev/null 2>&1
    else "$bin/pg_ctl" -D "$WORK/data/postgres" -m fast -w stop >/dev/null 2>&1; fi
  fi
  [ -n "${QM_E2E_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

# Starts the server (reusing the data directory, so it also serves as a restart) and sets
# SERVER_PID, URL, GRPC_ADDR and KUBECONFIG (the admin kubeconfig written by the server). Exits the script when the server does not come up.
start_server() {
  "$QM_BIN" --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir "$WORK/data" \
    --log-level warn "$@" \
    > "$WORK/server.out" 2>> "$WORK/server.err" &
  SERVER_PID=$!
  local line=""
  for _ in $(seq 1 300); do
    line=$(grep -m1 '^LISTENING ' "$WORK/server.out" 2>/dev/null) && break
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "server died:"; cat "$WORK/server.err"; exit 1; }
    sleep 0.1
  done
  [ -n "$line" ] || { echo "server did not start"; cat "$WORK/server.err"; exit 1; }
  URL=${line#LISTENING }
  # The node-agent gRPC endpoint (host:port), printed before LISTENING.
  GRPC_ADDR=$(grep -m1 '^GRPC_LISTENING ' "$WORK/server.out" | cut -d' ' -f2)
  # TLS and a credential, as a user would: the admin kubeconfig the server writes.
  export KUBECONFIG="$WORK/data/admin.kubeconfig"
  : > "$WORK/server.out"
}

failures=0
checks=0
pass() { checks=$((checks + 1)); echo "ok:   $1"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $1"; shift; printf '    %s\n' "$@"; }
expect() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "want: $3" "got:  $2"; fi; }
expect_match() { if grep -qE -- "$3" <<<"$2"; then pass "$1"; else fail "$1" "want /$3/" "got:  $2"; fi; }
eventually() {
  local deadline=$((SECONDS + $1)); shift
  local out
  while true; do
    out=$("$@") && { echo "$out"; return 0; }
    [ $SECONDS -ge $deadline ] && { echo "$out"; return 1; }
    sleep 0.2
  done
}
