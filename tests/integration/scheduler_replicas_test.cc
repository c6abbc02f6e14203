// Three scheduler replicas, each with its own PostgreSQL store connection and object cache,
// schedule the same pods against one database at the same time. Afterwards every allocation in
// the database is checked: no device is held by two claims, no consumable device gives out more
// capacity than it has, no pool's shared counters are overcommitted, the ledger (and the
// database's capacity and counter usage) matches the claims, and every bound pod's claim is
// allocated and reserved for it.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "common/clock.h"
#include "common/id_generator.h"
#include "common/quantity.h"
#include "pg_test_env.h"
#include "service/scheduler.h"
#include "service/watch_hub.h"
#include "store/pg/pg_store.h"
#include "stored_objects.h"
#include "test_objects.h"

namespace qm {

// Quantities in failure messages read as Kubernetes writes them.
void PrintTo(const Quantity& q, std::ostream* os) { *os << q.String(); }

namespace service {
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
    testing::PutObject(store, ids_, clock_, resource, ns, name, body);
  }

  // Three replicas, each with a store (its own connections) on the test database, reset.
  std::vector<Replica> OpenReplicas() {
    testing::PgTestEnv::Get().Reset();
    std::vector<Replica> replicas(3);
    for (auto& r : replicas) {
      auto store = store::pg::PgStore::Open(testing::PgTestEnv::Get().url(), 4);
      EXPECT_TRUE(store.ok()) << store.status();
      if (store.ok()) r.store = std::move(*store);
    }
    return replicas;
  }

