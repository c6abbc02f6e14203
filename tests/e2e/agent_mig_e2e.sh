#!/usr/bin/env bash
# Dynamic MIG end to end: a real `qm-agent --simulate` whose GPU is `mig: dynamic` against a real
# quartermaster, checked with the real kubectl. The agent publishes every MIG placement of an
# A100-40GB over a counter set with a counter per memory slice; the server's allocator hands out
# only placements that do not overlap; each prepared claim's CDI spec names the MIG instance the agent
# created for it, which its checkpoint records, survives an agent restart, and is destroyed when
# the pod goes. The claims are chosen so that memory and compute slices alone would allow what the
# per-slice counters forbid: beside a 3g.20gb at slices 0-3, a 1g.5gb gets slice 4 (not 0), and a
# 2g.10gb waits (every 2g.10gb placement overlaps one of them) until the 3g.20gb is gone.
# Usage: agent_mig_e2e.sh <path to quartermaster> <path to qm-agent>
set -u
QM_BIN=$(realpath "$1")
AGENT_BIN=$(realpath "$2")
source "$(dirname "$0")/lib.sh" qm-agent-mig-e2e
AGENT=""
stop_agent() { if [ -n "$AGENT" ] && kill -0 "$AGENT" 2>/dev/null; then kill -TERM "$AGENT"; wait "$AGENT" 2>/dev/null; fi; AGENT=""; }
trap 'stop_agent; cleanup' EXIT

k() { kubectl "$@" 2>&1; }
km() { k -n mig-test "$@"; }

start_server
"$QM_BIN" credential --node mig-node --server "$URL" --data-dir "$WORK/data" --out "$WORK/mig-node.kubeconfig"
mkdir -p "$WORK/mig-node"
cat > "$WORK/mig-node.yaml" <<'EOF'
gpus:
- {model: NVIDIA A100-SXM4-40GB, memory: 40Gi, mig: dynamic}
EOF
start_agent() {
  "$AGENT_BIN" --server "$GRPC_ADDR" --node-name mig-node --simulate "$WORK/mig-node.yaml" \
    --kubeconfig "$WORK/mig-node.kubeconfig" --cdi-dir "$WORK/mig-node/cdi" \
    --state-dir "$WORK/mig-node/state" >> "$WORK/mig-node.log" 2>&1 &
  AGENT=$!
}
start_agent

# --- every placement, over per-memory-slice counters ------------------------------------------
devices() { k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[*]}{.name}{" "}{end}{end}' | grep . ; }
expect "every placement of the A100-40GB is published" "$(eventually 30 devices)" \
  "gpu-0-mig-1g-5gb-at-0 gpu-0-mig-1g-5gb-at-1 gpu-0-mig-1g-5gb-at-2 gpu-0-mig-1g-5gb-at-3 gpu-0-mig-1g-5gb-at-4 gpu-0-mig-1g-5gb-at-5 gpu-0-mig-1g-5gb-at-6 gpu-0-mig-2g-10gb-at-0 gpu-0-mig-2g-10gb-at-2 gpu-0-mig-2g-10gb-at-4 gpu-0-mig-3g-20gb-at-0 gpu-0-mig-3g-20gb-at-4 gpu-0-mig-4g-20gb-at-0 gpu-0-mig-7g-40gb-at-0 "
expect "the GPU's counter set has a counter per memory slice" \
  "$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.sharedCounters[*]}{.name}/{.counters.memory.value}/{.counters.compute-slices.value}/{.counters.memory-slice-0.value}/{.counters.memory-slice-7.value}{end}{end}')" \
  "gpu-0-counter-set/40Gi/7/1/1"
expect "a 3g.20gb at slice 4 consumes slices 4 to 7" \
  "$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[?(@.name=="gpu-0-mig-3g-20gb-at-4")]}{.attributes.profile.string}/{.attributes.placementStart.int}/{.consumesCounters[0].counters.memory-slice-3.value}/{.consumesCounters[0].counters.memory-slice-4.value}/{.consumesCounters[0].counters.memory-slice-7.value}/{.consumesCounters[0].counters.compute-slices.value}{end}{end}')" \
  "3g.20gb/4//1/1/3"

# --- claims by profile: the allocator never overlaps placements --------------------------------
k create namespace mig-test >/dev/null
claim() {  # claim <name> <profile> [count]: a MIG claim and a pod using it
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1, namespace: mig-test}
spec:
  devices:
    requests:
    - name: mig
      exactly:
        deviceClassName: mig.nvidia.com
        count: ${3:-1}
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '$2'"}
---
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: mig-test}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: busybox, resources: {claims: [{name: mig}]}}]
  resourceClaims: [{name: mig, resourceClaimName: $1}]
