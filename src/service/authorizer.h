#pragma once

// Kubernetes RBAC authorization (ARCHITECTURE.md §8): who may do what, decided from the Role,
// ClusterRole, RoleBinding and ClusterRoleBinding objects plus the built-in bootstrap policy,
// with Kubernetes' semantics (plugin/pkg/auth/authorizer/rbac). Deny is the default: a request
// is allowed when some rule granted to the user matches it.
//
// Decisions are cheap: the objects are decoded once per change into an index from subject (user
// name, group name) to the rules granted to it, cluster-wide or per namespace, and Authorize
// reads an immutable snapshot of that index. No JSON, no store round trip, no lock held while
// evaluating.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "auth/user.h"
#include "model/object.h"
#include "model/rbac.h"
#include "service/watch_hub.h"

namespace qm::service {

// What the authorizer is asked, as kube-apiserver's RequestInfo describes a request.
struct AuthzAttributes {
  // get list watch create update patch delete deletecollection, or impersonate/bind/escalate;
  // for non-resource requests the lowercase HTTP method (get, post, put, ...).
  std::string verb;
  bool resource_request = true;
  std::string api_group;    // "" for the core group
  std::string resource;     // "pods"
  std::string subresource;  // "status"
  // The namespace of a namespaced request; "" at the cluster scope. As in RequestInfo, a
  // request on a namespace object itself (.../namespaces/team-a) carries its name here.
  std::string namespace_name;
  std::string name;  // the object's name; "" for list, watch, create, deletecollection
  std::string path;  // non-resource requests: the URL path ("/healthz")
};

struct AuthzDecision {
  bool allowed = false;
  // Allowed: `RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole
  // "cluster-admin" to Group "system:masters"`. Denied: "no RBAC policy matched", or the
  // problems met on the way (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`).
  std::string reason;
};

// The stored RBAC objects, decoded. Cluster-scoped ones have an empty namespace_.
struct RbacPolicy {
  std::vector<model::Role> roles;
  std::vector<model::Role> cluster_roles;
  std::vector<model::RoleBinding> role_bindings;
  std::vector<model::RoleBinding> cluster_role_bindings;
};

// The built-in policy, evaluated in addition to the stored objects (like Kubernetes' bootstrap
// roles, which are reconciled into storage and cannot be taken away):
//  * cluster-admin: everything, bound to group system:masters;
//  * admin, edit, view (bound to nobody; bind them): view reads every kind this service serves
//    except the rbac kinds; edit adds create/update/patch/delete/deletecollection on the
//    namespaced workload kinds (pods, resourceclaims, resourceclaimtemplates, serviceaccounts);
//    admin adds roles, rolebindings and localsubjectaccessreviews;
//  * system:node, bound to group system:nodes: what a node agent reads and writes (nodes,
//    nodes/status, resourceslices, resourceclaims/status, pods/status, events; node restriction,
//    elsewhere, narrows these to the node's own objects);
//  * system:discovery, system:basic-user (system:authenticated) and system:public-info-viewer
//    (system:authenticated, system:unauthenticated): discovery, OpenAPI, version and health
//    paths, and the self-review kinds.
// A stored ClusterRole with a bootstrap role's name adds its rules to the built-in ones.
const RbacPolicy& BootstrapPolicy();

// Evaluates RBAC over the bootstrap policy and the stored objects, which are either handed in
// (the RbacPolicy constructor, Replace) or followed from a WatchHub (Follow). Thread-safe:
// Authorize and RulesFor may run concurrently with each other and with updates; each sees
// either the policy before an update or after it.
class Authorizer {
 public:
  // The rules that apply to a user, as a SelfSubjectRulesReview reports them.
  struct ResourceRule {
    std::vector<std::string> verbs;
    std::vector<std::string> api_groups;
    std::vector<std::string> resources;
    std::vector<std::string> resource_names;
    bool operator==(const ResourceRule&) const = default;
  };
  struct NonResourceRule {
    std::vector<std::string> verbs;
    std::vector<std::string> non_resource_urls;
    bool operator==(const NonResourceRule&) const = default;
  };
  struct Rules {
    std::vector<ResourceRule> resource_rules;
    std::vector<NonResourceRule> non_resource_rules;
    // True when a binding of the user names a role that does not exist; evaluation_error then
    // says which (the rules of the other bindings are still listed).
    bool incomplete = false;
    std::string evaluation_error;
  };

  // The bootstrap policy only.
  Authorizer();
  // The bootstrap policy plus `stored`.
  explicit Authorizer(RbacPolicy stored);
  // Stops following a hub, if it does.
  ~Authorizer();

  Authorizer(const Authorizer&) = delete;
  Authorizer& operator=(const Authorizer&) = delete;

  // Replaces the stored policy.
  void Replace(RbacPolicy stored);
  // Replaces the stored policy with the RBAC objects among `objects` (stored objects as the
  // store and the hub hold them; other resources are ignored). An object whose body does not
  // decode is left out, and the first such is reported as InvalidArgument; the others still
  // apply.
  absl::Status Replace(const std::vector<model::Object>& objects);

  // Follows `hub` (already started): loads the RBAC objects from its cache and subscribes to
  // its changes. A write is reflected once the hub has dispatched its revision (a
  // WatchHub::List with that min_rv returns), with no store round trip. Replaces whatever
  // Replace set; a Replace while following lasts until the next RBAC change from the hub.
  // FailedPrecondition when the hub has no cache; other errors from Subscribe. If the hub later
  // loses its place in the change log (410), the next Authorize or RulesFor reloads from it
  // (one caller pays for the reload; the others keep the previous policy meanwhile). `hub` must
  // outlive this object.
  absl::Status Follow(WatchHub& hub);

  // Whether `user` may do `attrs`. Reads the in-memory index only (no store round trip, no
  // JSON), except for the one reload after a 410 described at Follow.
  AuthzDecision Authorize(const auth::UserInfo& user, const AuthzAttributes& attrs) const;

  // The resource and non-resource rules that apply to `user` in `namespace_name` (cluster-wide
  // grants plus, when `namespace_name` is set, the RoleBindings of that namespace).
  Rules RulesFor(const auth::UserInfo& user, const std::string& namespace_name) const;

 private:
  class Impl;
  class Feed;
  std::unique_ptr<Impl> impl_;
};

// Kubernetes' 403 message for a denied request (apiserver responsewriters.Forbidden wrapped by
// apierrors.NewForbidden), e.g. `pods "p1" is forbidden: User "alice" cannot get resource
// "pods" in API group "" in the namespace "team-a"`, or for a non-resource request `forbidden:
// User "alice" cannot get path "/metrics"`.
std::string ForbiddenMessage(const auth::UserInfo& user, const AuthzAttributes& attrs);

}  // namespace qm::service
