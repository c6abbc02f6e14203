#!/usr/bin/env bash
# End-to-end security: the real kubectl over verified TLS against a real quartermaster with
# certificates generated at first start. Identities (admin token, client certificates minted by
# `quartermaster credential`, ServiceAccount tokens from `kubectl create token`), RBAC with
# Kubernetes' 403 wording, `kubectl auth whoami` / `can-i`, impersonation, bad credentials.
# Usage: security_e2e.sh <path to quartermaster> <seeds dir>
set -u
QM_BIN=$(realpath "$1")
SEEDS=$(realpath "$2")
source "$(dirname "$0")/lib.sh" qm-sec-e2e
# expect_line <description> <actual> <line>: one line of the output is exactly <line>.
expect_line() {
  if grep -qxF -- "$3" <<<"$2"; then pass "$1"; else fail "$1" "want a line: $3" "got: $2"; fi
}

start_server --scheduler=false
ADMIN="$WORK/data/admin.kubeconfig"
k() { kubectl --kubeconfig "$ADMIN" "$@" 2>&1; }

# --- TLS material written at first start ------------------------------------------------------
expect "admin kubeconfig is 0600" "$(stat -c %a "$ADMIN")" "600"
expect "CA key is 0600" "$(stat -c %a "$WORK/data/pki/ca.key")" "600"
expect "serving key is 0600" "$(stat -c %a "$WORK/data/pki/server.key")" "600"
expect "https URL" "${URL%%://*}" "https"
expect_line "serving certificate verifies against the CA" \
  "$(openssl verify -CAfile "$WORK/data/pki/ca.crt" "$WORK/data/pki/server.crt" 2>&1)" \
  "$WORK/data/pki/server.crt: OK"

# --- who am I ---------------------------------------------------------------------------------
out=$(k auth whoami)
expect_line "whoami: admin" "$(tr -s ' ' <<<"$out")" "Username admin"
expect_line "whoami: groups" "$(tr -s ' ' <<<"$out")" "Groups [system:masters system:authenticated]"

# --- anonymous and bad credentials ------------------------------------------------------------
expect "anonymous /version" "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/data/pki/ca.crt" "$URL/version")" "200"
expect "anonymous /readyz" "$(curl -s --cacert "$WORK/data/pki/ca.crt" "$URL/readyz")" "ok"
expect "anonymous list is 401" "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/data/pki/ca.crt" "$URL/api/v1/namespaces")" "401"
expect "anonymous /metrics is 401" "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/data/pki/ca.crt" "$URL/metrics")" "401"
expect "401 body is a Status" \
  "$(curl -s --cacert "$WORK/data/pki/ca.crt" "$URL/api/v1/namespaces" | jq -c '[.kind,.reason,.code]')" \
  '["Status","Unauthorized",401]'
# kubectl's last line for a 401: discovery (cold cache) or the request itself answered it.
unauthorized() { tail -1 <<<"$1" | grep -qxE 'error: You must be logged in to the server \((Unauthorized|the server has asked for the client to provide credentials)\)'; }
for token in wrong "$(head -c 3000 /dev/zero | tr '\0' x)" "a.b.c" "eyJhbGciOiJIUzI1NiJ9.e30.sig"; do
  out=$(kubectl --kubeconfig "$ADMIN" --token "$token" get namespaces 2>&1)
  if unauthorized "$out"; then pass "bad token is Unauthorized (${token:0:12})"; else fail "bad token (${token:0:12})" "$out"; fi
  expect "bad token is a 401 (${token:0:12})" \
    "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/data/pki/ca.crt" -H "Authorization: Bearer $token" "$URL/api/v1/namespaces")" "401"
done
expect "plain HTTP on the TLS port is refused" \
  "$(curl -s -o /dev/null -w '%{http_code}' "http://${URL#https://}/version")" "000"

# An untrusted client certificate (its own CA) is 401, not a handshake failure.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=evil-ca" \
  -keyout "$WORK/evil-ca.key" -out "$WORK/evil-ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/O=system:masters/CN=mallory" \
  -keyout "$WORK/evil.key" -out "$WORK/evil.csr" 2>/dev/null
openssl x509 -req -in "$WORK/evil.csr" -CA "$WORK/evil-ca.crt" -CAkey "$WORK/evil-ca.key" \
  -CAcreateserial -days 1 -out "$WORK/evil.crt" 2>/dev/null
expect "untrusted client certificate is 401" \
  "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/data/pki/ca.crt" --cert "$WORK/evil.crt" --key "$WORK/evil.key" "$URL/api/v1/namespaces")" "401"

