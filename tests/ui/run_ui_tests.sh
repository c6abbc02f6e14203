#!/usr/bin/env bash
# Browser tests of the web UI: playwright-core drives Debian's Chromium (headless) against a real
# quartermaster with its embedded PostgreSQL and the sample inventory (--sample-inventory, as
# scripts/run.sh starts it), and kubectl checks what the UI changed.
# Usage: run_ui_tests.sh <path to quartermaster> <web source dir> <built UI dir> <seeds dir>
#        <screenshot dir>
set -euo pipefail
QM_BIN=$(realpath "$1")
WEB_SRC=$(realpath "$2")
WEB_ROOT=$(realpath -m "$3")
SEEDS=$(realpath "$4")
SHOTS=$(realpath -m "$5")
CHROMIUM=${QM_CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "ui tests: $CHROMIUM is missing (scripts/install-deps.sh installs chromium)"; exit 1; }
command -v kubectl >/dev/null || { echo "ui tests: kubectl is not on PATH"; exit 1; }

# The UI and the npm packages (npm ci from the lock file): built here when missing or stale.
bash "$WEB_SRC/build.sh" "$WEB_ROOT"

source "$(dirname "$0")/../e2e/lib.sh" qm-ui
start_server --sample-inventory --web-root "$WEB_ROOT"
CA="$WORK/data/pki/ca.crt"

# Browsers resume TLS sessions; a resumed handshake must succeed (client CA configured).
hostport=${URL#https://}
# (TLS 1.3 sends the session ticket after the handshake: keep the first connection open a moment.)
sleep 1 | openssl s_client -connect "$hostport" -CAfile "$CA" -sess_out "$WORK/tls.sess" \
  >/dev/null 2>&1 || true
resumed=$(openssl s_client -connect "$hostport" -CAfile "$CA" -sess_in "$WORK/tls.sess" \
  </dev/null 2>/dev/null || true)
if ! grep -q '^Reused' <<<"$resumed"; then
  echo "FAIL: the server does not resume TLS sessions"
  exit 1
fi
echo "ok:   TLS sessions resume"

# A view-only identity: a ServiceAccount bound to the built-in view ClusterRole.
kubectl create serviceaccount ui-viewer -n default >/dev/null
kubectl create clusterrolebinding ui-viewer --clusterrole=view \
  --serviceaccount=default:ui-viewer >/dev/null
VIEW_TOKEN=$(kubectl create token ui-viewer -n default --duration 1h)

# This run's screenshots only (a failure-N.png of an earlier run would read as this run's).
mkdir -p "$SHOTS"
find "$SHOTS" -maxdepth 1 -type f -name '*.png' -delete
export QM_URL="$URL" QM_ADMIN_TOKEN="$(cat "$WORK/data/admin.token")" QM_VIEW_TOKEN="$VIEW_TOKEN"
export QM_SHOTS="$SHOTS" QM_SEEDS="$SEEDS" QM_CHROMIUM="$CHROMIUM" QM_WORK="$WORK"
export QM_WEB_SRC="$WEB_SRC"
node "$(dirname "$0")/ui_test.mjs"
