#!/usr/bin/env bash
# Node lifecycle end to end (issue 11, "Node lifecycle in the service"): a real quartermaster
# with a short --node-monitor-grace-period and real `qm-agent --simulate` processes, checked
# with the real kubectl. An agent that stops heartbeating makes its node Ready=Unknown with the
# node.kubernetes.io/unreachable taints; its pods are evicted once their tolerationSeconds pass
# and their claims released (graceful deletion: a pod whose devices the dead agent prepared stays
# Terminating for its grace period, then goes); restarted, the node is Ready again without the
# taint and nothing is prepared twice. A node made by hand through REST is never monitored. Device health: a device
# the agent reports unhealthy gets a quartermaster.io/unhealthy DeviceTaintRule (NoSchedule, or
# NoExecute for a critical fault, which evicts), removed when it reports healthy again.
# Usage: agent_lifecycle_e2e.sh <path to quartermaster> <path to qm-agent> <seeds dir>
set -u
QM_BIN=$(realpath "$1")
AGENT_BIN=$(realpath "$2")
SEEDS=$(realpath "$3")
source "$(dirname "$0")/lib.sh" qm-lifecycle-e2e

declare -A AGENT_PID
stop_agent() {
  local pid=${AGENT_PID[$1]:-}
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -"${2:-TERM}" "$pid"; wait "$pid" 2>/dev/null; fi
  AGENT_PID[$1]=""
}
stop_agents() { for n in "${!AGENT_PID[@]}"; do stop_agent "$n"; done; }
trap 'stop_agents; cleanup' EXIT

k() { kubectl "$@" 2>&1; }
kd() { k -n dra-test "$@"; }

start_server --node-monitor-grace-period 3s --default-unreachable-toleration-seconds 300
mint() {
  "$QM_BIN" credential --node "$1" --server "$URL" --data-dir "$WORK/data" --out "$WORK/$1.kubeconfig"
}
start_agent() {
  local node=$1; shift
  mkdir -p "$WORK/$node"
  "$AGENT_BIN" --server "$GRPC_ADDR" --node-name "$node" --simulate "$WORK/$node.yaml" \
    --kubeconfig "$WORK/$node.kubeconfig" --cdi-dir "$WORK/$node/cdi" \
    --state-dir "$WORK/$node/state" "$@" >> "$WORK/$node.log" 2>&1 &
  AGENT_PID[$node]=$!
}
ready_of() { k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
taints_of() { k get node "$1" -o jsonpath='{range .spec.taints[*]}{.key}:{.effect} {end}'; }
node_of() { local n; n=$(kd get pod "$1" -o jsonpath='{.spec.nodeName}'); [ -n "$n" ] && echo "$n"; }
is() { local got; got=$("${@:2}"); [ "$got" = "$1" ] && echo "$got" || { echo "$got"; return 1; }; }

printf 'gpus:\n- {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 2}\n' > "$WORK/gpu-node-a.yaml"
mint gpu-node-a
start_agent gpu-node-a
expect "the agent's node is Ready" "$(eventually 30 is True ready_of gpu-node-a)" "True"
# A node made by hand (tests, benchmarks) has no agent: it is never declared unreachable.
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Node
metadata: {name: hand-made}
YAML

# --- default tolerations (DefaultTolerationSeconds) ------------------------------------------
k apply -f "$SEEDS/01-namespace.yaml" -f "$SEEDS/03-deviceclass-gpu.yaml" >/dev/null
kd apply -f - >/dev/null <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
---
apiVersion: v1
kind: Pod
metadata: {name: defaults}
spec:
  nodeSelector: {kubernetes.io/hostname: nowhere}
  containers: [{name: c, image: registry.example/app:v1}]
---
apiVersion: v1
kind: Pod
metadata: {name: short}
spec:
  terminationGracePeriodSeconds: 3
  tolerations:
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 4}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers: [{name: c, image: registry.example/app:v1}]
---
apiVersion: v1
kind: Pod
metadata: {name: forever}
spec:
  tolerations:
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers: [{name: c, image: registry.example/app:v1}]
YAML
expect "a new pod gets the not-ready and unreachable NoExecute tolerations, 300 s" \
  "$(kd get pod defaults -o jsonpath='{range .spec.tolerations[*]}{.key}:{.effect}:{.tolerationSeconds} {end}')" \
  "node.kubernetes.io/not-ready:NoExecute:300 node.kubernetes.io/unreachable:NoExecute:300 "
expect "a pod that lists tolerations keeps its own (kubectl apply stays idempotent)" \
  "$(kd get pod short -o jsonpath='{range .spec.tolerations[*]}{.key}:{.tolerationSeconds} {end}')" \
  "node.kubernetes.io/unreachable:4 "
kd delete pod defaults --wait=false >/dev/null

