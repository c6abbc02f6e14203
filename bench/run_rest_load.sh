#!/usr/bin/env bash
# Starts a fresh quartermaster (embedded PostgreSQL, durable commits) in a temporary directory
# and runs the REST load driver against it. Arguments go to rest_load.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/qm-bench-XXXXXX)
chmod 755 "$work"
build/server/quartermaster --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir "$work/data" --log-level warn \
  > "$work/out" 2> "$work/err" &
pid=$!
trap 'kill -TERM $pid; wait $pid; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do grep -q '^LISTENING ' "$work/out" && break; sleep 0.1; done
url=$(sed -n 's/^LISTENING //p' "$work/out")
build/bench/rest_load --url "$url" --token-file "$work/data/admin.token" \
  --ca-file "$work/data/pki/ca.crt" "$@"
