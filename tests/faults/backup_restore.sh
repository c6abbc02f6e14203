#!/usr/bin/env bash
# Backup and restore, exactly as docs/reliability.md tells an operator: `quartermaster backup`
# while the server runs, more writes after it (the restore will not have them) and a second
# backup while they run, the server stopped, `quartermaster restore` into a new data directory with the old one's
# credentials copied over, and the restored server started. Checks that:
#   - every object is back: the lists of every kind equal those at the backup by uid and
#     resourceVersion (the bootstrap RBAC objects, which every start reconciles, by uid);
#   - `fault_load verify` passes for every write acknowledged before the backup: nothing lost,
#     every pod decided, no device held twice, the device ledger equals the claims;
#   - the old credentials (CA, admin token) work against the restored server;
#   - a watch resuming at a resourceVersion from before the restore, from the backup or from
#     the writes after it, gets 410 Gone; a list then answers at a newer resourceVersion and a
#     watch from there sees a new write;
#   - new writes get resourceVersions above every one the old server handed out;
#   - the scheduler binds a new pod;
#   - the backup taken under load restores consistently: every write acknowledged before it
#     started is there, no device held twice, the ledger equals the claims, every pod decided.
# Negative control: the same restore with --bump-revision 0 must fail the 410 and
# resourceVersion checks (a watch from after the backup silently waits; revisions repeat).
#
# Usage: backup_restore.sh <quartermaster binary> <fault_load binary> [load seconds (4)]
set -uo pipefail
QM_BIN=$1
LOAD=$2
SECONDS_OF_LOAD=${3:-4}
source "$(dirname "$0")/lib.sh" qm-backup

CLAIMS=/apis/resource.k8s.io/v1/namespaces/faults/resourceclaims

# Every object of every kind the server lists: kind, namespace, name, uid, resourceVersion.
snapshot() {
  local r
  for r in $(kubectl api-resources --verbs=list -o name); do
    # The ClusterSummary is computed from what the server holds, not stored: no backup has it.
    [ "$r" = clustersummaries.admin.quartermaster.io ] && continue
    kubectl get "$r" -A -o json | jq -r --arg r "$r" \
      '.items[] | "\($r) \(.metadata.namespace // "-") \(.metadata.name) \(.metadata.uid) \(.metadata.resourceVersion)"'
  done | sort
}
# The same without the resourceVersions of the bootstrap RBAC objects, which every start
# applies again (new resourceVersions, same uids).
comparable() {
  awk '$1 ~ /^clusterrole/ && ($3 ~ /^system:/ || $3 ~ /^(cluster-admin|admin|edit|view)$/) { $5 = "-" } { print }'
}
list_rv() { kubectl get --raw "$CLAIMS?limit=1" | jq -r .metadata.resourceVersion; }
# True when a watch resuming at resourceVersion $1 is told 410 Gone at once.
watch_gets_410() {
  local first
  first=$(kubectl get --raw "$CLAIMS?watch=true&resourceVersion=$1&timeoutSeconds=3" 2>/dev/null | head -1)
  [ "$(jq -r 'select(.type == "ERROR") | .object.code' <<<"$first" 2>/dev/null)" = 410 ]
}
new_claim_rv() {  # creates claim $1; prints its resourceVersion
  kubectl create -o jsonpath='{.metadata.resourceVersion}' -f - <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1, namespace: faults}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: fault-gpu}}]}}
EOF
}
stop_server() {
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""
}
# The documented restore of $WORK/backup.dump into the new data directory $WORK/data (the
# previous one moved to $1 first), then the server started on it. Extra arguments go to restore.
restore_into_new_data_dir() {
  local old=$1
  shift
  mv "$WORK/data" "$old"
  "$QM_BIN" restore --data-dir "$WORK/data" --input "$WORK/backup.dump" "$@" || fail "restore"
  cp -a "$old/pki" "$old/admin.token" "$old/service-account.key" "$WORK/data/"
  start_server
}

start_server
# shellcheck disable=SC2046
"$LOAD" setup $(conn) --nodes 8 --devices 4 --probe-devices 4 >/dev/null || exit 1

# Writes before the backup, all of which the restore must bring back.
# shellcheck disable=SC2046
"$LOAD" load $(conn) --journal "$WORK/journal.1" --prefix a --seconds "$SECONDS_OF_LOAD" \
  --concurrency 8 > "$WORK/load.1.out" 2>&1 || fail "load: $(cat "$WORK/load.1.out")"
verify_journals "before the backup" control
echo "before the backup: $VERIFY"

# The backup, taken while the server runs. Nothing writes now, so the lists before and after it
# are what the dump holds (the server's own background writes would show as a difference).
for attempt in 1 2 3; do
  before=$(snapshot)
  t0=$(now_ms)
  "$QM_BIN" backup --data-dir "$WORK/data" --output "$WORK/backup.dump" || fail "backup"
  backup_ms=$(( $(now_ms) - t0 ))
  [ "$(snapshot)" = "$before" ] && break
  [ "$attempt" = 3 ] && fail "the objects kept changing during the backup"
done
rv_backup=$(list_rv)
echo "backup: $(wc -l <<<"$before") objects at resourceVersion $rv_backup," \
  "$(stat -c %s "$WORK/backup.dump") bytes in ${backup_ms} ms"