# --- client certificates minted by the CLI ----------------------------------------------------
"$QM_BIN" credential --data-dir "$WORK/data" --user alice --group team-a-devs --server "$URL" \
  --out "$WORK/alice.kubeconfig"
expect "minted kubeconfig is 0600" "$(stat -c %a "$WORK/alice.kubeconfig")" "600"
alice() { kubectl --kubeconfig "$WORK/alice.kubeconfig" "$@" 2>&1; }
out=$(alice auth whoami)
expect_line "whoami: alice by certificate" "$(tr -s ' ' <<<"$out")" "Username alice"
expect_line "whoami: certificate O is a group" "$(tr -s ' ' <<<"$out")" "Groups [team-a-devs system:authenticated]"

# --- RBAC: a view user ------------------------------------------------------------------------
k create namespace team-a >/dev/null
k create namespace team-b >/dev/null
expect "alice cannot list before any binding" "$(alice get resourceclaims -n team-a)" \
  'Error from server (Forbidden): resourceclaims.resource.k8s.io is forbidden: User "alice" cannot list resource "resourceclaims" in API group "resource.k8s.io" in the namespace "team-a"'
expect "admin binds view" "$(k create rolebinding alice-view --clusterrole=view --user=alice -n team-a)" \
  "rolebinding.rbac.authorization.k8s.io/alice-view created"
expect "alice lists in team-a" "$(alice get resourceclaims -n team-a)" "No resources found in team-a namespace."
expect "alice cannot list in team-b" "$(alice get resourceclaims -n team-b)" \
  'Error from server (Forbidden): resourceclaims.resource.k8s.io is forbidden: User "alice" cannot list resource "resourceclaims" in API group "resource.k8s.io" in the namespace "team-b"'
sed 's/namespace: dra-test/namespace: team-a/' "$SEEDS/07-resourceclaim-v1.yaml" > "$WORK/claim-a.yaml"
expect "view user cannot create (exact wording)" "$(alice create -f "$WORK/claim-a.yaml")" \
  'Error from server (Forbidden): error when creating "'"$WORK"'/claim-a.yaml": resourceclaims.resource.k8s.io is forbidden: User "alice" cannot create resource "resourceclaims" in API group "resource.k8s.io" in the namespace "team-a"'
expect "cluster-scoped create denied (exact wording)" "$(alice create -f "$SEEDS/03-deviceclass-gpu.yaml")" \
  'Error from server (Forbidden): error when creating "'"$SEEDS"'/03-deviceclass-gpu.yaml": deviceclasses.resource.k8s.io is forbidden: User "alice" cannot create resource "deviceclasses" in API group "resource.k8s.io" at the cluster scope'

# --- kubectl auth can-i: a matrix (admin asks as others through impersonation) ----------------
can() { kubectl --kubeconfig "$ADMIN" auth can-i "$@" 2>/dev/null; }
expect "can-i: alice list claims in team-a" "$(can list resourceclaims -n team-a --as alice)" "yes"
expect "can-i: alice get claims in team-a" "$(can get resourceclaims -n team-a --as alice)" "yes"
expect "can-i: alice create claims in team-a" "$(can create resourceclaims -n team-a --as alice)" "no"
expect "can-i: alice list claims in team-b" "$(can list resourceclaims -n team-b --as alice)" "no"
expect "can-i: alice create deviceclasses" "$(can create deviceclasses --as alice)" "no"
expect "can-i: alice list rolebindings (view has no rbac)" "$(can list rolebindings -n team-a --as alice)" "no"
expect "can-i: admin anything" "$(can '*' '*')" "yes"
expect "can-i: bob nothing" "$(can list pods -n team-a --as bob)" "no"
k create rolebinding bob-edit --clusterrole=edit --user=bob -n team-a >/dev/null
expect "can-i: edit user creates claims" "$(can create resourceclaims -n team-a --as bob)" "yes"
expect "can-i: edit user cannot create roles" "$(can create roles -n team-a --as bob)" "no"
expect "can-i: group grant" "$(k create clusterrolebinding devs-view --clusterrole=view --group=team-a-devs >/dev/null; can list deviceclasses --as carol --as-group team-a-devs)" "yes"
expect "can-i as alice herself" "$(kubectl --kubeconfig "$WORK/alice.kubeconfig" auth can-i list resourceclaims -n team-a 2>/dev/null)" "yes"
out=$(kubectl --kubeconfig "$WORK/alice.kubeconfig" auth can-i --list -n team-a 2>&1)
expect_line "can-i --list shows the view rule" "$(tr -s ' ' <<<"$out" | grep '^resourceclaims.resource.k8s.io ' | sed 's/ $//')" \
  "resourceclaims.resource.k8s.io [] [] [get list watch]"