cdi_count() { ls "$WORK/gpu-node-a/cdi" 2>/dev/null | grep -c json; }
prepared() { [ "$(cdi_count)" = 2 ] && echo 2; }
expect "both pods' claims prepared on gpu-node-a" "$(eventually 30 prepared)" "2"
short_claim=$(kd get pod short -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
prepares_before=$(grep -c " prepared claim " "$WORK/gpu-node-a.log" || true)

# --- the agent dies: Unknown, unreachable taints, eviction after tolerationSeconds ------------
stop_agent gpu-node-a KILL
killed_at=$SECONDS
expect "no heartbeat for the grace period: Ready=Unknown" "$(eventually 15 is Unknown ready_of gpu-node-a)" "Unknown"
expect "and the unreachable taints" "$(taints_of gpu-node-a)" \
  "node.kubernetes.io/unreachable:NoSchedule node.kubernetes.io/unreachable:NoExecute "
expect_match "kubectl get nodes says NotReady" "$(k get node gpu-node-a)" "gpu-node-a +NotReady"
expect "the pod tolerating it for 4 s is still there right after" "$(kd get pod short -o name)" "pod/short"
gone() { kd get pod "$1" -o name 2>&1 | grep -q NotFound && echo gone; }
terminating() { local t; t=$(kd get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}'); [ -n "$t" ] && echo "$t"; }
# Evicted gracefully: its devices are prepared on a node that cannot say they are unprepared, so
# it stays Terminating for its terminationGracePeriodSeconds and then goes.
deletion_ts=$(eventually 20 terminating short)
expect_match "the pod is evicted after its tolerationSeconds: Terminating" "$(kd get pod short)" "^short +[0-9]+/1 +Terminating "
expect "with deletionGracePeriodSeconds 3" "$(kd get pod short -o jsonpath='{.metadata.deletionGracePeriodSeconds}')" "3"
expect "its claim keeps its device while it terminates" \
  "$(kd get resourceclaim "$short_claim" -o jsonpath='{.status.allocation.devices.results[0].pool}')" "gpu-node-a"
expect "the unreachable node's pod goes after its grace period" "$(eventually 20 gone short)" "gone"
gone_at=$(date +%s)
expect "not before its deletionTimestamp" "$([ "$gone_at" -ge "$(date -d "$deletion_ts" +%s)" ] && echo yes)" "yes"
expect "its claim is released (generated claim deleted)" \
  "$(eventually 15 bash -c "kubectl -n dra-test get resourceclaim $short_claim -o name 2>&1 | grep -q NotFound && echo released")" "released"
expect "the pod tolerating it forever stays" "$(kd get pod forever -o jsonpath='{.spec.nodeName}')" "gpu-node-a"
expect "the hand-made node is not monitored" "$(taints_of hand-made)" ""

# --- the agent comes back: Ready, taint gone, nothing prepared twice ----------------------------
start_agent gpu-node-a
expect "heartbeating again: Ready=True" "$(eventually 30 is True ready_of gpu-node-a)" "True"
expect "and the taint is gone" "$(eventually 10 is "" taints_of gpu-node-a)" ""
one_left() { [ "$(cdi_count)" = 1 ] && echo 1; }
expect "the evicted pod's CDI spec is removed, the other stays" "$(eventually 20 one_left)" "1"
sleep 2
expect "nothing was prepared twice" "$(grep -c " prepared claim " "$WORK/gpu-node-a.log" || true)" "$prepares_before"
expect "the remaining pod kept its node" "$(kd get pod forever -o jsonpath='{.spec.nodeName}')" "gpu-node-a"

# --- device health: an unhealthy device gets a taint, healthy again it goes --------------------
# The simulate file marks gpu-1 unhealthy; the agent reads it again when it starts.
rules() { k get devicetaintrules -o jsonpath='{range .items[*]}{.metadata.name} {.spec.deviceSelector.device} {.spec.taint.key}={.spec.taint.value}:{.spec.taint.effect}{"\n"}{end}'; }
has_rule() { local r; r=$(rules); [ -n "$r" ] && echo "$r"; }
no_rule() { local r; r=$(rules); [ -z "$r" ] && echo none; }
used=$(kd get resourceclaim "$(kd get pod forever -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')" \
  -o jsonpath='{.status.allocation.devices.results[0].device}')
free=gpu-0; [ "$used" = gpu-0 ] && free=gpu-1
idx=${free#gpu-}
stop_agent gpu-node-a
printf 'gpus:\n- {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 1%s}\n- {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 1%s}\n' \
  "$([ "$idx" = 0 ] && echo ', unhealthy: PowerBrakeActive')" "$([ "$idx" = 1 ] && echo ', unhealthy: PowerBrakeActive')" > "$WORK/gpu-node-a.yaml"
start_agent gpu-node-a
expect "an unhealthy device (a recoverable fault) gets a NoSchedule taint with the reason" \
  "$(eventually 20 has_rule)" "unhealthy.gpu.nvidia.com.gpu-node-a.$free $free quartermaster.io/unhealthy=PowerBrakeActive:NoSchedule"
expect_match "and the node's DevicesHealthy condition says so" \
  "$(k get node gpu-node-a -o jsonpath='{.status.conditions[?(@.type=="quartermaster.io/DevicesHealthy")].status}')" "False"
kd apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: avoids}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers: [{name: c, image: registry.example/app:v1}]
YAML
sleep 3
expect "a new pod does not get the tainted device (the only free one)" \
  "$(kd get pod avoids -o jsonpath='{.spec.nodeName}|{.status.conditions[?(@.type=="PodScheduled")].reason}')" "|Unschedulable"
# The device the remaining pod uses fails for good: NoExecute evicts it.
stop_agent gpu-node-a
printf 'gpus:\n- {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 2, unhealthy: XidCriticalError}\n' > "$WORK/gpu-node-a.yaml"
start_agent gpu-node-a
two_noexec() { [ "$(rules | grep -c XidCriticalError:NoExecute)" = 2 ] && echo 2; }
expect "a critical fault (XidCriticalError) makes the taint NoExecute" "$(eventually 20 two_noexec)" "2"
expect "and evicts the pod on the device" "$(eventually 20 gone forever)" "gone"
# Healthy again: the rules go, and the waiting pod gets a device.
stop_agent gpu-node-a
printf 'gpus:\n- {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 2}\n' > "$WORK/gpu-node-a.yaml"
start_agent gpu-node-a
expect "healthy again: the taints are removed" "$(eventually 20 no_rule)" "none"
expect "and the waiting pod is scheduled" "$(eventually 30 node_of avoids)" "gpu-node-a"

echo "$((checks - failures))/$checks checks passed"
[ "$failures" = 0 ]
