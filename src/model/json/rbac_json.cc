#include "model/json/rbac_json.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace qm::model::json {
namespace {

using nlohmann::json;

absl::Status TypeError(const std::string& path, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": expected ", want));
}

// The member `key` of `object`, or nullptr when absent or null.
const json* Member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status GetString(const json& object, const char* key, const std::string& path,
                       std::string& out) {
  const json* v = Member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_string()) return TypeError(absl::StrCat(path, key), "string");
  out = v->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetStrings(const json& object, const char* key, const std::string& path,
                        std::vector<std::string>& out) {
  const json* v = Member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array()) return TypeError(absl::StrCat(path, key), "array");
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) return TypeError(absl::StrCat(path, key, "[", i, "]"), "string");
    out.push_back((*v)[i].get<std::string>());
  }
  return absl::OkStatus();
}

// An array member whose items are objects, each passed to `decode` with its path.
template <typename F>
absl::Status ForEachObject(const json& object, const char* key, F decode) {
  const json* v = Member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array()) return TypeError(key, "array");
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = absl::StrCat(key, "[", i, "].");
    if (!(*v)[i].is_object()) return TypeError(path.substr(0, path.size() - 1), "object");
    QM_RETURN_IF_ERROR(decode((*v)[i], path));
  }
  return absl::OkStatus();
}

absl::Status DecodeMeta(const json& object, std::string& namespace_, std::string& name) {
  const json* meta = Member(object, "metadata");
  if (meta == nullptr) return absl::OkStatus();
  if (!meta->is_object()) return TypeError("metadata", "object");
  QM_RETURN_IF_ERROR(GetString(*meta, "name", "metadata.", name));
  return GetString(*meta, "namespace", "metadata.", namespace_);
}

}  // namespace

absl::StatusOr<Role> DecodeRole(const json& object) {
  if (!object.is_object()) return TypeError("", "object");
  Role role;
  QM_RETURN_IF_ERROR(DecodeMeta(object, role.namespace_, role.name));
  QM_RETURN_IF_ERROR(ForEachObject(object, "rules", [&](const json& r, const std::string& p) {
    PolicyRule rule;
    QM_RETURN_IF_ERROR(GetStrings(r, "verbs", p, rule.verbs));
    QM_RETURN_IF_ERROR(GetStrings(r, "apiGroups", p, rule.api_groups));
    QM_RETURN_IF_ERROR(GetStrings(r, "resources", p, rule.resources));
    QM_RETURN_IF_ERROR(GetStrings(r, "resourceNames", p, rule.resource_names));
    QM_RETURN_IF_ERROR(GetStrings(r, "nonResourceURLs", p, rule.non_resource_urls));
    role.rules.push_back(std::move(rule));
    return absl::OkStatus();
  }));
  return role;
}

absl::StatusOr<RoleBinding> DecodeRoleBinding(const json& object) {
  if (!object.is_object()) return TypeError("", "object");
  RoleBinding binding;
  QM_RETURN_IF_ERROR(DecodeMeta(object, binding.namespace_, binding.name));
  if (const json* ref = Member(object, "roleRef")) {
    if (!ref->is_object()) return TypeError("roleRef", "object");
    QM_RETURN_IF_ERROR(GetString(*ref, "apiGroup", "roleRef.", binding.role_ref.api_group));
    QM_RETURN_IF_ERROR(GetString(*ref, "kind", "roleRef.", binding.role_ref.kind));
    QM_RETURN_IF_ERROR(GetString(*ref, "name", "roleRef.", binding.role_ref.name));
  }
  QM_RETURN_IF_ERROR(ForEachObject(object, "subjects", [&](const json& s, const std::string& p) {
    Subject subject;
    QM_RETURN_IF_ERROR(GetString(s, "kind", p, subject.kind));
    QM_RETURN_IF_ERROR(GetString(s, "apiGroup", p, subject.api_group));
    QM_RETURN_IF_ERROR(GetString(s, "name", p, subject.name));
    QM_RETURN_IF_ERROR(GetString(s, "namespace", p, subject.namespace_));
    binding.subjects.push_back(std::move(subject));
    return absl::OkStatus();
  }));
  return binding;
}

}  // namespace qm::model::json
