// RBAC authorization: a matrix of users, verbs and resources over stored objects handed in as
// the store holds them, the bootstrap roles, the hub-fed mode, and Kubernetes' 403 messages.

#include "service/authorizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/resource_types.h"
#include "store/memory_store.h"

namespace qm::service {
namespace {

using ::testing::ElementsAre;

constexpr char kRoles[] = "roles.rbac.authorization.k8s.io";
constexpr char kClusterRoles[] = "clusterroles.rbac.authorization.k8s.io";
constexpr char kRoleBindings[] = "rolebindings.rbac.authorization.k8s.io";
constexpr char kClusterRoleBindings[] = "clusterrolebindings.rbac.authorization.k8s.io";

model::Object Obj(const std::string& resource, const std::string& ns, const std::string& name,
                  const std::string& body) {
  model::Object o;
  o.resource = resource;
  o.meta.namespace_ = ns;
  o.meta.name = name;
  o.body = body;
  return o;
}

std::string Binding(const std::string& role_kind, const std::string& role,
                    const std::string& subjects) {
  return R"({"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":")" + role_kind +
         R"(","name":")" + role + R"("},"subjects":)" + subjects + "}";
}

std::string User(const std::string& name) {
  return R"({"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":")" + name + R"("})";
}

// The stored policy of the matrix: one object per behaviour under test.
std::vector<model::Object> StoredObjects() {
  return {
      // team-a: alice views, bob edits, carol administers (bootstrap ClusterRoles via
      // RoleBindings, so only within team-a).
      Obj(kRoleBindings, "team-a", "viewers",
          Binding("ClusterRole", "view", "[" + User("alice") + "]")),
      Obj(kRoleBindings, "team-a", "editors",
          Binding("ClusterRole", "edit", "[" + User("bob") + "]")),
      Obj(kRoleBindings, "team-a", "admins",
          Binding("ClusterRole", "admin", "[" + User("carol") + "]")),
      // A Role with resourceNames and a subresource, bound to dave.
      Obj(kRoles, "team-a", "claim-reader",
          R"({"rules":[{"verbs":["get"],"apiGroups":["resource.k8s.io"],
                        "resources":["resourceclaims"],"resourceNames":["rc1"]},
                       {"verbs":["update"],"apiGroups":["resource.k8s.io"],
                        "resources":["resourceclaims/status"]}]})"),
      Obj(kRoleBindings, "team-a", "dave",
          Binding("Role", "claim-reader", "[" + User("dave") + "]")),
      // A custom ClusterRole through a ClusterRoleBinding to a group.
      Obj(kClusterRoles, "", "class-admin",
          R"({"rules":[{"verbs":["*"],"apiGroups":["resource.k8s.io"],
                        "resources":["deviceclasses"]},
                       {"verbs":["get"],"nonResourceURLs":["/metrics","/logs/*"]}]})"),
      Obj(kClusterRoleBindings, "", "platform",
          Binding("ClusterRole", "class-admin",
                  R"([{"kind":"Group","apiGroup":"rbac.authorization.k8s.io",
                       "name":"platform-admins"}])")),
      // The same ClusterRole bound in team-a only: resources in team-a, never URLs.
      Obj(kRoleBindings, "team-a", "hank",
          Binding("ClusterRole", "class-admin", "[" + User("hank") + "]")),
      // Service accounts: ci defaults to the binding's namespace, deployer names its own.
      Obj(kRoleBindings, "team-b", "automation",
          Binding("ClusterRole", "edit",
                  R"([{"kind":"ServiceAccount","name":"ci"},
                      {"kind":"ServiceAccount","name":"deployer","namespace":"tools"}])")),
      // Wildcards: every subresource named status, and read-everything.
      Obj(kClusterRoles, "", "status-writer",
          R"({"rules":[{"verbs":["update","patch"],"apiGroups":["*"],"resources":["*/status"]}]})"),
      Obj(kClusterRoleBindings, "", "erin",
          Binding("ClusterRole", "status-writer", "[" + User("erin") + "]")),
      Obj(kClusterRoles, "", "reader",
          R"({"rules":[{"verbs":["get"],"apiGroups":["*"],"resources":["*"]}]})"),
      Obj(kClusterRoleBindings, "", "ivy",
          Binding("ClusterRole", "reader", "[" + User("ivy") + "]")),
      // A binding to a role that does not exist.
      Obj(kClusterRoleBindings, "", "frank",
          Binding("ClusterRole", "missing", "[" + User("frank") + "]")),
      // Not RBAC: ignored.
      Obj("pods", "team-a", "p1", R"({"spec":{}})"),
  };
}