expect "impersonation needs the verb" "$(alice get namespaces --as bob)" \
  'Error from server (Forbidden): users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope'

# --- ServiceAccounts and kubectl create token -------------------------------------------------
expect "create serviceaccount" "$(k create serviceaccount builder -n team-a)" "serviceaccount/builder created"
token=$(k create token builder -n team-a --duration 20m)
sa() { kubectl --kubeconfig "$ADMIN" --token "$token" "$@" 2>&1; }
out=$(sa auth whoami)
expect_line "token user" "$(tr -s ' ' <<<"$out")" "Username system:serviceaccount:team-a:builder"
expect "token without a binding is forbidden" "$(sa get pods -n team-a)" \
  'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:team-a:builder" cannot list resource "pods" in API group "" in the namespace "team-a"'
k create rolebinding builder-edit --clusterrole=edit --serviceaccount=team-a:builder -n team-a >/dev/null
expect "token with an edit binding creates" "$(sa create -f "$WORK/claim-a.yaml")" \
  "resourceclaim.resource.k8s.io/gpu-claim-v1 created"
expect "too short a token is refused" "$(k create token builder -n team-a --duration 1m)" \
  'error: failed to create token: TokenRequest.authentication.k8s.io "builder" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes'
k delete serviceaccount builder -n team-a >/dev/null
out=$(sa get resourceclaims -n team-a)
if unauthorized "$out"; then pass "deleting the ServiceAccount invalidates its token"; else fail "deleted ServiceAccount's token" "$out"; fi

# --- RBAC escalation prevention -------------------------------------------------------------
k create rolebinding dave-admin --clusterrole=admin --user=dave -n team-a >/dev/null
dave() { kubectl --kubeconfig "$ADMIN" --as dave "$@" 2>&1; }
expect "namespace admin binds view" "$(dave create rolebinding erin-view --clusterrole=view --user=erin -n team-a)" \
  "rolebinding.rbac.authorization.k8s.io/erin-view created"
out=$(dave create rolebinding dave-root --clusterrole=cluster-admin --user=dave -n team-a)
expect_line "namespace admin cannot bind cluster-admin" "$(head -1 <<<"$out")" \
  'error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io "dave-root" is forbidden: user "dave" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:'
expect_line "the refusal lists what is not held" "$out" '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'
expect "namespace admin creates a role it holds" "$(dave create role pod-reader --verb=get --resource=pods -n team-a)" \
  "role.rbac.authorization.k8s.io/pod-reader created"
out=$(dave create role too-much --verb='*' --resource=nodes -n team-a)
expect_line "namespace admin cannot create a role beyond its rights" "$(head -1 <<<"$out")" \
  'Error from server (Forbidden): roles.rbac.authorization.k8s.io "too-much" is forbidden: user "dave" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:'

# --- node restriction: node A may touch only its own slices -----------------------------------
"$QM_BIN" credential --data-dir "$WORK/data" --node gpu-node-a --server "$URL" --out "$WORK/node-a.kubeconfig"
nodea() { kubectl --kubeconfig "$WORK/node-a.kubeconfig" "$@" 2>&1; }
for part in certificate key; do
  kubectl --kubeconfig "$WORK/node-a.kubeconfig" config view --raw \
    -o jsonpath="{.users[0].user.client-$part-data}" | base64 -d > "$WORK/node-a.${part/certificate/crt}"
done
slice() {  # slice <name> <node>
  printf 'apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: %s\nspec:\n  driver: gpu.example.com\n  nodeName: %s\n  pool:\n    name: %s\n    generation: 1\n    resourceSliceCount: 1\n  devices:\n  - name: gpu-0\n' "$1" "$2" "$2"
}
slice slice-a gpu-node-a > "$WORK/slice-a.yaml"
slice slice-b gpu-node-b > "$WORK/slice-b.yaml"
slice slice-a gpu-node-b > "$WORK/slice-a-moved.yaml"
expect_line "whoami: node identity" "$(nodea auth whoami | tr -s ' ')" "Username system:node:gpu-node-a"
expect "node A publishes its own slice" "$(nodea create -f "$WORK/slice-a.yaml")" \
  "resourceslice.resource.k8s.io/slice-a created"
expect "node A cannot publish node B's slice" "$(nodea create -f "$WORK/slice-b.yaml")" \
  'Error from server (Forbidden): error when creating "'"$WORK"'/slice-b.yaml": resourceslices.resource.k8s.io "slice-b" is forbidden: node "gpu-node-a" may only create, update or delete ResourceSlices whose spec.nodeName is "gpu-node-a"'
