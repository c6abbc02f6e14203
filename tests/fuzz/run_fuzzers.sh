#!/usr/bin/env bash
# Builds the REST-layer libFuzzer targets (tests/fuzz/*_fuzz.cc, all but the CEL one, which
# run_cel_fuzz.sh builds) with clang (ASan + UBSan) and runs each for a bounded time.
#
# Usage: run_fuzzers.sh <source dir> <seconds per target> [target...]
#   seconds 0: build only (into QM_FUZZ_BUILD_DIR, to keep the binaries)
#   targets: http_request_fuzz object_decode_fuzz patch_fuzz selector_fuzz quantity_fuzz
#            token_fuzz (default: all)
#
# The src/ files the targets need are compiled once into one archive (ninja, header
# dependencies tracked) and each target links against it. The build holds $QM_BUILD_LOCK
# (default /tmp/qm-build.lock) so it does not compete with other builds on this machine.
# Environment:
#   QM_FUZZ_BUILD_DIR  keep objects and binaries there for incremental rebuilds (default: a
#                      temporary directory, removed on exit)
#   QM_FUZZ_JOBS       parallel compiles (default 2)
#   QM_FUZZ_ALLOW_5XX  set to 1 to report internal errors (5xx) once and keep fuzzing
#                      instead of stopping at the first (see fuzz_util.h)
# Each target starts from tests/fuzz/corpus/<target>/ (copied; the run's corpus is thrown
# away) with tests/fuzz/<target>.dict when present, and runs with -timeout=5 (a hang) and
# -rss_limit_mb=2048. Prints executions and crashes per target and a summary table; a crashing
# input is printed in hex and kept under /tmp/qm-fuzz-crashes-*. Exits 1 on any crash.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 <source dir> <seconds per target> [target...]" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
seconds=$2
shift 2
all_targets=(http_request_fuzz object_decode_fuzz patch_fuzz selector_fuzz quantity_fuzz token_fuzz)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  if [[ ! -f "$src/tests/fuzz/$t.cc" ]]; then
    echo "unknown target $t (known: ${all_targets[*]})" >&2
    exit 2
  fi
done

