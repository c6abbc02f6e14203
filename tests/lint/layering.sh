#!/usr/bin/env bash
# The layering rule of docs/README.md ("Where JSON is read"): JSON bodies are decoded, encoded and
# edited in model/json only. No file under src/allocator/ or src/service/ names nlohmann or a json
# value (calls into model::json and includes of model/json/ headers are the codec, and allowed):
# the scheduler holds stored bodies as model::json::Document and changes them through the edits
# of model/json/edits.h.
#
# Usage: layering.sh <source dir>
set -euo pipefail
src="${1:?usage: $0 <source dir>}"
cd "$src"

status=0
for f in src/allocator/*.h src/allocator/*.cc src/service/*.h src/service/*.cc; do
  # Drop the codec's namespace and headers, then look for the JSON library or a json value.
  hits=$(sed -E 's#model::json::##g; s#"model/json/[a-z_]+\.h"##g' "$f" |
    grep -nE 'nlohmann|(^|[^A-Za-z_"/.])json([^A-Za-z_"]|$)' || true)
  if [[ -n "$hits" ]]; then
    echo "$f: uses JSON outside model/json:"
    echo "$hits" | sed 's/^/  /'
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "layering: ok"
exit $status
