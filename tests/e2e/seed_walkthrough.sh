#!/usr/bin/env bash
# The seed walkthrough of shared/fixtures/seeds/README.md, driven by the real kubectl against
# the real server (embedded PostgreSQL, scheduler running): every outcome of the table, device
# exhaustion with the explaining condition and Event, release on delete and automatic
# scheduling of the waiting pod, and a pod applied before its class.
# Usage: seed_walkthrough.sh <path to quartermaster> <seeds dir>
set -u
QM_BIN=$(realpath "$1")
SEEDS=$(realpath "$2")
source "$(dirname "$0")/lib.sh" qm-seeds
start_server

k() { kubectl "$@" 2>&1; }
kd() { k -n dra-test "$@"; }

node_of() { local n; n=$(kd get pod "$1" -o jsonpath='{.spec.nodeName}'); [ -n "$n" ] && echo "$n"; }
apply() { k apply -f "$SEEDS/$1"; }

# --- 00-03: inventory, namespace, classes ---------------------------------------------------
apply 00-inventory.yaml >/dev/null
expect "3 nodes" "$(k get nodes -o name | wc -l)" "3"
expect "3 slices" "$(k get resourceslices -o name | wc -l)" "3"
devices=$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[*]}{.name}{"\n"}{end}{end}' | grep -c .)
expect "18 devices" "$devices" "18"
apply 01-namespace.yaml >/dev/null
apply 02-deviceclass-a100-80g.yaml >/dev/null
apply 03-deviceclass-gpu.yaml >/dev/null
expect "classes created" "$(k get deviceclasses -o name | sort | tr '\n' ' ')" \
  "deviceclass.resource.k8s.io/a100-80g deviceclass.resource.k8s.io/gpu.nvidia.com "

# --- 04: v1beta1 claim, pending --------------------------------------------------------------
expect_match "v1beta1 claim stored" "$(apply 04-resourceclaim-v1beta1.yaml)" "gpu-claim created"
expect "readable as v1" "$(kd get resourceclaims.v1.resource.k8s.io gpu-claim -o jsonpath='{.apiVersion}')" "resource.k8s.io/v1"
expect "readable as v1beta1" "$(kubectl -n dra-test get resourceclaims.v1beta1.resource.k8s.io gpu-claim -o jsonpath='{.apiVersion}' 2>/dev/null)" "resource.k8s.io/v1beta1"
sleep 1
expect "no consumer: pending" "$(kd get resourceclaim gpu-claim -o jsonpath='{.status.allocation}')" ""

# --- 05/06: two pods share one claim ----------------------------------------------------------
apply 05-pod-shared-claim.yaml >/dev/null
node1=$(eventually 20 node_of pod1)
expect_match "pod1 on gpu-node-a or gpu-node-b" "$node1" "^gpu-node-[ab]$"
expect "gpu-claim has one device" \
  "$(kd get resourceclaim gpu-claim -o jsonpath='{range .status.allocation.devices.results[*]}{.device}{"\n"}{end}' | grep -c .)" "1"
expect "gpu-claim reserved for pod1" "$(kd get resourceclaim gpu-claim -o jsonpath='{.status.reservedFor[*].name}')" "pod1"
apply 06-pod-shared-claim-rhel.yaml >/dev/null
expect "pod1-rhel on pod1's node" "$(eventually 20 node_of pod1-rhel)" "$node1"
expect "reserved for both pods" "$(kd get resourceclaim gpu-claim -o jsonpath='{.status.reservedFor[*].name}')" "pod1 pod1-rhel"
expect "still one device" \
  "$(kd get resourceclaim gpu-claim -o jsonpath='{range .status.allocation.devices.results[*]}{.device}{"\n"}{end}' | grep -c .)" "1"

# --- 07: v1 claim, pending --------------------------------------------------------------------
expect_match "v1 claim stored" "$(apply 07-resourceclaim-v1.yaml)" "gpu-claim-v1 created"
expect "v1 claim pending" "$(kd get resourceclaim gpu-claim-v1 -o jsonpath='{.status.allocation}')" ""

# --- 12/13: claims from a template -----------------------------------------------------------
apply 12-claimtemplate-per-pod.yaml >/dev/null
apply 13-pods-from-template.yaml >/dev/null
eventually 20 node_of trainer-0 >/dev/null
eventually 20 node_of trainer-1 >/dev/null
generated=$(kd get resourceclaims -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.resource\.kubernetes\.io/pod-claim-name} {.metadata.ownerReferences[0].name} {.status.allocation.devices.results[0].pool}/{.status.allocation.devices.results[0].device}{"\n"}{end}' | grep '^trainer-')
expect "one generated claim per pod" "$(wc -l <<<"$generated")" "2"
expect_match "annotated with the pod claim name and owned by the pod" "$generated" "^trainer-0-[a-z0-9-]+ [a-z0-9-]+ trainer-0 "
expect "two distinct devices" "$(awk '{print $4}' <<<"$generated" | sort -u | wc -l)" "2"
expect_match "pod status lists its claim" "$(kd get pod trainer-0 -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')" "^trainer-0-"

