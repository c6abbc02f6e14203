#!/usr/bin/env bash
# Builds the web UI into OUT_DIR (default: ../build/web), which `quartermaster` serves at `/`.
# Installs the npm packages from package-lock.json (npm ci) when node_modules is missing or older
# than the lock file, and skips the build when OUT_DIR is newer than every source.
set -euo pipefail
cd "$(dirname "$0")"
out=$(realpath -m "${1:-../build/web}")
if ! command -v npm >/dev/null 2>&1; then
  echo "web/build.sh: npm is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
if [ -f "$out/index.html" ] && [ -z "$(find src index.html package.json package-lock.json \
    vite.config.ts tsconfig.json -newer "$out/index.html" -print -quit)" ]; then
  echo "web/build.sh: $out is up to date"
  exit 0
fi
node_modules/.bin/tsc --noEmit -p .
node_modules/.bin/vite build --logLevel warn --outDir "$out" --emptyOutDir
echo "web/build.sh: built $out"
