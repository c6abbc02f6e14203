#!/usr/bin/env bash
# Starts a fresh quartermaster (embedded PostgreSQL, durable commits) in a temporary directory
# and runs the fleet driver against it: 5,000 simulated agents x 8 GPUs register and publish,
# heartbeat every 10 s (the server's CPU measured from /proc), then 5,000 pods are scheduled onto
# them while the agents prepare their claims (bind -> CDI written -> claim Ready). Arguments go
# to fleet_load (e.g. --nodes 500 --pods 0). After scripts/build.sh. QM_BIN runs another server
# binary (A/B comparisons). The CDI specs go to a tmpfs (/dev/shm) where there is one, as a
# node's /var/run/cdi is on /run's tmpfs; QM_FLEET_CDI_PARENT puts them elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/qm-fleet-XXXXXX)
chmod 755 "$work"
ulimit -n 65536 2>/dev/null || true
${QM_BIN:-build/server/quartermaster} --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir "$work/data" \
  --log-level "${QM_LOG_LEVEL:-warn}" > "$work/out" 2> "$work/err" &
pid=$!
cdi_parent=${QM_FLEET_CDI_PARENT:-/dev/shm}
[ -d "$cdi_parent" ] && [ -w "$cdi_parent" ] || cdi_parent=$work
cdi=$(mktemp -d "$cdi_parent/qm-fleet-cdi-XXXXXX")
trap 'kill -TERM $pid; wait $pid; cp "$work/err" /tmp/qm-fleet-last.err 2>/dev/null; rm -rf "$work" "$cdi"' EXIT
for _ in $(seq 1 300); do grep -q '^LISTENING ' "$work/out" && break; sleep 0.1; done
url=$(sed -n 's/^LISTENING //p' "$work/out")
grpc=$(sed -n 's/^GRPC_LISTENING //p' "$work/out")
postmaster=$(head -1 "$work/data/postgres/postmaster.pid" 2>/dev/null || echo 0)
source bench/cpu.sh
read -r s0 p0 < <(cpu_ticks "$pid")
build/bench/fleet_load --url "$url" --token-file "$work/data/admin.token" \
  --ca-file "$work/data/pki/ca.crt" --grpc "$grpc" --server-pid "$pid" \
  --postmaster-pid "$postmaster" --cdi-dir "$cdi" --nodes 5000 --pods 5000 "$@"
read -r s1 p1 < <(cpu_ticks "$pid")
cpu_report "$s0" "$p0" "$s1" "$p1" "cpu, whole run"
if grep -qi error "$work/err"; then echo "server errors:"; grep -i error "$work/err" | head -5; fi