# --- 20/21: extended resources, taint toleration ----------------------------------------------
apply 20-pod-device-plugin-style.yaml >/dev/null
expect "device-plugin-style pod on gpu-node-a" "$(eventually 20 node_of example-vector-add)" "gpu-node-a"
expect_match "a claim was generated for it" \
  "$(kd get resourceclaims -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.resource\.kubernetes\.io/extended-resource-claim}{"\n"}{end}')" \
  "^example-vector-add-extended-resources-[a-z0-9]+ true"
apply 21-pod-gpu-toleration.yaml >/dev/null
expect_match "tolerating pod scheduled" "$(eventually 20 node_of gpu-tolerating)" "^gpu-node-[abc]$"
for p in pod1 pod1-rhel trainer-0 trainer-1 example-vector-add; do
  [ "$(node_of $p)" = "gpu-node-c" ] && fail "$p avoided the tainted node" "it is on gpu-node-c"
done

# --- 14: firstAvailable, used by a pod -------------------------------------------------------
apply 14-claim-fallback-l4-or-a100.yaml >/dev/null
cat > "$WORK/fallback-user.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: fallback-user, namespace: dra-test}
spec:
  resourceClaims: [{name: accel, resourceClaimName: a100-or-two-l4}]
  containers: [{name: c, image: registry.example/app:v1, resources: {claims: [{name: accel}]}}]
EOF
k apply -f "$WORK/fallback-user.yaml" >/dev/null
eventually 20 node_of fallback-user >/dev/null
expect "firstAvailable picks the A100 while one is free" \
  "$(kd get resourceclaim a100-or-two-l4 -o jsonpath='{.status.allocation.devices.results[*].request}')" "accel/a100"
# The same claim again, when no A100 of 40Gi or more is left: two L4 on one node.
sed 's/name: a100-or-two-l4/name: a100-or-two-l4-again/' "$SEEDS/14-claim-fallback-l4-or-a100.yaml" | k apply -f - >/dev/null
sed 's/fallback-user/fallback-again/; s/resourceClaimName: a100-or-two-l4/resourceClaimName: a100-or-two-l4-again/' \
  "$WORK/fallback-user.yaml" | k apply -f - >/dev/null
eventually 20 node_of fallback-again >/dev/null
expect "then it falls back to two L4" \
  "$(kd get resourceclaim a100-or-two-l4-again -o jsonpath='{.status.allocation.devices.results[*].request}')" "accel/l4-pair accel/l4-pair"
expect "both L4 on one node" \
  "$(kd get resourceclaim a100-or-two-l4-again -o jsonpath='{.status.allocation.devices.results[*].pool}')" "gpu-node-b gpu-node-b"

# --- exhaustion: the 80Gi A100s run out ---------------------------------------------------------
cat > "$WORK/a100-pods.yaml" <<'EOF'
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: a100-80g, namespace: dra-test}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: a100-80g}}]
EOF
for i in 1 2 3 4 5; do
  cat >> "$WORK/a100-pods.yaml" <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: big-$i, namespace: dra-test}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: a100-80g}]
  containers: [{name: c, image: registry.example/train:v1, resources: {claims: [{name: gpu}]}}]
EOF
done
k apply -f "$WORK/a100-pods.yaml" >/dev/null
waiting() {
  local s; s=$(kd get pods -o jsonpath='{range .items[?(@.status.conditions[0].status=="False")]}{.metadata.name}{"\n"}{end}')
  [ -n "$s" ] && echo "$s"
}
pending=$(eventually 20 waiting)
expect_match "pods beyond the free A100 80Gi stay pending" "$pending" "^big-"
first_pending=$(head -1 <<<"$pending")
reason=$(kd get pod "$first_pending" -o jsonpath='{.status.conditions[0].reason}: {.status.conditions[0].message}')
expect_match "PodScheduled=False explains with counts" "$reason" \
  "^Unschedulable: 0/3 nodes are available: .*insufficient devices of class a100-80g"
events=$(eventually 10 kd get events --field-selector involvedObject.name="$first_pending" -o jsonpath='{.items[*].reason}')
expect_match "a FailedScheduling event" "$events" "FailedScheduling"
expect_match "kubectl describe shows the event" "$(kd describe pod "$first_pending")" "FailedScheduling"