# Writes after the backup: acknowledged by the old server, absent from the restore. A second
# backup is taken while they run.
# shellcheck disable=SC2046
"$LOAD" load $(conn) --journal "$WORK/after-backup" --prefix b --seconds 3 --concurrency 8 \
  > "$WORK/load.2.out" 2>&1 &
load_pid=$!
sleep 1
# Every write acknowledged before the backup starts is in it; later ones may be or not.
acked_before=$(wc -l < "$WORK/after-backup")
"$QM_BIN" backup --data-dir "$WORK/data" --output "$WORK/busy.dump" > /dev/null || fail "backup under load"
wait "$load_pid" || fail "load: $(cat "$WORK/load.2.out")"
rv_old_newest=$(list_rv)
stop_server

t0=$(now_ms)
restore_into_new_data_dir "$WORK/data-original"
restore_ms=$(( $(now_ms) - t0 ))

# Every object back.
after=$(snapshot)
if ! diff <(comparable <<<"$before") <(comparable <<<"$after") > "$WORK/snapshot.diff"; then
  cat "$WORK/snapshot.diff"
  fail "the restored objects differ from those at the backup"
fi
verify_journals "after the restore" control
# The old credentials work: the old CA verifies the restored server, the old token is admin.
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/data-original/pki/ca.crt" \
  -H "Authorization: Bearer $(cat "$WORK/data-original/admin.token")" "$URL$CLAIMS")
[ "$code" = 200 ] || fail "the old credentials are refused by the restored server ($code)"
# Watches from before the restore: 410 Gone, from the backup's revision and from later ones.
watch_gets_410 "$rv_backup" || fail "a watch from the backup's resourceVersion $rv_backup was not told 410"
watch_gets_410 "$rv_old_newest" || fail "a watch from resourceVersion $rv_old_newest (after the backup) was not told 410"
# The relist: a list answers at a revision a watch can start from, and that watch sees news.
rv_list=$(list_rv)
[ "$rv_list" -gt "$rv_old_newest" ] || fail "the list's resourceVersion $rv_list is not above $rv_old_newest"
kubectl get --raw "$CLAIMS?watch=true&resourceVersion=$rv_list&timeoutSeconds=5" > "$WORK/relist-watch.out" 2>&1 &
relist_watch=$!
sleep 1
rv_new=$(new_claim_rv after-restore) || fail "a write after the restore failed"
[ "$rv_new" -gt "$rv_old_newest" ] ||
  fail "a new write got resourceVersion $rv_new, not above the old server's $rv_old_newest"
wait "$relist_watch"
[ "$(jq -r 'select(.type == "ADDED") | .object.metadata | "\(.name) \(.resourceVersion)"' \
  "$WORK/relist-watch.out")" = "after-restore $rv_new" ] || fail "the watch after the relist missed the new claim: $(cat "$WORK/relist-watch.out")"
grep -q '"ERROR"' "$WORK/relist-watch.out" && fail "the watch after the relist ended with an error: $(cat "$WORK/relist-watch.out")"
# shellcheck disable=SC2046
probe=$("$LOAD" probe $(conn) --journal "$WORK/journal.probe" --prefix probe --timeout 30) ||
  fail "no pod was bound after the restore: $probe"
echo "restore: $(wc -l <<<"$after") objects back in ${restore_ms} ms (restore and start);" \
  "old watches at $rv_backup and $rv_old_newest got 410, relisted at $rv_list, new write at $rv_new;" \
  "${probe#probe: }; $VERIFY"

# The backup taken under load: consistent (no device held twice, the ledger equals the claims,
# every pod decided by the restored scheduler), with every write acknowledged before it.
stop_server
mv "$WORK/backup.dump" "$WORK/quiet.dump"
mv "$WORK/busy.dump" "$WORK/backup.dump"
restore_into_new_data_dir "$WORK/data-restored" > /dev/null
mv "$WORK/journal.probe" "$WORK/probe-journal"  # the first restored server's writes
{
  head -n "$acked_before" "$WORK/after-backup"
  tail -n +"$((acked_before + 1))" "$WORK/after-backup" | sed 's/^ack /unknown /'
} > "$WORK/journal.2"
verify_journals "after restoring the backup taken under load"
echo "backup under load: restored; $VERIFY"

# Negative control: without the revision bump the checks above must fail.
stop_server
mv "$WORK/quiet.dump" "$WORK/backup.dump"
restore_into_new_data_dir "$WORK/data-restored-2" --bump-revision 0 > /dev/null
watch_gets_410 "$rv_old_newest" && fail "control: without the bump a watch from after the backup got 410 anyway"
rv_control=$(new_claim_rv control)
[ "$rv_control" -gt "$rv_old_newest" ] && fail "control: without the bump a new write got $rv_control > $rv_old_newest"
echo "control (--bump-revision 0): a watch at $rv_old_newest waited silently instead of 410, a new write reused resourceVersion $rv_control: both caught"
echo "backup and restore: $(wc -l <<<"$before") objects, $(grep -c '^ack ' "$WORK/journal.1") acknowledged writes before the backup, 0 lost, 0 doubles, 0 ledger mismatches; backup ${backup_ms} ms, restore and start ${restore_ms} ms"
