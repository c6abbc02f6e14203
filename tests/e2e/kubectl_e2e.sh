#!/usr/bin/env bash
# End-to-end: the real kubectl against a real quartermaster with its embedded PostgreSQL.
# Usage: kubectl_e2e.sh <path to quartermaster> <seeds dir>
set -u
QM_BIN=$(realpath "$1")
SEEDS=$(realpath "$2")
source "$(dirname "$0")/lib.sh" qm-e2e
failures=0
checks=0
# API semantics only: pods stay as written (the scheduler has its own walkthrough test).
QM_FLAGS=(--scheduler=false)

k() { kubectl "$@" 2>&1; }

# expect <description> <grep flags> <what a miss is called> <output> <needle>...: one check, which
# fails at the first needle grep does not find in the output.
expect() {
  local desc=$1 flags=$2 miss=$3 out=$4; shift 4
  checks=$((checks + 1))
  for needle in "$@"; do
    if ! grep "$flags" -- "$needle" <<<"$out"; then
      echo "FAIL: $desc: $miss '$needle' in:"; echo "$out" | sed 's/^/    /'
      failures=$((failures + 1)); return
    fi
  done
  echo "ok:   $desc"
}

# check <description> <output> <line> [<line>...]: each <line> is a whole line of the output
# (exactly: a count "18" does not pass on "118", "pod/a" not on "pod/ab").
check() { expect "$1" -qxF "no line" "$2" "${@:3}"; }

# check_has <description> <output> <text> [<text>...]: each <text> appears somewhere in the
# output; only for tables, YAML and help text, where a line holds more than the check is about.
check_has() { expect "$1" -qF "missing" "$2" "${@:3}"; }

check_not() {  # check_not <description> <haystack> <needle>
  checks=$((checks + 1))
  if grep -qF -- "$3" <<<"$2"; then
    echo "FAIL: $1: unexpected '$3' in:"; echo "$2" | sed 's/^/    /'; failures=$((failures + 1))
  else
    echo "ok:   $1"
  fi
}

SERVER_STARTED=$(date +%s)  # the ClusterSummary's creationTimestamp is at or after it
start_server "${QM_FLAGS[@]}"

# --- create every seed kind this issue serves -------------------------------------------------
check "apply inventory (Nodes, ResourceSlices)" "$(k apply -f "$SEEDS/00-inventory.yaml")" \
  "node/gpu-node-a created" "resourceslice.resource.k8s.io/gpu-node-c-gpu.nvidia.com created"
check "apply namespace" "$(k apply -f "$SEEDS/01-namespace.yaml")" "namespace/dra-test created"
check "apply device classes" "$(k apply -f "$SEEDS/02-deviceclass-a100-80g.yaml" -f "$SEEDS/03-deviceclass-gpu.yaml")" \
  "deviceclass.resource.k8s.io/a100-80g created" "deviceclass.resource.k8s.io/gpu.nvidia.com created"
check "apply v1beta1 claim (deprecation warning)" "$(k apply -f "$SEEDS/04-resourceclaim-v1beta1.yaml")" \
  "resourceclaim.resource.k8s.io/gpu-claim created" \
  "Warning: resource.k8s.io/v1beta1 ResourceClaim is deprecated in v1.35+, unavailable in v1.38+; use resource.k8s.io/v1 ResourceClaim"
check "apply v1 claim" "$(k apply -f "$SEEDS/07-resourceclaim-v1.yaml")" "resourceclaim.resource.k8s.io/gpu-claim-v1 created"
check "apply claim template" "$(k apply -f "$SEEDS/12-claimtemplate-per-pod.yaml")" \
  "resourceclaimtemplate.resource.k8s.io/one-gpu created"
check "apply firstAvailable claim" "$(k apply -f "$SEEDS/14-claim-fallback-l4-or-a100.yaml")" \
  "resourceclaim.resource.k8s.io/a100-or-two-l4 created"

# --- get with the upstream columns ------------------------------------------------------------
out=$(k get resourceslices)
check "get resourceslices columns" "$(head -1 <<<"$out" | tr -s ' ')" "NAME NODE DRIVER POOL AGE"
check "get resourceslices rows" "$(awk 'NR > 1 { print $1, $2, $3, $4 }' <<<"$out")" \
  "gpu-node-a-gpu.nvidia.com gpu-node-a gpu.nvidia.com gpu-node-a" \
  "gpu-node-b-gpu.nvidia.com gpu-node-b gpu.nvidia.com gpu-node-b" \
  "gpu-node-c-gpu.nvidia.com gpu-node-c gpu.nvidia.com gpu-node-c"
