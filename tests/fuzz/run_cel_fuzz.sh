#!/usr/bin/env bash
# Builds the CEL fuzz target (parse + evaluate) with clang's libFuzzer (ASan + UBSan) and runs it for a bounded
# time. Usage: run_cel_fuzz.sh <source dir> <seconds>. Fails on any crash, hang (5 s per
# input), leak or memory blow-up (1 GiB).
set -euo pipefail
src=$1
seconds=${2:-30}
work=$(mktemp -d /tmp/qm-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src/src" "$src/tests/fuzz/cel_fuzz.cc" "$src"/src/cel/*.cc "$src/src/common/quantity.cc" \
  "$src/src/common/semver.cc" "$src/src/common/utf8.cc" -lre2 -labsl_strings -labsl_str_format_internal -labsl_status \
  -labsl_statusor -labsl_int128 -labsl_throw_delegate -labsl_time -labsl_time_zone -o "$work/cel_fuzz"
mkdir -p "$work/corpus"
# Seed corpus: real selectors.
printf '%s' 'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"' > "$work/corpus/1"
printf '%s' 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0' > "$work/corpus/2"
printf '%s' '[1, 2u, 3.5, "s", b"x", r"\d", {1: [true, null]}].all(x, x != 0 || has(x.f))' > "$work/corpus/3"
printf '%s' 'cel.bind(a, device.attributes["d"].?x.orValue(1), a > 0 ? a : -a)' > "$work/corpus/4"
"$work/cel_fuzz" "$work/corpus" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=1024 \
  -max_len=4096 -print_final_stats=1 2>&1 | tail -20
