#!/usr/bin/env bash
# Node agents end to end: a real quartermaster (embedded PostgreSQL, TLS, scheduler) and real
# `qm-agent --simulate` processes authenticated by node credentials minted with
# `quartermaster credential --node`, checked with the real kubectl: slices and GFD labels
# published, seed pods scheduled onto agent-published devices, CDI specs written with the right
# device, claims Ready in status.devices and pods with quartermaster.io/DevicesPrepared, node
# restriction over gRPC, agent and server restarts without duplicate preparation, and graceful
# deletion: a deleted pod stays Terminating until its agent unprepared (CDI spec removed), then
# goes and its devices are free; --force --grace-period=0 removes it at once (its device still
# waits for the unprepare).
# Usage: agent_e2e.sh <path to quartermaster> <path to qm-agent> <seeds dir>
set -u
QM_BIN=$(realpath "$1")
AGENT_BIN=$(realpath "$2")
SEEDS=$(realpath "$3")
source "$(dirname "$0")/lib.sh" qm-agent-e2e

declare -A AGENT_PID
stop_agent() {
  local pid=${AGENT_PID[$1]:-}
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null; fi
  AGENT_PID[$1]=""
}
stop_agents() { for n in "${!AGENT_PID[@]}"; do stop_agent "$n"; done; }
trap 'stop_agents; cleanup' EXIT

# eventually <seconds> <command...>: retries until the command succeeds; prints its last output.
k() { kubectl "$@" 2>&1; }
kd() { k -n dra-test "$@"; }

start_server
mint() {
  "$QM_BIN" credential --node "$1" --server "$URL" --data-dir "$WORK/data" --out "$WORK/$1.kubeconfig"
}
# start_agent <node> [--node-name other]: the agent of <node> with its own credential, CDI and
# state directories; output appended to $WORK/<node>.log.
start_agent() {
  local node=$1; shift
  mkdir -p "$WORK/$node"
  "$AGENT_BIN" --server "$GRPC_ADDR" --node-name "$node" --simulate "$WORK/$node.yaml" \
    --kubeconfig "$WORK/$node.kubeconfig" --cdi-dir "$WORK/$node/cdi" \
    --state-dir "$WORK/$node/state" "$@" >> "$WORK/$node.log" 2>&1 &
  AGENT_PID[$node]=$!
}
log_count() { grep -c -- "$2" "$WORK/$1.log" 2>/dev/null || true; }
# reached <node> <text> <n>: the node's log has <n> lines with <text> (prints "yes").
reached() { [ "$(log_count "$1" "$2")" -ge "$3" ] && echo yes; }

# --- --help documents every flag -------------------------------------------------------------
help=$("$AGENT_BIN" --help)
missing=""
for f in --server --node-name --simulate --cdi-dir --state-dir --kubeconfig --ca-file --cert-file \
         --key-file --token-file --insecure --log-level --help; do
  grep -q -- "$f" <<<"$help" || missing="$missing $f"
done
expect "--help names every flag" "$missing" ""
printf 'gpus: [{model: NVIDIA L4}]\n' > "$WORK/bad.yaml"
echo token > "$WORK/token"
out=$("$AGENT_BIN" --server 127.0.0.1:1 --node-name x --token-file "$WORK/token" \
        --simulate "$WORK/bad.yaml" 2>&1)
expect "a bad simulate file stops the agent with exit code 2" "$?" "2"
expect_match "and names the field" "$out" "bad.yaml: gpus\[0\]\.memory: required"

# --- two agents join: slices, labels, Ready --------------------------------------------------
cat > "$WORK/gpu-node-a.yaml" <<'EOF'
gpus:
- model: NVIDIA A100-SXM4-80GB
  memory: 80Gi
  count: 4
