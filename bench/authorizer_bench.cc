// RBAC authorization micro-benchmarks: the per-request cost of Authorizer::Authorize, which the
// REST server pays on every request (target: authn + authz <= 5% of request throughput; at the
// REST load driver's ~10k requests/s per core that is <= 5 us per request for both together).
// The policy: 2,000 namespaces, each with a RoleBinding of `view` to its own user, a Role and a
// RoleBinding to a group, plus 200 ClusterRoleBindings; the index is built once, as the hub-fed
// authorizer keeps it. Run: build/bench/authorizer_bench
#include <benchmark/benchmark.h>

#include <string>

#include "service/authorizer.h"

namespace {

using namespace qm;
using namespace qm::service;

constexpr char kRbac[] = "rbac.authorization.k8s.io";
constexpr int kNamespaces = 2000;

model::RoleBinding Bind(const std::string& ns, const std::string& name, const std::string& kind,
                        const std::string& role, const std::string& subject_kind,
                        const std::string& subject) {
  return model::RoleBinding{ns, name, {kRbac, kind, role}, {{subject_kind, kRbac, subject, ""}}};
}

RbacPolicy LargePolicy() {
  RbacPolicy p;
  for (int i = 0; i < kNamespaces; ++i) {
    const std::string ns = "team-" + std::to_string(i);
    p.roles.push_back(
        model::Role{ns,
                    "claims",
                    {model::PolicyRule{{"get", "list"}, {"resource.k8s.io"}, {"resourceclaims"}}}});
    p.role_bindings.push_back(
        Bind(ns, "view", "ClusterRole", "view", "User", "user-" + std::to_string(i)));
    p.role_bindings.push_back(Bind(ns, "claims", "Role", "claims", "Group", "devs"));
  }
  for (int i = 0; i < 200; ++i) {
    p.cluster_role_bindings.push_back(Bind("", "crb-" + std::to_string(i), "ClusterRole", "view",
                                           "User", "ops-" + std::to_string(i)));
  }
  return p;
}

AuthzAttributes ListPods(const std::string& ns) {
  AuthzAttributes a;
  a.verb = "list";
  a.resource = "pods";
  a.namespace_name = ns;
  return a;
}

const Authorizer& SharedAuthorizer() {
  static const auto* authz = new Authorizer(LargePolicy());
  return *authz;
}

void BM_AllowedClusterAdmin(benchmark::State& state) {
  const Authorizer& authz = SharedAuthorizer();
  const auth::UserInfo user{"admin", "", {"system:masters", "system:authenticated"}};
  const AuthzAttributes attrs = ListPods("team-7");
  for (auto _ : state) benchmark::DoNotOptimize(authz.Authorize(user, attrs));
}
BENCHMARK(BM_AllowedClusterAdmin);

void BM_AllowedByRoleBinding(benchmark::State& state) {
  const Authorizer& authz = SharedAuthorizer();
  const auth::UserInfo user{"user-1234", "", {"devs", "system:authenticated"}};
  const AuthzAttributes attrs = ListPods("team-1234");
  for (auto _ : state) benchmark::DoNotOptimize(authz.Authorize(user, attrs));
}
BENCHMARK(BM_AllowedByRoleBinding);

void BM_Denied(benchmark::State& state) {
  const Authorizer& authz = SharedAuthorizer();
  const auth::UserInfo user{"user-1234", "", {"devs", "system:authenticated"}};
  AuthzAttributes attrs = ListPods("team-99");
  attrs.verb = "create";
  for (auto _ : state) benchmark::DoNotOptimize(authz.Authorize(user, attrs));
}
BENCHMARK(BM_Denied);

void BM_RebuildIndex(benchmark::State& state) {
  const RbacPolicy policy = LargePolicy();
  Authorizer authz;
  for (auto _ : state) authz.Replace(policy);
}
BENCHMARK(BM_RebuildIndex)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
