#!/usr/bin/env bash
# Configures and builds Quartermaster into build/ (two parallel jobs: the machines have 2 cores),
# then the web UI into build/web (npm ci from web/package-lock.json, then vite; skipped when up
# to date), which build/server/quartermaster serves at /. QM_SKIP_WEB=1 builds only the server.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${QM_BUILD_TYPE:-RelWithDebInfo}" \
  ${QM_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "${QM_JOBS:-2}"
if [ -z "${QM_SKIP_WEB:-}" ]; then
  bash web/build.sh "$PWD/build/web"
fi
