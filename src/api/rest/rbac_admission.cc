// RestApi::AdmitRbac: RBAC escalation prevention for writes of the RBAC kinds.
#include "service/rbac_admission.h"
#include "api/rest/rest_api.h"
#include "model/json/rbac_json.h"
#include "model/json/read.h"

namespace qm::api {

absl::Status RestApi::AdmitRbac(const model::ResourceType& type, const nlohmann::json& hub,
                                const HttpRequest& req) {
  if (authorizer_ == nullptr || !req.user.has_value() ||
      type.group != "rbac.authorization.k8s.io") {
    return absl::OkStatus();
  }
  const bool cluster = type.kind.rfind("Cluster", 0) == 0;
  if (type.kind == "Role" || type.kind == "ClusterRole") {
    auto role = model::json::DecodeRole(hub);
    if (!role.ok()) return role.status();
    return service::AdmitRoleWrite(*authorizer_, *req.user, *role, cluster);
  }
  auto binding = model::json::DecodeRoleBinding(hub);
  if (!binding.ok()) return binding.status();
  // The rules of the referenced role: the stored object's plus a built-in role's of that name.
  auto lookup = [this](const std::string& kind, const std::string& ns,
                       const std::string& name) -> std::optional<std::vector<model::PolicyRule>> {
    std::optional<std::vector<model::PolicyRule>> rules;
    const bool cluster_role = kind == "ClusterRole";
    if (cluster_role) {
      for (const auto& r : service::BootstrapPolicy().cluster_roles) {
        if (r.name == name) rules = r.rules;
      }
    }
    auto stored = objects_.Get(model::ResourceKey{
        std::string(cluster_role ? "clusterroles" : "roles") + ".rbac.authorization.k8s.io",
        cluster_role ? "" : ns, name});
    if (stored.ok()) {
      auto decoded = model::json::DecodeRole(model::json::Read(stored->body));
      if (decoded.ok()) {
        if (!rules) rules.emplace();
        rules->insert(rules->end(), decoded->rules.begin(), decoded->rules.end());
      }
    }
    return rules;
  };
  return service::AdmitBindingWrite(*authorizer_, *req.user, *binding, cluster, lookup);
}

}  // namespace qm::api

namespace qm::api {

std::string BootstrapRbacManifests() {
  using nlohmann::json;
  auto rules_json = [](const std::vector<model::PolicyRule>& rules) {
    json out = json::array();
    for (const auto& r : rules) {
      json j = {{"verbs", r.verbs}};
      if (!r.non_resource_urls.empty()) {
        j["nonResourceURLs"] = r.non_resource_urls;
      } else {
        j["apiGroups"] = r.api_groups;
        j["resources"] = r.resources;
        if (!r.resource_names.empty()) j["resourceNames"] = r.resource_names;
      }
      out.push_back(std::move(j));
    }
    return out;
  };
  const json labels = {{"kubernetes.io/bootstrapping", "rbac-defaults"}};
  json docs = json::array();
  const auto& policy = service::BootstrapPolicy();
  for (const auto& role : policy.cluster_roles) {
    docs.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "ClusterRole"},
                    {"metadata", {{"name", role.name}, {"labels", labels}}},
                    {"rules", rules_json(role.rules)}});
  }
  for (const auto& binding : policy.cluster_role_bindings) {
    json subjects = json::array();
    for (const auto& s : binding.subjects) {
      json j = {{"kind", s.kind}, {"name", s.name}};
      if (!s.api_group.empty()) j["apiGroup"] = s.api_group;
      if (!s.namespace_.empty()) j["namespace"] = s.namespace_;
      subjects.push_back(std::move(j));
    }
    docs.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "ClusterRoleBinding"},
                    {"metadata", {{"name", binding.name}, {"labels", labels}}},
                    {"roleRef",
                     {{"apiGroup", binding.role_ref.api_group},
                      {"kind", binding.role_ref.kind},
                      {"name", binding.role_ref.name}}},
                    {"subjects", subjects}});
  }
  return docs.dump();
}

}  // namespace qm::api