# Deleting a pod that holds an 80Gi A100 releases it; a waiting pod gets it without any step.
holder=""
for p in trainer-0 trainer-1 example-vector-add big-1 big-2 big-3 big-4 big-5 pod1; do
  claim_devices=$(kd get resourceclaims -o jsonpath="{range .items[?(@.status.reservedFor[0].name==\"$p\")]}{.status.allocation.devices.results[0].pool}{end}")
  if [ "$claim_devices" = "gpu-node-a" ] && [ "$p" != "pod1" ]; then holder=$p; break; fi
done
[ -n "$holder" ] || fail "found a pod holding an A100 80Gi" "none"
pending_before=$(wc -l <<<"$pending")
kd delete pod "$holder" --wait=false >/dev/null
fewer() { local n; n=$(waiting | grep -c .); [ "$n" -lt "$pending_before" ] && echo "$n"; }
expect_match "a waiting pod was scheduled after the release" "$(eventually 20 fewer)" "^[0-9]+$"

# --- a pod applied before its class ------------------------------------------------------------
cat > "$WORK/early.yaml" <<'EOF'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: early-claim, namespace: dra-test}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: late-class}}]
---
apiVersion: v1
kind: Pod
metadata: {name: early, namespace: dra-test}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  resourceClaims: [{name: gpu, resourceClaimName: early-claim}]
  containers: [{name: c, image: registry.example/app:v1}]
EOF
k apply -f "$WORK/early.yaml" >/dev/null
sleep 1
expect "pod waits for its class" "$(kd get pod early -o jsonpath='{.spec.nodeName}')" ""
cat > "$WORK/late-class.yaml" <<'EOF'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: late-class}
spec:
  selectors: [{cel: {expression: 'device.attributes["gpu.nvidia.com"].productName.contains("H100")'}}]
EOF
k apply -f "$WORK/late-class.yaml" >/dev/null
expect "scheduled once the class exists" "$(eventually 20 node_of early)" "gpu-node-c"

# --- cordon and uncordon ---------------------------------------------------------------------
k cordon gpu-node-c >/dev/null
sed 's/{name: early,/{name: after-cordon,/; s/early-claim/after-cordon-claim/g' \
  "$WORK/early.yaml" | k apply -f - >/dev/null
cordoned() { local m; m=$(kd get pod after-cordon -o jsonpath='{.status.conditions[0].message}'); [ -n "$m" ] && echo "$m"; }
expect_match "a cordoned node is not used" "$(eventually 20 cordoned)" "node\(s\) were unschedulable"
k uncordon gpu-node-c >/dev/null
expect "scheduled after uncordon" "$(eventually 20 node_of after-cordon)" "gpu-node-c"

# --- kill -9 in the middle of scheduling: nothing half-bound, nothing lost ----------------------
# Free every device first, then create 30 pods and kill the server while it binds them.
kd delete pods --all --wait=false >/dev/null
settled() { [ -z "$(kd get resourceclaims -o jsonpath='{range .items[*]}{.status.reservedFor[0].name}{end}')" ] && echo yes; }
eventually 30 settled >/dev/null
: > "$WORK/many.yaml"
for i in $(seq 1 30); do
  printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: crash-%s, namespace: dra-test}\nspec:\n  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]\n  containers: [{name: c, image: registry.example/app:v1}]\n' "$i" >> "$WORK/many.yaml"
done
k apply -f "$WORK/many.yaml" >/dev/null
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
start_server
expect "every acknowledged pod survived kill -9" "$(kd get pods -o name | grep -c crash-)" "30"
all_decided() {
  local undecided
  undecided=$(kd get pods -o jsonpath='{range .items[*]}{.metadata.name}|{.status.conditions[0].type}{"\n"}{end}' |
    awk -F'|' '$1 ~ /^crash-/ && $2 == ""')
  if [ -z "$undecided" ]; then echo yes; else echo "undecided: $undecided"; return 1; fi
}
expect "every pod is decided after the restart" "$(eventually 60 all_decided)" "yes"
claims=$(kd get resourceclaims -o jsonpath='{range .items[*]}{.metadata.name} {.status.reservedFor[0].name} {.status.allocation.devices.results[0].pool} {.status.allocation.devices.results[0].device}{"\n"}{end}')
expect "no device is allocated twice" "$(awk 'NF == 4 {print $3"/"$4}' <<<"$claims" | sort | uniq -d)" ""
pods=$(kd get pods -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.resourceClaimStatuses[0].resourceClaimName}{"\n"}{end}')
half=$(awk 'NR == FNR { if (NF == 4) { node[$1] = $3; holder[$1] = $2 } next }
            $1 ~ /^crash-/ && NF == 3 && (node[$3] != $2 || holder[$3] != $1) { print $1 }' \
        <(echo "$claims") <(echo "$pods"))
expect "every bound pod holds its allocated claim on its node" "$half" ""
expect "the 18 devices went to 18 pods" "$(awk '$1 ~ /^crash-/ && NF == 3' <<<"$pods" | wc -l)" "18"

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]
