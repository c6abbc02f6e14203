#!/usr/bin/env bash
# qm-agent's NVML discovery end to end: the real agent loads the fake NVML library
# (tests/agent/fake_nvml, described by QM_FAKE_NVML_CONFIG) with --nvml-library and publishes
# to a real quartermaster: a whole GPU, a GPU in MIG mode as its MIG devices over a shared
# counter set, GFD labels; a claim for a MIG device is prepared with its MIG UUID; an MPS config
# becomes env and a mounted pipe directory in the CDI spec; an invalid config fails the claim
# (Ready=False, PrepareFailed) and prepares nothing. Health from NVML events (injected through the
# fake's events file): an ignored XID (13) changes nothing, XID 79 taints the GPU
# quartermaster.io/unhealthy NoExecute and evicts the pod using it. Also: a missing NVML library
# stops the agent with a clear error. MPS: the claim's control daemon (the fake
# tests/agent/fake_mps_control) is started with its defaults, survives an agent restart and is
# quit at unprepare; without the binary an MPS claim fails with PrepareFailed.
# Usage: agent_nvml_e2e.sh <path to quartermaster> <path to qm-agent> <path to libfake_nvml.so>
set -u
QM_BIN=$(realpath "$1")
AGENT_BIN=$(realpath "$2")
FAKE_NVML=$(realpath "$3")
source "$(dirname "$0")/lib.sh" qm-agent-nvml-e2e
AGENT=""
AGENT_RC=""
stop_agent() { if [ -n "$AGENT" ] && kill -0 "$AGENT" 2>/dev/null; then kill -TERM "$AGENT"; wait "$AGENT" 2>/dev/null; AGENT_RC=$?; fi; }
trap 'stop_agent; cleanup' EXIT

k() { kubectl "$@" 2>&1; }

# --- without an NVML library: a clear error, exit code 2 -----------------------------------
echo token > "$WORK/token"
out=$("$AGENT_BIN" --server 127.0.0.1:1 --node-name x --token-file "$WORK/token" \
        --nvml-library "$WORK/missing/libnvidia-ml.so.1" 2>&1)
expect "a missing NVML library stops the agent with exit code 2" "$?" "2"
expect_match "and says which library and what to do" "$out" \
  "cannot load the NVML library .*missing/libnvidia-ml.so.1.*--simulate FILE"
expect_match "--help documents --nvml-library" "$("$AGENT_BIN" --help)" "--nvml-library PATH"

# --- one whole GPU and one in MIG mode ------------------------------------------------------
cat > "$WORK/nvml.json" <<'EOF'
{"driverVersion": "570.86.15", "cudaDriverVersion": 12080,
 "gpus": [
  {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-0a000000-0000-4000-8000-000000000000",
   "memoryMiB": 81920, "pciBusId": "00000000:07:00.0", "computeCapability": [8, 0],
   "architecture": 7, "brand": 14, "minor": 0, "migMode": "disabled"},
  {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-0b000000-0000-4000-8000-000000000000",
   "memoryMiB": 81920, "pciBusId": "00000000:0F:00.0", "computeCapability": [8, 0],
   "architecture": 7, "brand": 14, "minor": 1, "migMode": "enabled", "maxMigDevices": 7,
   "mig": [
    {"slot": 0, "uuid": "MIG-1b000000-0000-4000-8000-000000000000", "gpuInstanceSlices": 3,
     "memoryMiB": 40192, "multiprocessors": 42},
    {"slot": 1, "uuid": "MIG-2b000000-0000-4000-8000-000000000000", "gpuInstanceSlices": 1,
     "memoryMiB": 9728, "multiprocessors": 14}]}]}
EOF
# Events the fake's nvmlEventSetWait_v2 reports, one JSON line each (appended below).
sed -i "s|^{\"driverVersion\"|{\"eventsFile\": \"$WORK/events.jsonl\", \"driverVersion\"|" "$WORK/nvml.json"
: > "$WORK/events.jsonl"
start_server
"$QM_BIN" credential --node nvml-node --server "$URL" --data-dir "$WORK/data" --out "$WORK/nvml-node.kubeconfig"
mkdir -p "$WORK/nvml-node"
# MPS control daemons: the fake nvidia-cuda-mps-control records its calls in $QM_FAKE_MPS_LOG.
FAKE_MPS="$(cd "$(dirname "$0")/.." && pwd)/agent/fake_mps_control/nvidia-cuda-mps-control"
export QM_FAKE_MPS_LOG="$WORK/mps-calls.log"
start_agent() {  # [--mps-control-binary PATH]
  QM_FAKE_NVML_CONFIG="$WORK/nvml.json" "$AGENT_BIN" --server "$GRPC_ADDR" --node-name nvml-node \
    --nvml-library "$FAKE_NVML" --kubeconfig "$WORK/nvml-node.kubeconfig" \
    --cdi-dir "$WORK/nvml-node/cdi" --state-dir "$WORK/nvml-node/state" \
    --mps-control-binary "${1:-$FAKE_MPS}" >> "$WORK/nvml-node.log" 2>&1 &
  AGENT=$!
}
start_agent
devices() { k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[*]}{.name}{" "}{end}{end}' | grep . ; }
out=$(eventually 30 devices)
expect "the whole GPU and the MIG devices are published, the partitioned GPU is not" "$out" \
  "gpu-0 gpu-1-mig-3g-40gb-0 gpu-1-mig-1g-10gb-0 "
