#!/usr/bin/env bash
# Dynamic MIG through NVML end to end: the real agent with the fake
# NVML and --mig-strategy=dynamic against the real server; a claim for a 1g.5gb MIG device gets
# an instance the fake NVML shows, which survives an agent restart and goes with the pod.
# Usage: agent_nvml_mig_e2e.sh <quartermaster> <qm-agent> <libfake_nvml.so>
set -u
QM_BIN=$(realpath "$1"); AGENT_BIN=$(realpath "$2"); FAKE_NVML=$(realpath "$3")
source "$(dirname "$0")/lib.sh" qm-agent-nvml-mig
AGENT=""
stop_agent() { if [ -n "$AGENT" ] && kill -0 "$AGENT" 2>/dev/null; then kill -TERM "$AGENT"; wait "$AGENT" 2>/dev/null; fi; AGENT=""; }
trap 'stop_agent; cleanup' EXIT
k() { kubectl "$@" 2>&1; }
cat > "$WORK/nvml.json" <<EOF
{"migStateFile": "$WORK/mig-state.json",
 "gpus": [{"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-0c000000-0000-4000-8000-000000000000",
   "memoryMiB": 40960, "pciBusId": "00000000:07:00.0", "computeCapability": [8, 0],
   "architecture": 7, "minor": 0, "migMode": "enabled", "maxMigDevices": 7}]}
EOF
start_server
"$QM_BIN" credential --node nvml-node --server "$URL" --data-dir "$WORK/data" --out "$WORK/n.kubeconfig"
start_agent() {
  QM_FAKE_NVML_CONFIG="$WORK/nvml.json" "$AGENT_BIN" --server "$GRPC_ADDR" --node-name nvml-node \
    --nvml-library "$FAKE_NVML" --mig-strategy=dynamic --kubeconfig "$WORK/n.kubeconfig" \
    --cdi-dir "$WORK/cdi" --state-dir "$WORK/state" >> "$WORK/agent.log" 2>&1 &
  AGENT=$!
}
start_agent
count() { local n; n=$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[*]}{.name}{" "}{end}{end}' | wc -w); [ "$n" -gt 0 ] && echo "$n"; }
expect "every placement of the GPU is published" "$(eventually 30 count)" "14"
k create namespace mig-test >/dev/null
k apply -f "$(dirname "$0")/../testdata/mig-deviceclass.yaml" >/dev/null
cat > "$WORK/claim.yaml" <<'EOF'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: small, namespace: mig-test}
spec:
  devices:
    requests:
    - name: mig
      exactly:
        deviceClassName: mig.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}
---
apiVersion: v1
kind: Pod
metadata: {name: small, namespace: mig-test}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: busybox, resources: {claims: [{name: mig}]}}]
  resourceClaims: [{name: mig, resourceClaimName: small}]
EOF
k apply -f "$WORK/claim.yaml" >/dev/null
ready() { local s; s=$(k -n mig-test get resourceclaim small -o jsonpath='{.status.devices[0].conditions[?(@.type=="Ready")].status}'); [ "$s" = True ] && echo "$s"; }
expect "the 1g.5gb claim is prepared" "$(eventually 30 ready)" "True"
expect "on placement 0" "$(k -n mig-test get resourceclaim small -o jsonpath='{.status.allocation.devices.results[0].device}')" "gpu-0-mig-1g-5gb-at-0"
instances() { jq -c '[.gpus[]?[] | {gi, profileId, start, uuid}]' "$WORK/mig-state.json" 2>/dev/null; }
expect "the fake NVML shows the GPU instance created" "$(instances)" \
  '[{"gi":1,"profileId":0,"start":0,"uuid":"MIG-fa4e0000-0000-4000-8000-000000000001"}]'
uid=$(k -n mig-test get resourceclaim small -o jsonpath='{.metadata.uid}')
expect_match "the CDI spec names its MIG device" "$(cat "$WORK/cdi/k8s.gpu.nvidia.com-claim_$uid.json")" \
  "NVIDIA_VISIBLE_DEVICES=MIG-fa4e0000-0000-4000-8000-000000000001"
stop_agent; start_agent
back() { [ "$(grep -c "watching assignments" "$WORK/agent.log")" -ge 2 ] && echo yes; }
expect "the agent restarts" "$(eventually 30 back)" "yes"
expect "the instance is still there" "$(instances | jq length)" "1"
k -n mig-test delete pod small --wait=false >/dev/null
empty() { [ "$(instances)" = "[]" ] && echo empty; }
expect "deleting the pod destroys the instance" "$(eventually 30 empty)" "empty"
stop_agent
[ "$failures" -ne 0 ] && tail -30 "$WORK/agent.log"
echo "$checks checks, $failures failures"; [ "$failures" -eq 0 ]
