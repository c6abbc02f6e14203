#pragma once

// JSON -> typed RBAC model (model/rbac.h) for rbac.authorization.k8s.io/v1 objects in the hub
// version. Like dra_json, decoding reads bodies the REST layer has already validated and
// defaulted, so it is lenient: absent fields are empty; only a wrong JSON type is an error,
// InvalidArgument naming the field path.

#include "absl/status/statusor.h"
#include "model/rbac.h"
#include "nlohmann/json.hpp"

namespace qm::model::json {

// A Role or ClusterRole: metadata.name, metadata.namespace (when present) and rules.
absl::StatusOr<Role> DecodeRole(const nlohmann::json& object);

// A RoleBinding or ClusterRoleBinding: metadata.name, metadata.namespace (when present),
// roleRef and subjects.
absl::StatusOr<RoleBinding> DecodeRoleBinding(const nlohmann::json& object);

}  // namespace qm::model::json