EOF
cat > "$WORK/gpu-node-b.yaml" <<'EOF'
gpus:
- {model: NVIDIA A100-PCIE-40GB, memory: 40Gi, count: 2}
- {model: NVIDIA L4, memory: 24Gi, count: 4}
EOF
mint gpu-node-a
mint gpu-node-b
start_agent gpu-node-a
start_agent gpu-node-b
slices() { k get resourceslices -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.nodeName}{" "}{.spec.driver}{"\n"}{end}'; }
two_slices() { local s; s=$(slices); [ "$(grep -c . <<<"$s")" = 2 ] && echo "$s"; }
out=$(eventually 30 two_slices)
expect "kubectl get resourceslices lists both nodes' slices" "$out" \
  "gpu-node-a-gpu.nvidia.com gpu-node-a gpu.nvidia.com
gpu-node-b-gpu.nvidia.com gpu-node-b gpu.nvidia.com"
expect "10 devices published" \
  "$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[*]}{.name}{"\n"}{end}{end}' | grep -c .)" "10"
expect "device attributes as NVIDIA's driver publishes them" \
  "$(k get resourceslice gpu-node-a-gpu.nvidia.com -o jsonpath='{.spec.devices[0].attributes.productName.string}/{.spec.devices[0].attributes.architecture.string}/{.spec.devices[0].attributes.cudaComputeCapability.version}/{.spec.devices[0].capacity.memory.value}')" \
  "NVIDIA A100-SXM4-80GB/Ampere/8.0.0/80Gi"
expect_match "kubectl get resourceslices" "$(k get resourceslices)" "gpu-node-b-gpu.nvidia.com +gpu-node-b +gpu.nvidia.com +gpu-node-b"
expect "GFD product label on gpu-node-a" \
  "$(k get node gpu-node-a -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product}')" "NVIDIA-A100-SXM4-80GB"
expect "GFD labels on gpu-node-b" \
  "$(k get node gpu-node-b -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product} {.metadata.labels.nvidia\.com/gpu\.count}')" "mixed 6"
expect "nodes Ready" "$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}')" \
  "gpu-node-a=True gpu-node-b=True "
expect_match "kubectl get nodes" "$(k get nodes)" "gpu-node-a +Ready"
k label node gpu-node-a accelerator=example-gpu-x100 >/dev/null

# --- node restriction over gRPC: node A's credential cannot act for another node --------------
cp "$WORK/gpu-node-a.yaml" "$WORK/gpu-node-c.yaml"
cp "$WORK/gpu-node-a.kubeconfig" "$WORK/gpu-node-c.kubeconfig"
start_agent gpu-node-c
out=$(eventually 20 grep -m1 PERMISSION_DENIED "$WORK/gpu-node-c.log")
expect_match "node A's credential for node gpu-node-c: PERMISSION_DENIED" "$out" \
  'PERMISSION_DENIED: node "gpu-node-a" may only act for itself, not for node "gpu-node-c"'
stop_agent gpu-node-c
expect "no Node gpu-node-c" "$(kubectl get node gpu-node-c -o name 2>/dev/null)" ""
expect "no slices for gpu-node-c" "$(k get resourceslices --field-selector spec.nodeName=gpu-node-c -o name)" ""

# --- a seed pod with a claim: scheduled onto agent devices, CDI spec, claim Ready ----------------
for f in 01-namespace.yaml 02-deviceclass-a100-80g.yaml 03-deviceclass-gpu.yaml \
         04-resourceclaim-v1beta1.yaml 05-pod-shared-claim.yaml; do
  k apply -f "$SEEDS/$f" >/dev/null
done
node_of() { local n; n=$(kd get pod "$1" -o jsonpath='{.spec.nodeName}'); [ -n "$n" ] && echo "$n"; }
node=$(eventually 30 node_of pod1)
expect_match "pod1 scheduled onto an agent's node" "$node" "^gpu-node-[ab]$"
uid=$(kd get resourceclaim gpu-claim -o jsonpath='{.metadata.uid}')
device=$(kd get resourceclaim gpu-claim -o jsonpath='{.status.allocation.devices.results[0].device}')
spec="$WORK/$node/cdi/k8s.gpu.nvidia.com-claim_$uid.json"
exists() { test -f "$1" && echo present; }
expect "CDI spec written for the claim on $node" "$(eventually 20 exists "$spec")" "present"
expect "CDI spec names the allocated device" "$(jq -r '.kind + " " + .devices[0].name' "$spec")" \
  "k8s.gpu.nvidia.com/claim $uid-$device"