auth::UserInfo U(const std::string& name, std::vector<std::string> groups = {}) {
  groups.push_back(auth::kGroupAuthenticated);
  return auth::UserInfo{name, "", std::move(groups)};
}

AuthzAttributes Res(const std::string& verb, const std::string& group, const std::string& resource,
                    const std::string& ns, const std::string& name = "",
                    const std::string& subresource = "") {
  AuthzAttributes a;
  a.verb = verb;
  a.api_group = group;
  a.resource = resource;
  a.subresource = subresource;
  a.namespace_name = ns;
  a.name = name;
  return a;
}

AuthzAttributes Url(const std::string& verb, const std::string& path) {
  AuthzAttributes a;
  a.resource_request = false;
  a.verb = verb;
  a.path = path;
  return a;
}

constexpr char kDra[] = "resource.k8s.io";
constexpr char kRbac[] = "rbac.authorization.k8s.io";

struct Case {
  const char* what;
  auth::UserInfo user;
  AuthzAttributes attrs;
  bool allowed;
};

std::vector<Case> Matrix() {
  const auth::UserInfo admin = U("kubernetes-admin", {auth::kGroupMasters});
  const auth::UserInfo alice = U("alice");
  const auth::UserInfo bob = U("bob");
  const auth::UserInfo carol = U("carol");
  const auth::UserInfo dave = U("dave");
  const auth::UserInfo pat = U("pat", {"platform-admins"});
  const auth::UserInfo hank = U("hank");
  const auth::UserInfo ci = U("system:serviceaccount:team-b:ci",
                              {auth::kGroupServiceAccounts, "system:serviceaccounts:team-b"});
  const auth::UserInfo deployer = U("system:serviceaccount:tools:deployer");
  const auth::UserInfo ci_elsewhere = U("system:serviceaccount:team-a:ci");
  const auth::UserInfo node = U("system:node:n1", {auth::kGroupNodes});
  const auth::UserInfo erin = U("erin");
  const auth::UserInfo ivy = U("ivy");
  const auth::UserInfo nobody = U("nobody");
  return {
      {"masters: anything", admin, Res("delete", kDra, "deviceclasses", "", "gpu"), true},
      {"masters: rbac", admin, Res("create", kRbac, "clusterrolebindings", ""), true},
      {"masters: any path", admin, Url("get", "/metrics"), true},
      {"masters: status", admin, Res("update", kDra, "resourceclaims", "t", "c", "status"), true},

      {"view: list pods in its namespace", alice, Res("list", "", "pods", "team-a"), true},
      {"view: watch claims", alice, Res("watch", kDra, "resourceclaims", "team-a"), true},
      {"view: claim status", alice, Res("get", kDra, "resourceclaims", "team-a", "c", "status"),
       true},
      {"view: not another namespace", alice, Res("list", "", "pods", "team-b"), false},
      {"view: not cluster-wide", alice, Res("list", "", "pods", ""), false},
      {"view: cannot create", alice, Res("create", "", "pods", "team-a"), false},
      {"view: cannot delete", alice, Res("delete", kDra, "resourceclaims", "team-a", "c"), false},
      {"view: no roles", alice, Res("list", kRbac, "roles", "team-a"), false},
      {"view: serviceaccounts", alice, Res("get", "", "serviceaccounts", "team-a", "ci"), true},

      {"edit: create claims", bob, Res("create", kDra, "resourceclaims", "team-a"), true},
      {"edit: deletecollection pods", bob, Res("deletecollection", "", "pods", "team-a"), true},
      {"edit: templates", bob, Res("patch", kDra, "resourceclaimtemplates", "team-a", "t"), true},
      {"edit: not claim status", bob,
       Res("update", kDra, "resourceclaims", "team-a", "c", "status"), false},
      {"edit: not quotas", bob, Res("update", "", "resourcequotas", "team-a", "q"), false},
      {"edit: not roles", bob, Res("create", kRbac, "roles", "team-a"), false},
      {"edit: not rolebindings", bob, Res("get", kRbac, "rolebindings", "team-a", "x"), false},
      {"edit: impersonate service accounts", bob,
       Res("impersonate", "", "serviceaccounts", "team-a", "ci"), true},

      {"admin: roles", carol, Res("create", kRbac, "roles", "team-a"), true},
      {"admin: rolebindings", carol, Res("delete", kRbac, "rolebindings", "team-a", "b"), true},
      {"admin: local reviews", carol,
       Res("create", "authorization.k8s.io", "localsubjectaccessreviews", "team-a"), true},
      {"admin: not elsewhere", carol, Res("create", kRbac, "roles", "team-b"), false},
      {"admin: not cluster roles", carol, Res("create", kRbac, "clusterroles", ""), false},

      {"resourceNames: named", dave, Res("get", kDra, "resourceclaims", "team-a", "rc1"), true},
      {"resourceNames: other name", dave, Res("get", kDra, "resourceclaims", "team-a", "rc2"),
       false},
      {"resourceNames: never list", dave, Res("list", kDra, "resourceclaims", "team-a"), false},
      {"subresource: status only", dave,
       Res("update", kDra, "resourceclaims", "team-a", "rc9", "status"), true},
      {"subresource: not the object", dave, Res("update", kDra, "resourceclaims", "team-a", "rc1"),
       false},

      {"group: cluster-wide class admin", pat, Res("create", kDra, "deviceclasses", ""), true},
      {"group: star verb", pat, Res("deletecollection", kDra, "deviceclasses", ""), true},
      {"group: other group", pat, Res("create", "", "deviceclasses", ""), false},
      {"group: nonResourceURL exact", pat, Url("get", "/metrics"), true},
      {"group: nonResourceURL prefix", pat, Url("get", "/logs/today/kube.log"), true},
      {"group: prefix is not a match", pat, Url("get", "/logsx"), false},
      {"group: exact URL is not a prefix", pat, Url("get", "/metrics/extra"), false},
      {"group: verb on URL", pat, Url("post", "/metrics"), false},

      {"RoleBinding->ClusterRole: in namespace", hank,
       Res("create", kDra, "deviceclasses", "team-a"), true},
      {"RoleBinding->ClusterRole: not cluster scope", hank,
       Res("create", kDra, "deviceclasses", ""), false},
      {"RoleBinding->ClusterRole: no URLs", hank, Url("get", "/metrics"), false},

      {"service account: defaulted namespace", ci, Res("create", "", "pods", "team-b"), true},
      {"service account: only there", ci, Res("create", "", "pods", "team-a"), false},
      {"service account: explicit namespace", deployer,
       Res("create", kDra, "resourceclaims", "team-b"), true},
      {"service account: same name elsewhere", ci_elsewhere, Res("create", "", "pods", "team-b"),
       false},

      {"*/status", erin, Res("patch", "", "pods", "team-a", "p", "status"), true},
      {"*/status any group", erin, Res("update", kDra, "devicetaintrules", "", "r", "status"),
       true},
      {"*/status not the object", erin, Res("patch", "", "pods", "team-a", "p"), false},
      {"*/status not another subresource", erin, Res("patch", "", "pods", "team-a", "p", "statusx"),
       false},
      {"* resources include subresources", ivy,
       Res("get", kDra, "resourceclaims", "x", "c", "status"), true},
      {"* resources, listed verb only", ivy, Res("list", "", "pods", "x"), false},

      {"node: create slices", node, Res("create", kDra, "resourceslices", ""), true},
      {"node: delete slices", node, Res("delete", kDra, "resourceslices", "", "s"), true},
      {"node: node status", node, Res("patch", "", "nodes", "", "n1", "status"), true},
      {"node: claim status", node, Res("update", kDra, "resourceclaims", "t", "c", "status"), true},
      {"node: events", node, Res("create", "", "events", "t"), true},
      {"node: get and create nodes", node, Res("create", "", "nodes", ""), true},
      {"node: read claims", node, Res("watch", kDra, "resourceclaims", ""), true},
      {"node: not delete nodes", node, Res("delete", "", "nodes", "", "n2"), false},
      {"node: not create pods", node, Res("create", "", "pods", "t"), false},
      {"node: not write classes", node, Res("create", kDra, "deviceclasses", ""), false},
      {"node: not update claims", node, Res("update", kDra, "resourceclaims", "t", "c"), false},

      {"authenticated: discovery", nobody, Url("get", "/apis/resource.k8s.io/v1"), true},
      {"authenticated: openapi", nobody, Url("get", "/openapi/v3/apis/resource.k8s.io/v1"), true},
      {"authenticated: health", nobody, Url("get", "/readyz"), true},
      {"authenticated: version", nobody, Url("get", "/version"), true},
      {"authenticated: self review", nobody,
       Res("create", "authorization.k8s.io", "selfsubjectaccessreviews", ""), true},
      {"authenticated: whoami", nobody,
       Res("create", "authentication.k8s.io", "selfsubjectreviews", ""), true},
      {"authenticated: not metrics", nobody, Url("get", "/metrics"), false},
      {"authenticated: no pods", nobody, Res("list", "", "pods", "team-a"), false},
      {"authenticated: no post to discovery", nobody, Url("post", "/apis"), false},
      {"unauthenticated: nothing but public info",
       auth::UserInfo{"system:anonymous", "", {"system:unauthenticated"}}, Url("get", "/apis"),
       false},
      {"unauthenticated: health",
       auth::UserInfo{"system:anonymous", "", {"system:unauthenticated"}}, Url("get", "/livez"),
       true},
  };
}

