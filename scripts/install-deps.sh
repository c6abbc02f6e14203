#!/usr/bin/env bash
# Installs every Debian package Quartermaster needs to build, run and test.
# Idempotent; run as root (or with sudo available) on a bare Debian 12 machine.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  clang clang-format clang-tidy libclang-rt-14-dev
  libpqxx-dev libpq-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libabsl-dev libre2-dev prometheus-cpp-dev libcurl4-openssl-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libyaml-cpp-dev
  libboost-dev libboost-system-dev libssl-dev openssl jq libjemalloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  postgresql-15 postgresql-client-15
  chromium

)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js (the web UI's build, scripts/build.sh, and its browser tests) may come from NodeSource
# (which bundles npm); only ask Debian for it when absent. Chromium (above) runs the browser tests
# headless; playwright-core never downloads a browser of its own.
if ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
