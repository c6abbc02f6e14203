// RestApi::AdmitRbac: RBAC escalation prevention for writes of the RBAC kinds.
#include "service/rbac_admission.h"
#include "api/rest/rest_api.h"
#include "model/json/rbac_json.h"

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
      auto decoded = model::json::DecodeRole(nlohmann::json::parse(stored->body, nullptr, false));
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