class AuthorizerTest : public ::testing::Test {
 protected:
  AuthorizerTest() { EXPECT_TRUE(authz_.Replace(StoredObjects()).ok()); }
  Authorizer authz_;
};

TEST_F(AuthorizerTest, Matrix) {
  for (const Case& c : Matrix()) {
    const AuthzDecision d = authz_.Authorize(c.user, c.attrs);
    EXPECT_EQ(d.allowed, c.allowed) << c.what << " (" << d.reason << ")";
  }
}

TEST_F(AuthorizerTest, ReasonsNameTheGrantOrTheProblem) {
  EXPECT_EQ(
      authz_.Authorize(U("root", {auth::kGroupMasters}), Res("get", "", "pods", "x", "p")).reason,
      "RBAC: allowed by ClusterRoleBinding \"cluster-admin\" of ClusterRole \"cluster-admin\" "
      "to Group \"system:masters\"");
  EXPECT_EQ(authz_.Authorize(U("alice"), Res("list", "", "pods", "team-a")).reason,
            "RBAC: allowed by RoleBinding \"viewers/team-a\" of ClusterRole \"view\" to User "
            "\"alice\"");
  EXPECT_EQ(
      authz_.Authorize(U("system:serviceaccount:team-b:ci"), Res("list", "", "pods", "team-b"))
          .reason,
      "RBAC: allowed by RoleBinding \"automation/team-b\" of ClusterRole \"edit\" to "
      "ServiceAccount \"ci/team-b\"");
  const AuthzDecision denied = authz_.Authorize(U("alice"), Res("create", "", "pods", "team-a"));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.reason, "no RBAC policy matched");
  const AuthzDecision dangling = authz_.Authorize(U("frank"), Res("get", "", "pods", "x", "p"));
  EXPECT_FALSE(dangling.allowed);
  EXPECT_EQ(dangling.reason, "RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found");
}

