#!/usr/bin/env bash
# The layering rule of docs/README.md ("Where JSON is read"): JSON bodies are decoded and encoded
# in model/json only. No file under src/allocator/ or src/service/ names nlohmann or a json value
# (calls into model::json and includes of model/json/ headers are the codec, and allowed), except
# the scheduler files that still edit bodies for their writes, listed below. A file that starts
# using JSON fails this test; one that stops must leave the list.
#
# Usage: layering.sh <source dir>
set -euo pipefail
src="${1:?usage: $0 <source dir>}"
cd "$src"

still_json=(
  src/service/scheduler_pass.h
  src/service/scheduler_state.cc
  src/service/scheduler_claims.cc
  src/service/scheduler_binder.cc
  src/service/scheduler_queue.cc
)

status=0
for f in src/allocator/*.h src/allocator/*.cc src/service/*.h src/service/*.cc; do
  allowed=0
  for s in "${still_json[@]}"; do [[ "$f" == "$s" ]] && allowed=1; done
  # Drop the codec's namespace and headers, then look for the JSON library or a json value.
  hits=$(sed -E 's#model::json::##g; s#"model/json/[a-z_]+\.h"##g' "$f" |
    grep -nE 'nlohmann|(^|[^A-Za-z_"/.])json([^A-Za-z_"]|$)' || true)
  if [[ $allowed -eq 1 ]]; then
    if [[ -z "$hits" ]]; then
      echo "$f: no longer uses JSON; remove it from the list in $0"
      status=1
    fi
  elif [[ -n "$hits" ]]; then
    echo "$f: uses JSON outside model/json:"
    echo "$hits" | sed 's/^/  /'
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "layering: ok"
exit $status
