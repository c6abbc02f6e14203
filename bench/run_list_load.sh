#!/usr/bin/env bash
# Full lists at scale: starts a fresh quartermaster (embedded PostgreSQL, TLS, a bearer token),
# creates --nodes nodes with one ResourceSlice of 8 devices each through REST (scheduler_load's
# setup, 10 pods scheduled after it), then times GET of every Node, every ResourceSlice as v1
# and as v1beta1 (converted per item), and the slices of one node by field selector, --repeat
# times each, with the server's CPU for each request and its resident memory at the end.
# Usage: bash bench/run_list_load.sh [--nodes 20000] [--repeat 3]. After scripts/build.sh.
# QM_BIN runs another server binary (A/B comparisons).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=20000
repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/qm-list-XXXXXX)
chmod 755 "$work"
${QM_BIN:-build/server/quartermaster} --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 \
  --data-dir "$work/data" --log-level warn > "$work/out" 2> "$work/err" &
pid=$!
trap 'kill -TERM $pid; wait $pid; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do grep -q '^LISTENING ' "$work/out" && break; sleep 0.1; done
url=$(sed -n 's/^LISTENING //p' "$work/out")
build/bench/scheduler_load --url "$url" --token-file "$work/data/admin.token" \
  --ca-file "$work/data/pki/ca.crt" --nodes "$nodes" --devices 8 --warmup 0 --measured 10 |
  grep '^setup'
source bench/cpu.sh
# The token goes to curl in a header file, not on its command line.
printf 'Authorization: Bearer %s\n' "$(cat "$work/data/admin.token")" > "$work/auth"
chmod 600 "$work/auth"
node="scheduler-perf-dra-$((nodes / 2))"
for path in /api/v1/nodes /apis/resource.k8s.io/v1/resourceslices \
  /apis/resource.k8s.io/v1beta1/resourceslices \
  "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D$node"; do
  for _ in $(seq 1 "$repeat"); do
    read -r s0 p0 < <(cpu_ticks "$pid")
    line=$(curl -sS -o "$work/list.json" -w '%{http_code} %{size_download} %{time_total}' \
      --cacert "$work/data/pki/ca.crt" -H "@$work/auth" "$url$path")
    read -r s1 p1 < <(cpu_ticks "$pid")
    read -r code size secs <<< "$line"
    [ "$code" = 200 ] || { echo "GET $path: HTTP $code" >&2; exit 1; }
    printf 'GET %s: %s bytes in %s ms, ' "$path" "$size" "$(awk -v s="$secs" 'BEGIN {printf "%.0f", s * 1000}')"
    cpu_report "$s0" "$p0" "$s1" "$p1" "cpu"
  done
done
memory_report "$pid"