TEST_F(AuthorizerTest, UsersAndGroupsOfTheSameNameAreDistinct) {
  // "platform-admins" is bound as a group; a user of that name gets nothing from it.
  EXPECT_FALSE(
      authz_.Authorize(U("platform-admins"), Res("create", kDra, "deviceclasses", "")).allowed);
  // Nor does a group named like a bound user.
  EXPECT_FALSE(authz_.Authorize(U("x", {"alice"}), Res("list", "", "pods", "team-a")).allowed);
}

TEST_F(AuthorizerTest, ViewReadsEveryServedKindButRbac) {
  // Bound cluster-wide, view reads every kind of the type table (a new kind is covered without
  // touching the policy) and no rbac kind.
  Authorizer authz(
      RbacPolicy{{},
                 {},
                 {},
                 {model::RoleBinding{
                     "", "viewers", {kRbac, "ClusterRole", "view"}, {{"User", kRbac, "v", ""}}}}});
  for (const model::ResourceType& type : model::AllResourceTypes()) {
    const bool rbac = type.group == kRbac;
    EXPECT_EQ(authz.Authorize(U("v"), Res("list", type.group, type.plural, "")).allowed, !rbac)
        << type.GroupResource();
    EXPECT_FALSE(authz.Authorize(U("v"), Res("create", type.group, type.plural, "")).allowed)
        << type.GroupResource();
    if (type.has_status) {
      EXPECT_TRUE(
          authz.Authorize(U("v"), Res("get", type.group, type.plural, "", "x", "status")).allowed)
          << type.GroupResource();
    }
  }
}