expect "the GPU's attributes come from NVML" \
  "$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[?(@.name=="gpu-0")]}{.attributes.productName.string}/{.attributes.uuid.string}/{.attributes.architecture.string}/{.attributes.cudaComputeCapability.version}/{.attributes.driverVersion.version}/{.attributes.cudaDriverVersion.version}/{.attributes.pcieBusID.string}/{.attributes.type.string}/{.capacity.memory.value}{end}{end}')" \
  "NVIDIA A100-SXM4-80GB/GPU-0a000000-0000-4000-8000-000000000000/Ampere/8.0.0/570.86.15/12.8.0/0000:07:00.0/gpu/80Gi"
expect "a MIG device: profile, parent, memory, counters it consumes" \
  "$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[?(@.name=="gpu-1-mig-3g-40gb-0")]}{.attributes.type.string}/{.attributes.profile.string}/{.attributes.parentUUID.string}/{.attributes.uuid.string}/{.capacity.memory.value}/{.consumesCounters[0].counterSet}/{.consumesCounters[0].counters.compute-slices.value}/{.consumesCounters[0].counters.memory.value}{end}{end}')" \
  "mig/3g.40gb/GPU-0b000000-0000-4000-8000-000000000000/MIG-1b000000-0000-4000-8000-000000000000/40192Mi/gpu-1-counter-set/3/40192Mi"
expect "the GPU's counter set" \
  "$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.sharedCounters[*]}{.name}/{.counters.memory.value}/{.counters.compute-slices.value}{end}{end}')" \
  "gpu-1-counter-set/80Gi/7"
expect "GFD labels from NVML" \
  "$(k get node nvml-node -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product} {.metadata.labels.nvidia\.com/gpu\.count} {.metadata.labels.nvidia\.com/mig\.capable} {.metadata.labels.nvidia\.com/mig\.strategy} {.metadata.labels.nvidia\.com/cuda\.driver\.major}')" \
  "NVIDIA-A100-SXM4-80GB 2 true mixed 570"

# --- a claim for a MIG device is prepared with the MIG device's UUID --------------------------
k create namespace mig-test >/dev/null
k apply -f "$(dirname "$0")/../testdata/mig-deviceclass.yaml" >/dev/null
cat > "$WORK/claim.yaml" <<'EOF'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mig-claim, namespace: mig-test}
spec:
  devices:
    requests:
    - name: mig
      exactly:
        deviceClassName: mig.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}
---
apiVersion: v1
kind: Pod
metadata: {name: mig-pod, namespace: mig-test}
spec:
  containers:
  - name: c
    image: busybox
    resources:
      claims: [{name: mig}]
  resourceClaims:
  - {name: mig, resourceClaimName: mig-claim}
EOF
out=$(k apply -f "$WORK/claim.yaml")
expect_match "the MIG class, claim and pod are created" "$out" "pod/mig-pod created"
allocated() { local d; d=$(k -n mig-test get resourceclaim mig-claim -o jsonpath='{.status.allocation.devices.results[0].device}'); [ -n "$d" ] && echo "$d"; }
expect "the claim gets the 1g.10gb MIG device" "$(eventually 30 allocated)" "gpu-1-mig-1g-10gb-0"
uid=$(k -n mig-test get resourceclaim mig-claim -o jsonpath='{.metadata.uid}')
spec="$WORK/nvml-node/cdi/k8s.gpu.nvidia.com-claim_$uid.json"
exists() { [ -f "$1" ] && echo present; }
expect "its CDI spec is written" "$(eventually 20 exists "$spec")" "present"
expect_match "the spec names the MIG device by its NVML UUID" "$(cat "$spec" 2>/dev/null)" \
  "NVIDIA_VISIBLE_DEVICES=MIG-2b000000-0000-4000-8000-000000000000"
