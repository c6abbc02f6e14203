// libFuzzer target for the patch engines of api/rest/patch.h on a fuzzed document and patch.
//
// Input: one byte choosing the engine, then `document` kSeparator `patch` (both JSON; inputs
// where either does not parse only exercise PatchTypeFromContentType).
//   byte % 4 == 0: merge patch; applying the same patch twice changes nothing (RFC 7386 is
//                  idempotent).
//   byte % 4 == 1: JSON patch; a patch of `test` operations only leaves the document as it was.
//   byte % 4 == 2: strategic merge patch; for a patch without lists, $-directives and empty
//                  keys it must equal the merge patch.
//   byte % 4 == 3: all three on the same input.
// Never a crash, hang or exception; a finding aborts (see fuzz_util.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/rest/patch.h"
#include "fuzz_util.h"

namespace {

using nlohmann::json;
using qm::fuzz::Crash;

// True when `j` holds no array and no key that is empty or starts with '$' anywhere (the
// strategic merge patch skips both: directives, and "" which no Kubernetes field is named).
bool PlainObjects(const json& j) {
  if (j.is_array()) return false;
  if (!j.is_object()) return true;
  for (const auto& [key, value] : j.items()) {
    if (key.empty() || key[0] == '$') return false;
    if (!PlainObjects(value)) return false;
  }
  return true;
}

bool OnlyTests(const json& patch) {
  if (!patch.is_array()) return false;
  for (const auto& op : patch) {
    if (!op.is_object() || !op.contains("op") || op["op"] != "test") return false;
  }
  return true;
}

void Merge(const json& doc, const json& patch) {
  json once = qm::api::ApplyMergePatch(doc, patch);
  json twice = qm::api::ApplyMergePatch(once, patch);
  if (once != twice) Crash("merge patch is not idempotent: " + once.dump() + " vs " + twice.dump());
}

void JsonPatch(const json& doc, const json& patch) {
  auto out = qm::api::ApplyJsonPatch(doc, patch);
  if (out.ok() && OnlyTests(patch) && *out != doc) {
    Crash("json patch of tests only changed the document: " + out->dump());
  }
}

void Strategic(const json& doc, const json& patch) {
  auto out = qm::api::ApplyStrategicMergePatch(doc, patch);
  if (out.ok() && patch.is_object() && PlainObjects(patch) && PlainObjects(doc)) {
    json merged = qm::api::ApplyMergePatch(doc, patch);
    if (*out != merged) {
      Crash("strategic merge patch without lists or directives differs from merge patch: " +
            out->dump() + " vs " + merged.dump());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto [doc_text, patch_text] = qm::fuzz::SplitOnce(rest);
  json doc = json::parse(doc_text, nullptr, false);
  json patch = json::parse(patch_text, nullptr, false);
  if (doc.is_discarded() || patch.is_discarded()) {
    (void)qm::api::PatchTypeFromContentType(std::string(rest));
    return 0;
  }
  switch (data[0] % 4) {
    case 0:
      Merge(doc, patch);
      break;
    case 1:
      JsonPatch(doc, patch);
      break;
    case 2:
      Strategic(doc, patch);
      break;
    default:
      Merge(doc, patch);
      JsonPatch(doc, patch);
      Strategic(doc, patch);
      break;
  }
  return 0;
}