TEST_F(AuthorizerTest, RulesForAUserInANamespace) {
  const Authorizer::Rules in_team_a = authz_.RulesFor(U("dave"), "team-a");
  EXPECT_FALSE(in_team_a.incomplete);
  EXPECT_THAT(in_team_a.resource_rules,
              ::testing::IsSupersetOf(
                  {Authorizer::ResourceRule{{"get"}, {kDra}, {"resourceclaims"}, {"rc1"}},
                   Authorizer::ResourceRule{{"update"}, {kDra}, {"resourceclaims/status"}, {}},
                   Authorizer::ResourceRule{{"create"},
                                            {"authorization.k8s.io"},
                                            {"selfsubjectaccessreviews", "selfsubjectrulesreviews"},
                                            {}}}));
  EXPECT_FALSE(in_team_a.non_resource_rules.empty());  // discovery, from system:authenticated
  const Authorizer::Rules in_team_b = authz_.RulesFor(U("dave"), "team-b");
  for (const auto& r : in_team_b.resource_rules) {
    EXPECT_NE(r.resources, std::vector<std::string>{"resourceclaims"});
  }
  EXPECT_EQ(in_team_b.resource_rules.size() + 2, in_team_a.resource_rules.size());
  // A cluster-wide grant with both kinds of rules splits them.
  const Authorizer::Rules pat = authz_.RulesFor(U("pat", {"platform-admins"}), "");
  EXPECT_THAT(pat.non_resource_rules,
              ::testing::Contains(Authorizer::NonResourceRule{{"get"}, {"/metrics", "/logs/*"}}));
  EXPECT_THAT(pat.resource_rules,
              ::testing::Contains(Authorizer::ResourceRule{{"*"}, {kDra}, {"deviceclasses"}, {}}));
  const Authorizer::Rules frank = authz_.RulesFor(U("frank"), "x");
  EXPECT_TRUE(frank.incomplete);
  EXPECT_EQ(frank.evaluation_error, "clusterrole.rbac.authorization.k8s.io \"missing\" not found");
}