gpu_uuid=$(k get resourceslice "$node-gpu.nvidia.com" -o jsonpath="{.spec.devices[?(@.name==\"$device\")].attributes.uuid.string}")
expect "CDI spec exposes that GPU (NVIDIA_VISIBLE_DEVICES)" \
  "$(jq -r '.containerEdits.env[] | select(startswith("NVIDIA_VISIBLE_DEVICES="))' "$spec")" \
  "NVIDIA_VISIBLE_DEVICES=$gpu_uuid"
expect "CDI spec has the GPU's device node" "$(jq -r '.devices[0].containerEdits.deviceNodes[0].path' "$spec")" \
  "/dev/nvidia${device#gpu-}"
claim_ready() {
  local s; s=$(kd get resourceclaim gpu-claim -o jsonpath='{.status.devices[0].conditions[?(@.type=="Ready")].status}')
  [ "$s" = True ] && echo "$s"
}
expect "claim Ready in status.devices" "$(eventually 20 claim_ready)" "True"
yaml=$(kd get resourceclaim gpu-claim -o yaml)
expect_match "kubectl get resourceclaim -o yaml shows the CDI device ID" "$yaml" \
  "- k8s.gpu.nvidia.com/claim=$uid-$device"
expect_match "kubectl get resourceclaim -o yaml shows the device" "$yaml" "device: $device"
expect "pod condition quartermaster.io/DevicesPrepared" \
  "$(eventually 10 kd get pod pod1 -o jsonpath='{.status.conditions[?(@.type=="quartermaster.io/DevicesPrepared")].status}')" "True"

# --- per-pod claims from a template: one spec per generated claim --------------------------------
k apply -f "$SEEDS/12-claimtemplate-per-pod.yaml" -f "$SEEDS/13-pods-from-template.yaml" >/dev/null
spec_count() { find "$WORK"/gpu-node-*/cdi -name 'k8s.gpu.nvidia.com-claim_*.json' 2>/dev/null | wc -l; }
three() { local n; n=$(spec_count); [ "$n" = 3 ] && echo "$n"; }
expect "three CDI specs (pod1's claim and two generated claims)" "$(eventually 30 three)" "3"

# --- an agent restarts: nothing prepared twice, the admin's label kept --------------------------
before=$(stat -c %Y.%i "$spec")
prepared_before=$(log_count "$node" "prepared claim dra-test/gpu-claim ")
stop_agent "$node"
start_agent "$node"
expect "restarted agent watches again" "$(eventually 30 reached "$node" "watching assignments" 2)" "yes"
sleep 0.5  # a duplicate prepare would follow the first message immediately
expect "no duplicate preparation after the restart" "$(log_count "$node" "prepared claim dra-test/gpu-claim ")" "$prepared_before"
expect "CDI spec untouched by the restart" "$(stat -c %Y.%i "$spec")" "$before"
expect "admin label kept across re-registration" \
  "$(k get node gpu-node-a -o jsonpath='{.metadata.labels.accelerator}')" "example-gpu-x100"

# --- the server restarts: agents reconnect and register again -----------------------------------
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
start_server --grpc-addr "$GRPC_ADDR"
expect "agents re-register after a server restart" \
  "$(eventually 60 reached gpu-node-b "registered node gpu-node-b" 2)" "yes"
expect "both agents re-register" "$(eventually 60 reached gpu-node-a "registered node gpu-node-a" 3)" "yes"
expect "CDI spec still there after the server restart" "$(stat -c %Y.%i "$spec")" "$before"

# --- pods go gracefully: Terminating until the agent unprepared, then gone and the devices free --
# The agents are paused (SIGSTOP) so that the wait can be seen; they are resumed below.
pause_agents() { for n in gpu-node-a gpu-node-b; do kill -STOP "${AGENT_PID[$n]}"; done; }
resume_agents() { for n in gpu-node-a gpu-node-b; do kill -CONT "${AGENT_PID[$n]}"; done; }
expect "pod1 carries the devices-prepared finalizer" \
  "$(kd get pod pod1 -o jsonpath='{.metadata.finalizers}')" '["quartermaster.io/devices-prepared"]'
