#include "service/rbac_admission.h"

#include <vector>

#include "absl/strings/str_join.h"

namespace qm::service {
namespace {

constexpr char kRbacGroup[] = "rbac.authorization.k8s.io";

std::string Quoted(const std::vector<std::string>& v) {
  std::vector<std::string> q;
  for (const auto& s : v) q.push_back("\"" + s + "\"");
  return "[" + absl::StrJoin(q, " ") + "]";
}

std::string RuleText(const model::PolicyRule& r) {
  std::string out = "{";
  if (!r.non_resource_urls.empty()) {
    out += "NonResourceURLs:" + Quoted(r.non_resource_urls);
  } else {
    out += "APIGroups:" + Quoted(r.api_groups) + ", Resources:" + Quoted(r.resources);
    if (!r.resource_names.empty()) out += ", ResourceNames:" + Quoted(r.resource_names);
  }
  return out + ", Verbs:" + Quoted(r.verbs) + "}";
}

// The rules of `rules` that `user` does not hold in `namespace_name` ("" for cluster-wide):
// each verb x group x resource x name of a rule must be authorized on its own.
std::vector<model::PolicyRule> NotHeld(const Authorizer& authorizer, const auth::UserInfo& user,
                                       const std::vector<model::PolicyRule>& rules,
                                       const std::string& namespace_name) {
  std::vector<model::PolicyRule> missing;
  for (const auto& rule : rules) {
    bool held = true;
    for (const auto& verb : rule.verbs) {
      if (!rule.non_resource_urls.empty()) {
        for (const auto& url : rule.non_resource_urls) {
          AuthzAttributes a;
          a.verb = verb;
          a.resource_request = false;
          a.path = url;
          held = held && authorizer.Authorize(user, a).allowed;
        }
        continue;
      }
      std::vector<std::string> names = rule.resource_names;
      if (names.empty()) names.push_back("");
      for (const auto& group : rule.api_groups) {
        for (const auto& resource : rule.resources) {
          for (const auto& name : names) {
            AuthzAttributes a;
            a.verb = verb;
            a.api_group = group;
            auto slash = resource.find('/');
            a.resource = resource.substr(0, slash);
            if (slash != std::string::npos) a.subresource = resource.substr(slash + 1);
            a.namespace_name = namespace_name;
            a.name = name;
            held = held && authorizer.Authorize(user, a).allowed;
          }
        }
      }
    }
    if (!held) missing.push_back(rule);
  }
  return missing;
}

absl::Status Escalation(const auth::UserInfo& user, const std::vector<model::PolicyRule>& missing) {
  std::vector<std::string> rules;
  for (const auto& r : missing) rules.push_back(RuleText(r));
  return absl::PermissionDeniedError(
      "user \"" + user.name + "\" (groups=" + Quoted(user.groups) +
      ") is attempting to grant RBAC permissions not currently held:\n" +
      absl::StrJoin(rules, "\n"));
}

bool Allowed(const Authorizer& authorizer, const auth::UserInfo& user, const std::string& verb,
             const std::string& resource, const std::string& namespace_name,
             const std::string& name) {
  AuthzAttributes a;
  a.verb = verb;
  a.api_group = kRbacGroup;
  a.resource = resource;
  a.namespace_name = namespace_name;
  a.name = name;
  return authorizer.Authorize(user, a).allowed;
}

}  // namespace

absl::Status AdmitRoleWrite(const Authorizer& authorizer, const auth::UserInfo& user,
                            const model::Role& role, bool cluster_role) {
  const std::string ns = cluster_role ? "" : role.namespace_;
  if (Allowed(authorizer, user, "escalate", cluster_role ? "clusterroles" : "roles", ns,
              role.name)) {
    return absl::OkStatus();
  }
  auto missing = NotHeld(authorizer, user, role.rules, ns);
  return missing.empty() ? absl::OkStatus() : Escalation(user, missing);
}

absl::Status AdmitBindingWrite(const Authorizer& authorizer, const auth::UserInfo& user,
                               const model::RoleBinding& binding, bool cluster_binding,
                               const RoleLookup& lookup) {
  const std::string ns = cluster_binding ? "" : binding.namespace_;
  const bool cluster_role = binding.role_ref.kind == "ClusterRole";
  if (Allowed(authorizer, user, "bind", cluster_role ? "clusterroles" : "roles",
              cluster_role ? "" : ns, binding.role_ref.name) ||
      (cluster_role && !ns.empty() &&
       Allowed(authorizer, user, "bind", "clusterroles", ns, binding.role_ref.name))) {
    return absl::OkStatus();
  }
  auto rules = lookup(binding.role_ref.kind, cluster_role ? "" : ns, binding.role_ref.name);
  if (!rules.has_value()) {
    // Binding a role that does not exist grants nothing yet; Kubernetes refuses it unless the
    // user may `bind` it, since the role could be created later with any rules.
    return absl::PermissionDeniedError("user \"" + user.name + "\" cannot bind " +
                                       binding.role_ref.kind + " \"" + binding.role_ref.name +
                                       "\": it does not exist");
  }
  auto missing = NotHeld(authorizer, user, *rules, ns);
  return missing.empty() ? absl::OkStatus() : Escalation(user, missing);
}

}  // namespace qm::service