check "18 devices published" "$(k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[*]}{.name}{"\n"}{end}{end}' | grep -c .)" "18"
check "get resourceclaims -A columns" "$(k get resourceclaims -A | head -1 | tr -s ' ')" "NAMESPACE NAME STATE AGE"
check "claim row shows namespace and state" "$(k get resourceclaims -A --no-headers | awk '{ print $1, $2, $3 }')" \
  "dra-test gpu-claim pending"
check "get deviceclasses" "$(k get deviceclasses --no-headers | awk '{ print $1 }')" "a100-80g" "gpu.nvidia.com"
check "get nodes" "$(k get nodes --no-headers | awk '{ print $1 }')" "gpu-node-a" "gpu-node-b" "gpu-node-c"
check "get namespaces" "$(k get namespaces --no-headers | awk '{ print $1, $2 }')" "default Active" "dra-test Active"
check "get claim templates" "$(k get resourceclaimtemplates -n dra-test -o name)" "resourceclaimtemplate.resource.k8s.io/one-gpu"
check "get by label" "$(k get nodes -l accelerator=example-gpu-x100 -o name)" "node/gpu-node-a"
check_not "label selector excludes" "$(k get nodes -l accelerator=example-gpu-x100 -o name)" "gpu-node-b"
check "field selector on slices" "$(k get resourceslices --field-selector spec.nodeName=gpu-node-c -o name)" \
  "resourceslice.resource.k8s.io/gpu-node-c-gpu.nvidia.com"
check "field selector on names" \
  "$(k get namespaces --field-selector metadata.name=dra-test,metadata.name!=default -o name)" \
  "namespace/dra-test"
check_not "field selector on names excludes" \
  "$(k get namespaces --field-selector metadata.name=dra-test -o name)" "namespace/default"
check "field selector on namespaces" \
  "$(k get resourceclaimtemplates -A --field-selector metadata.namespace=dra-test -o name)" \
  "resourceclaimtemplate.resource.k8s.io/one-gpu"
check "chunked list" "$(k get resourceslices --chunk-size=1 -o name | wc -l)" "3"
check "not found" "$(k get resourceclaim nope -n dra-test)" \
  'Error from server (NotFound): resourceclaims.resource.k8s.io "nope" not found'

# --- -o yaml in v1 and v1beta1 ----------------------------------------------------------------
out=$(k get resourceclaim gpu-claim -n dra-test -o yaml)
check_has "v1beta1-created claim read as v1" "$out" "apiVersion: resource.k8s.io/v1" "exactly:" \
  "deviceClassName: gpu.nvidia.com" "allocationMode: ExactCount" 'resourceVersion: "'
out=$(k get resourceclaims.v1beta1.resource.k8s.io gpu-claim-v1 -n dra-test -o yaml)
check_has "v1-created claim read as v1beta1" "$out" "apiVersion: resource.k8s.io/v1beta1" \
  "  - allocationMode: ExactCount" "deviceClassName: gpu.nvidia.com"
check_not "v1beta1 has no exactly" "$out" "exactly:"
out=$(k get resourceslices.v1beta1.resource.k8s.io gpu-node-a-gpu.nvidia.com -o yaml)
check_has "slice read as v1beta1 has basic" "$out" "basic:" "productName:"

# --- re-apply, edit, server-side apply --------------------------------------------------------
out=$(k apply -f "$SEEDS/00-inventory.yaml" -f "$SEEDS/01-namespace.yaml" -f "$SEEDS/02-deviceclass-a100-80g.yaml" -f "$SEEDS/03-deviceclass-gpu.yaml")
check "re-apply prints unchanged" "$out" "node/gpu-node-a unchanged" \
  "resourceslice.resource.k8s.io/gpu-node-a-gpu.nvidia.com unchanged" "namespace/dra-test unchanged" \
  "deviceclass.resource.k8s.io/a100-80g unchanged"
check_not "re-apply changes nothing" "$out" "configured"
sed 's/^  name: a100-80g$/  name: a100-80g\n  labels:\n    tier: premium/' "$SEEDS/02-deviceclass-a100-80g.yaml" > "$WORK/edited.yaml"
check "edit prints configured" "$(k apply -f "$WORK/edited.yaml")" "deviceclass.resource.k8s.io/a100-80g configured"
check "edit is stored" "$(k get deviceclass a100-80g -o jsonpath='{.metadata.labels}')" '{"tier":"premium"}'
check "server-side apply of new object" "$(k apply --server-side -f "$SEEDS/12-claimtemplate-per-pod.yaml" -n dra-test)" \
  "resourceclaimtemplate.resource.k8s.io/one-gpu serverside-applied"
