#!/usr/bin/env bash
# Clang's thread-safety analysis over every translation unit of src/ and server/: each .cc is
# parsed (clang++ -fsyntax-only, no code generated) with the include paths and definitions the
# build uses (compile_commands.json) and -Wthread-safety -Wthread-safety-beta -Werror, so an
# ABSL_GUARDED_BY member touched without its mutex, a ...Locked function called without the lock,
# a lock not released on some path, or an annotation on a mutex that is not a capability fails
# the test. Every other warning clang reports under the project's -Wall -Wextra fails it too (but
# -Wmissing-field-initializers, see below).
#
# Usage: thread_safety.sh <build dir> <source dir> [file.cc...]
#   files: check only these (paths relative to the source dir); default every .cc of the build
#          under src/ and server/
# Environment:
#   QM_LINT_JOBS  parallel clang processes (default 2; CTest reserves 2 processors for it)
#   CLANGXX       the compiler (default clang++)
# Prints the diagnostics of each failing file and a summary; exits 1 if any file failed.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 <build dir> <source dir> [file.cc...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
shift 2
clangxx=${CLANGXX:-clang++}
jobs=${QM_LINT_JOBS:-2}
db=$build/compile_commands.json

if ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "thread_safety: $clangxx not found (scripts/install-deps.sh installs clang)" >&2
  exit 1
fi
if [[ ! -f $db ]]; then
  echo "thread_safety: $db missing (CMAKE_EXPORT_COMPILE_COMMANDS is ON in CMakeLists.txt)" >&2
  exit 1
fi

work=$(mktemp -d /tmp/qm-thread-safety-XXXXXX)
trap 'rm -rf "$work"' EXIT

# One line per translation unit: "<file>\t<command>" for the files wanted.
jq -r --arg src "$src" '.[] | select(.file | startswith($src + "/src/") or startswith($src + "/server/"))
  | select(.file | endswith(".cc")) | "\(.file)\t\(.directory)\t\(.command)"' "$db" |
  sort >"$work/all"
if [[ $# -gt 0 ]]; then
  : >"$work/units"
  for f in "$@"; do
    if ! grep -q "^$src/$f"$'\t' "$work/all"; then
      echo "thread_safety: $f is not in $db" >&2
      exit 2
    fi
    grep "^$src/$f"$'\t' "$work/all" >>"$work/units"
  done
else
  cp "$work/all" "$work/units"
fi
count=$(wc -l <"$work/units")
if [[ $count -eq 0 ]]; then
  echo "thread_safety: no translation units under $src/src or $src/server in $db" >&2
  exit 1
fi

# check_unit <index>: runs clang on line <index> of units; the output goes to <index>.log and a
# failure leaves <index>.failed.
check_unit() {
  local line file dir cmd
  line=$(sed -n "${1}p" "$work/units")
  IFS=$'\t' read -r file dir cmd <<<"$line"
  # The build's command minus the compiler, the object file and debug information.
  cmd=${cmd#* }
  cmd=$(sed -E 's/(^| )-o [^ ]+//; s/(^| )-c( |$)/ /; s/(^| )-g( |$)/ /' <<<"$cmd")
  if ! (cd "$dir" && eval "\"$clangxx\" $cmd $flags") >"$work/$1.log" 2>&1; then
    touch "$work/$1.failed"
  elif [[ -s "$work/$1.log" ]]; then  # anything printed (a note, a warning) counts
    touch "$work/$1.failed"
  fi
}
# -Wmissing-field-initializers (part of -Wextra) is left out: the code leaves members with default
# initializers out of aggregate initializers on purpose, and the g++ build only warns about it
# (clang 14 in more places than g++). Every other warning counts.
flags="-fsyntax-only -Wthread-safety -Wthread-safety-beta -Werror -ferror-limit=0"
flags+=" -Wno-missing-field-initializers"
export -f check_unit
export work clangxx flags

start=$SECONDS
seq 1 "$count" | xargs -P "$jobs" -I{} bash -c 'check_unit {}'

failed=0
for i in $(seq 1 "$count"); do
  if [[ -e "$work/$i.failed" ]]; then
    failed=$((failed + 1))
    file=$(sed -n "${i}p" "$work/units" | cut -f1)
    echo "=== ${file#"$src/"}"
    cat "$work/$i.log"
  fi
done
echo "thread_safety: $count translation units, $failed failed, $((SECONDS - start)) s" \
  "($clangxx, $jobs jobs)"
[[ $failed -eq 0 ]]
