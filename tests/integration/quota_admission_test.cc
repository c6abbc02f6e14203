// ResourceQuota admission under concurrency on a real PostgreSQL: one server, then three
// replicas (each its own store connections, object cache, object service and REST API, as three
// server processes run them) on one database. 50 clients create ResourceClaims at once against a
// quota of 10 devices: exactly 10 are created and the other 40 get Kubernetes' 403 "exceeded
// quota", whichever replica they reach; deleting claims gives their usage back.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/rest/rest_api.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "pg_test_env.h"
#include "service/object_service.h"
#include "service/watch_hub.h"
#include "store/pg/pg_store.h"

namespace qm {
namespace {

using nlohmann::json;

constexpr char kClaims[] = "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims";
constexpr char kDevices[] = "gpu.deviceclass.resource.k8s.io/devices";

struct Server {
  std::unique_ptr<store::pg::PgStore> store;
  std::unique_ptr<service::WatchHub> hub;
  std::unique_ptr<service::ObjectService> objects;
  std::unique_ptr<api::RestApi> api;
};

class QuotaAdmissionTest : public ::testing::Test {
 protected:
  void Start(int replicas) {
    testing::PgTestEnv::Get().Reset();
    servers_.resize(replicas);
    for (auto& s : servers_) {
      auto store = store::pg::PgStore::Open(testing::PgTestEnv::Get().url(), 8);
      ASSERT_TRUE(store.ok()) << store.status();
      s.store = std::move(*store);
      s.hub = std::make_unique<service::WatchHub>(*s.store, service::WatchHubOptions{});
      s.hub->Start();
      s.objects = std::make_unique<service::ObjectService>(*s.store, clock_, ids_, s.hub.get());
      s.api = std::make_unique<api::RestApi>(*s.objects, *s.hub, clock_);
    }
    ASSERT_TRUE(servers_[0].api->EnsureDefaultNamespace().ok());
    ASSERT_EQ(Call(0, "POST", "/api/v1/namespaces",
                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "team"}}}})
                  .code,
              201);
    ASSERT_EQ(Call(0, "POST", "/api/v1/namespaces/team/resourcequotas",
                   {{"apiVersion", "v1"},
                    {"kind", "ResourceQuota"},
                    {"metadata", {{"name", "gpus"}}},
                    {"spec", {{"hard", {{kDevices, "10"}}}}}})
                  .code,
              201);
  }
  void TearDown() override {
    for (auto& s : servers_) {
      if (s.hub) s.hub->Stop();
    }
  }

  api::HttpResponse Call(size_t server, const std::string& method, const std::string& path,
                         const json& body = nullptr) {
    api::HttpRequest r;
    r.method = method;
    r.path = path;
    r.content_type = "application/json";
    if (!body.is_null()) r.body = body.dump();
    return servers_[server % servers_.size()].api->Handle(r);
  }
  static json Claim(const std::string& name) {
    return {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"devices",
               {{"requests", {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu"}}}}}}}}}}};
  }

  struct Outcome {
    int created = 0;
    int exceeded = 0;  // 403 with Kubernetes' "exceeded quota" message
    std::vector<std::string> other;
  };
  // `clients` clients, all at once, each creating one claim through the servers in turn.
  Outcome CreateConcurrently(int clients, const std::string& prefix) {
    std::atomic<bool> go{false};
    std::vector<api::HttpResponse> responses(clients);
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        responses[i] = Call(i, "POST", kClaims, Claim(prefix + std::to_string(i)));
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    Outcome out;
    for (const auto& r : responses) {
      if (r.code == 201) {
        ++out.created;
      } else if (r.code == 403 && r.body.find("is forbidden: exceeded quota: gpus, requested: " +
                                              std::string(kDevices) + "=1, used: " + kDevices) !=
                                      std::string::npos) {
        ++out.exceeded;
      } else {
        out.other.push_back(std::to_string(r.code) + " " + r.body);
      }
    }
    return out;
  }

  // The claims in the namespace, read from the database.
  int StoredClaims() {
    auto listed = servers_[0].store->List(
        store::ListOptions{"resourceclaims.resource.k8s.io", "team", "", "", 0});
    EXPECT_TRUE(listed.ok());
    return listed.ok() ? static_cast<int>(listed->items.size()) : -1;
  }

  // 50 concurrent creates against the quota of 10: exactly 10; then deletes make room for
  // exactly as many more.
  void CheckExactlyTheQuotaIsAdmitted() {
    const Outcome first = CreateConcurrently(50, "c");
    EXPECT_EQ(first.created, 10);
    EXPECT_EQ(first.exceeded, 40);
    EXPECT_TRUE(first.other.empty()) << first.other.front();
    EXPECT_EQ(StoredClaims(), 10);
    auto used = servers_[0].store->QuotaUsed("team");
    ASSERT_TRUE(used.ok()) << used.status();
    EXPECT_EQ((*used)[kDevices], 10);

    // Deleting three claims (whichever they are) gives three devices back.
    auto listed = servers_[0].store->List(
        store::ListOptions{"resourceclaims.resource.k8s.io", "team", "", "", 0});
    ASSERT_TRUE(listed.ok());
    for (int i = 0; i < 3; ++i) {
      auto r = Call(i, "DELETE", std::string(kClaims) + "/" + listed->items[i]->meta.name);
      ASSERT_EQ(r.code, 200) << r.body;
    }
    const Outcome second = CreateConcurrently(20, "d");
    EXPECT_EQ(second.created, 3);
    EXPECT_EQ(second.exceeded, 17);
    EXPECT_TRUE(second.other.empty()) << second.other.front();
    EXPECT_EQ(StoredClaims(), 10);
    EXPECT_EQ((*servers_[0].store->QuotaUsed("team"))[kDevices], 10);

    // Deleting every claim leaves no usage behind.
    listed = servers_[0].store->List(
        store::ListOptions{"resourceclaims.resource.k8s.io", "team", "", "", 0});
    ASSERT_TRUE(listed.ok());
    for (size_t i = 0; i < listed->items.size(); ++i) {
      auto r = Call(i, "DELETE", std::string(kClaims) + "/" + listed->items[i]->meta.name);
      ASSERT_EQ(r.code, 200) << r.body;
    }
    EXPECT_EQ(StoredClaims(), 0);
    used = servers_[0].store->QuotaUsed("team");
    ASSERT_TRUE(used.ok()) << used.status();
    for (const auto& [key, n] : *used) EXPECT_EQ(n, 0) << key;
  }

  SystemClock clock_;
  RandomIdGenerator ids_;
  std::vector<Server> servers_;
};

TEST_F(QuotaAdmissionTest, OneServerAdmitsExactlyTheQuota) {
  Start(1);
  CheckExactlyTheQuotaIsAdmitted();
}

TEST_F(QuotaAdmissionTest, ThreeReplicasTogetherAdmitExactlyTheQuota) {
  Start(3);
  CheckExactlyTheQuotaIsAdmitted();
}

// A dry run is refused as the create would be, and writes nothing.
TEST_F(QuotaAdmissionTest, DryRunIsRefusedLikeTheCreate) {
  Start(1);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(Call(0, "POST", kClaims, Claim("c" + std::to_string(i))).code, 201);
  }
  api::HttpRequest dry_run;
  dry_run.method = "POST";
  dry_run.path = kClaims;
  dry_run.query = {{"dryRun", "All"}};
  dry_run.content_type = "application/json";
  dry_run.body = Claim("extra").dump();
  auto refused = servers_[0].api->Handle(dry_run);
  EXPECT_EQ(refused.code, 403) << refused.body;
  EXPECT_NE(refused.body.find("exceeded quota: gpus"), std::string::npos) << refused.body;
  EXPECT_EQ(StoredClaims(), 10);
}

}  // namespace
}  // namespace qm