kubectl -n dra-test get pod pod1 --watch-only --output-watch-events -o json > "$WORK/pod1.watch" 2>&1 &
watch_pid=$!
sleep 1  # the watch is established
pause_agents
kd delete pod pod1 --wait=false >/dev/null
expect_match "a deleted pod whose devices are prepared is Terminating" "$(kd get pod pod1)" "^pod1 +[0-9]+/2 +Terminating "
expect_match "with deletionTimestamp and deletionGracePeriodSeconds 30" \
  "$(kd get pod pod1 -o jsonpath='{.metadata.deletionTimestamp} {.metadata.deletionGracePeriodSeconds}')" \
  '^[0-9T:-]+Z 30$'
sleep 2
expect "still there while the agent has not unprepared" "$(kd get pod pod1 -o name)" "pod/pod1"
expect "its CDI spec is still there" "$(exists "$spec")" "present"
expect "its claim keeps its device (no longer reserved for the pod)" \
  "$(kd get resourceclaim gpu-claim -o jsonpath='{.status.allocation.devices.results[0].device}|{.status.reservedFor}')" "$device|"
# A forced deletion goes at once; its device waits for the unprepare all the same.
t0_claim=$(kd get pod trainer-0 -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
t0_node=$(kd get pod trainer-0 -o jsonpath='{.spec.nodeName}')
t0_spec="$WORK/$t0_node/cdi/k8s.gpu.nvidia.com-claim_$(kd get resourceclaim "$t0_claim" -o jsonpath='{.metadata.uid}').json"
expect "trainer-0's claim is prepared" "$(exists "$t0_spec")" "present"
kd delete pod trainer-0 --force --grace-period=0 >/dev/null
expect_match "kubectl delete --force --grace-period=0 removes the pod at once" "$(kd get pod trainer-0 -o name)" "NotFound"
sleep 1
expect "its generated claim keeps the device until the agent unprepared" \
  "$(kd get resourceclaim "$t0_claim" -o jsonpath='{.status.allocation.devices.results[0].pool}')" "$t0_node"
resume_agents
gone() { kd get "$1" "$2" -o name 2>&1 | grep -q NotFound && echo gone; }
expect "once the agent unprepared, pod1 goes" "$(eventually 30 gone pod pod1)" "gone"
expect "and its CDI spec went before it" "$(exists "$spec")" ""
expect "its claim's device is free (deallocated)" \
  "$(kd get resourceclaim gpu-claim -o jsonpath='{.status.allocation}{.status.devices}')" ""
expect "trainer-0's generated claim goes once unprepared" "$(eventually 30 gone resourceclaim "$t0_claim")" "gone"
expect "and its CDI spec is gone" "$(exists "$t0_spec")" ""
sleep 0.5
kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null
expect "watchers saw MODIFIED with the deletionTimestamp, then DELETED" \
  "$(jq -r 'select(.object.metadata.deletionTimestamp) | .type' "$WORK/pod1.watch" | uniq)" \
  "MODIFIED
DELETED"
# kubectl delete waits (as against Kubernetes) until the agent unprepared.
out=$(timeout 60 kubectl -n dra-test delete pod trainer-1 2>&1)
expect "kubectl delete (waiting) returns once the pod is gone" "$?|$out" '0|pod "trainer-1" deleted'
none() { local n; n=$(spec_count); [ "$n" = 0 ] && echo "$n"; }
expect "every CDI spec is gone" "$(eventually 30 none)" "0"
expect "released claim has no device status" "$(kd get resourceclaim gpu-claim -o jsonpath='{.status.devices}')" ""
expect_match "agent logged the unprepare" "$(cat "$WORK/$node.log")" "unprepared claim dra-test/gpu-claim"

echo "$checks checks, $failures failures"
if [ "$failures" -ne 0 ]; then
  for n in gpu-node-a gpu-node-b; do echo "--- $n.log"; tail -20 "$WORK/$n.log"; done
  echo "--- server.err"; tail -20 "$WORK/server.err"
fi
[ "$failures" -eq 0 ]