---
EOF
}
k apply -f "$(dirname "$0")/../testdata/mig-deviceclass.yaml" >/dev/null
claim three-a 3g.20gb > "$WORK/a.yaml"
expect_match "a claim for a 3g.20gb is created" "$(k apply -f "$WORK/a.yaml")" "pod/three-a created"
ready() { local s; s=$(km get resourceclaim "$1" -o jsonpath='{.status.devices[0].conditions[?(@.type=="Ready")].status}'); [ "$s" = True ] && echo "$s"; }
allocated() { local d; d=$(km get resourceclaim "$1" -o jsonpath='{.status.allocation.devices.results[0].device}'); [ -n "$d" ] && echo "$d"; }
expect "it gets the 3g.20gb at slices 0-3" "$(eventually 30 allocated three-a)" "gpu-0-mig-3g-20gb-at-0"
expect "the 3g.20gb is prepared" "$(eventually 30 ready three-a)" "True"
claim one-c 1g.5gb > "$WORK/c.yaml"
expect_match "then a claim for a 1g.5gb" "$(k apply -f "$WORK/c.yaml")" "pod/one-c created"
expect "it gets slice 4: slices 0-3 are the 3g.20gb's" "$(eventually 30 allocated one-c)" \
  "gpu-0-mig-1g-5gb-at-4"
claim two-b 2g.10gb > "$WORK/b.yaml"
expect_match "then a claim for a 2g.10gb" "$(k apply -f "$WORK/b.yaml")" "pod/two-b created"
sleep 3
expect "it waits: every 2g.10gb placement (0-1, 2-3, 4-5) overlaps, though memory and compute would do" \
  "$(km get resourceclaim two-b -o jsonpath='{.status.allocation}')" ""

# --- prepare: an instance per claim, in the CDI spec and the checkpoint -----------------------
expect "the 1g.5gb claim is prepared" "$(eventually 30 ready one-c)" "True"
uid_a=$(km get resourceclaim three-a -o jsonpath='{.metadata.uid}')
uid_c=$(km get resourceclaim one-c -o jsonpath='{.metadata.uid}')
spec_a="$WORK/mig-node/cdi/k8s.gpu.nvidia.com-claim_$uid_a.json"
spec_c="$WORK/mig-node/cdi/k8s.gpu.nvidia.com-claim_$uid_c.json"
mig_a=$(jq -r --arg u "$uid_a" '.claims[$u].devices[0].migInstance.uuid' "$WORK/mig-node/state/checkpoint.json")
mig_c=$(jq -r --arg u "$uid_c" '.claims[$u].devices[0].migInstance.uuid' "$WORK/mig-node/state/checkpoint.json")
expect_match "the checkpoint records the instance made for the first claim" "$mig_a" '^MIG-'
expect "at its placement" \
  "$(jq -r --arg u "$uid_a" '.claims[$u].devices[0].migInstance | "\(.placementStart)+\(.placementSize) gi \(.gpuInstanceID)"' "$WORK/mig-node/state/checkpoint.json")" \
  "0+4 gi 1"
expect_match "the first claim's CDI spec names its instance" "$(cat "$spec_a" 2>/dev/null)" \
  "NVIDIA_VISIBLE_DEVICES=$mig_a"
expect_match "the second claim's CDI spec names another instance" "$(cat "$spec_c" 2>/dev/null)" \
  "NVIDIA_VISIBLE_DEVICES=$mig_c"
[ "$mig_a" != "$mig_c" ] && pass "the two instances differ" || fail "the two instances differ" "both $mig_a"

# --- an agent restart keeps them; deleting a pod destroys its instance ------------------------
stop_agent
start_agent
restarted() { [ "$(grep -c "watching assignments" "$WORK/mig-node.log")" -ge 2 ] && echo yes; }
expect "the agent is back" "$(eventually 30 restarted)" "yes"
expect "nothing is prepared twice" "$(grep -c "created MIG instance" "$WORK/mig-node.log")" "2"
km delete pod three-a --wait=false >/dev/null
absent() { [ -f "$1" ] && return 1; echo absent; }
expect "deleting the first pod removes its CDI spec" "$(eventually 30 absent "$spec_a")" "absent"
destroyed() { grep -q "destroyed MIG instance $mig_a" "$WORK/mig-node.log" && echo yes; }
expect "and destroys its instance (restarted agent, from its checkpoint)" "$(eventually 10 destroyed)" "yes"
expect "the 2g.10gb gets slices 0-1 now" "$(eventually 30 allocated two-b)" "gpu-0-mig-2g-10gb-at-0"
expect "and is prepared on a new instance" "$(eventually 30 ready two-b)" "True"
uid_b=$(km get resourceclaim two-b -o jsonpath='{.metadata.uid}')
mig_b=$(jq -r --arg u "$uid_b" '.claims[$u].devices[0].migInstance.uuid' "$WORK/mig-node/state/checkpoint.json")
expect_match "a MIG device of its own (a new UUID)" "$mig_b" '^MIG-'
[ "$mig_b" != "$mig_a" ] && [ "$mig_b" != "$mig_c" ] && pass "not the UUID of a destroyed instance"   || fail "not the UUID of a destroyed instance" "got $mig_b (a: $mig_a, c: $mig_c)"

stop_agent
if [ "$failures" -ne 0 ]; then echo "--- the agent's log (last 60 lines)"; tail -60 "$WORK/mig-node.log"; echo "--- server.err"; tail -20 "$WORK/server.err"; fi
echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