  // A claim `name` asking for one device of class gpu as `exactly` (merged over the defaults),
  // and a pod using it.
  void ClaimAndPod(store::Store& store, const std::string& name, const json& exactly) {
    json request = {{"deviceClassName", "gpu"}, {"count", 1}};
    request.update(exactly);
    Put(store, kClaims, "default", name,
        {{"spec", {{"devices", {{"requests", {{{"name", "gpu"}, {"exactly", request}}}}}}}}});
    Put(store, "pods", "default", name,
        {{"spec",
          {{"containers", {{{"name", "c"}, {"image", "x"}}}},
           {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", name}}}}}},
         {"status", {{"phase", "Pending"}}}});
  }

  void PutClassAndNode(store::Store& store, const std::string& node) {
    if (!store.Get(model::ResourceKey{"namespaces", "", "default"}).ok()) {
      Put(store, "namespaces", "", "default", json::object());
      Put(store, "deviceclasses.resource.k8s.io", "", "gpu",
          {{"spec", testing::DriverClassSpec("gpu.example.com")}});
    }
    Put(store, "nodes", "", node, {{"spec", json::object()}});
  }

  static int BoundPods(store::Store& store) {
    auto pods = store.List(store::ListOptions{"pods", "default", "", "", 0});
    int bound = 0;
    for (const auto& p_ptr : pods->items) {
      const model::Object& p = *p_ptr;
      bound += json::parse(p.body)["spec"].contains("nodeName") ? 1 : 0;
    }
    return bound;
  }

  // Starts every replica's scheduler, then creates `pods` pods while they schedule, one client
  // per replica at the same time, `create(store, i)` making the i-th: each replica sees its own
  // client's pods first and binds different pods than the others against the same devices, as
  // with clients spread over a load balancer.
  // Waits until `done` holds (or 20 s pass) and no binding has changed for a second more, and
  // stops them.
  void RunSchedulers(std::vector<Replica>& replicas, int pods,
                     const std::function<void(store::Store&, int)>& create,
                     const std::function<bool()>& done) {
    for (auto& r : replicas) {
      r.hub = std::make_unique<WatchHub>(*r.store, WatchHubOptions{});
      r.hub->Start();
      r.scheduler = std::make_unique<Scheduler>(*r.store, *r.hub, clock_, ids_);
    }
    for (auto& r : replicas) r.scheduler->Start();
    std::vector<std::thread> clients;
    for (size_t c = 0; c < replicas.size(); ++c) {
      clients.emplace_back([&, c] {
        for (int i = static_cast<int>(c); i < pods; i += static_cast<int>(replicas.size())) {
          create(*replicas[c].store, i);
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      });
    }
    for (auto& t : clients) t.join();
    store::Store& store = *replicas[0].store;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // Losers of the last races retry on a fresh snapshot; wait until they have given up.
    for (int stable = 0, last = -1; stable < 20 && std::chrono::steady_clock::now() < deadline;) {
      const int bound = BoundPods(store);
      stable = bound == last ? stable + 1 : 0;
      last = bound;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& r : replicas) r.scheduler->Stop();
    for (auto& r : replicas) r.hub->Stop();
  }

  // Every allocation result of every claim.
  static std::vector<json> AllocationResults(store::Store& store) {
    std::vector<json> out;
    auto claims = store.List(store::ListOptions{kClaims, "default", "", "", 0});
    for (const auto& c_ptr : claims->items) {
      const model::Object& c = *c_ptr;
      json body = json::parse(c.body);
      if (!body.contains("status") || !body["status"].contains("allocation")) continue;
      for (const auto& r : body["status"]["allocation"]["devices"]["results"]) out.push_back(r);
    }
    return out;
  }

  // Every allocation result of every claim (pool/device/shareID -> the claim's uid), checking
  // that each bound pod's claim is allocated on the pod's node and reserved for it.
  struct Allocated {
    std::map<std::string, std::string> holder;  // pool/device/shareID -> claim uid
    std::vector<json> results;
  };
  static Allocated AllocatedDevices(store::Store& store) {
    Allocated out;
    auto claims = store.List(store::ListOptions{kClaims, "default", "", "", 0});
    EXPECT_TRUE(claims.ok());
    std::map<std::string, std::string> claim_node;
    for (const auto& c_ptr : claims->items) {
      const model::Object& c = *c_ptr;
      json body = json::parse(c.body);
      if (!body.contains("status") || !body["status"].contains("allocation")) continue;
      for (const auto& r : body["status"]["allocation"]["devices"]["results"]) {
        const std::string key = r["pool"].get<std::string>() + "/" +
                                r["device"].get<std::string>() + "/" + r.value("shareID", "");
        EXPECT_TRUE(out.holder.emplace(key, c.meta.uid).second) << key << " is allocated twice";
        out.results.push_back(r);
        claim_node[c.meta.name] = r["pool"].get<std::string>();
      }
      EXPECT_EQ(body["status"]["reservedFor"].size(), 1u) << c.meta.name;
    }
    auto pods = store.List(store::ListOptions{"pods", "default", "", "", 0});
    for (const auto& p_ptr : pods->items) {
      const model::Object& p = *p_ptr;
      json body = json::parse(p.body);
      if (!body["spec"].contains("nodeName")) continue;
      EXPECT_TRUE(claim_node.contains(p.meta.name)) << p.meta.name << " is bound without devices";
      EXPECT_EQ(body["spec"]["nodeName"], claim_node[p.meta.name]);
    }
    return out;
  }

  // The device ledger, keyed as Allocated::holder.
  static std::map<std::string, std::string> Ledger(store::Store& store) {
    auto ledger = store.ListDeviceClaims();
    EXPECT_TRUE(ledger.ok());
    std::map<std::string, std::string> rows;
    for (const auto& row : *ledger) {
      EXPECT_TRUE(
          rows.emplace(row.pool + "/" + row.device + "/" + row.share_id, row.claim_uid).second);
    }
    return rows;
  }

  // The database's usage rows (migrations/0005) of one kind: pool/owner/name -> used.
  static std::map<std::string, Quantity> DatabaseUsage(const std::string& kind) {
    pqxx::connection c(testing::PgTestEnv::Get().url());
    pqxx::nontransaction tx(c);
    std::map<std::string, Quantity> out;
    for (const auto& row : tx.exec_params(
             "SELECT pool, owner, name, used::text FROM device_usage WHERE kind = $1", kind)) {
      auto used = ParseQuantity(row[3].as<std::string>());
      EXPECT_TRUE(used.ok()) << row[3].as<std::string>();
      out[row[0].as<std::string>() + "/" + row[1].as<std::string>() + "/" +
          row[2].as<std::string>()] = *used;
    }
    return out;
  }

  static Quantity Q(const std::string& text) { return *ParseQuantity(text); }

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
      {{"spec", testing::DriverClassSpec("gpu.example.com")}});
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
  auto bound_pods = [&]() { return BoundPods(setup); };
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
  for (const auto& c_ptr : claims->items) {
    const model::Object& c = *c_ptr;
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
  for (const auto& p_ptr : pods->items) {
    const model::Object& p = *p_ptr;
    json body = json::parse(p.body);
    if (!body["spec"].contains("nodeName")) continue;
    ASSERT_TRUE(claim_node.contains(p.meta.name)) << p.meta.name << " is bound without devices";
    EXPECT_EQ(body["spec"]["nodeName"], claim_node[p.meta.name]);
  }
}

// 40 pods, each asking for 20Gi of a consumable 80Gi device (allowMultipleAllocations), on 5
// nodes with one such device each: room for 20. Shares have random ids, so the exclusive index
// cannot catch two replicas handing out the same room; the database's capacity rows must.
TEST_F(SchedulerReplicasTest, ThreeReplicasNeverOvercommitConsumableCapacity) {
  constexpr int kCapacityNodes = 5;
  constexpr int kSharePods = 40;
  std::vector<Replica> replicas = OpenReplicas();
  ASSERT_TRUE(replicas[0].store);
  store::Store& setup = *replicas[0].store;
  for (int n = 0; n < kCapacityNodes; ++n) {
    const std::string node = "node-" + std::to_string(n);
    PutClassAndNode(setup, node);
    Put(setup, "resourceslices.resource.k8s.io", "", node,
        {{"spec",
          {{"driver", "gpu.example.com"},
           {"nodeName", node},
           {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
           {"devices",
            {{{"name", "gpu-0"},
              {"allowMultipleAllocations", true},
              {"capacity", {{"memory", {{"value", "80Gi"}}}}}}}}}}});
  }
  RunSchedulers(
      replicas, kSharePods,
      [&](store::Store& store, int p) {
        ClaimAndPod(store, "p" + std::to_string(p),
                    {{"capacity", {{"requests", {{"memory", "20Gi"}}}}}});
      },
      [&] { return BoundPods(setup) >= kCapacityNodes * 4; });

  const Allocated allocated = AllocatedDevices(setup);
  std::map<std::string, Quantity> consumed;  // pool/device/memory -> sum over shares
  for (const auto& r : allocated.results) {
    ASSERT_TRUE(r.contains("shareID"));
    const std::string key = r["pool"].get<std::string>() + "/" + r["device"].get<std::string>();
    consumed[key + "/memory"] = consumed[key + "/memory"] + Q(r["consumedCapacity"]["memory"]);
  }
  int overcommitted = 0;
  for (const auto& [device, sum] : consumed) {
    if (sum > Q("80Gi")) ++overcommitted;
    EXPECT_LE(sum, Q("80Gi")) << device << " gave out " << sum.String();
  }
  EXPECT_EQ(overcommitted, 0);
  EXPECT_EQ(allocated.results.size(), static_cast<size_t>(kCapacityNodes * 4));
  EXPECT_EQ(BoundPods(setup), kCapacityNodes * 4);
  EXPECT_EQ(Ledger(setup), allocated.holder) << "the ledger and the claims disagree";
  EXPECT_EQ(DatabaseUsage("capacity"), consumed) << "the capacity rows and the claims disagree";
}

// Partitionable devices: each node's pool publishes one counter set (80Gi of memory) in a slice
// of its own, and seven devices that consume from it: the whole GPU (80Gi), two halves (40Gi)
// and four MIG slices (20Gi). Pods ask for a whole GPU, a half or a slice in turn, so replicas
// working from different snapshots pick different devices of the same GPU: only the counter
// rows stop them from together taking more than the GPU has.
TEST_F(SchedulerReplicasTest, ThreeReplicasNeverOvercommitSharedCounters) {
  constexpr int kCounterNodes = 5;
  constexpr int kPartitionPods = 45;
  std::vector<Replica> replicas = OpenReplicas();
  ASSERT_TRUE(replicas[0].store);
  store::Store& setup = *replicas[0].store;
  std::map<std::string, Quantity> device_memory;  // device -> what it consumes
  json devices = json::array();
  auto device = [&](const std::string& name, const std::string& profile, const std::string& mem) {
    device_memory[name] = Q(mem);
    devices.push_back(
        {{"name", name},
         {"attributes", {{"profile", {{"string", profile}}}}},
         {"consumesCounters",
          {{{"counterSet", "gpu-0"}, {"counters", {{"memory", {{"value", mem}}}}}}}}});
  };
  device("gpu-0", "whole", "80Gi");
  for (int i = 0; i < 2; ++i) device("gpu-0-half-" + std::to_string(i), "half", "40Gi");
  for (int i = 0; i < 4; ++i) device("gpu-0-mig-" + std::to_string(i), "mig", "20Gi");
  for (int n = 0; n < kCounterNodes; ++n) {
    const std::string node = "node-" + std::to_string(n);
    PutClassAndNode(setup, node);
    const json pool = {{"name", node}, {"generation", 1}, {"resourceSliceCount", 2}};
    Put(setup, "resourceslices.resource.k8s.io", "", node + "-counters",
        {{"spec",
          {{"driver", "gpu.example.com"},
           {"nodeName", node},
           {"pool", pool},
           {"sharedCounters",
            {{{"name", "gpu-0"}, {"counters", {{"memory", {{"value", "80Gi"}}}}}}}}}}});
    Put(setup, "resourceslices.resource.k8s.io", "", node + "-gpus",
        {{"spec",
          {{"driver", "gpu.example.com"},
           {"nodeName", node},
           {"pool", pool},
           {"devices", devices}}}});
  }
  auto create = [&](store::Store& store, int p) {
    const char* profiles[] = {"mig", "whole", "half"};
    const std::string expression =
        std::string("device.attributes['gpu.example.com'].profile == '") + profiles[p % 3] + "'";
    ClaimAndPod(store, "p" + std::to_string(p),
                {{"selectors", {{{"cel", {{"expression", expression}}}}}}});
  };
  // What the claims' allocations take from each pool's counter set: pool/gpu-0/memory -> sum.
  auto counters_consumed = [&](const std::vector<json>& results) {
    std::map<std::string, Quantity> consumed;
    for (const auto& r : results) {
      const std::string key = r["pool"].get<std::string>() + "/gpu-0/memory";
      consumed[key] = consumed[key] + device_memory.at(r["device"].get<std::string>());
    }
    return consumed;
  };
  RunSchedulers(replicas, kPartitionPods, create, [&] {
    auto consumed = counters_consumed(AllocationResults(setup));
    return consumed.size() == kCounterNodes &&
           std::all_of(consumed.begin(), consumed.end(),
                       [&](const auto& e) { return e.second >= Q("80Gi"); });
  });

  const Allocated allocated = AllocatedDevices(setup);
  const std::map<std::string, Quantity> consumed = counters_consumed(allocated.results);
  int overcommitted = 0;
  for (const auto& [set, sum] : consumed) {
    if (sum > Q("80Gi")) ++overcommitted;
    EXPECT_LE(sum, Q("80Gi")) << set << " gave out " << sum.String();
  }
  EXPECT_EQ(overcommitted, 0);
  // Every GPU is used up: the pods outnumber what the nodes have.
  EXPECT_EQ(consumed.size(), static_cast<size_t>(kCounterNodes));
  for (const auto& [set, sum] : consumed) EXPECT_EQ(sum, Q("80Gi")) << set;
  EXPECT_EQ(Ledger(setup), allocated.holder) << "the ledger and the claims disagree";
  EXPECT_EQ(DatabaseUsage("counter"), consumed) << "the counter rows and the claims disagree";
}

}  // namespace
}  // namespace service
}  // namespace qm