sed 's/gpu-claim-v1/ssa-claim/' "$SEEDS/07-resourceclaim-v1.yaml" > "$WORK/ssa.yaml"
check "server-side apply creates" "$(k apply --server-side -f "$WORK/ssa.yaml")" \
  "resourceclaim.resource.k8s.io/ssa-claim serverside-applied"
check "ssa object exists" "$(k get resourceclaim ssa-claim -n dra-test -o name)" "resourceclaim.resource.k8s.io/ssa-claim"
check "merge patch" "$(k patch deviceclass gpu.nvidia.com --type merge -p '{"metadata":{"labels":{"p":"merge"}}}')" "deviceclass.resource.k8s.io/gpu.nvidia.com patched"
check "json patch" "$(k patch deviceclass gpu.nvidia.com --type json -p '[{"op":"add","path":"/metadata/labels/j","value":"json"}]')" "deviceclass.resource.k8s.io/gpu.nvidia.com patched"
check "strategic patch on node" "$(k patch node gpu-node-b -p '{"metadata":{"labels":{"s":"smp"}}}')" "node/gpu-node-b patched"
check "patches stored" "$(k get deviceclass gpu.nvidia.com -o jsonpath='{.metadata.labels}{"\n"}'; k get node gpu-node-b -o jsonpath='{.metadata.labels.s}')" \
  '{"j":"json","p":"merge"}' "smp"
check "dry-run create stores nothing" "$(sed 's/gpu-claim-v1/dry-claim/' "$SEEDS/07-resourceclaim-v1.yaml" | k create --dry-run=server -f -)" "resourceclaim.resource.k8s.io/dry-claim created (server dry run)"
check "dry-run object absent" "$(k get resourceclaim dry-claim -n dra-test)" \
  'Error from server (NotFound): resourceclaims.resource.k8s.io "dry-claim" not found'
check "create existing is AlreadyExists" "$(k create -f "$SEEDS/07-resourceclaim-v1.yaml")" \
  "Error from server (AlreadyExists): error when creating \"$SEEDS/07-resourceclaim-v1.yaml\": resourceclaims.resource.k8s.io \"gpu-claim-v1\" already exists"

# --- explain ----------------------------------------------------------------------------------
check_has "explain resourceclaims.spec.devices" "$(k explain resourceclaims.spec.devices)" \
  "KIND:       ResourceClaim" "requests" "constraints"
check_has "explain v1beta1 slice devices" "$(k explain resourceslices.spec.devices --api-version=resource.k8s.io/v1beta1)" "basic"

# --- our review objects (admin.quartermaster.io), as SubjectAccessReview --------------------------
review() {
  printf 'apiVersion: admin.quartermaster.io/v1alpha1\nkind: DeviceMatchReview\nspec:\n%b  selectors:\n  - cel:\n      expression: device.driver == "gpu.nvidia.com"\n' "$1"
}
published=$(k get resourceslices -o jsonpath='{range .items[?(@.spec.driver=="gpu.nvidia.com")]}{range .spec.devices[*]}{.name}{"\n"}{end}{end}' | grep -c .)
check "the seeds publish gpu.nvidia.com devices" "$([ "$published" -gt 0 ] && echo yes)" "yes"
check "api-resources lists the reviews" "$(k api-resources --api-group=admin.quartermaster.io --no-headers | awk '{ print $1, $NF }')" \
  "deviceallocationhistoryreviews DeviceAllocationHistoryReview" "devicematchreviews DeviceMatchReview" \
  "utilizationhistoryreviews UtilizationHistoryReview"
check "create -f a DeviceMatchReview" "$(review "" | k create -f - -o jsonpath='{.kind} {.status.matchedDevices}')" \
  "DeviceMatchReview $published"
check "a review field the schema lacks is refused" "$(review "  colour: red\n" | k create -f - -o name 2>&1)" \
  'Error from server (BadRequest): error when creating "STDIN": strict decoding error: unknown field "spec.colour"'
check_has "explain a review" "$(k explain devicematchreviews.spec)" "KIND:       DeviceMatchReview" "selectors" "className"

