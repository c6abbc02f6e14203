#!/usr/bin/env bash
# Configures and builds Quartermaster into build/ (two parallel jobs: the machines have 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${QM_BUILD_TYPE:-RelWithDebInfo}" \
  ${QM_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "${QM_JOBS:-2}"