k create -f "$WORK/slice-b.yaml" >/dev/null
expect "node A cannot patch node B's slice" \
  "$(nodea patch resourceslice slice-b --type merge -p '{"metadata":{"labels":{"x":"y"}}}')" \
  'Error from server (Forbidden): resourceslices.resource.k8s.io "slice-b" is forbidden: User "system:node:gpu-node-a" cannot get resource "resourceslices" in API group "resource.k8s.io" at the cluster scope: no relationship found between node '"'gpu-node-a'"' and this object'
expect "node A cannot patch node B's slice (raw PATCH, no read first)" \
  "$(curl -s --cacert "$WORK/data/pki/ca.crt" --cert "$WORK/node-a.crt" --key "$WORK/node-a.key" -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"labels":{"x":"y"}}}' "$URL/apis/resource.k8s.io/v1/resourceslices/slice-b" | jq -r .message)" \
  'resourceslices.resource.k8s.io "slice-b" is forbidden: node "gpu-node-a" may only create, update or delete ResourceSlices whose spec.nodeName is "gpu-node-a"'
expect "node A cannot replace node B's slice" "$(nodea replace -f "$WORK/slice-b.yaml")" \
  'Error from server (Forbidden): error when replacing "'"$WORK"'/slice-b.yaml": resourceslices.resource.k8s.io "slice-b" is forbidden: node "gpu-node-a" may only create, update or delete ResourceSlices whose spec.nodeName is "gpu-node-a"'
# Moving a slice to another node is refused before admission: nodeName is immutable.
expect "node A cannot move its slice to node B (json patch)" \
  "$(nodea patch resourceslice slice-a --type json -p '[{"op":"replace","path":"/spec/nodeName","value":"gpu-node-b"}]')" \
  'The ResourceSlice "slice-a" is invalid: spec.nodeName: Invalid value: field is immutable'
expect "node A cannot delete node B's slice" "$(nodea delete resourceslice slice-b)" \
  'Error from server (Forbidden): resourceslices.resource.k8s.io "slice-b" is forbidden: node "gpu-node-a" may only create, update or delete ResourceSlices whose spec.nodeName is "gpu-node-a"'
FS='spec.nodeName=gpu-node-a'
NODE_LIST_DENIED='can only list, watch or delete-collection resourceslices with the field selector spec.nodeName=gpu-node-a'
expect "node A cannot delete the whole collection" "$(nodea delete --raw /apis/resource.k8s.io/v1/resourceslices)" \
  'Error from server (Forbidden): resourceslices.resource.k8s.io is forbidden: User "system:node:gpu-node-a" cannot deletecollection resource "resourceslices" in API group "resource.k8s.io" at the cluster scope: node "gpu-node-a" '"$NODE_LIST_DENIED"
# --- node restriction of reads (the node authorizer): only what its node needs -----------------
expect "node A cannot list every slice" "$(nodea get resourceslices)" \
  'Error from server (Forbidden): resourceslices.resource.k8s.io is forbidden: User "system:node:gpu-node-a" cannot list resource "resourceslices" in API group "resource.k8s.io" at the cluster scope: node "gpu-node-a" '"$NODE_LIST_DENIED"
expect "node A lists its own slices by field selector" \
  "$(nodea get resourceslices --field-selector "$FS" -o name)" "resourceslice.resource.k8s.io/slice-a"
expect "node A cannot list by another node's selector" \
  "$(nodea get resourceslices --field-selector spec.nodeName=gpu-node-b -o name | head -1 | cut -c1-40)" \
  "Error from server (Forbidden): resources"
expect "node A reads its own slice" "$(nodea get resourceslice slice-a -o jsonpath='{.spec.nodeName}')" "gpu-node-a"
expect "node A cannot read node B's slice" "$(nodea get resourceslice slice-b)" \
  'Error from server (Forbidden): resourceslices.resource.k8s.io "slice-b" is forbidden: User "system:node:gpu-node-a" cannot get resource "resourceslices" in API group "resource.k8s.io" at the cluster scope: no relationship found between node '"'gpu-node-a'"' and this object'
expect "node A cannot list claims" "$(nodea get resourceclaims -A)" \
  'Error from server (Forbidden): resourceclaims.resource.k8s.io is forbidden: User "system:node:gpu-node-a" cannot list resource "resourceclaims" in API group "resource.k8s.io" at the cluster scope: node "gpu-node-a" may not list resourceclaims; it reads those of its pods'