# --- the ClusterSummary and DeviceHolderReview (admin.quartermaster.io) ---------------------------
check "api-resources lists the summary and the holder review" \
  "$(k api-resources --api-group=admin.quartermaster.io --no-headers | awk '{ print $1, $NF }')" \
  "clustersummaries ClusterSummary" "deviceholderreviews DeviceHolderReview"
# The counts kubectl's own node table gives (STATUS: Ready, NotReady, Unknown; SchedulingDisabled).
want=$(k get nodes --no-headers | awk '{ n++; split($2, s, ","); r += s[1] == "Ready"; nr += s[1] == "NotReady";
  u += s[1] == "Unknown"; c += $2 ~ /SchedulingDisabled/ } END { print "cluster", n, r, nr, u, c }')
out=$(k get clustersummaries)
check "get clustersummaries columns" "$(head -1 <<<"$out" | tr -s ' ')" "NAME NODES READY NOT READY UNKNOWN CORDONED AGE"
check "get clustersummaries counts the nodes" "$(tail -n +2 <<<"$out" | awk '{ print $1, $2, $3, $4, $5, $6 }')" "$want"
check "the seeds' three nodes" "$(cut -d' ' -f2 <<<"$want")" "3"
check "clustersummaries AGE is the server's uptime, not <unknown>" \
  "$(tail -n +2 <<<"$out" | awk '{ print ($7 ~ /^[0-9]+[smhdy]([0-9]+[smhd])?$/) ? "an age" : $7 }')" "an age"
# kubectl get -w: Tables as events (the same columns), a cordon seen as one more CORDONED.
kubectl get clustersummaries -w --no-headers > "$WORK/summary-watch.txt" 2>&1 &
summary_watch=$!
eventually 10 grep -q . "$WORK/summary-watch.txt" >/dev/null
k cordon gpu-node-a >/dev/null
cordoned=$(awk '{ $6 += 1; print $1, $2, $3, $4, $5, $6 }' <<<"$want")
eventually 10 bash -c "awk '{ print \$1, \$2, \$3, \$4, \$5, \$6 }' '$WORK/summary-watch.txt' | grep -qxF '$cordoned'" >/dev/null
kill "$summary_watch" 2>/dev/null; wait "$summary_watch" 2>/dev/null
k uncordon gpu-node-a >/dev/null
check "get clustersummaries -w shows the cordon in the same columns" \
  "$(awk '{ print $1, $2, $3, $4, $5, $6 }' "$WORK/summary-watch.txt")" "$want" "$cordoned"
created=$(k get clustersummary cluster -o jsonpath='{.metadata.creationTimestamp}')
check "the summary's creationTimestamp is when the server started" \
  "$(t=$(date -d "$created" +%s 2>/dev/null) && [ "$t" -ge "$SERVER_STARTED" ] && [ "$t" -le "$(date +%s)" ] && echo in range || echo "$created")" "in range"
# A claim allocated by hand (the scheduler is off here): the review names it as the holder.
read -r held_pool held_device < <(k get resourceslices --field-selector spec.nodeName=gpu-node-b \
  -o jsonpath='{.items[0].spec.pool.name} {.items[0].spec.devices[0].name}')
sed 's/gpu-claim-v1/held-claim/' "$SEEDS/07-resourceclaim-v1.yaml" | k apply -f - >/dev/null
allocation='{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"'$held_pool'","device":"'$held_device'"}]},"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["gpu-node-b"]}]}]}}}}'
check "allocate held-claim (status)" \
  "$(k patch resourceclaim held-claim -n dra-test --subresource=status --type=merge -p "$allocation")" \
  "resourceclaim.resource.k8s.io/held-claim patched"
holder_review() {
  printf 'apiVersion: admin.quartermaster.io/v1alpha1\nkind: DeviceHolderReview\nspec:\n%b' "$1" | k create -f - -o jsonpath="$2"
}
check "create -f a DeviceHolderReview: the device's holder" \
  "$(holder_review "  pools:\n  - driver: gpu.nvidia.com\n    pool: $held_pool\n" \
    '{.status.heldDevices}{"\n"}{range .status.devices[*]}{.pool}/{.device} {range .holders[*]}{.claim.namespace}/{.claim.name} {.request} {.nodeName}{end}{"\n"}{end}')" \
  "1" "$held_pool/$held_device dra-test/held-claim gpu gpu-node-b"
