#include "api/rest/patch.h"

#include <algorithm>
#include <map>

namespace qm::api {
namespace {

using nlohmann::json;

// Lists Kubernetes merges by key under strategic merge patch, by field name. An empty key means
// a list of scalars merged as a set (metadata.finalizers).
const std::map<std::string, std::string>& MergeKeys() {
  static const auto* keys = new std::map<std::string, std::string>{
      {"finalizers", ""},
      {"ownerReferences", "uid"},
      {"containers", "name"},
      {"initContainers", "name"},
      {"ephemeralContainers", "name"},
      {"volumes", "name"},
      {"env", "name"},
      {"volumeMounts", "mountPath"},
      {"ports", "containerPort"},
      {"resourceClaims", "name"},
      {"imagePullSecrets", "name"},
      {"conditions", "type"},
      {"addresses", "type"},
      {"reservedFor", "uid"},
      {"resourceClaimStatuses", "name"},
      {"hostAliases", "ip"},
      {"topologySpreadConstraints", "topologyKey"},
  };
  return *keys;
}

constexpr char kDeleteFromPrimitiveList[] = "$deleteFromPrimitiveList/";

absl::StatusOr<json> MergeObject(const json& target, const json& patch);

absl::StatusOr<json> MergeList(const std::string& field, const json& target, const json& patch) {
  auto mk = MergeKeys().find(field);
  if (mk == MergeKeys().end() || !patch.is_array()) return patch;  // atomic list: replace
  json out = target.is_array() ? target : json::array();
  const std::string& key = mk->second;
  // A single {"$patch": "replace"} element replaces the list with the other elements.
  for (const auto& el : patch) {
    if (el.is_object() && el.value("$patch", "") == "replace") {
      json replaced = json::array();
      for (const auto& e : patch) {
        if (!(e.is_object() && e.contains("$patch"))) replaced.push_back(e);
      }
      return replaced;
    }
  }
  for (const auto& el : patch) {
    if (key.empty()) {
      if (std::find(out.begin(), out.end(), el) == out.end()) out.push_back(el);
      continue;
    }
    if (!el.is_object() || !el.contains(key)) {
      return absl::InvalidArgumentError("map: " + el.dump() +
                                        " does not contain declared merge key: " + key);
    }
    auto match = std::find_if(out.begin(), out.end(), [&](const json& e) {
      return e.is_object() && e.contains(key) && e[key] == el[key];
    });
    if (el.value("$patch", "") == "delete") {
      if (match != out.end()) out.erase(match);
      continue;
    }
    if (match != out.end()) {
      auto merged = MergeObject(*match, el);
      if (!merged.ok()) return merged.status();
      *match = *std::move(merged);
    } else {
      auto merged = MergeObject(json::object(), el);
      if (!merged.ok()) return merged.status();
      out.push_back(*std::move(merged));
    }
  }
  return out;
}

absl::StatusOr<json> MergeObject(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  const std::string directive = patch.value("$patch", "");
  if (directive == "delete") return json();  // caller removes the field
  json out = target.is_object() && directive != "replace" ? target : json::object();
  // Deletions from primitive lists apply before the list merge of the same field.
  for (const auto& [k, v] : patch.items()) {
    if (k.rfind(kDeleteFromPrimitiveList, 0) != 0) continue;
    std::string field = k.substr(sizeof(kDeleteFromPrimitiveList) - 1);
    if (!out.contains(field) || !out[field].is_array() || !v.is_array()) continue;
    json kept = json::array();
    for (const auto& e : out[field]) {
      if (std::find(v.begin(), v.end(), e) == v.end()) kept.push_back(e);
    }
    out[field] = std::move(kept);
  }
  for (const auto& [k, v] : patch.items()) {
    if (k.empty() || k[0] == '$') continue;  // directives handled above or order-only
    if (v.is_null()) {
      out.erase(k);
      continue;
    }
    if (v.is_object()) {
      auto merged = MergeObject(out.contains(k) ? out[k] : json(), v);
      if (!merged.ok()) return merged.status();
      if (merged->is_null()) {
        out.erase(k);
      } else {
        out[k] = *std::move(merged);
      }
    } else if (v.is_array()) {
      auto merged = MergeList(k, out.contains(k) ? out[k] : json(), v);
      if (!merged.ok()) return merged.status();
      out[k] = *std::move(merged);
    } else {
      out[k] = v;
    }
  }
  // $retainKeys (patchStrategy retainKeys, e.g. a pod's resourceClaims entries): fields the
  // list does not name are cleared, so switching resourceClaimName to
  // resourceClaimTemplateName does not leave both behind.
  if (auto retain = patch.find("$retainKeys"); retain != patch.end() && retain->is_array()) {
    json kept = json::object();
    for (auto& [k, v] : out.items()) {
      if (std::find(retain->begin(), retain->end(), json(k)) != retain->end()) kept[k] = v;
    }
    out = std::move(kept);
  }
  return out;
}

}  // namespace

absl::StatusOr<PatchType> PatchTypeFromContentType(const std::string& content_type) {
  std::string ct = content_type.substr(0, content_type.find(';'));
  if (ct == "application/json-patch+json") return PatchType::kJsonPatch;
  if (ct == "application/merge-patch+json") return PatchType::kMergePatch;
  if (ct == "application/strategic-merge-patch+json") return PatchType::kStrategicMergePatch;
  if (ct == "application/apply-patch+yaml" || ct == "application/apply-patch+json") {
    return PatchType::kApply;
  }
  return absl::UnimplementedError(
      "the body of the request was in an unknown format - accepted "
      "media types include: application/json-patch+json, "
      "application/merge-patch+json, "
      "application/strategic-merge-patch+json, "
      "application/apply-patch+yaml");
}

json ApplyMergePatch(const json& target, const json& patch) {
  json out = target;
  out.merge_patch(patch);
  return out;
}

namespace {

// The operations that add a value (add, and copy and move at their "path") need its parent to
// be an existing object or array, as RFC 6902 §4.1 and Kubernetes' json-patch say; nlohmann
// would create missing parents, and asserts on a scalar one (`/metadata/name/x`).
absl::Status CheckAddTarget(const json& doc, const json& op) {
  if (!op.is_object()) return absl::OkStatus();  // nlohmann reports the malformed operation
  auto kind = op.find("op");
  auto path = op.find("path");
  if (kind == op.end() || path == op.end() || !kind->is_string() || !path->is_string() ||
      (*kind != "add" && *kind != "copy" && *kind != "move")) {
    return absl::OkStatus();
  }
  const std::string& text = path->get_ref<const std::string&>();
  json::json_pointer pointer(text);  // a malformed pointer throws json::parse_error
  if (pointer.empty()) return absl::OkStatus();
  json::json_pointer parent = pointer.parent_pointer();
  if (!doc.contains(parent)) {
    return absl::InvalidArgumentError(
        "the json patch could not be applied: " + kind->dump() +
        " operation does not apply: doc is missing path: " + json(text).dump());
  }
  const json& container = doc.at(parent);
  if (!container.is_object() && !container.is_array()) {
    return absl::InvalidArgumentError("the json patch could not be applied: " + kind->dump() +
                                      " operation does not apply: the parent of " +
                                      json(text).dump() + " is not an object or an array");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<json> ApplyJsonPatch(const json& target, const json& patch) {
  if (!patch.is_array()) {
    return absl::InvalidArgumentError("json patch must be an array of operations");
  }
  // Limits as the apiserver's: a bounded number of operations, and copies may not grow the
  // document past the request size limit (each copy can double it).
  constexpr size_t kMaxOperations = 10000;
  constexpr size_t kMaxDocumentBytes = 16 * 1024 * 1024;
  if (patch.size() > kMaxOperations) {
    return absl::InvalidArgumentError("the json patch has " + std::to_string(patch.size()) +
                                      " operations, exceeding the maximum of " +
                                      std::to_string(kMaxOperations));
  }
  json out = target;
  try {
    for (const auto& op : patch) {
      if (auto parent = CheckAddTarget(out, op); !parent.ok()) return parent;
      out = out.patch(json::array({op}));
      if (op.is_object() && op.contains("op") && op["op"] == "copy" &&
          out.dump().size() > kMaxDocumentBytes) {
        return absl::InvalidArgumentError("the json patch makes the object larger than " +
                                          std::to_string(kMaxDocumentBytes) + " bytes");
      }
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(std::string("the json patch could not be applied: ") +
                                      e.what());
  }
  return out;
}

absl::StatusOr<json> ApplyStrategicMergePatch(const json& target, const json& patch) {
  if (!patch.is_object()) {
    return absl::InvalidArgumentError("strategic merge patch must be a JSON object");
  }
  absl::StatusOr<json> out;
  try {
    out = MergeObject(target, patch);
  } catch (const json::exception& e) {
    // A malformed directive (e.g. a non-string "$patch") fails nlohmann's typed accessors.
    return absl::InvalidArgumentError(
        std::string("the strategic merge patch could not be applied: ") + e.what());
  }
  if (!out.ok()) return out.status();
  if (out->is_null()) return absl::InvalidArgumentError("$patch: delete on the whole object");
  return out;
}

}  // namespace qm::api