expect "node A cannot list every pod" "$(nodea get pods -A)" \
  'Error from server (Forbidden): pods is forbidden: User "system:node:gpu-node-a" cannot list resource "pods" in API group "" at the cluster scope: node "gpu-node-a" can only list, watch or delete-collection pods with the field selector spec.nodeName=gpu-node-a'
expect "node A lists the pods bound to it" "$(nodea get pods -A --field-selector "$FS")" "No resources found"
expect "node A reads device classes and nodes" \
  "$(nodea get deviceclasses -o name >/dev/null && nodea get nodes -o name | grep -c Forbidden)" "0"
expect "delete by its selector removes only node A's own slice" \
  "$(nodea delete resourceslices --field-selector "$FS")" \
  'resourceslice.resource.k8s.io "slice-a" deleted'
expect "node B's slice survived" "$(k get resourceslice slice-b -o jsonpath='{.spec.nodeName}')" "gpu-node-b"
out=$(nodea create -f "$SEEDS/02-deviceclass-a100-80g.yaml")
expect "node cannot create device classes" "$out" \
  'Error from server (Forbidden): error when creating "'"$SEEDS"'/02-deviceclass-a100-80g.yaml": deviceclasses.resource.k8s.io is forbidden: User "system:node:gpu-node-a" cannot create resource "deviceclasses" in API group "resource.k8s.io" at the cluster scope'

# --- kubectl over TLS: watch, json patch, server-side apply as a token user -------------------
k apply -f "$SEEDS/03-deviceclass-gpu.yaml" >/dev/null
kubectl --kubeconfig "$ADMIN" get deviceclasses -w -o name > "$WORK/watch.txt" 2>&1 &
wpid=$!
sleep 1
k patch deviceclass gpu.nvidia.com --type json -p '[{"op":"add","path":"/metadata/labels","value":{"w":"1"}}]' >/dev/null
for _ in $(seq 1 50); do [ "$(grep -c . "$WORK/watch.txt")" -ge 2 ] && break; sleep 0.1; done
kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
expect "watch over TLS sees the patch" "$(grep -c 'deviceclass.resource.k8s.io/gpu.nvidia.com' "$WORK/watch.txt")" "2"

# --- audit trail ------------------------------------------------------------------------------
audit() { kubectl --kubeconfig "$ADMIN" get --raw "/apis/audit.quartermaster.io/v1/events?$1" 2>&1; }
sleep 0.5  # denials are written asynchronously (within ~200 ms)
expect "a change is audited with its user, verb, object and code" \
  "$(audit 'resource=namespaces&name=team-a' | jq -c '[.items[] | [.user.username, .verb, .resource, .name, .code]]')" \
  '[["admin","create","namespaces","team-a",201]]'
expect "a denial is audited" \
  "$(audit 'user=alice&resource=deviceclasses' | jq -c '[.items[] | [.verb, .code]]')" '[["create",403]]'
expect "node restriction denials are audited" \
  "$(audit 'user=system:node:gpu-node-a&name=slice-b' | jq -c '[.items[] | .code] | unique')" '[403]'
expect "kubectl create token is audited" \
  "$(audit 'resource=serviceaccounts&name=builder' | jq -c '[.items[] | select(.subresource == "token") | [.user.username, .verb, .code]] | unique')" \
  '[["admin","create",201]]'
expect "a bad token is audited as anonymous 401" \
  "$(audit 'user=system:anonymous' | jq -c '[.items[] | .code] | unique')" '[401]'
expect "deletes are audited (delete by node A)" \
  "$(audit 'user=system:node:gpu-node-a&name=slice-a' | jq -c '[.items[] | [.verb, .code]]')" \
  '[["create",201],["delete",200]]'
page1=$(audit 'user=admin&limit=2')
expect "paging: limit" "$(jq '.items | length' <<<"$page1")" "2"
token=$(jq -r '.metadata.continue' <<<"$page1")
page2=$(audit "user=admin&limit=2&continue=$token")
expect "paging: continue starts after the last id" \
  "$(jq -n --argjson a "$page1" --argjson b "$page2" '$b.items[0].id > $a.items[1].id')" "true"
expect "time filter: nothing before 2000" "$(audit 'until=2000-01-01T00:00:00Z' | jq '.items | length')" "0"
expect "a view user cannot read the audit trail" \
  "$(alice get --raw /apis/audit.quartermaster.io/v1/events)" \
  'Error from server (Forbidden): events.audit.quartermaster.io is forbidden: User "alice" cannot list resource "events" in API group "audit.quartermaster.io" at the cluster scope'

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