check "a DeviceHolderReview for a class lists the claims naming it" \
  "$(holder_review "  deviceClassName: gpu.nvidia.com\n" '{range .status.claims[*]}{.namespace}/{.name} {.allocated}{"\n"}{end}')" \
  "dra-test/gpu-claim-v1 false" "dra-test/held-claim true"
# With spec.limit 1: the first of the claims the unlimited review lists, and the count of them all.
class_claims=$(holder_review "  deviceClassName: gpu.nvidia.com\n" '{range .status.claims[*]}{.namespace}/{.name}{"\n"}{end}')
check "a class DeviceHolderReview's spec.limit lists the first claims and counts them all" \
  "$(holder_review "  deviceClassName: gpu.nvidia.com\n  limit: 1\n" '{.status.claimCount} {.status.claimsTruncated}{range .status.claims[*]} {.namespace}/{.name}{end}')" \
  "$(grep -c . <<<"$class_claims") true $(head -1 <<<"$class_claims")"
check "more than one claim names the class (so the limit leaves some out)" \
  "$( [ "$(grep -c . <<<"$class_claims")" -ge 2 ] && echo yes || echo "$class_claims")" "yes"
check_has "a DeviceHolderReview's spec.limit of 0 is refused at spec.limit" \
  "$(holder_review "  deviceClassName: gpu.nvidia.com\n  limit: 0\n" '{.status.claimCount}' 2>&1)" \
  'is invalid: spec.limit: Invalid value: 0: must be a positive integer'
k patch resourceclaim held-claim -n dra-test --subresource=status --type=json -p '[{"op":"remove","path":"/status/allocation"}]' >/dev/null
k delete resourceclaim held-claim -n dra-test --wait=false >/dev/null

# --- pods, events, resource quotas (core v1) --------------------------------------------------
check "apply pod sharing a claim" "$(k apply -f "$SEEDS/05-pod-shared-claim.yaml")" "pod/pod1 created"
check "apply pods from a claim template" "$(k apply -f "$SEEDS/13-pods-from-template.yaml")" \
  "pod/trainer-0 created" "pod/trainer-1 created"
check "apply RHEL pod with securityContext" "$(k apply -f "$SEEDS/06-pod-shared-claim-rhel.yaml")" "pod/pod1-rhel created"
check "apply extended-resource pods" "$(k apply -f "$SEEDS/20-pod-device-plugin-style.yaml" -f "$SEEDS/21-pod-gpu-toleration.yaml")" \
  "pod/example-vector-add created" "pod/gpu-tolerating created"
out=$(k get pods -n dra-test)
check "get pods columns" "$(head -1 <<<"$out" | tr -s ' ')" "NAME READY STATUS RESTARTS AGE"
check "pod row: ready count and phase" "$(k get pods -n dra-test --no-headers | awk '{ print $1, $2, $3, $4 }')" "pod1 0/2 Pending 0"
check_has "get pods -o wide" "$(k get pods -n dra-test -o wide)" "IP" "NODE" "NOMINATED NODE" "READINESS GATES" "<none>"
check "get po short name" "$(k get po trainer-0 -n dra-test -o name)" "pod/trainer-0"
check "get all lists pods" "$(k get all -n dra-test -o name)" "pod/pod1" "pod/trainer-1"
out=$(k get pod pod1 -n dra-test -o yaml)
check_has "pod -o yaml keeps the manifest and defaults the phase" "$out" "phase: Pending" \
  "resourceClaimName: gpu-claim" "restartPolicy: OnFailure" "image: nvcr.io/nvidia/k8s/cuda-sample:devicequery"
check_has "pod keeps securityContext" "$(k get pod pod1-rhel -n dra-test -o yaml)" "type: nvidia_container_t"
check "extended resource limit defaults the request" \
  "$(k get pod example-vector-add -n dra-test -o jsonpath='{.spec.containers[0].resources.requests}')" '{"nvidia.com/gpu":1}'
out=$(k apply -f "$SEEDS/05-pod-shared-claim.yaml" -f "$SEEDS/13-pods-from-template.yaml" -f "$SEEDS/06-pod-shared-claim-rhel.yaml" -f "$SEEDS/20-pod-device-plugin-style.yaml" -f "$SEEDS/21-pod-gpu-toleration.yaml")
check "re-apply pods prints unchanged" "$out" "pod/pod1 unchanged" "pod/trainer-0 unchanged" \
  "pod/gpu-tolerating unchanged" "pod/example-vector-add unchanged"
