#pragma once

// RBAC escalation prevention, as Kubernetes enforces it on the RBAC kinds: a user may create
// or update a Role or ClusterRole only with permissions it already holds (or the `escalate`
// verb on that role), and may bind a role only when it holds every permission the role grants
// in the binding's scope (or the `bind` verb on that role). Without it, anyone who may write
// RoleBindings in a namespace could bind cluster-admin to themselves.

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "auth/user.h"
#include "model/rbac.h"
#include "service/authorizer.h"

namespace qm::service {

// The rules of the role a binding refers to (stored plus built-in), nullopt when it does not
// exist. `namespace_name` is "" for a ClusterRole.
using RoleLookup = std::function<std::optional<std::vector<model::PolicyRule>>(
    const std::string& kind, const std::string& namespace_name, const std::string& name)>;

// OK, or PermissionDenied with Kubernetes' message (`user "alice" (groups=[...]) is attempting
// to grant RBAC permissions not currently held: ...`).
absl::Status AdmitRoleWrite(const Authorizer& authorizer, const auth::UserInfo& user,
                            const model::Role& role, bool cluster_role);
absl::Status AdmitBindingWrite(const Authorizer& authorizer, const auth::UserInfo& user,
                               const model::RoleBinding& binding, bool cluster_binding,
                               const RoleLookup& lookup);

}  // namespace qm::service
