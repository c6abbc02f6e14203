#include "service/authorizer.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/mutex.h"
#include "model/json/stored.h"
#include "model/resource_types.h"
#include "service/list_request.h"
#include "spdlog/spdlog.h"

// Semantics follow Kubernetes' plugin/pkg/auth/authorizer/rbac (RuleAllows, appliesTo) and
// pkg/registry/rbac/validation (the rule resolver): ClusterRoleBindings grant everywhere,
// RoleBindings only in their namespace and never for non-resource requests, a binding to a
// missing role grants nothing and is reported.
namespace qm::service {
namespace {

constexpr char kRolesResource[] = "roles.rbac.authorization.k8s.io";
constexpr char kClusterRolesResource[] = "clusterroles.rbac.authorization.k8s.io";
constexpr char kRoleBindingsResource[] = "rolebindings.rbac.authorization.k8s.io";
constexpr char kClusterRoleBindingsResource[] = "clusterrolebindings.rbac.authorization.k8s.io";
constexpr char kRbacSuffix[] = ".rbac.authorization.k8s.io";
constexpr char kAll[] = "*";
constexpr char kNoMatch[] = "no RBAC policy matched";

bool IsRbacResource(const std::string& resource) { return absl::EndsWith(resource, kRbacSuffix); }

// ---- rule matching (rbacv1helpers) ----------------------------------------------------------

bool MatchesOrAll(const std::vector<std::string>& items, const std::string& value) {
  for (const auto& item : items) {
    if (item == kAll || item == value) return true;
  }
  return false;
}

// `combined` is "resource/subresource" (or the resource alone); a rule entry matches it
// exactly, by "*", or as "*/subresource".
bool ResourceMatches(const model::PolicyRule& rule, const std::string& combined,
                     const std::string& subresource) {
  for (const auto& r : rule.resources) {
    if (r == kAll || r == combined) return true;
    if (subresource.empty()) continue;
    if (r.size() == subresource.size() + 2 && absl::StartsWith(r, "*/") &&
        absl::EndsWith(r, subresource)) {
      return true;
    }
  }
  return false;
}

// Rules naming objects match only requests that name one of them (never list, watch, create).
bool ResourceNameMatches(const model::PolicyRule& rule, const std::string& name) {
  if (rule.resource_names.empty()) return true;
  return std::find(rule.resource_names.begin(), rule.resource_names.end(), name) !=
         rule.resource_names.end();
}

bool NonResourceUrlMatches(const model::PolicyRule& rule, const std::string& path) {
  for (const auto& url : rule.non_resource_urls) {
    if (url == kAll || url == path) return true;
    if (absl::EndsWith(url, "*") && absl::StartsWith(path, url.substr(0, url.size() - 1))) {
      return true;
    }
  }
  return false;
}

bool RuleAllows(const AuthzAttributes& attrs, const std::string& combined,
                const model::PolicyRule& rule) {
  if (!MatchesOrAll(rule.verbs, attrs.verb)) return false;
  if (!attrs.resource_request) return NonResourceUrlMatches(rule, attrs.path);
  return MatchesOrAll(rule.api_groups, attrs.api_group) &&
         ResourceMatches(rule, combined, attrs.subresource) &&
         ResourceNameMatches(rule, attrs.name);
}

// ---- Go-style quoting (%q) for messages ------------------------------------------------------

std::string Q(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// ---- the index -------------------------------------------------------------------------------

using Rules = std::vector<model::PolicyRule>;

// What one binding grants one subject.
struct Grant {
  std::shared_ptr<const Rules> rules;  // nullptr when the role does not exist
  // `ClusterRoleBinding "b" of ClusterRole "r" to User "u"`, for the allow reason.
  std::string source;
  // When `rules` is nullptr: `clusterrole.rbac.authorization.k8s.io "r" not found`.
  std::string error;
};

struct SubjectGrants {
  std::vector<Grant> cluster;                                        // ClusterRoleBindings
  std::unordered_map<std::string, std::vector<Grant>> by_namespace;  // RoleBindings
};

// Immutable once built; shared by every request that reads it.
struct Index {
  std::unordered_map<std::string, SubjectGrants> users;
  std::unordered_map<std::string, SubjectGrants> groups;
};

// describeSubject: service accounts as "name/namespace".
std::string DescribeSubject(const model::Subject& s, const std::string& binding_namespace) {
  if (s.kind == model::kRbacServiceAccountKind) {
    return s.kind + " " +
           Q(s.name + "/" + (s.namespace_.empty() ? binding_namespace : s.namespace_));
  }
  return s.kind + " " + Q(s.name);
}

class IndexBuilder {
 public:
  explicit IndexBuilder(Index* index) : index_(*index) {}

  void AddClusterRoles(const std::vector<model::Role>& roles) {
    for (const auto& role : roles) Append(cluster_roles_[role.name], role.rules);
  }
  void AddRoles(const std::vector<model::Role>& roles) {
    for (const auto& role : roles) Append(roles_[{role.namespace_, role.name}], role.rules);
  }

  // After every role is added.
  void AddBindings(const std::vector<model::RoleBinding>& bindings) {
    for (const auto& b : bindings) AddBinding(b);
  }

 private:
  static void Append(std::shared_ptr<Rules>& rules, const Rules& more) {
    if (rules == nullptr) rules = std::make_shared<Rules>();
    rules->insert(rules->end(), more.begin(), more.end());
  }

  // GetRoleReferenceRules: a RoleBinding's Role lives in the binding's namespace.
  Grant Resolve(const model::RoleBinding& b) {
    Grant g;
    const model::RoleRef& ref = b.role_ref;
    if (ref.kind == "ClusterRole") {
      if (auto it = cluster_roles_.find(ref.name); it != cluster_roles_.end()) {
        g.rules = it->second;
      } else {
        g.error = "clusterrole.rbac.authorization.k8s.io " + Q(ref.name) + " not found";
      }
    } else if (ref.kind == "Role") {
      if (auto it = roles_.find({b.namespace_, ref.name});
          it != roles_.end() && !b.namespace_.empty()) {
        g.rules = it->second;
      } else {
        g.error = "role.rbac.authorization.k8s.io " + Q(ref.name) + " not found";
      }
    } else {
      g.error = "unsupported role reference kind: " + Q(ref.kind);
    }
    return g;
  }

  void AddBinding(const model::RoleBinding& b) {
    const bool cluster = b.namespace_.empty();
    const Grant resolved = Resolve(b);
    for (const auto& s : b.subjects) {
      SubjectGrants* target = nullptr;
      if (s.kind == model::kRbacUserKind) {
        target = &index_.users[s.name];
      } else if (s.kind == model::kRbacGroupKind) {
        target = &index_.groups[s.name];
      } else if (s.kind == model::kRbacServiceAccountKind) {
        // appliesToUser: the subject's namespace, else the binding's; a ClusterRoleBinding
        // subject without one matches nobody.
        const std::string& ns = s.namespace_.empty() ? b.namespace_ : s.namespace_;
        if (ns.empty()) continue;
        target = &index_.users[auth::kServiceAccountUserPrefix + ns + ":" + s.name];
      } else {
        continue;
      }
      Grant g = resolved;
      g.source = (cluster ? "ClusterRoleBinding " + Q(b.name)
                          : "RoleBinding " + Q(b.name + "/" + b.namespace_)) +
                 " of " + b.role_ref.kind + " " + Q(b.role_ref.name) + " to " +
                 DescribeSubject(s, b.namespace_);
      if (cluster) {
        target->cluster.push_back(std::move(g));
      } else {
        target->by_namespace[b.namespace_].push_back(std::move(g));
      }
    }
  }

  Index& index_;
  std::map<std::string, std::shared_ptr<Rules>> cluster_roles_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Rules>> roles_;
};

std::shared_ptr<const Index> BuildIndex(const RbacPolicy& stored) {
  auto index = std::make_shared<Index>();
  IndexBuilder builder(index.get());
  const RbacPolicy& bootstrap = BootstrapPolicy();
  builder.AddClusterRoles(bootstrap.cluster_roles);
  builder.AddClusterRoles(stored.cluster_roles);
  builder.AddRoles(stored.roles);
  builder.AddBindings(bootstrap.cluster_role_bindings);
  builder.AddBindings(stored.cluster_role_bindings);
  builder.AddBindings(stored.role_bindings);
  return index;
}

// Calls `visit` with each grant that applies to `user` in `namespace_name`: cluster-wide ones
// first, then the RoleBindings of that namespace; stops when `visit` returns true.
template <typename F>
void VisitGrants(const Index& index, const auth::UserInfo& user, const std::string& namespace_name,
                 F visit) {
  std::vector<const SubjectGrants*> subjects;
  if (auto it = index.users.find(user.name); it != index.users.end()) {
    subjects.push_back(&it->second);
  }
  for (const auto& group : user.groups) {
    if (auto it = index.groups.find(group); it != index.groups.end()) {
      subjects.push_back(&it->second);
    }
  }
  for (const SubjectGrants* s : subjects) {
    for (const Grant& g : s->cluster) {
      if (visit(g)) return;
    }
  }
  if (namespace_name.empty()) return;
  for (const SubjectGrants* s : subjects) {
    auto it = s->by_namespace.find(namespace_name);
    if (it == s->by_namespace.end()) continue;
    for (const Grant& g : it->second) {
      if (visit(g)) return;
    }
  }
}

// utilerrors.NewAggregate's message.
std::string Aggregate(const std::vector<std::string>& errors) {
  if (errors.size() == 1) return errors[0];
  return "[" + absl::StrJoin(errors, ", ") + "]";
}

// ---- the bootstrap policy --------------------------------------------------------------------

model::PolicyRule Rule(std::vector<std::string> verbs, std::vector<std::string> groups,
                       std::vector<std::string> resources) {
  model::PolicyRule r;
  r.verbs = std::move(verbs);
  r.api_groups = std::move(groups);
  r.resources = std::move(resources);
  return r;
}

model::PolicyRule UrlRule(std::vector<std::string> verbs, std::vector<std::string> urls) {
  model::PolicyRule r;
  r.verbs = std::move(verbs);
  r.non_resource_urls = std::move(urls);
  return r;
}

std::vector<std::string> ReadVerbs() { return {"get", "list", "watch"}; }
std::vector<std::string> WriteVerbs() {
  return {"create", "delete", "deletecollection", "patch", "update"};
}
std::vector<std::string> AllVerbs() {
  return {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
}

// view: read access to every served kind and its status, per API group, except the rbac kinds
// (Kubernetes' view grants no access to roles or bindings, nor to secrets, which are not served).
std::vector<model::PolicyRule> ViewRules() {
  std::vector<model::PolicyRule> rules;
  for (const auto& type : model::AllResourceTypes()) {
    if (type.group == model::kRbacGroup) continue;
    auto it = std::find_if(rules.begin(), rules.end(), [&](const model::PolicyRule& r) {
      return r.api_groups[0] == type.group;
    });
    if (it == rules.end()) it = rules.insert(rules.end(), Rule(ReadVerbs(), {type.group}, {}));
    it->resources.push_back(type.plural);
    if (type.has_status) it->resources.push_back(type.plural + "/status");
  }
  // The device-match preview and the utilization history (api/rest/admin_api.h) show only
  // devices, claims and counts that view reads.
  rules.push_back(Rule({"create"}, {"admin.quartermaster.io"},
                       {"devicematchreviews", "utilizationhistoryreviews",
                        "deviceallocationhistoryreviews", "deviceholderreviews"}));
  // The cluster summary (api/rest/cluster_summary.h): counts of nodes view reads.
  rules.push_back(Rule(ReadVerbs(), {"admin.quartermaster.io"}, {"clustersummaries"}));
  return rules;
}

// The namespaced workload kinds edit may write, by group; only the served ones are granted.
std::vector<model::PolicyRule> EditRules() {
  const std::vector<std::pair<std::string, std::vector<std::string>>> writable = {
      {"", {"pods", "serviceaccounts"}},
      {model::kResourceGroup, {"resourceclaims", "resourceclaimtemplates"}},
  };
  std::vector<model::PolicyRule> rules = ViewRules();
  for (const auto& [group, plurals] : writable) {
    std::vector<std::string> served;
    for (const auto& plural : plurals) {
      const model::ResourceType* type = model::FindResourceType(group, plural);
      if (type != nullptr && type->namespaced) served.push_back(plural);
    }
    if (!served.empty()) rules.push_back(Rule(WriteVerbs(), {group}, served));
  }
  rules.push_back(Rule({"impersonate"}, {""}, {"serviceaccounts"}));
  return rules;
}

std::vector<model::PolicyRule> AdminRules() {
  std::vector<model::PolicyRule> rules = EditRules();
  rules.push_back(Rule(AllVerbs(), {model::kRbacGroup}, {"roles", "rolebindings"}));
  rules.push_back(Rule({"create"}, {"authorization.k8s.io"}, {"localsubjectaccessreviews"}));
  return rules;
}

std::vector<model::PolicyRule> NodeRules() {
  return {
      Rule({"create", "get", "list", "watch", "update", "patch"}, {""}, {"nodes"}),
      Rule({"update", "patch"}, {""}, {"nodes/status"}),
      Rule(ReadVerbs(), {""}, {"pods"}),
      Rule({"update", "patch"}, {""}, {"pods/status"}),
      Rule({"create", "update", "patch"}, {""}, {"events"}),
      Rule(ReadVerbs(), {model::kResourceGroup},
           {"deviceclasses", "devicetaintrules", "resourceclaims"}),
      Rule({"update", "patch"}, {model::kResourceGroup}, {"resourceclaims/status"}),
      Rule({"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
           {model::kResourceGroup}, {"resourceslices"}),
  };
}

model::Role ClusterRole(std::string name, std::vector<model::PolicyRule> rules) {
  model::Role role;
  role.name = std::move(name);
  role.rules = std::move(rules);
  return role;
}

model::RoleBinding GroupBinding(const std::string& role, std::vector<std::string> groups) {
  model::RoleBinding b;
  b.name = role;
  b.role_ref = model::RoleRef{model::kRbacGroup, "ClusterRole", role};
  for (auto& g : groups) {
    b.subjects.push_back(
        model::Subject{model::kRbacGroupKind, model::kRbacGroup, std::move(g), ""});
  }
  return b;
}

RbacPolicy BuildBootstrapPolicy() {
  RbacPolicy p;
  p.cluster_roles = {
      ClusterRole("cluster-admin", {Rule({kAll}, {kAll}, {kAll}), UrlRule({kAll}, {kAll})}),
      ClusterRole("admin", AdminRules()),
      ClusterRole("edit", EditRules()),
      ClusterRole("view", ViewRules()),
      ClusterRole("system:node", NodeRules()),
      ClusterRole("system:discovery",
                  {UrlRule({"get"}, {"/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*",
                                     "/version", "/version/", "/healthz", "/readyz", "/livez"})}),
      ClusterRole("system:basic-user",
                  {Rule({"create"}, {"authorization.k8s.io"},
                        {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}),
                   Rule({"create"}, {"authentication.k8s.io"}, {"selfsubjectreviews"})}),
      ClusterRole("system:public-info-viewer",
                  {UrlRule({"get"}, {"/healthz", "/livez", "/readyz", "/version", "/version/"})}),
  };
  p.cluster_role_bindings = {
      GroupBinding("cluster-admin", {auth::kGroupMasters}),
      GroupBinding("system:node", {auth::kGroupNodes}),
      GroupBinding("system:discovery", {auth::kGroupAuthenticated}),
      GroupBinding("system:basic-user", {auth::kGroupAuthenticated}),
      GroupBinding("system:public-info-viewer",
                   {auth::kGroupAuthenticated, "system:unauthenticated"}),
  };
  return p;
}

// A stored RBAC object, decoded.
using Decoded = std::variant<model::Role, model::RoleBinding>;

absl::StatusOr<Decoded> Decode(const model::Object& obj) {
  auto fail = [&](const absl::Status& st) {
    return absl::InvalidArgumentError(obj.resource + " " + Q(obj.meta.name) + ": " +
                                      std::string(st.message()));
  };
  if (obj.resource == kRolesResource || obj.resource == kClusterRolesResource) {
    auto role = model::json::DecodeRole(obj);
    if (!role.ok()) return fail(role.status());
    return Decoded(*std::move(role));
  }
  auto binding = model::json::DecodeRoleBinding(obj);
  if (!binding.ok()) return fail(binding.status());
  return Decoded(*std::move(binding));
}

}  // namespace

const RbacPolicy& BootstrapPolicy() {
  static const auto* policy = new RbacPolicy(BuildBootstrapPolicy());
  return *policy;
}

// ---- Authorizer::Impl ------------------------------------------------------------------------

// Lock order: WatchHub's mutex -> Feed::mu_ -> Impl::mu_; follow_mu_ is taken before any of
// them and never while the hub dispatches.
class Authorizer::Impl {
 public:
  std::shared_ptr<const Index> Snapshot() const { return index_.load(std::memory_order_acquire); }

  void Publish(const RbacPolicy& stored) {
    index_.store(BuildIndex(stored), std::memory_order_release);
  }

  void ReplaceObjects(std::map<model::ResourceKey, Decoded> objects) {
    qm::MutexLock lock(&mu_);
    objects_ = std::move(objects);
    PublishLocked();
  }

  // One change from the hub (an RBAC resource).
  void Apply(const model::WatchEvent& event) {
    qm::MutexLock lock(&mu_);
    PutLocked(event.type == model::EventType::kDeleted, event.object);
    if (!loading_) PublishLocked();
  }

  // Loads the RBAC objects from `hub` and subscribes to its changes (Authorizer::Follow).
  absl::Status FollowLocked(WatchHub& hub) ABSL_EXCLUSIVE_LOCKS_REQUIRED(follow_mu_);

  // Reloads from the hub after it expired our subscription; another thread already doing so
  // is not waited for.
  void MaybeResync() {
    if (!stale_.load(std::memory_order_relaxed)) return;
    if (!follow_mu_.TryLock()) return;
    try {
      if (stale_.load() && hub_ != nullptr) {
        if (auto st = FollowLocked(*hub_); !st.ok()) {
          spdlog::warn("authorizer: reloading RBAC objects failed: {}", st.ToString());
        }
      }
    } catch (...) {
      follow_mu_.Unlock();
      throw;
    }
    follow_mu_.Unlock();
  }

  void StopFollowing();

  std::atomic<bool> stale_{false};
  qm::Mutex follow_mu_;

 private:
  void PutLocked(bool deleted, const model::Object& obj) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (deleted) {
      objects_.erase(obj.Key());
      return;
    }
    auto decoded = Decode(obj);
    if (!decoded.ok()) {
      spdlog::warn("authorizer: ignoring {}", decoded.status().ToString());
      objects_.erase(obj.Key());
      return;
    }
    objects_.insert_or_assign(obj.Key(), *std::move(decoded));
  }

  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    RbacPolicy policy;
    for (const auto& [key, decoded] : objects_) {
      if (key.resource == kRolesResource) {
        policy.roles.push_back(std::get<model::Role>(decoded));
      } else if (key.resource == kClusterRolesResource) {
        policy.cluster_roles.push_back(std::get<model::Role>(decoded));
      } else if (key.resource == kRoleBindingsResource) {
        policy.role_bindings.push_back(std::get<model::RoleBinding>(decoded));
      } else if (key.resource == kClusterRoleBindingsResource) {
        policy.cluster_role_bindings.push_back(std::get<model::RoleBinding>(decoded));
      }
    }
    Publish(policy);
  }

  std::atomic<std::shared_ptr<const Index>> index_{BuildIndex(RbacPolicy{})};
  qm::Mutex mu_;
  std::map<model::ResourceKey, Decoded> objects_ ABSL_GUARDED_BY(mu_);
  // While loading from the hub: changes are recorded, published once the load completes.
  bool loading_ ABSL_GUARDED_BY(mu_) = false;
  WatchHub* hub_ ABSL_GUARDED_BY(follow_mu_) = nullptr;
  std::shared_ptr<Feed> feed_ ABSL_GUARDED_BY(follow_mu_);
};

// The hub subscription. Detach() cuts it from the Impl; the hub drops it at its next delivery
// or tick.
class Authorizer::Feed : public Watcher {
 public:
  explicit Feed(Impl* impl) : impl_(impl) {}

