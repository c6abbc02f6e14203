#pragma once

// Typed rbac.authorization.k8s.io/v1 objects, as the authorizer evaluates them. The REST layer
// stores JSON bodies; model/json/rbac_json.h decodes them into these structs once per object
// version. aggregationRule is not kept: this service does not aggregate ClusterRoles.

#include <string>
#include <vector>

namespace qm::model {

// One rule of a Role or ClusterRole: `verbs` on either resources (`api_groups` x `resources`,
// optionally only the objects in `resource_names`) or non-resource URL paths.
struct PolicyRule {
  std::vector<std::string> verbs;
  std::vector<std::string> api_groups;
  std::vector<std::string> resources;  // "pods", "resourceclaims/status", "*", "*/status"
  std::vector<std::string> resource_names;
  std::vector<std::string> non_resource_urls;  // "/healthz", "/apis/*"
  bool operator==(const PolicyRule&) const = default;
};

// A Role (namespace_ set) or a ClusterRole (namespace_ empty).
struct Role {
  std::string namespace_;
  std::string name;
  std::vector<PolicyRule> rules;
  bool operator==(const Role&) const = default;
};

struct RoleRef {
  std::string api_group;  // rbac.authorization.k8s.io
  std::string kind;       // Role or ClusterRole
  std::string name;
  bool operator==(const RoleRef&) const = default;
};

// Who a binding grants its role to.
struct Subject {
  std::string kind;  // User, Group or ServiceAccount
  std::string api_group;
  std::string name;
  std::string namespace_;  // ServiceAccount only
  bool operator==(const Subject&) const = default;
};

// A RoleBinding (namespace_ set) or a ClusterRoleBinding (namespace_ empty).
struct RoleBinding {
  std::string namespace_;
  std::string name;
  RoleRef role_ref;
  std::vector<Subject> subjects;
  bool operator==(const RoleBinding&) const = default;
};

inline constexpr char kRbacUserKind[] = "User";
inline constexpr char kRbacGroupKind[] = "Group";
inline constexpr char kRbacServiceAccountKind[] = "ServiceAccount";

}  // namespace qm::model