check_not "re-apply pods changes nothing" "$out" "configured"
sed 's|cuda-sample:devicequery|cuda-sample:devicequery-v2|' "$SEEDS/05-pod-shared-claim.yaml" > "$WORK/pod1-image.yaml"
check "apply a new image (strategic merge patch)" "$(k apply -f "$WORK/pod1-image.yaml")" "pod/pod1 configured"
check "new image stored, other container kept" \
  "$(k get pod pod1 -n dra-test -o jsonpath='{.spec.containers[*].image}')" \
  "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0 nvcr.io/nvidia/k8s/cuda-sample:devicequery-v2"
sed 's|restartPolicy: OnFailure|restartPolicy: Never|' "$SEEDS/05-pod-shared-claim.yaml" > "$WORK/pod1-policy.yaml"
check "other spec changes are forbidden" "$(k apply -f "$WORK/pod1-policy.yaml" | sed 's/ (.*//')" \
  'The Pod "pod1" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations`' \
  '  spec.restartPolicy: "OnFailure" -> "Never"'
check "main endpoint does not change status" \
  "$(k patch pod trainer-1 -n dra-test --type merge -p '{"status":{"phase":"Running"}}' >/dev/null; k get pod trainer-1 -n dra-test -o jsonpath='{.status.phase}')" "Pending"
check "status subresource changes status" \
  "$(k patch pod trainer-1 -n dra-test --subresource=status --type merge -p '{"status":{"phase":"Running"}}')" "pod/trainer-1 patched"
out=$(k get pods -n dra-test --field-selector status.phase=Pending -o name)
check "field selector status.phase=Pending" "$out" "pod/pod1" "pod/trainer-0"
check_not "field selector excludes running pod" "$out" "pod/trainer-1"
check "field selector status.phase=Running" "$(k get pods -n dra-test --field-selector status.phase=Running -o name)" "pod/trainer-1"
check "bind a pod (nodeName set once)" "$(k patch pod trainer-0 -n dra-test -p '{"spec":{"nodeName":"gpu-node-a"}}')" "pod/trainer-0 patched"
check "field selector spec.nodeName" "$(k get pods -A --field-selector spec.nodeName=gpu-node-a --no-headers | awk '{ print $1, $2 }')" "dra-test trainer-0"
check_not "field selector spec.nodeName excludes unbound" "$(k get pods -A --field-selector spec.nodeName=gpu-node-a)" "pod1"
check_has "node column shows the binding" "$(k get pod trainer-0 -n dra-test -o wide)" "gpu-node-a"
check "nodeName cannot change once set" "$(k patch pod trainer-0 -n dra-test -p '{"spec":{"nodeName":"gpu-node-b"}}')" \
  '  spec.nodeName: "gpu-node-a" -> "gpu-node-b"'
cat > "$WORK/bad-pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: bad-pod
  namespace: dra-test
spec:
  resourceClaims:
  - name: gpu
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: nic
  - name: main
    image: busybox
YAML
check "invalid pod is rejected with Kubernetes messages" "$(k apply -f "$WORK/bad-pod.yaml")" \
  'The Pod "bad-pod" is invalid: ' \
  '* spec.resourceClaims[0]: Invalid value: {"name":"gpu"}: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`' \
  '* spec.containers[0].resources.claims[0]: Not found: "nic": must be one of the names in pod.spec.resourceClaims: gpu' \
  '* spec.containers[1].name: Duplicate value: "main"'
cat > "$WORK/unknown-pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: typo-pod
  namespace: dra-test
spec:
  resourceClaims:
  - name: gpu
    resourceClaimNme: gpu-claim
  containers:
  - name: main
    image: busybox
YAML
check "unknown pod field is a strict decoding error" "$(k apply -f "$WORK/unknown-pod.yaml")" \
  "Error from server (BadRequest): error when creating \"$WORK/unknown-pod.yaml\": strict decoding error: unknown field \"spec.resourceClaims[0].resourceClaimNme\""

POD_UID=$(k get pod pod1 -n dra-test -o jsonpath='{.metadata.uid}')
NOW=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cat > "$WORK/event.yaml" <<YAML
apiVersion: v1
kind: Event
metadata:
  name: pod1.e2e
  namespace: dra-test
involvedObject:
  apiVersion: v1
  kind: Pod
  name: pod1
  namespace: dra-test
  uid: $POD_UID
reason: FailedScheduling
message: "0/3 nodes are available: 3 insufficient devices of class gpu.nvidia.com."
type: Warning
count: 1
firstTimestamp: "$NOW"
lastTimestamp: "$NOW"
source:
  component: quartermaster-scheduler