expect_match "and its parent GPU's device node" "$(cat "$spec" 2>/dev/null)" '"/dev/nvidia1"'

# --- opaque configs: MPS on the whole GPU; a GpuConfig for a MIG device fails the claim -------
cat > "$WORK/configs.yaml" <<'EOF'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: whole-gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mps-claim, namespace: mig-test}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: whole-gpu.nvidia.com}
    config:
    - requests: [gpu]
      opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing:
            strategy: MPS
            mpsConfig: {defaultActiveThreadPercentage: 40, defaultPinnedDeviceMemoryLimit: 8Gi}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad-config-claim, namespace: mig-test}
spec:
  devices:
    requests:
    - name: mig
      exactly:
        deviceClassName: mig.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}
---
apiVersion: v1
kind: Pod
metadata: {name: mps-pod, namespace: mig-test}
spec:
  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimName: mps-claim}]
---
apiVersion: v1
kind: Pod
metadata: {name: bad-config-pod, namespace: mig-test}
spec:
  containers: [{name: c, image: busybox, resources: {claims: [{name: mig}]}}]
  resourceClaims: [{name: mig, resourceClaimName: bad-config-claim}]
EOF
out=$(k apply -f "$WORK/configs.yaml")
expect_match "claims with opaque configs are created" "$out" "pod/bad-config-pod created"
uid=$(k -n mig-test get resourceclaim mps-claim -o jsonpath='{.metadata.uid}')
spec="$WORK/nvml-node/cdi/k8s.gpu.nvidia.com-claim_$uid.json"
expect "the MPS claim's CDI spec is written" "$(eventually 30 exists "$spec")" "present"
body=$(cat "$spec" 2>/dev/null)
expect_match "MPS: the pipe directory" "$body" '"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"'
expect_match "MPS: the thread percentage" "$body" '"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40"'
expect_match "MPS: the pinned memory limit of the GPU" "$body" \
  '"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=GPU-0a000000-0000-4000-8000-000000000000=8192M"'
expect_match "MPS: the claim's pipe directory is mounted" "$body" \
  "\"hostPath\": \"$WORK/nvml-node/state/mps/$uid/pipe\""
mps_dir="$WORK/nvml-node/state/mps/$uid"
expect "MPS: the claim's control daemon is started on its GPU, with its defaults" "$(cat "$QM_FAKE_MPS_LOG")" \
"start pipe=$mps_dir/pipe log=$mps_dir/log devices=GPU-0a000000-0000-4000-8000-000000000000
set_default_active_thread_percentage 40 pipe=$mps_dir/pipe
set_default_device_pinned_mem_limit GPU-0a000000-0000-4000-8000-000000000000 8192M pipe=$mps_dir/pipe"
# The agent restarts: the daemon keeps serving the claim, nothing is started twice.
stop_agent
expect "SIGTERM stops the agent cleanly although NVML runs threads of its own" \
  "$AGENT_RC/$(tail -1 "$WORK/nvml-node.log" | grep -o 'stopped$')" "0/stopped"
start_agent
registered() { [ "$(grep -c "watching assignments" "$WORK/nvml-node.log")" = 2 ] && echo 2; }
expect "the agent is back" "$(eventually 30 registered)" "2"
expect "MPS: after a restart the daemon is neither quit nor started again" \
  "$(grep -c . "$QM_FAKE_MPS_LOG")/$([ -p "$mps_dir/pipe/control" ] && echo serving)" "3/serving"
failed() {
  local s; s=$(k -n mig-test get resourceclaim bad-config-claim -o jsonpath='{.status.devices[0].conditions[?(@.type=="Ready")].status} {.status.devices[0].conditions[?(@.type=="Ready")].reason} {.status.devices[0].conditions[?(@.type=="Ready")].message}')
  [ "${s%% *}" = False ] && echo "$s"
}
expect_match "an invalid config: the claim's device is Ready=False with the reason" \
  "$(eventually 30 failed)" "False PrepareFailed .*a GpuConfig does not apply to a MIG device"
bad_uid=$(k -n mig-test get resourceclaim bad-config-claim -o jsonpath='{.metadata.uid}')
expect "and nothing is prepared for it" "$(ls "$WORK/nvml-node/cdi" | grep -c "$bad_uid")" "0"

