// Three scheduler replicas, each with its own PostgreSQL store connection and object cache,
// schedule the same pods against one database at the same time. Afterwards every allocation in
// the database is checked: no device is held by two claims, the ledger matches the claims, and
// every bound pod's claim is allocated and reserved for it.

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/clock.h"
#include "common/id_generator.h"
#include "pg_test_env.h"
#include "service/scheduler.h"
#include "service/watch_hub.h"
#include "store/pg/pg_store.h"

namespace qm::service {
namespace {

using nlohmann::json;

constexpr int kNodes = 10;
constexpr int kDevicesPerNode = 4;
constexpr int kPods = 60;  // more pods than devices: the replicas compete for the last ones
constexpr char kClaims[] = "resourceclaims.resource.k8s.io";

struct Replica {
  std::unique_ptr<store::pg::PgStore> store;
  std::unique_ptr<WatchHub> hub;
  std::unique_ptr<Scheduler> scheduler;
};

class SchedulerReplicasTest : public ::testing::Test {
 protected:
  void Put(store::Store& store, const std::string& resource, const std::string& ns,
           const std::string& name, const json& body) {
    model::Object o;
    o.resource = resource;
    o.meta.namespace_ = ns;
    o.meta.name = name;
    o.meta.uid = ids_.NewUid();
    o.meta.generation = 1;
    o.meta.creation_timestamp = clock_.Now();
    o.body = body.dump();
    o.fields = {{"metadata.name", name}, {"metadata.namespace", ns}};
    auto created = store.Create(o);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  SystemClock clock_;
  RandomIdGenerator ids_;
};

TEST_F(SchedulerReplicasTest, ThreeReplicasNeverGiveADeviceToTwoClaims) {
  testing::PgTestEnv::Get().Reset();
  const std::string url = testing::PgTestEnv::Get().url();
  std::vector<Replica> replicas(3);
  for (auto& r : replicas) {
    auto store = store::pg::PgStore::Open(url, 4);
    ASSERT_TRUE(store.ok()) << store.status();
    r.store = std::move(*store);
  }
  store::Store& setup = *replicas[0].store;
  Put(setup, "namespaces", "", "default", json::object());
  Put(setup, "deviceclasses.resource.k8s.io", "", "gpu",
      {{"spec",
        {{"selectors", {{{"cel", {{"expression", "device.driver == 'gpu.example.com'"}}}}}}}}});
  for (int n = 0; n < kNodes; ++n) {
    const std::string node = "node-" + std::to_string(n);
    Put(setup, "nodes", "", node, {{"spec", json::object()}});
    json devices = json::array();
    for (int d = 0; d < kDevicesPerNode; ++d)
      devices.push_back({{"name", "gpu-" + std::to_string(d)}});
    Put(setup, "resourceslices.resource.k8s.io", "", node,
        {{"spec",
          {{"driver", "gpu.example.com"},
           {"nodeName", node},
           {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
           {"devices", devices}}}});
  }
  for (int p = 0; p < kPods; ++p) {
    const std::string name = "p" + std::to_string(p);
    Put(setup, kClaims, "default", name,
        {{"spec",
          {{"devices",
            {{"requests",
              {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu"}, {"count", 1}}}}}}}}}}});
    Put(setup, "pods", "default", name,
        {{"spec",
          {{"containers", {{{"name", "c"}, {"image", "x"}}}},
           {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", name}}}}}},
         {"status", {{"phase", "Pending"}}}});
  }

  for (auto& r : replicas) {
    r.hub = std::make_unique<WatchHub>(*r.store, WatchHubOptions{});
    r.hub->Start();
    r.scheduler = std::make_unique<Scheduler>(*r.store, *r.hub, clock_, ids_);
  }
  for (auto& r : replicas) r.scheduler->Start();

  // Wait until every device is taken (the replicas keep retrying lost races).
  auto bound_pods = [&]() {
    auto pods = setup.List(store::ListOptions{"pods", "default", "", "", 0});
    int bound = 0;
    for (const auto& p : pods->items) {
      bound += json::parse(p.body)["spec"].contains("nodeName") ? 1 : 0;
    }
    return bound;
  };
  for (int i = 0; i < 600 && bound_pods() < kNodes * kDevicesPerNode; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let stragglers finish
  for (auto& r : replicas) r.scheduler->Stop();
  for (auto& r : replicas) r.hub->Stop();

  EXPECT_EQ(bound_pods(), kNodes * kDevicesPerNode);

  // Every allocation in the database.
  auto claims = setup.List(store::ListOptions{kClaims, "default", "", "", 0});
  ASSERT_TRUE(claims.ok());
  std::map<std::string, std::string> holder;  // device -> claim uid
  std::map<std::string, std::string> claim_node;
  for (const auto& c : claims->items) {
    json body = json::parse(c.body);
    if (!body.contains("status") || !body["status"].contains("allocation")) continue;
    const auto& results = body["status"]["allocation"]["devices"]["results"];
    ASSERT_EQ(results.size(), 1u) << c.meta.name;
    const std::string device =
        results[0]["pool"].get<std::string>() + "/" + results[0]["device"].get<std::string>();
    EXPECT_TRUE(holder.emplace(device, c.meta.uid).second)
        << device << " is allocated to two claims";
    claim_node[c.meta.name] = results[0]["pool"].get<std::string>();
    ASSERT_EQ(body["status"]["reservedFor"].size(), 1u);
    EXPECT_EQ(body["status"]["reservedFor"][0]["name"], c.meta.name);
  }
  EXPECT_EQ(holder.size(), static_cast<size_t>(kNodes * kDevicesPerNode));

  auto ledger = setup.ListDeviceClaims();
  ASSERT_TRUE(ledger.ok());
  std::map<std::string, std::string> rows;
  for (const auto& row : *ledger) {
    EXPECT_TRUE(rows.emplace(row.pool + "/" + row.device, row.claim_uid).second)
        << "two ledger rows for " << row.pool << "/" << row.device;
  }
  EXPECT_EQ(rows, holder) << "the ledger and the claims disagree";

  auto pods = setup.List(store::ListOptions{"pods", "default", "", "", 0});
  for (const auto& p : pods->items) {
    json body = json::parse(p.body);
    if (!body["spec"].contains("nodeName")) continue;
    ASSERT_TRUE(claim_node.contains(p.meta.name)) << p.meta.name << " is bound without devices";
    EXPECT_EQ(body["spec"]["nodeName"], claim_node[p.meta.name]);
  }
}

}  // namespace
}  // namespace qm::service