work=$(mktemp -d /tmp/qm-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
build=${QM_FUZZ_BUILD_DIR:-$work/build}
mkdir -p "$build"
build=$(cd "$build" && pwd)

# --- build -------------------------------------------------------------------------------
# The archive holds what the REST layer links, minus the transport (http_server.cc: Beast/asio
# sessions, metrics.cc: prometheus) and files no target reaches (the scheduler, the allocator,
# certificates): a third of the compile time. Should a target come to need one of those, the
# link fails and the build is retried with every file (and says so).
transport=(api/rest/http_server.cc api/rest/metrics.cc)
skipped=(service/scheduler.cc service/scheduler_binder.cc service/scheduler_claims.cc
  service/scheduler_eviction.cc service/scheduler_queue.cc service/scheduler_state.cc
  service/placement.cc allocator/allocator.cc auth/pki.cc common/logging.cc)
lib_sources() {  # $1: "all" to keep the skipped files too (never the transport)
  local dir f rel
  for dir in common model model/json cel allocator auth store service api/rest; do
    for f in "$src/src/$dir"/*.cc; do
      rel=${f#"$src/src/"}
      [[ " ${transport[*]} " == *" $rel "* ]] && continue
      [[ $1 != all && " ${skipped[*]} " == *" $rel "* ]] && continue
      echo "$f"
    done
  done
}

absl_libs=""
for l in statusor status cord cordz_info cord_internal cordz_functions exponential_biased \
  cordz_handle bad_optional_access str_format_internal strerror bad_variant_access \
  synchronization stacktrace symbolize debugging_internal demangle_internal graphcycles_internal \
  malloc_internal time strings throw_delegate strings_internal base raw_logging_internal \
  log_severity spinlock_wait civil_time time_zone int128; do
  absl_libs+=" -labsl_$l"
done

obj() {  # object path for a source path
  local rel=${1#"$src"/}
  echo "obj/${rel%.cc}.o"
}

write_ninja() {  # $1: "all" or "subset"
  local f o objs=() util
  echo "cxx = clang++"
  echo "flags = -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined" \
    "-fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link -DSPDLOG_COMPILED_LIB" \
    "-DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED -I$src/src -I$src/tests/fuzz"
  echo "libs = -lre2 -lssl -lcrypto -lspdlog -lfmt$absl_libs -lpthread"
  echo "rule pch"
  echo "  command = \$cxx \$flags -MD -MF \$out.d -x c++-header \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  echo "  description = PCH \$in"
  echo "rule cc"
  echo "  command = \$cxx \$flags -include-pch fuzz_pch.h.pch -MD -MF \$out.d -c \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  echo "  description = CC \$in"
  echo "rule ar"
  echo "  command = rm -f \$out && ar qcs \$out \$in"
  echo "  description = AR \$out"
  echo "rule link"
  echo "  command = \$cxx \$flags -fsanitize=fuzzer \$in -o \$out \$libs"
  echo "  description = LINK \$out"
  echo "build fuzz_pch.h.pch: pch $src/tests/fuzz/fuzz_pch.h"
  while read -r f; do
    o=$(obj "$f")
    objs+=("$o")
    echo "build $o: cc $f | fuzz_pch.h.pch"
  done < <(lib_sources "$1")
  echo "build libqm_fuzz.a: ar ${objs[*]}"
  util=$(obj "$src/tests/fuzz/fuzz_util.cc")
  echo "build $util: cc $src/tests/fuzz/fuzz_util.cc | fuzz_pch.h.pch"
  for t in "${all_targets[@]}"; do
    o=$(obj "$src/tests/fuzz/$t.cc")
    echo "build $o: cc $src/tests/fuzz/$t.cc | fuzz_pch.h.pch"
    echo "build $t: link $o $util libqm_fuzz.a"
  done
}

build_all() {  # $1: "all" or "subset"; under the lock, so runs sharing a build dir take turns
  (
    flock 9
    write_ninja "$1" > "$build/build.ninja"
    ninja -C "$build" -j "${QM_FUZZ_JOBS:-2}" "${targets[@]}" > "$work/build.log" 2>&1
  ) 9> "${QM_BUILD_LOCK:-/tmp/qm-build.lock}"
}

start=$(date +%s)
echo "building ${targets[*]} in $build (waiting for ${QM_BUILD_LOCK:-/tmp/qm-build.lock})"
if ! build_all subset; then
  if grep -q 'undefined reference' "$work/build.log"; then
    grep 'undefined reference' "$work/build.log" | head -5
    echo "a target needs a file run_fuzzers.sh skips: building with every file" \
      "(trim skipped= in run_fuzzers.sh)"
    build_all all || { tail -50 "$work/build.log"; echo "build failed" >&2; exit 1; }
  else
    tail -50 "$work/build.log"
    echo "build failed" >&2
    exit 1
  fi
fi
echo "build: $(( $(date +%s) - start )) s"
if [[ $seconds == 0 ]]; then
  echo "built in $build (0 seconds: nothing run)"
  exit 0
fi

# --- run ---------------------------------------------------------------------------------
# UBSan findings abort (-fno-sanitize-recover) with a stack, like ASan's.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
declare -A execs crashes
failed=0
keep=""
for t in "${targets[@]}"; do
  corpus="$work/corpus/$t"
  mkdir -p "$corpus" "$work/artifacts"
  if [[ -d "$src/tests/fuzz/corpus/$t" ]]; then cp "$src/tests/fuzz/corpus/$t"/* "$corpus/"; fi
  args=(-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=8192
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$t-")
  [[ -f "$src/tests/fuzz/$t.dict" ]] && args+=(-dict="$src/tests/fuzz/$t.dict")
  rc=0
  "$build/$t" "${args[@]}" "$corpus" > "$work/$t.log" 2>&1 || rc=$?
  n=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$work/$t.log" | tail -1)
  execs[$t]=${n:-0}
  found=$(find "$work/artifacts" -name "$t-*" -type f | sort)
  if [[ $rc -ne 0 || -n "$found" ]]; then
    crashes[$t]=$(printf '%s\n' "$found" | grep -c . || true)
    [[ ${crashes[$t]} -eq 0 ]] && crashes[$t]=1
    failed=1
    [[ -z "$keep" ]] && keep=$(mktemp -d /tmp/qm-fuzz-crashes-XXXXXX)
    echo "== $t: CRASH after ${execs[$t]} executions (exit $rc)"
    grep -v '^#[0-9]' "$work/$t.log" | grep -v -e '^INFO:' -e 'NEW_FUNC' | tail -60
    for a in $found; do
      cp "$a" "$keep/"
      echo "-- input $(basename "$a") ($(stat -c %s "$a") bytes), hex:"
      head -c 4096 "$a" | od -An -tx1 -v | tr -d ' \n' | fold -w 128
      echo
    done
    if [[ -n ${QM_FUZZ_BUILD_DIR:-} ]]; then
      echo "   reproduce: $build/$t $keep/<input>"
    else
      echo "   reproduce: QM_FUZZ_BUILD_DIR=DIR $0 $src 0 $t; DIR/$t $keep/<input>"
    fi
  else
    crashes[$t]=0
    echo "== $t: ${execs[$t]} executions, 0 crashes (${seconds} s)"
  fi
  # Internal errors seen under QM_FUZZ_ALLOW_5XX (one line per kind, with the input in hex).
  grep '^FUZZ internal error' "$work/$t.log" || true
done

echo
printf '%-22s %14s %8s %10s\n' target executions crashes "exec/s"
total=0
for t in "${targets[@]}"; do
  rate=-  # a crash ends a target early
  [[ ${crashes[$t]} -eq 0 ]] && rate=$(( execs[$t] / seconds ))
  printf '%-22s %14s %8s %10s\n' "$t" "${execs[$t]}" "${crashes[$t]}" "$rate"
  total=$(( total + execs[$t] ))
done
printf '%-22s %14s\n' total "$total"
[[ -n "$keep" ]] && echo "crashing inputs kept in $keep"
exit $failed