  // Applying a change to the index is cheap and never blocks; being synchronous makes a write
  // count once the hub has dispatched it (see Authorizer::Follow).
  bool Synchronous() const override { return true; }

  bool Deliver(const model::WatchEvent& event) override {
    if (!IsRbacResource(event.object.resource)) return true;
    qm::MutexLock lock(&mu_);
    if (impl_ == nullptr) return false;
    impl_->Apply(event);
    return true;
  }

  bool Tick(int64_t) override {
    qm::MutexLock lock(&mu_);
    return impl_ != nullptr;
  }

  void Expire(const absl::Status& status) override {
    qm::MutexLock lock(&mu_);
    if (impl_ == nullptr) return;
    spdlog::warn("authorizer: RBAC watch expired ({}); reloading on the next request",
                 status.ToString());
    impl_->stale_ = true;
  }

  void Detach() {
    qm::MutexLock lock(&mu_);
    impl_ = nullptr;
  }

 private:
  qm::Mutex mu_;
  Impl* impl_ ABSL_GUARDED_BY(mu_);
};

void Authorizer::Impl::StopFollowing() {
  qm::MutexLock lock(&follow_mu_);
  if (feed_ != nullptr) feed_->Detach();
  feed_.reset();
  hub_ = nullptr;
}

absl::Status Authorizer::Impl::FollowLocked(WatchHub& hub) {
  if (feed_ != nullptr) feed_->Detach();
  feed_.reset();
  auto feed = std::make_shared<Feed>(this);
  auto finish_loading = [&] {
    qm::MutexLock lock(&mu_);
    loading_ = false;
    PublishLocked();
  };
  {
    qm::MutexLock lock(&mu_);
    loading_ = true;
    objects_.clear();
  }
  // Each list reflects some revision; replaying the change log from the oldest of them
  // converges every object on its latest state.
  std::optional<int64_t> from;
  for (const char* resource : {kClusterRolesResource, kRolesResource, kClusterRoleBindingsResource,
                               kRoleBindingsResource}) {
    ListRequest request;
    request.store.resource = resource;
    auto listed = hub.List(request, 0);
    if (!listed.ok()) {
      finish_loading();
      return listed.status();
    }
    from = from.has_value() ? std::min(*from, listed->resource_version) : listed->resource_version;
    qm::MutexLock lock(&mu_);
    for (const auto& obj : listed->items) PutLocked(false, *obj);
  }
  if (auto st = hub.Subscribe(feed, from.value_or(0)); !st.ok()) {
    feed->Detach();
    finish_loading();
    return st;
  }
  finish_loading();
  feed_ = std::move(feed);
  hub_ = &hub;
  stale_ = false;
  return absl::OkStatus();
}

// ---- Authorizer ------------------------------------------------------------------------------

Authorizer::Authorizer() : impl_(std::make_unique<Impl>()) {}

Authorizer::Authorizer(RbacPolicy stored) : Authorizer() { Replace(std::move(stored)); }

Authorizer::~Authorizer() { impl_->StopFollowing(); }

void Authorizer::Replace(RbacPolicy stored) { impl_->Publish(stored); }

absl::Status Authorizer::Replace(const std::vector<model::Object>& objects) {
  absl::Status first_error;
  std::map<model::ResourceKey, Decoded> decoded;
  for (const auto& obj : objects) {
    if (!IsRbacResource(obj.resource)) continue;
    auto d = Decode(obj);
    if (!d.ok()) {
      if (first_error.ok()) first_error = d.status();
      continue;
    }
    decoded.insert_or_assign(obj.Key(), *std::move(d));
  }
  impl_->ReplaceObjects(std::move(decoded));
  return first_error;
}

absl::Status Authorizer::Follow(WatchHub& hub) {
  qm::MutexLock lock(&impl_->follow_mu_);
  return impl_->FollowLocked(hub);
}

AuthzDecision Authorizer::Authorize(const auth::UserInfo& user,
                                    const AuthzAttributes& attrs) const {
  impl_->MaybeResync();
  const std::shared_ptr<const Index> index = impl_->Snapshot();
  // "resource/subresource", built only when there is a subresource.
  std::string with_subresource;
  if (!attrs.subresource.empty()) with_subresource = attrs.resource + "/" + attrs.subresource;
  const std::string& combined = attrs.subresource.empty() ? attrs.resource : with_subresource;
  // Non-resource requests are never namespaced: RoleBindings do not apply to them.
  const std::string no_namespace;
  const std::string& ns = attrs.resource_request ? attrs.namespace_name : no_namespace;
  AuthzDecision decision;
  std::vector<std::string> errors;
  VisitGrants(*index, user, ns, [&](const Grant& g) {
    if (g.rules == nullptr) {
      errors.push_back(g.error);
      return false;
    }
    for (const auto& rule : *g.rules) {
      if (RuleAllows(attrs, combined, rule)) {
        decision.allowed = true;
        decision.reason = "RBAC: allowed by " + g.source;
        return true;
      }
    }
    return false;
  });
  if (!decision.allowed) decision.reason = errors.empty() ? kNoMatch : "RBAC: " + Aggregate(errors);
  return decision;
}

Authorizer::Rules Authorizer::RulesFor(const auth::UserInfo& user,
                                       const std::string& namespace_name) const {
  impl_->MaybeResync();
  const std::shared_ptr<const Index> index = impl_->Snapshot();
  Rules out;
  std::vector<std::string> errors;
  VisitGrants(*index, user, namespace_name, [&](const Grant& g) {
    if (g.rules == nullptr) {
      errors.push_back(g.error);
      return false;
    }
    for (const auto& rule : *g.rules) {
      if (!rule.resources.empty()) {
        out.resource_rules.push_back(
            ResourceRule{rule.verbs, rule.api_groups, rule.resources, rule.resource_names});
      }
      if (!rule.non_resource_urls.empty()) {
        out.non_resource_rules.push_back(NonResourceRule{rule.verbs, rule.non_resource_urls});
      }
    }
    return false;
  });
  if (!errors.empty()) {
    out.incomplete = true;
    out.evaluation_error = Aggregate(errors);
  }
  return out;
}

std::string ForbiddenMessage(const auth::UserInfo& user, const AuthzAttributes& attrs) {
  if (!attrs.resource_request) {
    return "forbidden: User " + Q(user.name) + " cannot " + attrs.verb + " path " + Q(attrs.path);
  }
  const std::string resource =
      attrs.subresource.empty() ? attrs.resource : attrs.resource + "/" + attrs.subresource;
  std::string msg = "User " + Q(user.name) + " cannot " + attrs.verb + " resource " + Q(resource) +
                    " in API group " + Q(attrs.api_group);
  msg += attrs.namespace_name.empty() ? " at the cluster scope"
                                      : " in the namespace " + Q(attrs.namespace_name);
  // apierrors.NewForbidden over the group-qualified resource (without the subresource).
  const std::string group_resource =
      attrs.api_group.empty() ? attrs.resource : attrs.resource + "." + attrs.api_group;
  if (group_resource.empty()) return "forbidden: " + msg;
  if (attrs.name.empty()) return group_resource + " is forbidden: " + msg;
  return group_resource + " " + Q(attrs.name) + " is forbidden: " + msg;
}

}  // namespace qm::service
