#!/usr/bin/env bash
# The web UI at scale (docs/ui.md "Measured"): starts quartermaster with its embedded PostgreSQL
# and the sample inventory, adds NODES nodes with 8 GPUs each (ResourceSlices as the sample's,
# through the REST API), and measures in headless Chromium the first meaningful render of the
# Overview, Inventory and Device classes pages (from navigation to the numbers on screen), RUNS
# times each; prints the median.
# Usage: bench/ui_scale.sh [NODES=5000] [RUNS=3]   (after scripts/build.sh)
# QM_WEB_BEFORE=<dir of another UI build> times that build too, interleaved, on the same data.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-5000}
RUNS=${2:-3}
export QM_BIN=$(realpath build/server/quartermaster)
source tests/e2e/lib.sh qm-ui-scale
start_server --sample-inventory --web-root "$(realpath build/web)"
# The seed claim and its pod (allocated before the fleet arrives): what Assignments shows.
for f in 01-namespace.yaml 04-resourceclaim-v1beta1.yaml 05-pod-shared-claim.yaml; do
  kubectl apply -f "tests/testdata/seeds/$f" >/dev/null
done
export QM_URL="$URL" QM_ADMIN_TOKEN="$(cat "$WORK/data/admin.token")" QM_NODES="$NODES"
export QM_RUNS="$RUNS" QM_CHROMIUM="${QM_CHROMIUM:-/usr/bin/chromium}"
export QM_WEB_SRC="$(realpath web)" NODE_EXTRA_CA_CERTS="$WORK/data/pki/ca.crt"
export QM_WEB_BEFORE="${QM_WEB_BEFORE:+$(realpath "$QM_WEB_BEFORE")}"
node bench/ui_scale.mjs
