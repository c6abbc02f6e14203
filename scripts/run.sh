#!/usr/bin/env bash
# One command from a bare machine to a running service: installs the Debian packages, builds,
# and starts quartermaster with its embedded PostgreSQL (data in ./qm-data) and the sample
# inventory loaded. Extra arguments go to quartermaster (see `--help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec build/server/quartermaster --sample-inventory --data-dir "${QM_DATA_DIR:-qm-data}" "$@"