# --- health from NVML events ---------------------------------------------------------------
# XID 13 (an application's graphics engine exception, ignored as NVIDIA ignores it) on the MIG
# GPU, then XID 79 (fallen off the bus) on gpu-0, which mps-pod uses. Events are handled in
# order and every health report is complete, so once gpu-0's rule exists a rule for the MIG
# devices would exist too had XID 13 counted.
echo '{"gpu": 1, "type": "xid", "xid": 13}' >> "$WORK/events.jsonl"
echo '{"gpu": 0, "type": "xid", "xid": 79}' >> "$WORK/events.jsonl"
rules() { k get devicetaintrules -o jsonpath='{range .items[*]}{.metadata.name} {.spec.deviceSelector.device} {.spec.taint.key}={.spec.taint.value}:{.spec.taint.effect}{"\n"}{end}'; }
has_rule() { local r; r=$(rules); [ -n "$r" ] && echo "$r"; }
expect "XID 79 taints the GPU NoExecute (and the ignored XID 13 taints nothing)" \
  "$(eventually 30 has_rule)" \
  "unhealthy.gpu.nvidia.com.nvml-node.gpu-0 gpu-0 quartermaster.io/unhealthy=XidCriticalError:NoExecute"
expect_match "the node's device health carries the XID" \
  "$(k get node nvml-node -o jsonpath='{.metadata.annotations.quartermaster\.io/device-health}')" \
  "XID 79 on GPU-0a000000-0000-4000-8000-000000000000: GPU has fallen off the bus"
expect_match "the agent saw XID 13 and left the devices alone" "$(cat "$WORK/nvml-node.log")" \
  "device event on GPU-0b000000-0000-4000-8000-000000000000 \(type 0x8, data 13\) changes no device's health"
# Both fail while the thing is still there, so `eventually` keeps asking (they used to succeed
# with no output and the check did not wait).
gone() { k -n mig-test get pod "$1" >/dev/null 2>&1 && return 1; echo gone; }
expect "the pod using the GPU is evicted" "$(eventually 30 gone mps-pod)" "gone"
spec="$WORK/nvml-node/cdi/k8s.gpu.nvidia.com-claim_$uid.json"
absent() { [ -f "$1" ] && return 1; echo absent; }
expect "and its claim unprepared" "$(eventually 30 absent "$spec")" "absent"
expect "MPS: unprepare quits the claim's daemon" "$(tail -1 "$QM_FAKE_MPS_LOG")" "quit pipe=$mps_dir/pipe"
expect "the pod on the MIG device stays" "$(k -n mig-test get pod mig-pod -o jsonpath='{.metadata.name}')" "mig-pod"

# --- MPS without the control binary: the claim fails with PrepareFailed -------------------------
stop_agent
start_agent "$WORK/missing/nvidia-cuda-mps-control"
k -n mig-test delete pod bad-config-pod --wait=false >/dev/null
k -n mig-test delete resourceclaim bad-config-claim --wait=false >/dev/null
cat > "$WORK/mps-mig.yaml" <<'EOF'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mps-mig-claim, namespace: mig-test}
spec:
  devices:
    requests:
    - name: mig
      exactly:
        deviceClassName: mig.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: MigDeviceConfig
          sharing: {strategy: MPS}
---
apiVersion: v1
kind: Pod
metadata: {name: mps-mig-pod, namespace: mig-test}
spec:
  containers: [{name: c, image: busybox, resources: {claims: [{name: mig}]}}]
  resourceClaims: [{name: mig, resourceClaimName: mps-mig-claim}]
EOF
expect_match "an MPS claim on the MIG device is created" "$(k apply -f "$WORK/mps-mig.yaml")" "pod/mps-mig-pod created"
mps_failed() {
  local s; s=$(k -n mig-test get resourceclaim mps-mig-claim -o jsonpath='{.status.devices[0].conditions[?(@.type=="Ready")].status} {.status.devices[0].conditions[?(@.type=="Ready")].reason} {.status.devices[0].conditions[?(@.type=="Ready")].message}')
  [ "${s%% *}" = False ] && echo "$s"
}
expect_match "a missing MPS control binary fails the claim with PrepareFailed and says why" \
  "$(eventually 30 mps_failed)" \
  "False PrepareFailed .*the MPS control daemon of the claim did not start: cannot run the MPS control binary $WORK/missing/nvidia-cuda-mps-control: No such file or directory"
mig_uid=$(k -n mig-test get resourceclaim mps-mig-claim -o jsonpath='{.metadata.uid}')
expect "and nothing is prepared for it" "$(ls "$WORK/nvml-node/cdi" "$WORK/nvml-node/state/mps" | grep -c "$mig_uid")" "0"

stop_agent
if [ "$failures" -ne 0 ]; then echo "--- the agent's log (last 60 lines)"; tail -60 "$WORK/nvml-node.log"; fi
echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
