#pragma once

// Node restriction (Kubernetes' NodeRestriction admission plugin), applied to every write a
// node identity makes, whatever the route: a user `system:node:<name>` in group `system:nodes`
// may create, update and delete only the ResourceSlices whose spec.nodeName is its own node,
// only its own Node object, only the status of pods bound to it, and only the status of
// ResourceClaims allocated to it (status.allocation.nodeSelector names the node). Other users
// are not restricted here (RBAC decides).

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "auth/user.h"
#include "model/core.h"

namespace qm::service {

// The node a user acts for, when it is a node identity.
std::optional<std::string> NodeNameOf(const auth::UserInfo& user);

// OK, or PermissionDenied saying what the node may do. `kind` is the object's kind ("Node",
// "ResourceSlice", ...), `subresource` "" or "status"; `old_obj` is the stored object (null on
// create), `new_obj` the object as it would be stored (none on delete): what ties each to
// nodes (model::json::NodeRelationsOf).
absl::Status AdmitNodeWrite(const auth::UserInfo& user, const std::string& kind,
                            const std::string& subresource,
                            const std::optional<model::NodeRelations>& old_obj,
                            const std::optional<model::NodeRelations>& new_obj);

// Node authorization of reads (Kubernetes' node authorizer, with 1.32's field-selector rule):
// a node identity may list, watch and delete-collection ResourceSlices and Pods only with a
// field selector that requires `spec.nodeName=<its node>`, and may not list or watch
// ResourceClaims (it gets the claims of its pods one by one). `verb` is the RBAC verb, `group`
// and `resource` the API group and plural, `field_selector` the request's fieldSelector. OK for
// other users and resources.
absl::Status AdmitNodeCollectionRead(const auth::UserInfo& user, const std::string& group,
                                     const std::string& resource, const std::string& verb,
                                     const std::string& field_selector);

// Node authorization of a get: a node identity may read only the ResourceSlices of its node,
// the pods bound to it and the ResourceClaims allocated to it (status.allocation's node
// selector names the node); other kinds are left to RBAC. `obj` is what ties the object to
// nodes. PermissionDenied with Kubernetes' "no relationship found" wording.
absl::Status AdmitNodeGet(const auth::UserInfo& user, const std::string& kind,
                          const model::NodeRelations& obj);

}  // namespace qm::service