reportingComponent: quartermaster-scheduler
YAML
check "create an event" "$(k create -f "$WORK/event.yaml")" "event/pod1.e2e created"
out=$(k get events -n dra-test)
check "get events columns" "$(head -1 <<<"$out" | tr -s ' ')" "LAST SEEN TYPE REASON OBJECT MESSAGE"
check "event row" "$(k get events -n dra-test --no-headers | tr -s ' ' | cut -d' ' -f2-)" \
  "Warning FailedScheduling pod/pod1 0/3 nodes are available: 3 insufficient devices of class gpu.nvidia.com."
check "get ev by involved object" "$(k get ev -n dra-test --field-selector involvedObject.name=pod1,reason=FailedScheduling -o name)" "event/pod1.e2e"
out=$(k describe pod pod1 -n dra-test)
check_has "describe pod" "$out" "Name:" "pod1" "Namespace:" "dra-test" "Status:" "Pending" "ctr0" "ctr1" \
  "Events:" "FailedScheduling" "quartermaster-scheduler" "0/3 nodes are available"
check_has "describe pod without events" "$(k describe pod trainer-1 -n dra-test)" "trainer-1" "Events:" "<none>"

cat > "$WORK/quota.yaml" <<'YAML'
apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpu-quota
  namespace: dra-test
spec:
  hard:
    gpu.nvidia.com.deviceclass.resource.k8s.io/devices: "4"
    count/pods: "10"
    limits.cpu: "8"
YAML
check "create a resource quota" "$(k apply -f "$WORK/quota.yaml")" "resourcequota/gpu-quota created"
check "get quota columns" "$(k get quota -n dra-test | head -1 | tr -s ' ')" "NAME AGE REQUEST LIMIT"
check "get quota row" "$(k get quota -n dra-test -o name)" "resourcequota/gpu-quota"
k patch resourcequota gpu-quota -n dra-test --subresource=status --type merge \
  -p '{"status":{"hard":{"count/pods":"10","gpu.nvidia.com.deviceclass.resource.k8s.io/devices":"4","limits.cpu":"8"},"used":{"count/pods":"5","gpu.nvidia.com.deviceclass.resource.k8s.io/devices":"1"}}}' >/dev/null
check "quota shows used/hard" "$(k get resourcequota gpu-quota -n dra-test --no-headers | tr -s ' ' | cut -d' ' -f3-)" \
  "count/pods: 5/10, gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 1/4 limits.cpu: 0/8"
check "quota spec kept" "$(k get quota gpu-quota -n dra-test -o jsonpath='{.spec.hard.count/pods}')" "10"
# Admission: the claims of dra-test already ask for more than 4 devices of the class, so one
# more is refused with Kubernetes' 403.
check "quota refuses a claim over the limit" \
  "$(sed 's/gpu-claim-v1/over-quota/' "$SEEDS/07-resourceclaim-v1.yaml" | k apply -f -)" \
  'Error from server (Forbidden): error when creating "STDIN": resourceclaims.resource.k8s.io "over-quota" is forbidden: exceeded quota: gpu-quota, requested: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=1, used: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=5, limited: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=4'
k delete quota gpu-quota -n dra-test >/dev/null

kubectl get pods -n dra-test -w --output-watch-events > "$WORK/watch-pods.txt" 2>&1 &
WATCH_PID=$!
sleep 2
k delete pod pod1-rhel -n dra-test >/dev/null
sleep 2
kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null
check "get pods -w sees the deletion" "$(awk '{ print $1, $2 }' "$WORK/watch-pods.txt")" "ADDED pod1" "DELETED pod1-rhel"
check "delete pod" "$(k delete pod trainer-1 -n dra-test)" 'pod "trainer-1" deleted'
check "deleted pod is gone" "$(k get pod trainer-1 -n dra-test)" 'Error from server (NotFound): pods "trainer-1" not found'

# --- invalid manifests ------------------------------------------------------------------------
cat > "$WORK/invalid.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: Bad_Name
  namespace: dra-test
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        allocationMode: Sometimes
YAML
out=$(k apply -f "$WORK/invalid.yaml")
check "invalid manifest is rejected with field paths" "$(sed 's/ (e\.g\..*//' <<<"$out")" 'The ResourceClaim "Bad_Name" is invalid: ' \
  "* metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character" \
  '* spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Sometimes": supported values: "All", "ExactCount"'