TEST_F(AuthorizerTest, ReplaceSwapsThePolicyAndReportsUndecodableObjects) {
  ASSERT_TRUE(authz_.Authorize(U("alice"), Res("list", "", "pods", "team-a")).allowed);
  const absl::Status st = authz_.Replace(
      std::vector<model::Object>{Obj(kRoleBindings, "team-a", "broken", R"({"subjects":"alice"})"),
                                 Obj(kRoleBindings, "team-a", "bob",
                                     Binding("ClusterRole", "view", "[" + User("bob") + "]"))});
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_FALSE(authz_.Authorize(U("alice"), Res("list", "", "pods", "team-a")).allowed);
  EXPECT_TRUE(authz_.Authorize(U("bob"), Res("list", "", "pods", "team-a")).allowed);
  // The bootstrap policy cannot be replaced away.
  authz_.Replace(RbacPolicy{});
  EXPECT_TRUE(
      authz_.Authorize(U("root", {auth::kGroupMasters}), Res("get", "", "pods", "x", "p")).allowed);
}

TEST_F(AuthorizerTest, StoredClusterRoleWithABootstrapNameAddsRules) {
  ASSERT_TRUE(authz_
                  .Replace(std::vector<model::Object>{
                      Obj(kClusterRoles, "", "view",
                          R"({"rules":[{"verbs":["get"],"apiGroups":["example.com"],
                                        "resources":["widgets"]}]})"),
                      Obj(kRoleBindings, "team-a", "viewers",
                          Binding("ClusterRole", "view", "[" + User("alice") + "]"))})
                  .ok());
  EXPECT_TRUE(
      authz_.Authorize(U("alice"), Res("get", "example.com", "widgets", "team-a", "w")).allowed);
  EXPECT_TRUE(authz_.Authorize(U("alice"), Res("list", "", "pods", "team-a")).allowed);
}

TEST(ForbiddenMessageTest, KubernetesWording) {
  const auth::UserInfo alice = U("alice");
  EXPECT_EQ(ForbiddenMessage(alice, Res("create", kDra, "deviceclasses", "")),
            "deviceclasses.resource.k8s.io is forbidden: User \"alice\" cannot create resource "
            "\"deviceclasses\" in API group \"resource.k8s.io\" at the cluster scope");
  EXPECT_EQ(ForbiddenMessage(alice, Res("list", "", "pods", "team-a")),
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in "
            "the namespace \"team-a\"");
  EXPECT_EQ(ForbiddenMessage(alice, Res("get", "", "pods", "team-a", "p1")),
            "pods \"p1\" is forbidden: User \"alice\" cannot get resource \"pods\" in API group "
            "\"\" in the namespace \"team-a\"");
  EXPECT_EQ(ForbiddenMessage(alice, Res("update", kDra, "resourceclaims", "team-a", "c", "status")),
            "resourceclaims.resource.k8s.io \"c\" is forbidden: User \"alice\" cannot update "
            "resource \"resourceclaims/status\" in API group \"resource.k8s.io\" in the namespace "
            "\"team-a\"");
  EXPECT_EQ(ForbiddenMessage(alice, Url("get", "/metrics")),
            "forbidden: User \"alice\" cannot get path \"/metrics\"");
  EXPECT_EQ(ForbiddenMessage(U("sa \"x\""), Url("get", "/metrics")),
            "forbidden: User \"sa \\\"x\\\"\" cannot get path \"/metrics\"");
}

// ---- hub-fed mode --------------------------------------------------------------------------

class FollowTest : public ::testing::Test {
 protected:
  FollowTest() : hub_(store_, WatchHubOptions{}) { hub_.Start(); }
  ~FollowTest() override { hub_.Stop(); }

  int64_t Put(const model::Object& obj) {
    auto current = store_.Get(obj.Key());
    auto written =
        current.ok() ? store_.Update(obj, current->meta.resource_version) : store_.Create(obj);
    EXPECT_TRUE(written.ok()) << written.status();
    return written.ok() ? written->meta.resource_version : 0;
  }

