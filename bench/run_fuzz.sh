#!/usr/bin/env bash
# Runs every REST-layer libFuzzer target (tests/fuzz/run_fuzzers.sh: HTTP requests, object
# decoding, patches, selectors, quantities, tokens) for [seconds] each (default 60) and prints
# executions and crashes per target and in total. Usage: bench/run_fuzz.sh [seconds] [target...]
# Builds into build/fuzz (kept: a second run only rebuilds what changed); exits 1 on a crash.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
[[ $# -gt 0 ]] && shift
export QM_FUZZ_BUILD_DIR=${QM_FUZZ_BUILD_DIR:-$root/build/fuzz}
exec "$root/tests/fuzz/run_fuzzers.sh" "$root" "$seconds" "$@"