cat > "$WORK/unknown.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: strict
spec:
  selectorz: []
YAML
cat > "$WORK/badcel.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: bad-cel
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.nvidia.com" &&
YAML
check "bad CEL selector is rejected with a positioned message" "$(k apply -f "$WORK/badcel.yaml")" \
  "The DeviceClass \"bad-cel\" is invalid: spec.selectors[0].cel.expression: Invalid value: \"device.driver == \\\"gpu.nvidia.com\\\" &&\": compilation failed: ERROR: <input>:1:37: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}" \
  ' | device.driver == "gpu.nvidia.com" &&' \
  ' | ....................................^'
check "unknown field is a strict decoding error" "$(k apply -f "$WORK/unknown.yaml")" \
  "Error from server (BadRequest): error when creating \"$WORK/unknown.yaml\": strict decoding error: unknown field \"spec.selectorz\""
cat > "$WORK/nons.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: orphan
  namespace: no-such-namespace
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
YAML
check "namespace must exist" "$(k apply -f "$WORK/nons.yaml")" \
  "Error from server (NotFound): error when creating \"$WORK/nons.yaml\": namespaces \"no-such-namespace\" not found"

# --- watch ------------------------------------------------------------------------------------
kubectl get resourceclaims -n dra-test -w --output-watch-events > "$WORK/watch.txt" 2>&1 &
WATCH_PID=$!
sleep 2
k label resourceclaim gpu-claim -n dra-test watched=yes >/dev/null
sed 's/gpu-claim-v1/watched-claim/' "$SEEDS/07-resourceclaim-v1.yaml" | k apply -f - >/dev/null
k delete resourceclaim watched-claim -n dra-test >/dev/null
sleep 2
kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null
out=$(cat "$WORK/watch.txt")
check "get -w prints ADDED/MODIFIED/DELETED" "$(awk '{ print $1, $2 }' <<<"$out")" "EVENT NAME" "ADDED gpu-claim" \
  "MODIFIED gpu-claim" "ADDED watched-claim" "DELETED watched-claim"
kubectl get deviceclass a100-80g -w -o name > "$WORK/watch1.txt" 2>&1 &
WATCH_PID=$!
sleep 2
k label deviceclass a100-80g round=two >/dev/null
sleep 2
kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null
check "single-object watch sees the first change" "$(grep -c deviceclass "$WORK/watch1.txt")" "2"

# --- delete -----------------------------------------------------------------------------------
check "delete -f" "$(k delete -f "$SEEDS/07-resourceclaim-v1.yaml")" 'resourceclaim.resource.k8s.io "gpu-claim-v1" deleted'
check "deleted claim is gone" "$(k get resourceclaim gpu-claim-v1 -n dra-test)" \
  'Error from server (NotFound): resourceclaims.resource.k8s.io "gpu-claim-v1" not found'
k patch resourceclaim gpu-claim -n dra-test --type merge -p '{"metadata":{"finalizers":["example.com/hold"]}}' >/dev/null
k delete resourceclaim gpu-claim -n dra-test --wait=false >/dev/null
check "finalizer keeps object with deletionTimestamp" "$(k get resourceclaim gpu-claim -n dra-test --no-headers | awk '{ print $1, $2 }')" "gpu-claim deleted,pending"
k patch resourceclaim gpu-claim -n dra-test --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
check "removing the last finalizer deletes" "$(k get resourceclaim gpu-claim -n dra-test)" \
  'Error from server (NotFound): resourceclaims.resource.k8s.io "gpu-claim" not found'

# --- kill -9 between create and get -----------------------------------------------------------
sed 's/gpu-claim-v1/durable-claim/' "$SEEDS/07-resourceclaim-v1.yaml" | k create -f - >/dev/null
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
start_server "${QM_FLAGS[@]}"
check "kill -9 loses nothing" "$(k get resourceclaim durable-claim -n dra-test -o name)" "resourceclaim.resource.k8s.io/durable-claim"
check "inventory kept across restart" "$(k get resourceslices -o name | wc -l)" "3"

# --- namespace deletion takes its contents ----------------------------------------------------
k delete namespace dra-test >/dev/null
check "namespace contents deleted" "$(k get resourceclaims -A)" "No resources found"

# --- graceful shutdown ------------------------------------------------------------------------
kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; rc=$?
SERVER_PID=""
check "SIGTERM exits cleanly" "rc=$rc" "rc=0"

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]
