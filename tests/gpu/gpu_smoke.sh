#!/usr/bin/env bash
# A smoke test on a real GPU machine (not run by CI: its machines have no GPU). Starts a
# quartermaster (embedded PostgreSQL) and a qm-agent that discovers the GPUs through the
# driver's NVML, then runs tests/gpu/gpu_smoke.py: what NVML reported, a whole-GPU claim and an
# MPS claim prepared, used by a CUDA program (python3 with torch) and unprepared. Needs root
# (or a user that may run the MPS control daemon), PostgreSQL's server binaries and python3.
# Usage: tests/gpu/gpu_smoke.sh <quartermaster> <qm-agent> [out dir]
# QM_AGENT_FLAGS adds flags to the agent's command line (e.g. --mig-strategy=dynamic).
# Writes report.txt, resourceslices.json, nodes.json, the CDI specs and agent.log to the out dir.
set -u
QM_BIN=$(realpath "$1"); AGENT_BIN=$(realpath "$2"); OUT=${3:-$(mktemp -d /tmp/qm-gpu-smoke-XXXXXX)}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
exec > >(tee "$OUT/report.txt") 2>&1
echo "== machine"; grep -E '^PRETTY_NAME' /etc/os-release; uname -r
nvidia-smi --query-gpu=name,uuid,memory.total,pci.bus_id,driver_version,mig.mode.current,compute_cap --format=csv
NVML=$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')
[ -n "$NVML" ] || NVML=$(find /usr /lib /opt -name 'libnvidia-ml.so.1' 2>/dev/null | head -1)
MPS_BIN=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null | head -1)
echo "NVML library: ${NVML:-none}; MPS control: ${MPS_BIN:-none}"; export MPS_BIN
[ -n "$NVML" ] || { echo "no libnvidia-ml.so.1: not a GPU machine"; exit 1; }
W=$(mktemp -d /tmp/qm-gpu-smoke-work-XXXXXX); chmod 755 "$W"; export QMW=$W
"$QM_BIN" --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir "$W/data" --log-level info \
  > "$W/server.out" 2> "$W/server.err" &
SP=$!
for _ in $(seq 1 600); do grep -q '^LISTENING ' "$W/server.out" && break; kill -0 $SP 2>/dev/null || break; sleep 0.1; done
URL=$(sed -n 's/^LISTENING //p' "$W/server.out"); GRPC=$(sed -n 's/^GRPC_LISTENING //p' "$W/server.out")
[ -n "$URL" ] || { echo "server did not start"; tail -30 "$W/server.err"; exit 1; }
"$QM_BIN" credential --node gpu-node-1 --server "$URL" --data-dir "$W/data" --out "$W/node.kubeconfig"
FLAGS=(--server "$GRPC" --node-name gpu-node-1 --kubeconfig "$W/node.kubeconfig" --cdi-dir "$W/cdi"
       --state-dir "$W/state" --nvml-library "$NVML")
[ -n "$MPS_BIN" ] && FLAGS+=(--mps-control-binary "$MPS_BIN")
# shellcheck disable=SC2206  # split on purpose: several flags
FLAGS+=(${QM_AGENT_FLAGS:-})
echo "agent flags: ${QM_AGENT_FLAGS:-(none)}"
printf '%q ' "$AGENT_BIN" "${FLAGS[@]}" > "$W/agent.cmd"
"$AGENT_BIN" "${FLAGS[@]}" >> "$W/agent.log" 2>&1 &
echo $! > "$W/agent.pid"
echo "== checks"
timeout 300 python3 "$HERE/gpu_smoke.py" "$URL" "$(cat "$W/data/admin.token")" "$W/data/pki/ca.crt" "$W/cdi" "$OUT"
rc=$?
AP=$(cat "$W/agent.pid"); kill -TERM "$AP"
for _ in $(seq 1 100); do kill -0 "$AP" 2>/dev/null || break; sleep 0.1; done
echo "agent after SIGTERM: $(tail -1 "$W/agent.log")"
kill -TERM $SP; wait $SP
cp "$W/agent.log" "$OUT/agent.log"; rm -rf "$W"
echo "report in $OUT"
exit $rc