  int64_t Remove(const model::ResourceKey& key) {
    auto deleted = store_.Delete(key, 0);
    EXPECT_TRUE(deleted.ok()) << deleted.status();
    return deleted.ok() ? deleted->meta.resource_version : 0;
  }

  // Returns once the hub has dispatched revision `rv` (and so the authorizer has applied it).
  void Sync(int64_t rv) {
    ListRequest request;
    request.store.resource = kRoleBindings;
    ASSERT_TRUE(hub_.List(request, rv).ok());
  }

  store::MemoryStore store_;
  WatchHub hub_;
};

TEST_F(FollowTest, LoadsExistingObjectsAndFollowsChanges) {
  Put(Obj(kRoles, "team-a", "pod-reader",
          R"({"rules":[{"verbs":["get","list"],"apiGroups":[""],"resources":["pods"]}]})"));
  Sync(Put(Obj(kRoleBindings, "team-a", "alice",
               Binding("Role", "pod-reader", "[" + User("alice") + "]"))));
  Authorizer authz;
  ASSERT_TRUE(authz.Follow(hub_).ok());
  const AuthzAttributes list_pods = Res("list", "", "pods", "team-a");
  EXPECT_TRUE(authz.Authorize(U("alice"), list_pods).allowed);
  EXPECT_FALSE(authz.Authorize(U("bob"), list_pods).allowed);

  // A new binding applies as soon as the hub has dispatched it.
  Sync(Put(Obj(kClusterRoleBindings, "", "bob-view",
               Binding("ClusterRole", "view", "[" + User("bob") + "]"))));
  EXPECT_TRUE(authz.Authorize(U("bob"), list_pods).allowed);
  EXPECT_TRUE(authz.Authorize(U("bob"), Res("list", "", "pods", "team-b")).allowed);

  // Changing a role changes what its bindings grant; deleting a binding revokes it.
  Sync(Put(Obj(kRoles, "team-a", "pod-reader",
               R"({"rules":[{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}]})")));
  EXPECT_FALSE(authz.Authorize(U("alice"), list_pods).allowed);
  EXPECT_TRUE(authz.Authorize(U("alice"), Res("get", "", "pods", "team-a", "p")).allowed);
  Sync(Remove(model::ResourceKey{kClusterRoleBindings, "", "bob-view"}));
  EXPECT_FALSE(authz.Authorize(U("bob"), list_pods).allowed);

  // Other kinds do not disturb it.
  Sync(Put(Obj("pods", "team-a", "p", R"({"spec":{}})")));
  EXPECT_TRUE(authz.Authorize(U("alice"), Res("get", "", "pods", "team-a", "p")).allowed);
}

TEST_F(FollowTest, AnAuthorizerMayGoAwayBeforeTheHub) {
  {
    Authorizer authz;
    ASSERT_TRUE(authz.Follow(hub_).ok());
  }
  // The hub delivers to a detached feed without touching the destroyed authorizer.
  Sync(Put(
      Obj(kRoleBindings, "team-a", "x", Binding("ClusterRole", "view", "[" + User("x") + "]"))));
  Authorizer again;
  ASSERT_TRUE(again.Follow(hub_).ok());
  EXPECT_TRUE(again.Authorize(U("x"), Res("list", "", "pods", "team-a")).allowed);
}

TEST(FollowWithoutCacheTest, RefusesAHubWithoutCache) {
  store::MemoryStore store;
  WatchHub hub(store, WatchHubOptions{});  // never started: no cache
  Authorizer authz;
  EXPECT_TRUE(absl::IsFailedPrecondition(authz.Follow(hub)));
  // Still answers from the bootstrap policy.
  EXPECT_TRUE(authz.Authorize(U("root", {auth::kGroupMasters}), Url("get", "/metrics")).allowed);
}

}  // namespace
}  // namespace qm::service
